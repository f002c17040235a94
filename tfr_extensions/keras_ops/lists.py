"""Lists, masks and dtypes: the ``keras.ops`` twin of :mod:`tfr_extensions.ops.lists`
(the same conventions, the same names; the bad-input screening of the losses is
:mod:`tfr_extensions.keras_ops.screening`).

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
