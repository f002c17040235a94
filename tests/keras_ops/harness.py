"""Shared machinery of the cross-implementation suite (``tests/keras_ops``).

The suite runs once per Keras 3 backend (``KERAS_BACKEND=tensorflow|jax|torch``,
see the Makefile's ``test-backends``); TensorFlow is installed in that stack, so
each test computes the TensorFlow implementation (:mod:`tfr_extensions.ops`,
the TF loss functions) in the same process as the reference, and holds the
``keras.ops`` implementation to it.

* :func:`value_and_grad`: value and gradient of a scalar function of backend
  tensors, with the backend's own autodiff (``jax.value_and_grad``,
  ``torch.autograd``, ``tf.GradientTape``).
* :func:`tf_value_and_grad`: the same for a TensorFlow function.
* :func:`cases`: shared random cases covering padding, ties, lists without
  relevant documents, list size 1 and bad input.
* :func:`assert_close`: relative 1e-5 (float32) by default.
"""
from typing import Callable, Dict, Iterator, Tuple

import numpy as np

import keras
from keras import ops

BACKEND = keras.backend.backend()


def to_numpy(x) -> np.ndarray:
    return np.asarray(ops.convert_to_numpy(x))


def value_and_grad(fn: Callable, *args, argnum: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    """``(fn(*args), d sum(fn(*args)) / d args[argnum])`` as NumPy, on Keras's backend.

    ``args`` are NumPy arrays (converted here); ``fn`` returns a tensor, summed
    for the gradient.
    """
    if BACKEND == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
        tensors = [jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]

        def total(x):
            call = list(tensors)
            call[argnum] = x
            out = fn(*call)
            return jnp.sum(out), out

        (_, out), grad = jax.value_and_grad(total, has_aux=True)(tensors[argnum])
        return to_numpy(out), to_numpy(grad)
    if BACKEND == "torch":
        import torch  # pylint: disable=import-outside-toplevel
        tensors = [ops.convert_to_tensor(a) if isinstance(a, np.ndarray) else a for a in args]
        x = tensors[argnum].detach().clone().requires_grad_(True)
        tensors[argnum] = x
        out = fn(*tensors)
        grad, = torch.autograd.grad(out.sum(), x, allow_unused=True)
        grad = torch.zeros_like(x) if grad is None else grad
        return to_numpy(out.detach()), to_numpy(grad)
    return tf_value_and_grad(fn, *args, argnum=argnum)


def jit_value_and_grad(fn: Callable, labels, scores) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`value_and_grad` of ``fn(labels, scores)``, under one ``jax.jit`` on the JAX
    backend (one compilation per shape instead of one per primitive and shape, which
    eager JAX pays: the suite stays fast, and the bodies are checked under ``jax.jit``)."""
    if BACKEND != "jax":
        return value_and_grad(fn, labels, scores)
    import jax  # pylint: disable=import-outside-toplevel

    def total(s, l):
        out = fn(l, s)
        return ops.sum(out), out

    (_, value), grad = jax.jit(jax.value_and_grad(total, has_aux=True))(scores, labels)
    return to_numpy(value), to_numpy(grad)


def per_list_loss(spec, options, which: str) -> Callable:
    """``(labels, scores) -> losses * weights`` of implementation ``which``
    (``"keras_ops"``, ``"tensorflow"``) of a loss spec with checked ``options``, for the
    value-and-gradient helpers."""
    def per_list(labels, scores):
        losses, weights, _ = spec.compute(labels, scores, None, options, which)
        return losses * weights
    return per_list


def tf_value_and_grad(fn: Callable, *args, argnum: int = 1) -> Tuple[np.ndarray, np.ndarray]:
    """``value_and_grad`` for a TensorFlow function of TF tensors."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    tensors = [tf.convert_to_tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    with tf.GradientTape() as tape:
        tape.watch(tensors[argnum])
        out = fn(*tensors)
        total = tf.reduce_sum(out)
    grad = tape.gradient(total, tensors[argnum])
    grad = tf.zeros_like(tensors[argnum]) if grad is None else grad
    return out.numpy(), grad.numpy()


def assert_close(actual, expected, rtol: float = 1e-5, atol: float = 1e-6, what: str = ""):
    """Relative ``rtol`` with a small absolute floor (values near 0); NaN equal to NaN."""
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def cases(seed: int = 0, dtype=np.float32) -> Iterator[Tuple[str, np.ndarray, np.ndarray]]:
    """``(name, labels [B, L], scores [B, L])`` for every shared case."""
    rng = np.random.default_rng(seed)

    def graded(b, l):
        return rng.integers(0, 5, size=(b, l)).astype(dtype)

    def scores(b, l):
        return rng.normal(size=(b, l)).astype(dtype)

    labels = graded(6, 9)
    labels[0, 5:] = -1.0  # padding
    labels[1] = 0.0  # no relevant document
    labels[2, 1:] = -1.0  # one valid document
    yield "mixed", labels, scores(6, 9)
    tied = scores(4, 8)
    tied[:, 4:] = tied[:, :4]  # ties in every list
    tied[1] = 0.5  # all tied
    yield "ties", graded(4, 8), tied
    yield "list_size_1", graded(5, 1), scores(5, 1)
    yield "long", graded(3, 70), scores(3, 70)
    bad_scores = scores(4, 6)
    bad_labels = graded(4, 6)
    bad_scores[0, 2] = np.nan  # broken list
    bad_scores[1, 1] = np.inf  # broken list
    bad_labels[2, 3] = -1.0
    bad_scores[2, 3] = np.nan  # NaN on padding: ignored
    bad_labels[3, 0] = 40.0  # above MAX_LABEL: broken
    yield "bad_input", bad_labels, bad_scores


CASES: Dict[str, Tuple[np.ndarray, np.ndarray]] = {
    name: (labels, scores) for name, labels, scores in cases()}
