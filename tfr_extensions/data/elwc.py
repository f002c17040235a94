"""ExampleListWithContext (ELWC), TF-Ranking's list format: write, feature specs, parse.

One record per query: a ``tensorflow.serving.ExampleListWithContext`` whose
context holds the query id (int64 ``"query_id"``) and whose examples hold, per
document, the ``F`` feature values as one float list (``"features"``) and the
label (float ``"relevance"``).

* :func:`to_elwc` writes LETOR data as ELWC TFRecords (for TF-Ranking's own
  readers: ``tfr.data.build_ranking_dataset`` / ``tfr.data.make_parsing_fn``
  with ``data_format=tfr.data.ELWC``);
* :func:`feature_spec` is the per-document ``tf.Example`` spec (one float
  list of length F), which :func:`elwc_feature_specs` extends with the label
  and the context's query id, and which the serving signatures parse;
* :func:`parse_elwc` is TF-Ranking's ``tfr.data.parse_from_example_list`` in
  ``tf.io`` ops only (no ``tensorflow_serving`` protos needed at run time;
  checked against TF-Ranking's in ``tests/test_compat.py``), :func:`split_elwc`
  its first step.

An ELWC of one document with features ``[1, 2]`` (field 1, ``examples``, of
the ELWC message holds the serialized ``tf.Example``):

>>> example = tf.train.Example(features=tf.train.Features(feature={
...     "features": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 2.0]))}))
>>> elwc = bytes([10, example.ByteSize()]) + example.SerializeToString()
>>> parsed = parse_elwc(tf.constant([elwc]), None, feature_spec(2),
...                     mask_feature_name="mask")
>>> parsed["features"].numpy().tolist(), parsed["mask"].numpy().tolist()
([[[1.0, 2.0]]], [[True]])
"""
import functools
import os
from typing import Dict, Optional, Tuple, Union

import numpy as np
import tensorflow as tf

from tfr_extensions.data.libsvm_data import LibSVMData
from tfr_extensions.ops.conventions import PADDING_LABEL  # TF-Ranking's label of padded examples


FeatureSpec = Dict[str, Union[tf.io.FixedLenFeature, tf.io.VarLenFeature, tf.io.RaggedFeature]]


def feature_spec(num_features: int,
                 feature_name: str = "features") -> Dict[str, tf.io.FixedLenFeature]:
    """The per-document ``tf.Example`` feature spec: one float list of length F
    (padded documents take zeros).

    >>> feature_spec(3)["features"].default_value
    [0.0, 0.0, 0.0]
    """
    return {feature_name: tf.io.FixedLenFeature([num_features], tf.float32,
                                                default_value=[0.0] * num_features)}


def elwc_feature_specs(num_features: int, feature_name: str = "features",
                       label_name: str = "relevance", qid_name: Optional[str] = "query_id",
                       ) -> Tuple[Dict[str, tf.io.FixedLenFeature], Dict[str, tf.io.FixedLenFeature]]:
    """``(context_feature_spec, example_feature_spec)`` for files from :func:`to_elwc`.

    The example spec (:func:`feature_spec` and the label) includes the
    label; TF-Ranking's readers take it in ``example_feature_spec`` and models
    pop it out as the label.

    >>> context, example = elwc_feature_specs(3)
    >>> sorted(context), sorted(example), example["features"].shape
    (['query_id'], ['features', 'relevance'], [3])
    """
    context = {} if qid_name is None else {
        qid_name: tf.io.FixedLenFeature([1], tf.int64, default_value=[0])}
    example = {
        **feature_spec(num_features, feature_name),
        label_name: tf.io.FixedLenFeature([1], tf.float32, default_value=[PADDING_LABEL]),
    }
    return context, example


def to_elwc(data: LibSVMData, path: Union[str, os.PathLike], *, feature_name: str = "features",
            label_name: str = "relevance", qid_name: Optional[str] = "query_id",
            compression: Optional[str] = None) -> int:
    """Writes one ELWC record per query to the TFRecord file ``path``.

    Args:
      data: the queries (their order is kept).
      path: the output file (overwritten).
      feature_name: name of the per-document float list of ``F`` features.
      label_name: name of the per-document float label.
      qid_name: name of the int64 query id in the context (None: empty context).
      compression: None, ``"GZIP"`` or ``"ZLIB"``.

    Returns:
      The number of records (queries) written.
    """
    from tensorflow_serving.apis import input_pb2  # imported lazily: only ELWC needs it

    if feature_name == label_name:
        raise ValueError(f"`feature_name` and `label_name` must differ; both are {feature_name!r}.")
    if compression not in (None, "GZIP", "ZLIB"):
        raise ValueError(f"`compression` must be None, 'GZIP' or 'ZLIB'; got {compression!r}.")
    features = np.asarray(data.features, np.float32)
    labels = np.asarray(data.labels, np.float32)
    offsets = np.asarray(data.query_offsets)
    query_ids = data.query_ids
    options = tf.io.TFRecordOptions(compression_type=compression or "")
    with tf.io.TFRecordWriter(os.fspath(path), options) as writer:
        for query in range(data.num_queries):
            elwc = input_pb2.ExampleListWithContext()
            if qid_name is not None:
                elwc.context.features.feature[qid_name].int64_list.value.append(
                    int(query_ids[query]))
            for row in range(offsets[query], offsets[query + 1]):
                example = elwc.examples.add()
                example.features.feature[feature_name].float_list.value.extend(features[row])
                example.features.feature[label_name].float_list.value.append(labels[row])
            writer.write(elwc.SerializeToString())
    return int(data.num_queries)


# ----------------------------------------------------------------------------- parsing

# ExampleListWithContext's wire format, which is all its parsing needs:
#   message ExampleListWithContext { repeated Example examples = 1; Example context = 2; }
# described here as bytes fields so that tf.io.decode_proto can split it without
# the tensorflow_serving protos (TF-Ranking does the same, tensorflow_ranking/python/data.py).
_ELWC_PACKAGE = "tfr_extensions.internal"
_ELWC_MESSAGE = "SerializedExampleListWithContext"


@functools.lru_cache(maxsize=None)
def _elwc_descriptor_source() -> bytes:
    from google.protobuf import descriptor_pb2  # pylint: disable=g-import-not-at-top
    descriptors = descriptor_pb2.FileDescriptorSet()
    file_proto = descriptors.file.add(name="tfr_extensions_serialized_elwc.proto",
                                      package=_ELWC_PACKAGE, syntax="proto3")
    message = file_proto.message_type.add(name=_ELWC_MESSAGE)
    field = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="examples", number=1, type=field.TYPE_BYTES,
                      label=field.LABEL_REPEATED)
    message.field.add(name="context", number=2, type=field.TYPE_BYTES,
                      label=field.LABEL_OPTIONAL)
    return b"bytes://" + descriptors.SerializeToString()


def split_elwc(serialized: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Splits serialized ELWCs ``[B]`` into ``(context [B, 1] or [B, 0], examples
    [B, L], sizes [B])``: serialized ``tf.Example`` strings, examples padded
    with ``""`` to the longest list L, and each list's number of examples."""
    sizes, (context, examples) = tf.io.decode_proto(
        tf.convert_to_tensor(serialized, tf.string),
        message_type=f"{_ELWC_PACKAGE}.{_ELWC_MESSAGE}", field_names=["context", "examples"],
        output_types=[tf.string, tf.string], descriptor_source=_elwc_descriptor_source(),
        name="parse_inputs_as_ExampleListWithContext")  # named: the node a bad input fails at
    return context, examples, sizes[..., 1]


def _to_lists(tensor, batch_size, list_size):
    """``[B * L, ...]`` parsed features -> ``[B, L, ...]``."""
    if isinstance(tensor, tf.RaggedTensor):
        return tf.RaggedTensor.from_uniform_row_length(tensor, list_size)
    if isinstance(tensor, tf.SparseTensor):
        shape = tf.concat([tf.stack([tf.cast(batch_size, tf.int64), tf.cast(list_size, tf.int64)]),
                           tensor.dense_shape[1:]], 0)
        return tf.sparse.reshape(tensor, shape)
    return tf.reshape(tensor, tf.concat([[batch_size, list_size], tf.shape(tensor)[1:]], 0))


def parse_elwc(serialized: tf.Tensor, context_feature_spec: Optional[FeatureSpec],
               example_feature_spec: FeatureSpec, mask_feature_name: Optional[str] = None,
               size_feature_name: Optional[str] = None,
               list_size: Optional[int] = None) -> Dict[str, tf.Tensor]:
    """Parses a batch of serialized ``ExampleListWithContext`` into features.

    TF-Ranking's ``tfr.data.parse_from_example_list`` (without shuffling): each
    example feature becomes ``[B, L, ...]`` (``tf.SparseTensor`` for a
    ``VarLenFeature``, ``tf.RaggedTensor`` for a ``RaggedFeature``), L the
    longest list of the batch, or ``list_size`` when given (longer lists are
    truncated, shorter ones padded); padded examples take the specs' default
    values. Context features are ``[B, ...]``; a missing context takes the
    context specs' defaults (where TF-Ranking fails).

    Args:
      serialized: string ``[B]``.
      context_feature_spec: feature name -> ``tf.io`` spec for the context
        (None or empty: no context features).
      example_feature_spec: feature name -> ``tf.io`` spec for each example;
        a ``FixedLenFeature`` needs a default value to pad lists.
      mask_feature_name: if given, adds bool ``[B, L]``, True for real examples.
      size_feature_name: if given, adds int32 ``[B]``, each list's number of
        examples (before truncation).
      list_size: if > 0, the fixed L.

    Returns:
      A dict of feature name to tensor.
    """
    if not example_feature_spec:
        raise ValueError(f"`example_feature_spec` must not be empty; got {example_feature_spec!r}.")
    list_size = list_size if list_size and list_size > 0 else None
    context, examples, sizes = split_elwc(serialized)
    batch_size = context.shape[0] or tf.shape(examples)[0]
    current_size = tf.shape(examples)[1]
    if list_size is not None:
        examples = tf.cond(
            current_size > list_size,
            lambda: examples[:, :list_size],
            lambda: tf.pad(examples, [[0, 0], [0, list_size - current_size]], constant_values=""))
        current_size = list_size
    parsed = tf.io.parse_example(tf.reshape(examples, [-1]), example_feature_spec)
    features = {name: _to_lists(value, batch_size, current_size) for name, value in parsed.items()}
    if context_feature_spec:
        # (an ELWC without a context parses as an empty tf.Example: the defaults)
        context = tf.pad(context, [[0, 0], [0, 1 - tf.shape(context)[1]]])
        features.update(tf.io.parse_example(tf.reshape(context, [batch_size]),
                                            context_feature_spec))
    if size_feature_name:
        features[size_feature_name] = sizes
    if mask_feature_name:
        features[mask_feature_name] = tf.sequence_mask(sizes, list_size)
    return features
