"""The bad-input policy of every loss, in ``keras.ops``: the twin of
:mod:`tfr_extensions.ops.screening` (the same functions and names), for Keras 3 on
JAX and PyTorch. The policy is stated once, in :mod:`tfr_extensions.losses.base`.

>>> from keras import ops
>>> _, scores, valid, broken = screen_lists(ops.array([[1., -1.]]),
...                                         ops.array([[float("nan"), 2.]]), 31.0)
>>> ops.convert_to_numpy(scores).tolist(), ops.convert_to_numpy(broken).tolist()
([[0.0, 2.0]], [True])
"""
import contextlib
from typing import Any, Callable, Mapping

from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics


def screen_lists(labels, scores, max_label: float, mask=None):
    """The bad-input policy of :mod:`tfr_extensions.losses.base`, as tensors:
    ``(labels, scores, valid, broken)`` exactly as
    :func:`tfr_extensions.ops.screening.screen_lists` returns them (labels 0 at
    padding and capped at ``max_label``, non-finite scores set to 0, ``broken``
    ``[batch]`` the lists with a valid document whose score is not finite or
    whose label exceeds ``max_label``)."""
    lists.check_list_shapes(labels, scores)
    valid = labels >= 0  # False for NaN labels
    if mask is not None:
        valid = ops.logical_and(valid, ops.cast(mask, "bool"))
    finite = ops.isfinite(scores)
    bad = ops.logical_and(valid, ops.logical_not(
        ops.logical_and(finite, labels <= max_label)))
    broken = ops.any(bad, axis=-1)
    zero = ops.zeros_like(scores)
    labels = ops.where(valid, numerics.minimum(labels, float(max_label)), zero)
    return labels, ops.where(finite, scores, zero), valid, broken


def no_gradient_where(broken, scores):
    """``scores`` whose gradient is exactly 0 in the lists where ``broken`` is set."""
    return ops.where(broken[:, None], ops.stop_gradient(scores), scores)


def nan_where(broken, losses):
    """``losses`` with NaN in the lists where ``broken`` is set, and the same gradient."""
    nan = ops.where(broken, ops.full_like(losses, float("nan")), ops.zeros_like(losses))
    return losses + ops.stop_gradient(nan)


def screened_loss(body: Callable, labels, scores, mask, max_label: float,
                  options: Mapping[str, Any]):
    """A loss body under the bad-input policy: ``(losses, weights, aux)``.

    Screens ``labels``/``scores`` (:func:`screen_lists`), runs ``body(labels, scores,
    mask=valid, **options)`` on scores with no gradient in broken lists, and gives
    those lists NaN losses: :func:`tfr_extensions.ops.screening.screened_loss`
    in ``keras.ops``.
    """
    scores = ops.convert_to_tensor(scores)
    dtype = lists.compute_dtype(scores)
    labels, scores, valid, broken = screen_lists(
        ops.cast(ops.convert_to_tensor(labels), dtype), ops.cast(scores, dtype), max_label, mask)
    losses, weights, *aux = body(labels, scores=no_gradient_where(broken, scores), mask=valid,
                                 **options)
    return nan_where(broken, losses), weights, (aux[0] if aux else {})




def listwise_sample_weights(labels, sample_weight):
    """Per-list weights ``[batch, 1]`` from per-list or per-item sample weights
    (TF-Ranking's listwise rule: the label-weighted mean of the item weights), as
    :func:`tfr_extensions.ops.screening.listwise_sample_weights`."""
    weights = ops.cast(ops.convert_to_tensor(sample_weight), labels.dtype)
    rank = len(weights.shape)
    if rank == 0:
        return ops.full((ops.shape(labels)[0], 1), weights, dtype=labels.dtype)
    if rank == 1:
        return weights[:, None]
    if rank == 2 and weights.shape[1] == 1:
        return weights
    relevance = ops.where(labels >= 0, labels, ops.zeros_like(labels))
    total = ops.sum(relevance, axis=1, keepdims=True)
    weighted = ops.sum(weights * relevance, axis=1, keepdims=True)
    return numerics.safe_divide(weighted, total)


def loss_inputs(y_true, y_pred, sample_weight, ragged: bool):
    """What a Keras loss class computes on: ``(labels, scores, list_weights, dtype)``,
    as :func:`tfr_extensions.ops.screening.loss_inputs` (ragged tensors exist on
    TensorFlow only: ``ragged`` must be False here)."""
    if ragged:
        raise ValueError("`ragged=True` takes tf.RaggedTensor inputs, which exist on Keras's "
                         "TensorFlow backend only. Pad the lists (label -1) instead.")
    y_true = lists.labels_with_mask(y_true)
    y_pred = ops.convert_to_tensor(y_pred)
    dtype = lists.compute_dtype(y_pred)
    y_pred = ops.cast(y_pred, dtype)
    y_true = ops.cast(ops.convert_to_tensor(y_true), dtype)
    if sample_weight is not None:
        sample_weight = listwise_sample_weights(y_true, sample_weight)
    return y_true, y_pred, sample_weight, dtype


def name_scope(name: str):  # pylint: disable=unused-argument
    """No name scope: JAX and PyTorch programs have none to give."""
    return contextlib.nullcontext()
