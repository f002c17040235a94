"""The ``keras.ops`` filling's two primitives of the twin-sigmoid ranks
(:mod:`tfr_extensions.ops.twin_sigmoid`): a custom gradient, and a function of lists
run as it is (``jax.jit`` and ``torch.compile`` compile it with its caller; TensorFlow's
filling compiles it per bucket of list lengths, :mod:`tfr_extensions.ops.list_programs`).
"""
import keras
import numpy as np
from keras import ops

from tfr_extensions.keras_ops import sorting


def run_over_lists(function, tensors, statics=(), tie_break: bool = False, seed=None):
    """``function(*tensors, *statics)``, with ``tie_keys=`` the keys of ``seed``
    (:func:`sorting.tie_keys_for`) for ``tie_break``."""
    if not tie_break:
        return function(*tensors, *statics)
    return function(*tensors, *statics, tie_keys=sorting.tie_keys_for(tensors[0], seed))


def with_gradient(value, x, backward, *residuals):
    """``value`` (computed from ``x`` without a gradient) with the gradient
    ``backward(upstream, x, *residuals)`` with respect to ``x``: ``keras.ops.custom_gradient``,
    on JAX a ``jax.custom_vjp`` whose arguments include the ``residuals`` (tensors or None,
    zero cotangents), never closed over, which would leak the tracers of a loss compiled
    alone into a gradient taken outside (``jax.grad(jax.jit(loss))``)."""
    if keras.backend.backend() != "jax":
        @ops.custom_gradient
        def _value(v):
            def grad(*args, upstream=None):  # (the upstream keyword on PyTorch)
                return backward(args[0] if upstream is None else upstream, v, *residuals)
            return ops.copy(value), grad
        return _value(x)
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel

    def zero_cotangent(r):
        if r is None:
            return None
        if jnp.issubdtype(r.dtype, jnp.inexact):
            return jnp.zeros_like(r)
        return np.zeros(r.shape, jax.dtypes.float0)  # (bool and int arguments)

    @jax.custom_vjp
    def _value(v, out, *res):
        del v, res
        return out

    def forward(v, out, *res):
        return out, (v, out, res)

    def backward_pass(saved, upstream):
        v, out, res = saved
        return (backward(upstream, v, *res), jnp.zeros_like(out),
                *[zero_cotangent(r) for r in res])

    _value.defvjp(forward, backward_pass)
    return _value(x, jax.lax.stop_gradient(value), *residuals)
