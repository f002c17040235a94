"""The input conventions and the bad-input policy of every loss and metric, in
TensorFlow: written once here, for the TensorFlow implementation.

The policy is stated in :mod:`tfr_extensions.losses.base`; this module is its
TensorFlow implementation, and :mod:`tfr_extensions.keras_ops.screening` its
``keras.ops`` twin (the same function names). Every op, loss body and metric of
:mod:`tfr_extensions.ops` takes its inputs through these functions:

* **shapes and dtype**: :func:`check_list_shapes`, :func:`compute_dtype`,
  :func:`prepare_scores`, :func:`prepare_lists`;
* **padding**: :func:`valid_documents` (a label < 0 or NaN, or ``mask`` False),
  keras-rs's ``{"labels", "mask"}`` (:func:`labels_with_mask`) and ragged inputs
  (:func:`ragged_to_dense`, TF-Ranking's padding);
* **non-finite scores and labels above the maximum**: :func:`screen_lists`,
  and :func:`screened_loss`, which runs a loss body under the policy (NaN loss and
  zero gradient for a broken list); the screening costs O(B L) element-wise
  operations and no host sync;
* **lists without a relevant document**: :func:`has_relevant` (weight 0);
* **the Keras classes' inputs**: :func:`loss_inputs` (with per-item sample weights
  by :func:`listwise_sample_weights`) and :func:`metric_inputs`.
"""
import contextlib
from typing import Any, Callable, Mapping, Optional, Tuple

import tensorflow as tf

from tfr_extensions.ops import numerics
from tfr_extensions.ops.conventions import PADDING_LABEL

#: TF-Ranking's paddings of ragged scores and per-document weights
#: (``tensorflow_ranking/python/utils.py``); labels are padded with
#: :data:`~tfr_extensions.ops.conventions.PADDING_LABEL`.
PADDING_PREDICTION = -1e6
PADDING_WEIGHT = 0.0


def compute_dtype(scores: tf.Tensor) -> tf.DType:
    """float64 for float64 inputs, float32 for everything else (incl. float16)."""
    return tf.float64 if scores.dtype == tf.float64 else tf.float32


def check_list_shapes(labels: tf.Tensor, scores: tf.Tensor) -> None:
    """Raises ValueError unless labels and scores are both rank 2 and compatible."""
    for arg, tensor in (("labels", labels), ("scores", scores)):
        rank = tensor.shape.rank
        if rank is not None and rank != 2:
            raise ValueError(
                f"`{arg}` must have shape [batch, list_size]; got rank {rank} "
                f"(shape {tensor.shape}).")
    if not labels.shape.is_compatible_with(scores.shape):
        raise ValueError(
            f"`labels` and `scores` must have the same shape; got "
            f"{labels.shape} and {scores.shape}.")


def valid_documents(labels: tf.Tensor, mask=None) -> tf.Tensor:
    """The padding rule: bool ``[batch, list_size]``, True for the documents with a
    label >= 0 (a NaN label is padding) and ``mask`` True (where given).

    >>> valid_documents(tf.constant([[2., -1., float("nan"), 0.]]), [[True, True, True, False]]
    ...                 ).numpy().tolist()
    [[True, False, False, False]]
    """
    valid = tf.greater_equal(labels, tf.constant(0, labels.dtype))
    if mask is not None:
        valid = tf.logical_and(valid, tf.cast(mask, tf.bool))
    return valid


def has_relevant(labels: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Bool ``[batch]``: the list has at least one valid document with label > 0 (a
    list without one gets weight 0 in every loss)."""
    return tf.reduce_any(tf.logical_and(mask, labels > 0), axis=-1)


def prepare_scores(scores, mask=None) -> Tuple[tf.Tensor, tf.Tensor]:
    """Scores in the compute dtype, checked to be ``[batch, list_size]``, and the
    bool validity mask (all True when ``mask`` is None)."""
    scores = tf.convert_to_tensor(scores)
    if not scores.dtype.is_floating:
        scores = tf.cast(scores, tf.float32)
    scores = tf.cast(scores, compute_dtype(scores))
    if scores.shape.rank is not None and scores.shape.rank != 2:
        raise ValueError(f"`scores` must have shape [batch, list_size]; got {scores.shape}.")
    valid = tf.ones_like(scores, tf.bool) if mask is None else tf.cast(mask, tf.bool)
    return scores, valid


def prepare_lists(
    labels, scores, mask=None
) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Casts to the compute dtype, checks shapes, and builds the validity mask.

    Returns:
      ``(labels, scores, mask)``: labels and scores in the compute dtype with
      padded labels replaced by 0 (so no -1 ever reaches ``2^y``), and ``mask``
      bool ``[batch, list_size]``, True for valid documents (:func:`valid_documents`).
    """
    scores = tf.convert_to_tensor(scores)
    if not scores.dtype.is_floating:
        scores = tf.cast(scores, tf.float32)
    dtype = compute_dtype(scores)
    scores = tf.cast(scores, dtype)
    labels = tf.cast(tf.convert_to_tensor(labels), dtype)
    check_list_shapes(labels, scores)
    valid = valid_documents(labels, mask)
    labels = tf.where(valid, labels, tf.constant(0, labels.dtype))
    return labels, scores, valid


def labels_with_mask(y_true):
    """Labels ``[batch, list_size]`` from ``y_true`` as the losses and metrics take it:
    a tensor, or keras-rs's dict ``{"labels": ..., "mask": ...}`` whose ``mask``
    (bool, True = valid; optional) marks more padding, which becomes label -1.

    >>> labels_with_mask({"labels": [[2., 1.]], "mask": [[True, False]]}).numpy().tolist()
    [[2.0, -1.0]]
    """
    if not isinstance(y_true, Mapping):
        return y_true
    unknown = sorted(set(y_true) - {"labels", "mask"})
    if "labels" not in y_true or unknown:
        raise ValueError("`y_true` as a dict must be keras-rs's {'labels': ..., 'mask': ...} "
                         f"('mask' optional); got the keys {sorted(y_true)}.")
    labels, mask = y_true["labels"], y_true.get("mask")
    if mask is None:
        return labels
    if isinstance(labels, tf.RaggedTensor):
        labels = labels.to_tensor(PADDING_LABEL)
    if isinstance(mask, tf.RaggedTensor):
        mask = mask.to_tensor(False)
    labels = tf.convert_to_tensor(labels)
    return tf.where(tf.cast(mask, tf.bool), labels, tf.constant(PADDING_LABEL, labels.dtype))


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


def screen_lists(labels: tf.Tensor, scores: tf.Tensor, max_label: float, mask=None):
    """The bad-input policy as tensors.

    Args:
      labels, scores: ``[batch, list_size]`` in the compute dtype.
      max_label: the largest label a valid document may have.
      mask: optional bool ``[batch, list_size]``, False for more padding.

    Returns:
      ``(labels, scores, mask, broken)``: ``mask`` bool ``[batch, list_size]``,
      True for valid documents (label >= 0 and ``mask``; NaN labels are
      padding); labels 0 at padded documents and capped at ``max_label``;
      scores with every NaN or infinite entry set to 0 by ``tf.where`` (so its
      gradient is exactly 0); ``broken`` bool ``[batch]``, the lists with a
      valid document whose score is not finite or whose label exceeds
      ``max_label``. What a loss computes for a broken list is discarded, but
      it is finite: no NaN or inf reaches a loss, so none reaches another list
      through a batch-wide reduction.

    Only the per-element selects feed the loss (so that XLA, which fuses them
    into the O(L^2) kernels that read the scores, repeats as little as
    possible there); ``broken`` is one reduction beside them.

    >>> _, scores, valid, broken = screen_lists(tf.constant([[1., -1.]]),
    ...                                         tf.constant([[float("nan"), 2.]]), 31.0)
    >>> scores.numpy().tolist(), valid.numpy().tolist(), broken.numpy().tolist()
    ([[0.0, 2.0]], [[True, False]], [True])
    """
    check_list_shapes(labels, scores)
    valid = valid_documents(labels, mask)
    finite = tf.math.is_finite(scores)
    zero = tf.constant(0, scores.dtype)
    bad = tf.logical_and(valid, tf.logical_not(
        tf.logical_and(finite, tf.less_equal(labels, max_label))))
    broken = tf.reduce_any(bad, axis=-1)
    labels = tf.where(valid, tf.minimum(labels, max_label), zero)
    return labels, tf.where(finite, scores, zero), valid, broken


def no_gradient_where(broken: tf.Tensor, scores: tf.Tensor) -> tf.Tensor:
    """``scores`` whose gradient is exactly 0 in the lists where ``broken`` is set.

    The select sits on the scores, after the loss's backward pass, not on the
    loss's upstream gradient: an upstream that depends on ``broken`` (a
    reduction over each list) led XLA to recompute that reduction inside the
    loss's O(L^2) backward loop (``docs/notes/twin_sigmoid_speed.md``).
    """
    return tf.where(broken[:, None], tf.stop_gradient(scores), scores)


def nan_where(broken: tf.Tensor, losses: tf.Tensor) -> tf.Tensor:
    """``losses`` with NaN in the lists where ``broken`` is set, and the same
    gradient (the NaN is a constant of the backward pass)."""
    nan = tf.where(broken, tf.constant(float("nan"), losses.dtype),
                   tf.constant(0, losses.dtype))
    return losses + tf.stop_gradient(nan)


def _dense(labels, scores, mask):
    """Ragged inputs padded as TF-Ranking does; dense ones pass through."""
    if isinstance(labels, tf.RaggedTensor) or isinstance(scores, tf.RaggedTensor):
        labels, scores, _, _ = ragged_to_dense(labels, scores)
        if isinstance(mask, tf.RaggedTensor):
            mask = mask.to_tensor(False)
    return labels, scores, mask


def screened_loss(body: Callable, labels, scores, mask, max_label: float,
                  options: Mapping[str, Any]):
    """A TensorFlow loss body under the bad-input policy: ``(losses, weights, aux)``.

    Pads ragged inputs, casts to the compute dtype, screens (:func:`screen_lists`),
    runs ``body(labels, scores, mask=valid, **options)`` on scores with no gradient
    in broken lists and gives those lists NaN losses. ``aux`` is the body's third
    output, or ``{}``.
    """
    labels, scores, mask = _dense(labels, scores, mask)
    scores = tf.convert_to_tensor(scores)
    dtype = compute_dtype(scores)
    labels, scores, valid, broken = screen_lists(
        tf.cast(tf.convert_to_tensor(labels), dtype), tf.cast(scores, dtype), max_label, mask)
    losses, weights, *aux = body(labels, scores=no_gradient_where(broken, scores), mask=valid,
                                 **options)
    return nan_where(broken, losses), weights, (aux[0] if aux else {})


def listwise_sample_weights(labels: tf.Tensor, sample_weight) -> tf.Tensor:
    """Per-list weights ``[batch, 1]`` from per-list or per-item sample weights.

    Per-item weights follow TF-Ranking's ``_ListwiseLoss``: the mean of the item
    weights weighted by the (valid, non-negative) labels.

    >>> listwise_sample_weights(tf.constant([[1., 3.]]), tf.constant([[2., 6.]])).numpy().tolist()
    [[5.0]]
    """
    weights = tf.cast(tf.convert_to_tensor(sample_weight), labels.dtype)
    if weights.shape.rank == 0:
        return tf.fill([tf.shape(labels)[0], 1], weights)
    if weights.shape.rank == 1:
        return weights[:, None]
    if weights.shape.rank == 2 and weights.shape[1] == 1:
        return weights
    relevance = tf.where(valid_documents(labels), labels, tf.constant(0, labels.dtype))
    total = tf.reduce_sum(relevance, axis=1, keepdims=True)
    weighted = tf.reduce_sum(weights * relevance, axis=1, keepdims=True)
    return numerics.safe_divide(weighted, total)


def loss_inputs(y_true, y_pred, sample_weight, ragged: bool):
    """What a Keras loss class computes on: ``(labels, scores, list_weights, dtype)``.

    ``y_true`` may be keras-rs's ``{"labels", "mask"}``; ragged inputs (or any with
    ``ragged``) are padded as TF-Ranking does; labels and scores are cast to the
    compute dtype (float64 for float64 scores, else float32); per-item sample weights
    become per-list weights ``[batch, 1]`` (:func:`listwise_sample_weights`).
    """
    y_true = labels_with_mask(y_true)
    if ragged or isinstance(y_true, tf.RaggedTensor):
        y_true, y_pred, sample_weight, _ = ragged_to_dense(y_true, y_pred, sample_weight)
    y_pred = tf.convert_to_tensor(y_pred)
    dtype = compute_dtype(y_pred)
    y_pred = tf.cast(y_pred, dtype)
    y_true = tf.cast(tf.convert_to_tensor(y_true), dtype)
    if sample_weight is not None:
        sample_weight = listwise_sample_weights(y_true, sample_weight)
    return y_true, y_pred, sample_weight, dtype


def metric_inputs(y_true, y_pred) -> Tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """What a Keras metric computes on: ``(labels, scores, valid)``.

    ``y_true`` may be keras-rs's ``{"labels", "mask"}`` (:func:`labels_with_mask`)
    or ragged (padded with label -1); labels are float32; ragged scores are padded
    with 0 (their documents are padding); ``valid`` is :func:`valid_documents`.

    >>> labels, _, valid = metric_inputs(tf.ragged.constant([[1.], [2., 0.]]),
    ...                                  tf.ragged.constant([[0.5], [1., 2.]]))
    >>> labels.numpy().tolist(), valid.numpy().tolist()
    ([[1.0, -1.0], [2.0, 0.0]], [[True, False], [True, True]])
    """
    y_true = labels_with_mask(y_true)
    if isinstance(y_true, tf.RaggedTensor):
        y_true = y_true.to_tensor(PADDING_LABEL)
    if isinstance(y_pred, tf.RaggedTensor):
        y_pred = y_pred.to_tensor(0.0)
    labels = tf.cast(tf.convert_to_tensor(y_true), tf.float32)
    return labels, y_pred, valid_documents(labels)


def name_scope(name: str):
    """The name scope of a loss's ops (TensorFlow's graphs and profiles show it)."""
    return tf.name_scope(name) if name else contextlib.nullcontext()
