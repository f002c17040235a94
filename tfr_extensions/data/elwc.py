"""LETOR data as ExampleListWithContext (ELWC) TFRecords, for TF-Ranking pipelines.

One record per query: a ``tensorflow.serving.ExampleListWithContext`` whose
context holds the query id (int64 ``"query_id"``) and whose examples hold, per
document, the ``F`` feature values as one float list (``"features"``) and the
label (float ``"relevance"``). :func:`elwc_feature_specs` gives the matching
parsing specs for ``tfr.data.build_ranking_dataset`` / ``tfr.data.make_parsing_fn``
with ``data_format=tfr.data.ELWC``.
"""
import os
from typing import Dict, Optional, Tuple, Union

import numpy as np
import tensorflow as tf

from tfr_extensions.data.libsvm_data import LibSVMData

LABEL_PADDING = -1.0  # TF-Ranking's default label of padded examples


def elwc_feature_specs(num_features: int, feature_name: str = "features",
                       label_name: str = "relevance", qid_name: Optional[str] = "query_id",
                       ) -> Tuple[Dict[str, tf.io.FixedLenFeature], Dict[str, tf.io.FixedLenFeature]]:
    """``(context_feature_spec, example_feature_spec)`` for files from :func:`to_elwc`.

    The example spec includes the label; TF-Ranking's readers take it in
    ``example_feature_spec`` and models pop it out as the label.

    >>> context, example = elwc_feature_specs(3)
    >>> sorted(context), sorted(example), example["features"].shape
    (['query_id'], ['features', 'relevance'], [3])
    """
    context = {} if qid_name is None else {
        qid_name: tf.io.FixedLenFeature([1], tf.int64, default_value=[0])}
    example = {
        feature_name: tf.io.FixedLenFeature(
            [num_features], tf.float32, default_value=[0.0] * num_features),
        label_name: tf.io.FixedLenFeature([1], tf.float32, default_value=[LABEL_PADDING]),
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
