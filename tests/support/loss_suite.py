"""What the backend-neutral loss suites share (``tests/neutral/test_neutral_losses.py``,
``tests/neutral/test_neutral_keras_losses.py``): the registry's losses (one key per
class), their options, the lists every test computes on, and the runners that give
values and gradients through the backend's own autodiff (:mod:`support.autodiff`).

Keras 3 only (``tests/conftest.py`` leaves it out of the Keras 2 stacks' collection).
Imports numpy, keras, tfr_extensions and ``support`` only.
"""
import functools
import json

import keras
import numpy as np

import tfr_extensions as tfrx
from support import autodiff

BACKEND = keras.backend.backend()
#: one registry key per loss class (its default name)
KEYS = tfrx.losses.names(classes=False, presets=False, tf_ranking=False)
CLASSES = {key: type(tfrx.losses.get(key)) for key in KEYS}
FUNCTIONS = {key: cls.spec.function for key, cls in CLASSES.items()}
SEEDED = tuple(key for key in KEYS if "seed" in FUNCTIONS[key].spec.defaults)
#: the options every test uses unless it says otherwise: a seed where the loss takes one
OPTIONS = {key: {"seed": 7} if key in SEEDED else {} for key in KEYS}
#: the losses whose value depends on random draws at distinct scores (sampled
#: rankings); the others are deterministic there (twin-sigmoid's seed breaks ties only)
SAMPLED = ("expected_utility", "mdprank")
LABELS = np.array([
    [2.0, 0.0, 1.0, 0.0, 3.0, -1.0, -1.0],   # padded tail
    [0.0, 0.0, 0.0, 0.0, -1.0, -1.0, -1.0],  # no relevant document
    [1.0, 0.0, -1.0, 2.0, 0.0, 1.0, 0.0],    # padding in the middle
    [4.0, 1.0, 0.0, 0.0, 0.0, 2.0, 1.0],     # no padding
], np.float32)
SCORES = np.random.default_rng(0).normal(size=LABELS.shape).astype(np.float32)
#: the relative tolerance of properties that reorder a loss's sums (masking = deleting,
#: permutations, compilation): float32 rounding, except WassRank's Sinkhorn iterations, which
#: resolve costs of 10^2 / lambda to about 1e-4 relative in float32 (its docstring)
PROPERTY_RTOL = {"wassrank": 5e-4}
VALID = LABELS >= 0
RELEVANT = np.any(LABELS > 0, axis=1)
#: one valid document in lists 0, 2 and 3 (list 1's diagonal entry is padding)
BAD = np.eye(4, 7, 3, dtype=bool) & VALID


def run(key, labels=LABELS, scores=SCORES, mask=None, total="weighted", **options):
    """``(losses, weights, gradient)`` of the public function as NumPy: the gradient of
    ``sum(losses * weights)`` (``total="weighted"``) or of ``sum(losses)``.

    On JAX one compiled program per loss, options and shape (``jax.jit`` of
    ``jax.value_and_grad``, as a training step runs it: several times faster than
    JAX's op-by-op eager mode on CPU; ``test_compiled_value_and_gradient_equal_eager``
    holds the two equal); with ``seed=None`` (fresh draws from Keras's global stream,
    which a compiled program cannot advance) it runs eagerly.
    """
    options = {**OPTIONS[key], **options}
    if BACKEND == "jax" and options.get("seed", 0) is not None:
        program = _jax_program(key, total, json.dumps(options, sort_keys=True))
        (_, (losses, weights)), grad = program(scores, labels, mask)
        return autodiff.to_numpy(losses), autodiff.to_numpy(weights), autodiff.to_numpy(grad)
    function = FUNCTIONS[key]

    def fn(y, s):
        losses, weights = function(y, s, mask=mask, **options)
        return (losses * weights if total == "weighted" else losses), (losses, weights)

    _, grad, (losses, weights) = autodiff.value_and_grad(fn, labels, scores, has_aux=True)
    return losses, weights, grad


@functools.lru_cache(maxsize=None)
def _jax_program(key, total, options_json):
    import jax  # pylint: disable=import-outside-toplevel
    function, options = FUNCTIONS[key], json.loads(options_json)

    def objective(scores, labels, mask):
        losses, weights = function(labels, scores, mask=mask, **options)
        out = losses * weights if total == "weighted" else losses
        return keras.ops.sum(out), (losses, weights)

    return jax.jit(jax.value_and_grad(objective, has_aux=True))


def assert_close(actual, expected, rtol=1e-5, atol=1e-6, what=""):
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def per_list(oracle, labels=LABELS, scores=SCORES):
    """``oracle(valid labels, valid scores) -> (value, gradient)`` over each list, the
    gradients scattered back with 0 at padding."""
    values, grads = np.zeros(len(labels)), np.zeros(labels.shape)
    for b, (y, s) in enumerate(zip(labels, scores)):
        keep = y >= 0
        values[b], grads[b, keep] = oracle(y[keep].astype(np.float64), s[keep].astype(np.float64))
    return values, grads


def value_of(loss, labels=LABELS, scores=SCORES, sample_weight=None):
    """A Keras loss object's value as NumPy."""
    return autodiff.to_numpy(loss(labels, scores, sample_weight=sample_weight))
