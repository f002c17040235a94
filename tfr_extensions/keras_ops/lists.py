"""Lists: the ``keras.ops`` form of :mod:`tfr_extensions.ops.lists` (the same conventions
and names): gathers, gains ``2^y - 1`` and discounts ``1 / log2(1 + rank)``. A label < 0 (or
NaN) or ``mask`` False marks padding; float64 scores compute in float64 (on JAX with
``jax_enable_x64``), others in float32. :mod:`tfr_extensions.ops.screening`'s input
preparation keeps its old names here.

>>> ops.convert_to_numpy(gains(ops.array([[0., 1., 2.]]))).tolist()
[[0.0, 1.0, 3.0]]
"""
from keras import ops

from tfr_extensions.keras_ops import numerics
from tfr_extensions.ops.conventions import MAX_LABEL, PADDING_LABEL  # noqa: F401
from tfr_extensions.ops.screening import (  # noqa: F401
    check_list_shapes, compute_dtype, has_relevant, labels_with_mask, prepare_lists,
    prepare_scores)


def dtype_name(x) -> str:
    """The standardized dtype name of a tensor (``"float32"``, ``"bool"``, ...)."""
    from keras import backend  # pylint: disable=import-outside-toplevel
    return backend.standardize_dtype(x.dtype)


def batch_gather(params, indices):
    """``params[b, indices[b, ...]]`` for ``[B, L]`` params and int ``[B, L]`` or ``[B, S, n]``
    indices (``tf.gather(..., batch_dims=1)``, :func:`tfr_extensions.ops.lists.batch_gather`)."""
    if len(indices.shape) == 2:
        return ops.take_along_axis(params, indices, axis=-1)
    if len(indices.shape) != 3:
        raise ValueError(f"`indices` must be [B, L] or [B, S, n]; got {tuple(indices.shape)}.")
    expanded = ops.broadcast_to(params[:, None, :],
                                tuple(ops.shape(indices)[:2]) + (ops.shape(params)[-1],))
    return ops.take_along_axis(expanded, indices, axis=-1)


def gains(labels):
    """The exponential gain 2^y - 1 (labels of padded documents must be 0)."""
    return ops.power(numerics.constant(2.0, labels.dtype), labels) - 1.0


def log2_discount(ranks):
    """1 / log2(1 + rank) for 1-based ranks."""
    return ops.log(numerics.constant(2.0, ranks.dtype)) / ops.log1p(ranks)


def compiling_with_xla() -> bool:
    """True: ``jax.jit`` and ``torch.compile`` need static shapes (XLA's path)."""
    return True
