"""Lists: the ``keras.ops`` form of :mod:`tfr_extensions.ops.lists` (the same conventions and
names; float64 on JAX with ``jax_enable_x64``): gathers, the gains and discounts of
:mod:`tfr_extensions.ops.conventions`, and :mod:`tfr_extensions.ops.screening`'s input
preparation under its old names.
"""
from keras import ops

from tfr_extensions.ops.conventions import (  # noqa: F401
    MAX_LABEL, PADDING_LABEL, gains, log2_discount)
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


def compiling_with_xla() -> bool:
    """True: ``jax.jit`` and ``torch.compile`` need static shapes (XLA's path)."""
    return True
