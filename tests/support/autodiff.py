"""Value, gradient and compilation on Keras 3's active backend, with its own autodiff,
for the backend-neutral suite (``tests/neutral``).

Imports no TensorFlow: the TensorFlow branch imports it lazily, and only runs on
Keras's TensorFlow backend (where TensorFlow is installed).

* :func:`value_and_grad`: ``(fn(*args), d sum(fn(*args)) / d args[argnum])`` as NumPy,
  by ``jax.value_and_grad``, ``torch.autograd`` or ``tf.GradientTape``.
* :func:`compiled` and :func:`compiled_value_and_grad`: ``fn`` (and its gradient)
  compiled as the backend compiles a training step (``jax.jit``, ``torch.compile``,
  ``tf.function(jit_compile=True)``).
* :func:`float64`: a context where the backend computes float64 arrays in float64
  (JAX needs ``jax_enable_x64``, restored on exit; the others always do).
* :func:`to_numpy`.
"""
import contextlib
from typing import Callable

import numpy as np

import keras
from keras import ops


def backend() -> str:
    return keras.backend.backend()


def to_numpy(x) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(x))


@contextlib.contextmanager
def float64():
    """float64 computation on every backend: JAX's ``jax_enable_x64`` on, then restored."""
    if backend() != "jax":
        yield
        return
    import jax  # pylint: disable=import-outside-toplevel
    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


def value_and_grad(fn: Callable, *args, argnum: int = 1, has_aux: bool = False):
    """``(fn(*args), d sum(fn(*args)) / d args[argnum])`` as NumPy arrays.

    NumPy ``args`` become backend tensors of their own dtype (float64 needs
    :func:`float64` on JAX); other arguments (dicts, None, Python numbers) pass
    through. An unused argument has a zero gradient. With ``has_aux``, ``fn``
    returns ``(out, aux)`` (a tuple of tensors, not differentiated) and the result is
    ``(out, grad, aux)``.
    """
    def split(result):
        return result if has_aux else (result, ())

    def done(out, grad, aux):
        out, grad = to_numpy(out), to_numpy(grad)
        return (out, grad, tuple(to_numpy(a) for a in aux)) if has_aux else (out, grad)

    name = backend()
    if name == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
        tensors = [jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]

        def total(x):
            call = list(tensors)
            call[argnum] = x
            out, aux = split(fn(*call))
            return jnp.sum(out), (out, aux)

        (_, (out, aux)), grad = jax.value_and_grad(total, has_aux=True)(tensors[argnum])
        return done(out, grad, aux)
    if name == "torch":
        import torch  # pylint: disable=import-outside-toplevel
        tensors = [torch.as_tensor(a, device=_torch_device()) if isinstance(a, np.ndarray)
                   else a for a in args]
        x = tensors[argnum].detach().clone().requires_grad_(True)
        tensors[argnum] = x
        out, aux = split(fn(*tensors))
        if out.requires_grad:
            grad, = torch.autograd.grad(out.sum(), x, allow_unused=True)
        else:  # nothing depends on x (a batch of no list)
            grad = None
        grad = torch.zeros_like(x) if grad is None else grad
        return done(out.detach(), grad, [a.detach() for a in aux])
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    tensors = [tf.convert_to_tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    with tf.GradientTape() as tape:
        tape.watch(tensors[argnum])
        out, aux = split(fn(*tensors))
        total = tf.reduce_sum(out)
    grad = tape.gradient(total, tensors[argnum])
    grad = tf.zeros_like(tensors[argnum]) if grad is None else grad
    return done(out, grad, aux)


def _torch_device():
    return ops.convert_to_tensor(np.zeros(1, np.float32)).device


def compiled_value_and_grad(fn: Callable, labels: np.ndarray, scores: np.ndarray):
    """:func:`value_and_grad` of ``fn(labels, scores)`` in ``scores``, the value and the
    gradient computed by one compiled program, as a training step computes them
    (``jax.jit`` of ``jax.value_and_grad``; ``torch.compile``'d forward with its
    compiled backward; one ``tf.function(jit_compile=True)`` holding the tape)."""
    name = backend()
    if name == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        import jax.numpy as jnp  # pylint: disable=import-outside-toplevel

        def total(y, s):
            out = fn(y, s)
            return jnp.sum(out), out

        (_, out), grad = jax.jit(jax.value_and_grad(total, argnums=1, has_aux=True))(
            jnp.asarray(labels), jnp.asarray(scores))
        return to_numpy(out), to_numpy(grad)
    if name == "torch":
        return value_and_grad(compiled(fn), labels, scores)
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    @tf.function(jit_compile=True)
    def step(y, s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            out = fn(y, s)
            total = tf.reduce_sum(out)
        return out, tape.gradient(total, s)

    out, grad = step(tf.constant(labels), tf.constant(scores))
    return to_numpy(out), to_numpy(grad)


def compiled(fn: Callable) -> Callable:
    """``fn`` compiled as the backend compiles a step: ``jax.jit``, ``torch.compile``
    (``fullgraph=False``: graph breaks are allowed, as Keras's ``jit_compile`` is),
    ``tf.function(jit_compile=True)``."""
    name = backend()
    if name == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        return jax.jit(fn)
    if name == "torch":
        import torch  # pylint: disable=import-outside-toplevel
        return torch.compile(fn)
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    return tf.function(fn, jit_compile=True)
