"""The ``keras.ops`` filling's two primitives of :mod:`tfr_extensions.ops.twin_sigmoid`'s
ranks: a custom gradient, and a function of lists run as it is (``jax.jit`` and
``torch.compile`` compile it with its caller; TensorFlow's per bucket of list lengths)."""
import keras
import numpy as np
from keras import ops

from tfr_extensions.keras_ops import sorting


def run_over_lists(function, tensors, statics=(), tie_break: bool = False, seed=None):
    """``function(*tensors, *statics)``, for ``tie_break`` with ``tie_keys=`` those of ``seed``."""
    if not tie_break:
        return function(*tensors, *statics)
    return function(*tensors, *statics, tie_keys=sorting.tie_keys_for(tensors[0], seed))


def with_gradient(value, x, backward, *residuals):
    """``value`` (computed from ``x`` without a gradient) with the gradient ``backward(upstream,
    x, *residuals)`` with respect to ``x``: ``keras.ops.custom_gradient``; on JAX a
    ``jax.custom_vjp`` taking the ``residuals`` (tensors or None, zero cotangents) as arguments:
    closed over, they would leak a jitted loss's tracers into ``jax.grad(jax.jit(loss))``."""
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
