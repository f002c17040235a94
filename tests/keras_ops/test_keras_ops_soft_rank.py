"""keras.ops SoftRank (rank distributions, SoftNDCG) against the TensorFlow ops.

The TF op (:mod:`tfr_extensions.ops.rank_distributions`) and the TF body
(:func:`tfr_extensions.losses.soft_rank.softndcg_loss`) are the reference, with
the NumPy recursion of Eq. 11-12 (``tests/support/oracles_softrank.py``) as a second one.
"""
import contextlib
import importlib

import numpy as np
import pytest
import tensorflow as tf

import keras
from keras import ops

import harness
import tfr_extensions as tfrx
from support.oracles_softrank import rank_binomial
from tfr_extensions.ops.losses import soft_rank as tf_soft_rank

tf_rd = importlib.import_module("tfr_extensions.ops.rank_distributions")
krd = importlib.import_module("tfr_extensions.keras_ops.rank_distributions")
k_soft_rank = importlib.import_module("tfr_extensions.keras_ops.losses.soft_rank")


@pytest.fixture(autouse=True)
def _graph_mode_tf_levels(monkeypatch):
    """The TF op as graph ops, not per-level XLA programs (the same values, as
    tests/ops/test_rank_distributions.py checks; XLA compiles cost seconds)."""
    monkeypatch.setattr(tf_rd, "COMPILED_LEVELS_MIN_LIST_SIZE", 1 << 30)


def _jit(fn):
    """``fn`` under ``jax.jit`` on JAX (one program per shape, where op-by-op JAX
    compiles every primitive, and every loop, separately), else ``fn``."""
    if harness.BACKEND == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        return jax.jit(fn)
    return fn


def _value_and_grad(fn, *args, argnum=1):
    """``harness.value_and_grad`` of ``_jit(fn)``."""
    return harness.value_and_grad(_jit(fn), *args, argnum=argnum)


def _probs_and_grad(fn, scores, weights):
    """``(fn(scores), d sum(fn(scores) * weights) / d scores)`` as NumPy, with the
    backend's autodiff (one ``jax.jit`` program on JAX)."""
    if harness.BACKEND == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        import jax.numpy as jnp  # pylint: disable=import-outside-toplevel

        @jax.jit
        def run(s):
            def total(s):
                probs = fn(s)
                return jnp.sum(probs * weights), probs
            (_, probs), grad = jax.value_and_grad(total, has_aux=True)(s)
            return probs, grad

        probs, grad = run(jnp.asarray(scores))
        return np.asarray(probs), np.asarray(grad)
    if harness.BACKEND == "torch":
        import torch  # pylint: disable=import-outside-toplevel
        x = torch.tensor(scores, requires_grad=True)
        probs = fn(x)
        grad, = torch.autograd.grad((probs * torch.tensor(weights)).sum(), x)
        return probs.detach().numpy(), grad.numpy()
    return _tf_probs_and_grad(fn, scores, weights)


def _tf_probs_and_grad(fn, scores, weights):
    x = tf.constant(scores)
    with tf.GradientTape() as tape:
        tape.watch(x)
        probs = fn(x)
        total = tf.reduce_sum(probs * weights)
    return probs.numpy(), tape.gradient(total, x).numpy()


def _padded_lists(batch, size, seed):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(batch, size)).astype(np.float32)
    mask = rng.random((batch, size)) > 0.25
    mask[:, 0] = True
    return scores, mask


# ---- rank distributions -------------------------------------------------------------

@pytest.mark.parametrize("method,topn,sinkhorn", [
    ("normal", 4, 0), ("exact", 3, 2), ("auto", None, 3)])
def test_rank_distributions_and_gradients_equal_the_tf_op(method, topn, sinkhorn):
    scores, mask = _padded_lists(3, 11, seed=1)
    weights = np.random.default_rng(2).normal(size=(3, 11, 11 if topn is None else topn))
    weights = weights.astype(np.float32)
    options = dict(sigma=0.7, topn=topn, method=method, sinkhorn_iterations=sinkhorn)
    probs, grad = _probs_and_grad(
        lambda s: krd.rank_distributions(s, mask, **options), scores, weights)
    want, tf_grad = _tf_probs_and_grad(
        lambda s: tf_rd.rank_distributions(s, mask, **options), scores, weights)
    assert probs.shape == want.shape and probs.dtype == np.float32
    harness.assert_close(probs, want, what="distributions")
    harness.assert_close(grad, tf_grad, what="gradient")
    assert np.all(grad[~mask] == 0.0)


def test_exact_distributions_equal_the_recursion_oracle_and_rows_sum_to_one():
    scores, mask = _padded_lists(4, 9, seed=3)
    columns = np.array([[3, 0, 8], [1, 1, 2], [8, 7, 6], [0, 4, 5]], np.int32)

    def both(s):  # all rows, and three selected ones (distributions_of's columns)
        valid = ops.convert_to_tensor(mask)
        rows = krd.distributions_of(s, valid, 0.5, None, "exact", ops.convert_to_tensor(columns))
        return ops.concatenate([krd.rank_distributions(s, mask, sigma=0.5), rows], axis=1)

    probs, _ = _probs_and_grad(both, scores, np.zeros((4, 12, 9), np.float32))
    probs, selected = probs[:, :9], probs[:, 9:]
    want_selected = np.take_along_axis(probs, columns[:, :, None], axis=1)
    want_selected = np.where(np.take_along_axis(mask, columns, 1)[:, :, None], want_selected, 0.0)
    harness.assert_close(selected, want_selected, what="selected columns")
    for b in range(4):
        want = rank_binomial(scores[b], 0.5, mask[b])
        np.testing.assert_allclose(probs[b], want, atol=2e-6)
        np.testing.assert_allclose(probs[b][mask[b]].sum(1), 1.0, atol=2e-6)
        assert np.all(probs[b][~mask[b]] == 0.0)
        assert np.all(probs[b][:, mask[b].sum():] == 0.0)


def test_win_probabilities_bound_and_extreme_scores():
    assert krd.scaled_score_bound("float32") == tf_rd.scaled_score_bound(tf.float32)
    assert krd.scaled_score_bound("float64") == tf_rd.scaled_score_bound(tf.float64) == 2.0 ** 509
    scores, mask = _padded_lists(2, 6, seed=4)
    columns = np.array([[2, 0], [5, 1]], np.int32)
    for cols in (None, columns):
        got = krd.win_probabilities(ops.convert_to_tensor(scores), ops.convert_to_tensor(mask),
                                    0.8, None if cols is None else ops.convert_to_tensor(cols))
        want = tf_rd.win_probabilities(tf.constant(scores), tf.constant(mask), 0.8,
                                       None if cols is None else tf.constant(cols))
        harness.assert_close(harness.to_numpy(got), want.numpy())
    # huge and infinite scores clamp to the bound: finite, zero gradient, as the TF op
    extreme = np.array([[3e38, -3e38, 1e30, np.inf, 0.5, 2.0]], np.float32)
    extreme_mask = np.array([[True, True, True, True, True, False]])

    def total(s, m):
        return ops.sum(krd.rank_distributions(s, m, sigma=1e-3, topn=3)
                       * ops.arange(3, dtype="float32"), axis=(1, 2))

    def tf_total(s, m):
        return tf.reduce_sum(tf_rd.rank_distributions(s, m, sigma=1e-3, topn=3)
                             * tf.range(3, dtype=tf.float32), axis=(1, 2))

    value, grad = _value_and_grad(total, extreme, extreme_mask, argnum=0)
    tf_value, tf_grad = harness.tf_value_and_grad(tf_total, extreme, extreme_mask, argnum=0)
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad))
    harness.assert_close(value, tf_value)
    harness.assert_close(grad, tf_grad)
    assert grad[0, 5] == 0.0


# ---- SoftNDCG ------------------------------------------------------------------------

#: option settings checked on every shared case ...
OPTIONS = [
    {},  # sigma 1, all ranks, "auto" (exact here)
    {"topn": 10, "sigma": 0.5},
]
#: ... and on the mixed case (padding, a list without relevant documents, a
#: single document) only, to keep the JAX compiles few
MORE_OPTIONS = [
    {"topn": 5, "method": "normal", "sigma": 2.0},
    {"topn": 4, "method": "exact", "sinkhorn_iterations": 3, "discount_alpha": -0.5,
     "sigma": 0.1},
]


def _check_softndcg(options, cases):
    fn = tfrx.losses.softndcg_loss
    checked = fn.spec.check_options(**options)
    for name, labels, scores in cases:
        value, grad = _value_and_grad(
            lambda l, s: fn.spec.compute(l, s, None, checked, "keras_ops")[0], labels, scores)
        tf_value, tf_grad = harness.tf_value_and_grad(
            lambda l, s: fn.spec.compute(l, s, None, checked, "tensorflow")[0], labels, scores)
        harness.assert_close(value, tf_value, what=f"{name} value")
        harness.assert_close(grad, tf_grad, what=f"{name} gradient")


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_softndcg_values_and_gradients_equal_the_tf_body(options):
    _check_softndcg(options, harness.cases())


@pytest.mark.parametrize("options", MORE_OPTIONS, ids=str)
def test_softndcg_options_equal_the_tf_body(options):
    _check_softndcg(options, [("mixed",) + harness.CASES["mixed"]])


def test_float64_softndcg_equals_tf_at_ordinary_and_huge_scales():
    """Float64 (JAX under ``jax_enable_x64``): scores of 1e160 pass the bound
    2^509 of the scaled scores, clamp and tie, as in the TF body."""
    fn = tfrx.losses.softndcg_loss
    checked = fn.spec.check_options(topn=6)
    labels, scores = (x.astype(np.float64) for x in harness.CASES["mixed"])
    context = contextlib.nullcontext()
    if harness.BACKEND == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        context = jax.enable_x64(True)
    for scale in (1.0, 1e160):
        with context:
            value, grad = _value_and_grad(
                lambda l, s: fn.spec.compute(l, s, None, checked, "keras_ops")[0], labels,
                scores * scale)
        tf_value, tf_grad = harness.tf_value_and_grad(
            lambda l, s: fn.spec.compute(l, s, None, checked, "tensorflow")[0], labels, scores * scale)
        assert value.dtype == np.float64 and np.all(np.isfinite(grad))
        harness.assert_close(value, tf_value, rtol=1e-9, what=f"value x{scale}")
        harness.assert_close(grad, tf_grad, rtol=1e-9, atol=1e-12, what=f"gradient x{scale}")


@pytest.mark.parametrize("shape", [(3, 0), (0, 4)])
def test_empty_batches_and_lists(shape):
    fn = tfrx.losses.softndcg_loss
    checked = fn.spec.check_options()
    labels = np.ones(shape, np.float32)
    value, grad = _value_and_grad(lambda l, s: fn.spec.compute(l, s, None, checked, "keras_ops")[0],
                                  labels, np.zeros(shape, np.float32))
    assert value.shape == shape[:1] and grad.shape == shape
    assert np.all(value == 0.0)


def test_training_discount_equals_tf():
    count = np.array([1, 4, 7], np.int32)
    for alpha in (1.0, 0.4, 0.0, -1.0):
        got = k_soft_rank.training_discount(7, ops.convert_to_tensor(count), alpha, "float32")
        want = tf_soft_rank.training_discount(7, tf.constant(count), alpha, tf.float32)
        harness.assert_close(harness.to_numpy(got), want.numpy(), what=str(alpha))


def test_class_computes_through_the_keras_ops_body():
    labels, scores = harness.CASES["mixed"]
    loss = tfrx.losses.get("softndcg")
    assert isinstance(loss, tfrx.losses.SoftNDCGLoss)
    loss = tfrx.losses.SoftNDCGLoss(topn=3, sigma=0.5)
    spec = tfrx.losses.softndcg_loss.spec  # the TensorFlow implementation, the reference
    losses, weights, _ = spec.compute(labels, scores, None,
                                      spec.check_options(topn=3, sigma=0.5), "tensorflow")
    got = _jit(loss)(ops.convert_to_tensor(labels), ops.convert_to_tensor(scores))
    harness.assert_close(float(harness.to_numpy(got)),
                         float(np.mean(losses.numpy() * weights.numpy())))


def test_tiny_model_fits_with_softndcg():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(8, 5, 3)).astype(np.float32)
    labels = rng.integers(0, 3, size=(8, 5)).astype(np.float32)
    labels[:, 4] = -1.0  # padding
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.Dense(1),
                              keras.layers.Reshape((5,))])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=tfrx.losses.get("softndcg"))
    history = model.fit(features, labels, batch_size=4, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))
    assert -1.0 <= history.history["loss"][-1] < 0.0


@pytest.mark.skipif(harness.BACKEND != "jax", reason="jax.jit")
def test_jax_jit_of_value_and_grad_equals_tf():
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    labels, scores = harness.CASES["bad_input"]
    fn = tfrx.losses.softndcg_loss
    checked = fn.spec.check_options(topn=3, method="normal")

    @jax.jit
    @jax.value_and_grad
    def total(s):
        losses = fn.spec.compute(jnp.asarray(labels), s, None, checked, "keras_ops")[0]
        return jnp.sum(jnp.where(jnp.isnan(losses), 0.0, losses))

    value, grad = total(jnp.asarray(scores))
    tf_value, tf_grad = harness.tf_value_and_grad(
        lambda l, s: fn.spec.compute(l, s, None, checked, "tensorflow")[0], labels, scores)
    harness.assert_close(float(value), np.nansum(tf_value))
    harness.assert_close(np.asarray(grad), tf_grad)
