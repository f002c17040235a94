"""What differs between the supported stacks, in one place.

Three stacks are supported (``stacks/*.txt``, ``make test STACK=...``):

* ``tf215``: TensorFlow 2.15 with TF-Ranking 0.5.5 (its last release, which pins
  TF < 2.16 and imports ``tf.estimator``), Keras 2;
* ``tf221``: TensorFlow 2.21 with Keras 2 as ``tf_keras`` 2.21, selected by the
  environment variable ``TF_USE_LEGACY_KERAS=1``, and no TF-Ranking;
* ``keras3``: TensorFlow 2.21 with its default Keras 3 and keras-rs, no TF-Ranking.

Which Keras is active is :mod:`tfr_extensions.backend`'s business. This module
holds whether TF-Ranking is there, and our own versions of the few TF-Ranking
pieces the package cannot do without:

* :func:`tf_ranking` imports TF-Ranking lazily (None when it is missing or cannot
  import); :func:`has_tf_ranking`, and :func:`require_tf_ranking` for code that
  cannot work without it.
* :func:`ragged_to_dense`: TF-Ranking's padding of ragged labels/scores/weights.
* :func:`approx_ranks`: TF-Ranking's sigmoid rank approximation (ApproxNDCG's).
* :func:`parse_elwc` and :func:`elwc_predict_function`: TF-Ranking's
  ``tfr.data.parse_from_example_list`` and its ELWC predict signature, in
  ``tf.io`` ops only (no ``tensorflow_serving`` protos needed at run time).
* :func:`get_strategy`, :func:`strategy_scope`, :func:`get_output_filepath`:
  TF-Ranking's ``strategy_utils`` for the strategies our pipelines use.

Where TF-Ranking is installed, ``tests/test_compat.py`` checks each against it.
"""
import functools
import importlib
import os
import types
from typing import Callable, Dict, Optional, Tuple, Union

import tensorflow as tf

from tfr_extensions.ops.lists import PADDING_LABEL

# ----------------------------------------------------------------------------- TF-Ranking

@functools.lru_cache(maxsize=None)
def _import_tf_ranking() -> Tuple[Optional[types.ModuleType], str]:
    try:
        return importlib.import_module("tensorflow_ranking"), ""
    except ImportError as error:  # missing, or TF >= 2.16 (no tf.estimator)
        return None, f"{type(error).__name__}: {error}"


def tf_ranking() -> Optional[types.ModuleType]:
    """The ``tensorflow_ranking`` module, imported on first use; None when it is
    not installed or cannot be imported (TF >= 2.16 has no ``tf.estimator``)."""
    return _import_tf_ranking()[0]


def has_tf_ranking() -> bool:
    """Whether TF-Ranking imports in this process."""
    return tf_ranking() is not None


def require_tf_ranking(feature: str, instead: str = "") -> types.ModuleType:
    """TF-Ranking's module, or an ``ImportError`` saying that ``feature`` needs it.

    Args:
      feature: what needs TF-Ranking, e.g. ``"tfr_extensions.pipeline"``.
      instead: what to use without it (appended to the message).
    """
    module, reason = _import_tf_ranking()
    if module is None:
        raise ImportError(
            f"{feature} needs tensorflow-ranking (TF-Ranking 0.5.5, which requires TensorFlow "
            f"< 2.16; this is TensorFlow {tf.__version__}), which does not import here ({reason}). "
            f"Install the tf215 stack: pip install 'tfr_extensions[tf215]'. {instead}".rstrip())
    return module


# ----------------------------------------------------------------------------- ragged inputs

#: TF-Ranking's paddings (``tensorflow_ranking/python/utils.py``); the label one
#: is the package's (:data:`tfr_extensions.ops.lists.PADDING_LABEL`)
PADDING_PREDICTION = -1e6
PADDING_WEIGHT = 0.0


def ragged_to_dense(labels: tf.RaggedTensor, predictions: Optional[tf.RaggedTensor],
                    weights=None) -> Tuple[tf.Tensor, Optional[tf.Tensor], object, tf.Tensor]:
    """Pads ragged ``[batch, (list_size)]`` inputs as TF-Ranking does.

    ``tensorflow_ranking.python.utils.ragged_to_dense``: labels are padded with
    ``PADDING_LABEL`` (-1, which marks padding for every loss and metric),
    predictions with ``PADDING_PREDICTION`` (-1e6), ragged per-item weights
    with ``PADDING_WEIGHT`` (0); dense weights (per list, ``[batch, 1]``) and
    None pass through.

    Args:
      labels: ``tf.RaggedTensor`` ``[batch, (list_size)]``.
      predictions: ``tf.RaggedTensor`` of the same row lengths, or None.
      weights: None, a ``tf.RaggedTensor`` like ``labels``, or a dense tensor.

    Returns:
      ``(labels, predictions, weights, mask)``, dense ``[batch, list_size]``,
      ``mask`` bool, True for the entries that were present.

    >>> labels = tf.ragged.constant([[1.0, 0.0], [2.0]])
    >>> dense, scores, _, mask = ragged_to_dense(labels, tf.ragged.constant([[0.5, 0.25], [0.75]]))
    >>> dense.numpy().tolist(), scores.numpy().tolist(), mask.numpy().tolist()
    ([[1.0, 0.0], [2.0, -1.0]], [[0.5, 0.25], [0.75, -1000000.0]], [[True, True], [True, False]])
    """
    if not isinstance(labels, tf.RaggedTensor):
        raise TypeError(f"`labels` must be a tf.RaggedTensor; got {type(labels).__name__}.")
    if predictions is not None and not isinstance(predictions, tf.RaggedTensor):
        raise TypeError("`predictions` must be a tf.RaggedTensor like `labels`; got "
                        f"{type(predictions).__name__}.")
    mask = tf.cast(tf.ones_like(labels).to_tensor(0.0), tf.bool)
    labels = labels.to_tensor(PADDING_LABEL)
    if predictions is not None:
        predictions = predictions.to_tensor(PADDING_PREDICTION)
    if isinstance(weights, tf.RaggedTensor):
        weights = weights.to_tensor(PADDING_WEIGHT)
    return labels, predictions, weights, mask


def approx_ranks(logits: tf.Tensor) -> tf.Tensor:
    r"""TF-Ranking's ``losses_impl.approx_ranks``: :math:`\hat\pi_i = 1 +
    \sum_{j \ne i} \sigma(s_j - s_i)` (Qin et al.'s approximation, which
    ApproxNDCG differentiates), ``[B, L] -> [B, L]``; scale the logits for a
    steeper sigmoid.

    >>> approx_ranks(tf.constant([[0.0, 0.0, 100.0]])).numpy().tolist()
    [[2.5, 2.5, 1.0]]
    """
    logits = tf.convert_to_tensor(logits)
    pairs = tf.sigmoid(logits[:, None, :] - logits[:, :, None])  # [B, i, j]: sigma(s_j - s_i)
    return tf.reduce_sum(pairs, axis=-1) + 0.5  # sigma(0) = 1/2 on the diagonal, so + 1/2


# ----------------------------------------------------------------------------- ELWC

FeatureSpec = Dict[str, Union[tf.io.FixedLenFeature, tf.io.VarLenFeature, tf.io.RaggedFeature]]

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


def elwc_predict_function(model: Callable, context_feature_spec: Optional[FeatureSpec],
                          example_feature_spec: FeatureSpec,
                          mask_feature_name: str) -> tf.types.experimental.GenericFunction:
    """A TF Serving predict function over serialized ELWCs.

    TF-Ranking's ``tfr.keras.saved_model.Signatures(...).predict_tf_function()``:
    input ``inputs``, string ``[B]``; the features of :func:`parse_elwc` (with
    the mask under ``mask_feature_name``) go to ``model(features,
    training=False)``; a tensor output is returned as ``{"outputs": ...}``, a
    dict output as it is.
    """
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string,
                                                name=tf.saved_model.PREDICT_INPUTS)])
    def predict(serialized_elwcs):
        features = parse_elwc(serialized_elwcs, context_feature_spec, example_feature_spec,
                              mask_feature_name=mask_feature_name)
        outputs = model(features, training=False)
        if isinstance(outputs, dict):
            return outputs
        if isinstance(outputs, tf.Tensor):
            return {tf.saved_model.PREDICT_OUTPUTS: outputs}
        raise TypeError("The model's outputs must be a tensor or a dict of tensors; got "
                        f"{type(outputs).__name__}.")

    return predict


# ----------------------------------------------------------------------------- strategies

#: TF-Ranking's strategy names (``tfr.keras.strategy_utils``)
MIRRORED_STRATEGY = "MirroredStrategy"
MWMS_STRATEGY = "MultiWorkerMirroredStrategy"
STRATEGIES = (MIRRORED_STRATEGY, MWMS_STRATEGY)


def get_strategy(strategy: Optional[str],
                 cluster_resolver=None) -> Optional[tf.distribute.Strategy]:
    """A ``tf.distribute`` strategy by TF-Ranking's name, None for None.

    ``tfr.keras.strategy_utils.get_strategy`` for ``"MirroredStrategy"`` and
    ``"MultiWorkerMirroredStrategy"`` (the latter reads its cluster from
    ``TF_CONFIG`` unless ``cluster_resolver`` is given).
    """
    if strategy is None:
        return None
    if strategy == MIRRORED_STRATEGY:
        return tf.distribute.MirroredStrategy()
    if strategy == MWMS_STRATEGY:
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=cluster_resolver)
    raise ValueError(f"`strategy` must be None or one of {list(STRATEGIES)}; got {strategy!r}.")


class _NoStrategyScope:
    def __enter__(self):
        return None

    def __exit__(self, *args):
        return False


def strategy_scope(strategy: Optional[tf.distribute.Strategy]):
    """``strategy.scope()``, or a context that does nothing for None."""
    return _NoStrategyScope() if strategy is None else strategy.scope()


def get_output_filepath(filepath: str, strategy: Optional[tf.distribute.Strategy]) -> str:
    """Where this worker writes: ``filepath``, except on a non-chief worker of a
    ``MultiWorkerMirroredStrategy``, which gets ``<filepath>/workertemp_<task_id>``
    (created), as TF-Ranking's ``strategy_utils.get_output_filepath``."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        task_type = strategy.cluster_resolver.task_type
        task_id = strategy.cluster_resolver.task_id
        if task_type is not None and task_type != "chief":
            temp_dir = os.path.join(filepath, f"workertemp_{task_id}" if task_id is not None else "")
            tf.io.gfile.makedirs(temp_dir)
            return temp_dir
    return filepath
