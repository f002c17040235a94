"""Lists, masks, dtypes and the bad-input screening: the ``keras.ops`` twin of
:mod:`tfr_extensions.ops.lists` and of the screening in
:mod:`tfr_extensions.losses.base` (the same conventions, the same names).

``labels`` and ``scores`` are ``[batch, list_size]``; a label < 0 (or NaN)
marks padding, ``mask`` (bool, True = valid) narrows validity further; gains
are ``2^y - 1`` and discounts ``1 / log2(1 + rank)``; computation runs in
float64 for float64 scores and in float32 otherwise (on JAX, float64 needs
``jax_enable_x64``).

>>> from keras import ops
>>> ops.convert_to_numpy(labels_with_mask({"labels": [[2., 1.]], "mask": [[True, False]]})).tolist()
[[2.0, -1.0]]
"""
from typing import Mapping

from keras import ops

from tfr_extensions.ops.conventions import MAX_LABEL, PADDING_LABEL  # noqa: F401
from tfr_extensions.keras_ops import numerics


def dtype_name(x) -> str:
    """The standardized dtype name of a tensor (``"float32"``, ``"bool"``, ...)."""
    from keras import backend  # pylint: disable=import-outside-toplevel
    return backend.standardize_dtype(x.dtype)


def compute_dtype(scores) -> str:
    """``"float64"`` for float64 scores, ``"float32"`` for everything else."""
    return "float64" if dtype_name(scores) == "float64" else "float32"


def check_list_shapes(labels, scores) -> None:
    """Raises ValueError unless labels and scores are both rank 2 with the same shape."""
    for arg, tensor in (("labels", labels), ("scores", scores)):
        rank = len(tensor.shape)
        if rank != 2:
            raise ValueError(f"`{arg}` must have shape [batch, list_size]; got rank {rank} "
                             f"(shape {tuple(tensor.shape)}).")
    if not all(a is None or b is None or a == b for a, b in zip(labels.shape, scores.shape)):
        raise ValueError(f"`labels` and `scores` must have the same shape; got "
                         f"{tuple(labels.shape)} and {tuple(scores.shape)}.")


def prepare_scores(scores, mask=None):
    """Scores in the compute dtype (non-float ones as float32), checked to be
    ``[batch, list_size]``, and the bool validity mask (all True when ``mask`` is None),
    as :func:`tfr_extensions.ops.lists.prepare_scores`."""
    scores = ops.convert_to_tensor(scores)
    if not dtype_name(scores).startswith(("float", "bfloat")):
        scores = ops.cast(scores, "float32")
    scores = ops.cast(scores, compute_dtype(scores))
    if len(scores.shape) != 2:
        raise ValueError(f"`scores` must have shape [batch, list_size]; got {tuple(scores.shape)}.")
    valid = ops.ones_like(scores, dtype="bool") if mask is None else ops.cast(mask, "bool")
    return scores, valid


def batch_gather(params, indices):
    """``params[b, indices[b, ...]]`` for ``[B, L]`` params and int ``[B, ...]`` indices
    (``tf.gather(params, indices, batch_dims=1)``), as
    :func:`tfr_extensions.ops.lists.batch_gather`."""
    if len(indices.shape) == 2:
        return ops.take_along_axis(params, indices, axis=-1)
    if len(indices.shape) != 3:
        raise ValueError(f"`indices` must be [B, L] or [B, S, n]; got {tuple(indices.shape)}.")
    expanded = ops.broadcast_to(params[:, None, :],
                                tuple(ops.shape(indices)[:2]) + (ops.shape(params)[-1],))
    return ops.take_along_axis(expanded, indices, axis=-1)


def prepare_lists(labels, scores, mask=None):
    """``(labels, scores, mask)`` in the compute dtype, padded labels 0 and
    ``mask`` bool ``[batch, list_size]`` (True = valid)."""
    scores = ops.convert_to_tensor(scores)
    dtype = compute_dtype(scores)
    scores = ops.cast(scores, dtype)
    labels = ops.cast(ops.convert_to_tensor(labels), dtype)
    check_list_shapes(labels, scores)
    valid = labels >= 0
    if mask is not None:
        valid = ops.logical_and(valid, ops.cast(mask, "bool"))
    return ops.where(valid, labels, ops.zeros_like(labels)), scores, valid


def gains(labels):
    """The exponential gain 2^y - 1 (labels of padded documents must be 0)."""
    return ops.power(ops.cast(2.0, labels.dtype), labels) - 1.0


def log2_discount(ranks):
    """1 / log2(1 + rank) for 1-based ranks."""
    return ops.log(ops.cast(2.0, ranks.dtype)) / ops.log1p(ranks)


def has_relevant(labels, mask):
    """Bool ``[batch]``: the list has at least one valid document with label > 0."""
    return ops.any(ops.logical_and(mask, labels > 0), axis=-1)


def screen_lists(labels, scores, max_label: float, mask=None):
    """The bad-input policy of :mod:`tfr_extensions.losses.base`, as tensors:
    ``(labels, scores, valid, broken)`` exactly as
    :func:`tfr_extensions.losses.base.screen_lists` returns them (labels 0 at
    padding and capped at ``max_label``, non-finite scores set to 0, ``broken``
    ``[batch]`` the lists with a valid document whose score is not finite or
    whose label exceeds ``max_label``)."""
    check_list_shapes(labels, scores)
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


def screened_loss(body, labels, scores, mask, max_label: float, options):
    """A loss body under the bad-input policy: ``(losses, weights, aux)``.

    Screens ``labels``/``scores`` (:func:`screen_lists`), runs ``body(labels, scores,
    mask=valid, **options)`` on scores with no gradient in broken lists, and gives
    those lists NaN losses: what :meth:`tfr_extensions.losses.base.LossSpec.compute`
    does around a TensorFlow body, here around its ``keras.ops`` twin.
    """
    scores = ops.convert_to_tensor(scores)
    dtype = compute_dtype(scores)
    labels, scores, valid, broken = screen_lists(
        ops.cast(ops.convert_to_tensor(labels), dtype), ops.cast(scores, dtype), max_label, mask)
    losses, weights, *aux = body(labels, scores=no_gradient_where(broken, scores), mask=valid,
                                 **options)
    return nan_where(broken, losses), weights, (aux[0] if aux else {})


def labels_with_mask(y_true):
    """Labels ``[batch, list_size]`` from a tensor or keras-rs's ``{"labels", "mask"}``
    (``mask`` False becomes label -1), as :func:`tfr_extensions.ops.lists.labels_with_mask`."""
    if not isinstance(y_true, Mapping):
        return y_true
    unknown = sorted(set(y_true) - {"labels", "mask"})
    if "labels" not in y_true or unknown:
        raise ValueError("`y_true` as a dict must be keras-rs's {'labels': ..., 'mask': ...} "
                         f"('mask' optional); got the keys {sorted(y_true)}.")
    labels, mask = y_true["labels"], y_true.get("mask")
    if mask is None:
        return labels
    labels = ops.convert_to_tensor(labels)
    return ops.where(ops.cast(mask, "bool"), labels, ops.full_like(labels, PADDING_LABEL))


def listwise_sample_weights(labels, sample_weight):
    """Per-list weights ``[batch, 1]`` from per-list or per-item sample weights
    (TF-Ranking's listwise rule: the label-weighted mean of the item weights), as
    :func:`tfr_extensions.losses.base.listwise_sample_weights`."""
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
