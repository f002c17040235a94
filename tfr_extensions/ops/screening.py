"""The bad-input policy of every loss, in TensorFlow: screening, NaN for broken lists,
and the inputs of the Keras classes (keras-rs dicts, ragged tensors, sample weights).

The policy itself is stated once, in :mod:`tfr_extensions.losses.base`; this module
is its TensorFlow implementation, and :mod:`tfr_extensions.keras_ops.screening` its
``keras.ops`` twin (the same function names). :func:`screened_loss` runs a loss
body under the policy; the screening costs O(B L) element-wise operations and no
host sync.
"""
import contextlib
from typing import Any, Callable, Mapping

import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import numerics


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
    lists.check_list_shapes(labels, scores)
    valid = tf.greater_equal(labels, 0.0)
    if mask is not None:
        valid = tf.logical_and(valid, tf.cast(mask, tf.bool))
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
        labels, scores, _, _ = lists.ragged_to_dense(labels, scores)
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
    dtype = lists.compute_dtype(scores)
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
    relevance = tf.where(labels >= 0, labels, tf.constant(0, labels.dtype))
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
    y_true = lists.labels_with_mask(y_true)
    if ragged or isinstance(y_true, tf.RaggedTensor):
        y_true, y_pred, sample_weight, _ = lists.ragged_to_dense(y_true, y_pred, sample_weight)
    y_pred = tf.convert_to_tensor(y_pred)
    dtype = lists.compute_dtype(y_pred)
    y_pred = tf.cast(y_pred, dtype)
    y_true = tf.cast(tf.convert_to_tensor(y_true), dtype)
    if sample_weight is not None:
        sample_weight = listwise_sample_weights(y_true, sample_weight)
    return y_true, y_pred, sample_weight, dtype


def name_scope(name: str):
    """The name scope of a loss's ops (TensorFlow's graphs and profiles show it)."""
    return tf.name_scope(name) if name else contextlib.nullcontext()
