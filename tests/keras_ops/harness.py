"""Shared machinery of the ``keras.ops`` implementation's suite (``tests/keras_ops``).

The suite runs once per Keras 3 backend that computes with ``keras.ops``
(``KERAS_BACKEND=jax|torch``, see the Makefile's ``test-backends``) and holds the
``keras.ops`` implementation (:mod:`tfr_extensions.keras_ops`, the bodies named
``"keras_ops"`` in each loss's spec) to the independent NumPy oracles of
``tests/support`` by itself; only ``test_cross_implementation.py`` compares it with the
TensorFlow implementation. This module imports no TensorFlow.

* :func:`value_and_grad`: value and gradient with the backend's own autodiff
  (:func:`support.autodiff.value_and_grad`).
* :func:`jit_value_and_grad`, :func:`jit_values_and_grads` (several functions at
  once), :func:`body_value_and_grad` (a loss's ``keras.ops`` body): the same as one
  compiled program on JAX (``jax.jit``: one compilation per shape instead of one per
  primitive and shape, which eager JAX pays); :func:`body_value_and_grad` keeps one
  program per loss and options for the whole session, so tests of one shape share it.
* :func:`float64`: float64 computation on every backend (JAX's ``jax_enable_x64``).
* :func:`cases`, :data:`CASES`, :func:`merged_cases`: shared random cases covering
  padding, ties, lists without relevant documents, list size 1, long lists and bad
  input.
* :func:`expected_per_list`: what a loss body must give per list by the bad-input
  policy, from a per-list oracle of the valid documents; :func:`assert_policy` checks
  the policy's exact zeros and NaNs.
* :func:`assert_close`: relative 1e-5 (float32) by default.
"""
import functools
import json
from typing import Callable, Dict, Iterator, Tuple

import numpy as np

import keras
from keras import ops

from support import autodiff

BACKEND = keras.backend.backend()
#: the implementation this suite holds to the oracles
KERAS_OPS = "keras_ops"

to_numpy = autodiff.to_numpy
value_and_grad = autodiff.value_and_grad
float64 = autodiff.float64


def jit(fn: Callable) -> Callable:
    """``fn`` under ``jax.jit`` on JAX (one program per shape, where op-by-op JAX
    compiles every primitive, and every loop, separately), else ``fn``."""
    if BACKEND == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        return jax.jit(fn)
    return fn


def _jax_value_and_grad(fn: Callable) -> Callable:
    """``jax.jit`` of ``(scores, labels) -> ((sum, out), d sum / d scores)``."""
    import jax  # pylint: disable=import-outside-toplevel

    def total(s, l):
        out = fn(l, s)
        return ops.sum(out), out

    return jax.jit(jax.value_and_grad(total, has_aux=True))


def jit_value_and_grad(fn: Callable, labels, scores) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`value_and_grad` of ``fn(labels, scores)`` in ``scores``, under one
    ``jax.jit`` on the JAX backend (the bodies are checked under ``jax.jit`` there)."""
    if BACKEND != "jax":
        return value_and_grad(fn, labels, scores)
    (_, value), grad = _jax_value_and_grad(fn)(scores, labels)
    return to_numpy(value), to_numpy(grad)


def jit_values_and_grads(fns, labels, scores):
    """``[(fn(labels, scores), d sum(fn) / d scores) for fn in fns]`` as NumPy: on JAX all
    from one compiled program (one compilation for the lot)."""
    if BACKEND != "jax":
        return [value_and_grad(fn, labels, scores) for fn in fns]
    import jax  # pylint: disable=import-outside-toplevel

    def every(s, l):
        out = []
        for fn in fns:
            (_, value), grad = jax.value_and_grad(
                lambda x, fn=fn: (ops.sum(fn(l, x)), fn(l, x)), has_aux=True)(s)
            out.append((value, grad))
        return out

    return [(to_numpy(v), to_numpy(g)) for v, g in jax.jit(every)(scores, labels)]


def per_list_loss(spec, options, which: str = KERAS_OPS) -> Callable:
    """``(labels, scores) -> losses * weights`` of implementation ``which`` of a loss
    spec with checked ``options``, through the shared bad-input screening."""
    def per_list(labels, scores):
        losses, weights, _ = spec.compute(labels, scores, None, options, which)
        return losses * weights
    return per_list


@functools.lru_cache(maxsize=None)
def _body_program(key: str, options_json: str) -> Callable:
    """The compiled value and gradient of a loss's ``keras.ops`` body (JAX)."""
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    spec = tfrx.losses.get(key).spec
    options = spec.check_options(**json.loads(options_json))
    return _jax_value_and_grad(per_list_loss(spec, options))


def body_value_and_grad(key: str, labels, scores, compiled: bool = True, **options):
    """``(losses * weights, its gradient)`` of the ``keras.ops`` body of registry key
    ``key`` with ``options``, as NumPy. On JAX, ``compiled``: one program per key and
    options for the session (shared by every test that calls it in one shape), the
    faster choice for a shape that few option sets see; else op by op (JAX compiles
    each primitive once per shape, for every option set: faster for a grid of option
    sets on one shape, where whole programs would compile once per option set)."""
    if BACKEND != "jax" or not compiled:
        import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
        spec = tfrx.losses.get(key).spec
        return value_and_grad(per_list_loss(spec, spec.check_options(**options)),
                              labels, scores)
    program = _body_program(key, json.dumps(options, sort_keys=True))
    (_, value), grad = program(scores, labels)
    return to_numpy(value), to_numpy(grad)


def assert_close(actual, expected, rtol: float = 1e-5, atol: float = 1e-6, what: str = ""):
    """Relative ``rtol`` with a small absolute floor (values near 0); NaN equal to NaN."""
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def broken_lists(labels, scores, max_label: float = 31.0) -> np.ndarray:
    """Bool ``[B]``: lists that the bad-input policy breaks (a valid document with a
    non-finite score or a label above ``max_label``)."""
    valid = labels >= 0
    return np.any(valid & ~(np.isfinite(scores) & (labels <= max_label)), axis=-1)


def expected_per_list(oracle: Callable, labels, scores, max_label: float = 31.0):
    """``(values [B], gradients [B, L])`` that a body must give by the bad-input policy
    (:mod:`tfr_extensions.losses.base`): ``oracle(valid labels, valid scores) ->
    (value, gradient)`` (float64) for each list, scattered back with gradient 0 at
    padding; NaN and a zero gradient for a broken list (:func:`broken_lists`)."""
    values, grads = np.zeros(len(labels)), np.zeros(labels.shape)
    broken = broken_lists(labels, scores, max_label)
    for b, (y, s) in enumerate(zip(labels, scores)):
        if broken[b]:
            values[b] = np.nan
            continue
        keep = y >= 0
        if keep.any():
            values[b], grads[b, keep] = oracle(y[keep].astype(np.float64),
                                               s[keep].astype(np.float64))
    return values, grads


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
#: the cases that :func:`merged_cases` joins (all but the long lists, which would pad
#: every list to 70 documents)
SHORT_CASES = ("mixed", "ties", "list_size_1", "bad_input")


def merged_cases(names=None, dtype=np.float32) -> Tuple[np.ndarray, np.ndarray]:
    """The shared cases ``names`` (default: every case) in one batch, padded (label -1,
    score 0) to the longest list: one shape, one compiled program for all of them."""
    parts = [(labels.astype(dtype), scores.astype(dtype)) for name, labels, scores in cases()
             if names is None or name in names]
    size = max(labels.shape[1] for labels, _ in parts)
    labels = np.concatenate([np.pad(y, [(0, 0), (0, size - y.shape[1])], constant_values=-1.0)
                             for y, _ in parts])
    scores = np.concatenate([np.pad(s, [(0, 0), (0, size - s.shape[1])]) for _, s in parts])
    return labels, scores


def relevant_lists(labels) -> np.ndarray:
    """Bool ``[B]``: lists with a valid document of label > 0."""
    return np.any(labels > 0, axis=-1)


def assert_policy(value, grad, labels, scores, max_label: float = 31.0):
    """The bad-input policy, exactly: zero gradient at padding; NaN and zero gradient
    in broken lists, finite values elsewhere; 0 and zero gradient for lists without
    a relevant document."""
    broken = broken_lists(labels, scores, max_label)
    assert np.all(grad[labels < 0] == 0), "gradient at padding"
    assert np.all(np.isnan(value[broken])) and np.all(grad[broken] == 0), "broken lists"
    assert np.all(np.isfinite(value[~broken])) and np.all(np.isfinite(grad)), "finite"
    idle = ~relevant_lists(labels) & ~broken
    assert np.all(value[idle] == 0) and np.all(grad[idle] == 0), "no relevant document"
