"""keras.ops SoftRank (rank distributions, SoftNDCG) against the float64 NumPy oracles:
the recursion of Eq. 11-12 (:func:`support.oracles_softrank.rank_binomial`) and every
option of the op and the loss (:mod:`support.oracles_soft_ndcg`: cutoff, training
discount, normal approximation, Sinkhorn scaling, the score bound), gradients against
central differences of the oracle.
"""
import importlib

import numpy as np
import pytest
from scipy.special import erf

import keras
from keras import ops

import harness
import tfr_extensions as tfrx
from tfr_extensions import arrays
from support import oracles_soft_ndcg
from support.oracles_softrank import rank_binomial

krd = importlib.import_module("tfr_extensions.ops.rank_distributions")
k_soft_rank = importlib.import_module("tfr_extensions.losses.soft_rank")
KEY = "softndcg"
SPEC = tfrx.losses.softndcg_loss.spec
F32_BOUND = float(np.finfo(np.float32).max) / 4


def _probs_and_grad(fn, scores, weights):
    """``(fn(scores), d sum(fn(scores) * weights) / d scores)`` as NumPy, with the
    backend's autodiff (one ``jax.jit`` program on JAX)."""
    def weighted(_, s):
        probs = fn(s)
        return ops.sum(probs * ops.convert_to_tensor(weights), axis=(1, 2)), (probs,)

    _, grad, (probs,) = harness.value_and_grad(harness.jit(weighted), None, scores,
                                               has_aux=True)
    return probs, grad


def _padded_lists(batch, size, seed):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(batch, size)).astype(np.float32)
    mask = rng.random((batch, size)) > 0.25
    mask[:, 0] = True
    return scores, mask


def _oracle_distributions(scores, mask, num_ranks, bound=F32_BOUND, **options):
    """``[B, L, R]``: the oracle's distributions of the valid documents, 0 elsewhere."""
    out = np.zeros(scores.shape + (num_ranks,))
    for b, (s, keep) in enumerate(zip(scores, mask)):
        probs = oracles_soft_ndcg.rank_distributions(s[keep], bound=bound, **options)
        out[b, np.flatnonzero(keep), :probs.shape[1]] = probs
    return out


# ---- rank distributions -------------------------------------------------------------

@pytest.mark.parametrize("method,topn,sinkhorn", [
    ("normal", 4, 0), ("exact", 3, 2), ("auto", None, 3)])
def test_rank_distributions_and_gradients_equal_the_oracle(method, topn, sinkhorn):
    scores, mask = _padded_lists(3, 11, seed=1)
    num_ranks = 11 if topn is None else topn
    weights = np.random.default_rng(2).normal(size=(3, 11, num_ranks)).astype(np.float32)
    options = dict(sigma=0.7, topn=topn, method=method, sinkhorn_iterations=sinkhorn)
    probs, grad = _probs_and_grad(
        lambda s: krd.rank_distributions(s, mask, **options), scores, weights)
    oracle_options = dict(options, method="exact" if method == "auto" else method)
    want = _oracle_distributions(scores, mask, num_ranks, **oracle_options)
    want_grad = oracles_soft_ndcg.numerical_gradient(
        lambda s: np.sum(_oracle_distributions(s, mask, num_ranks, **oracle_options) * weights),
        scores, step=1e-3)
    assert probs.shape == want.shape and probs.dtype == np.float32
    harness.assert_close(probs, want, what="distributions")
    harness.assert_close(grad, want_grad, rtol=2e-5, atol=2e-6, what="gradient")
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


def _oracle_win_probabilities(scores, mask, sigma, bound):
    """``[L_i, B, L_j]``: Eq. 9 with the documented conventions (valid scaled scores
    clamped to +-bound, padded ones at -2 bound, 0 on the diagonal)."""
    x = np.clip(scores.astype(np.float64) / (2 * sigma), -bound, bound)
    x = np.where(mask, x, -2 * bound)
    pi = 0.5 + 0.5 * erf(x[:, :, None] - x[:, None, :])  # [B, i, j]
    pi[:, np.arange(scores.shape[1]), np.arange(scores.shape[1])] = 0.0
    return np.transpose(pi, [1, 0, 2])


def test_win_probabilities_bound_and_extreme_scores():
    assert krd.scaled_score_bound("float32") == F32_BOUND
    assert krd.scaled_score_bound("float64") == 2.0 ** 509
    scores, mask = _padded_lists(2, 6, seed=4)
    columns = np.array([[2, 0], [5, 1]], np.int32)
    want = _oracle_win_probabilities(scores, mask, 0.8, F32_BOUND)
    for cols in (None, columns):
        got = krd.win_probabilities(ops.convert_to_tensor(scores), ops.convert_to_tensor(mask),
                                    0.8, None if cols is None else ops.convert_to_tensor(cols))
        expected = want if cols is None else np.take_along_axis(want, cols[None], axis=2)
        harness.assert_close(harness.to_numpy(got), expected)
    # huge and infinite scores clamp to the bound: finite, zero gradient
    extreme = np.array([[3e38, -3e38, 1e30, np.inf, 0.5, 2.0]], np.float32)
    extreme_mask = np.array([[True, True, True, True, True, False]])

    def total(s, m):
        return ops.sum(krd.rank_distributions(s, m, sigma=1e-3, topn=3)
                       * ops.arange(3, dtype="float32"), axis=(1, 2))

    value, grad = harness.value_and_grad(harness.jit(total), extreme, extreme_mask, argnum=0)
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad))
    want = _oracle_distributions(extreme, extreme_mask, 3, sigma=1e-3, topn=3)
    harness.assert_close(value, np.sum(want * np.arange(3), axis=(1, 2)))
    np.testing.assert_array_equal(grad, 0.0)  # every pair saturates or is clamped


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
    {"topn": 6, "discount_alpha": 0.4},
]


def _oracle(labels, scores, options, bound=F32_BOUND):
    checked = SPEC.check_options(**options)
    return harness.expected_per_list(
        lambda y, s: oracles_soft_ndcg.soft_ndcg_loss_and_gradient(y, s, bound=bound, **checked),
        labels, scores)


def _check_softndcg(options, cases):
    for name, labels, scores in cases:
        value, grad = harness.body_value_and_grad(KEY, labels, scores, **options)
        want, want_grad = _oracle(labels, scores, options)
        harness.assert_close(value, want, what=f"{name} value")
        harness.assert_close(grad, want_grad, rtol=2e-5, atol=2e-6, what=f"{name} gradient")
        harness.assert_policy(value, grad, labels, scores)


@pytest.mark.parametrize("options", OPTIONS, ids=str)
def test_softndcg_values_and_gradients_equal_the_oracle_on_every_case(options):
    _check_softndcg(options, harness.cases())


@pytest.mark.parametrize("options", MORE_OPTIONS, ids=str)
def test_softndcg_options_equal_the_oracle(options):
    _check_softndcg(options, [("mixed",) + harness.CASES["mixed"]])


def test_float64_softndcg_equals_the_oracle_at_ordinary_and_huge_scales():
    """Float64 (JAX under ``jax_enable_x64``): scores of 1e160 pass the bound
    2^509 of the scaled scores, clamp and tie (zero gradient)."""
    labels, scores = (x.astype(np.float64) for x in harness.CASES["mixed"])
    for scale in (1.0, 1e160):
        with harness.float64():
            value, grad = harness.body_value_and_grad(KEY, labels, scores * scale, topn=6)
        want, want_grad = _oracle(labels, scores * scale, {"topn": 6}, bound=2.0 ** 509)
        assert value.dtype == np.float64 and np.all(np.isfinite(grad))
        harness.assert_close(value, want, rtol=1e-9, atol=1e-12, what=f"value x{scale}")
        harness.assert_close(grad, want_grad, rtol=1e-7, atol=1e-10, what=f"gradient x{scale}")
    np.testing.assert_array_equal(grad, 0.0)  # (x 1e160: every score clamped)


@pytest.mark.parametrize("shape", [(3, 0), (0, 4)])
def test_empty_batches_and_lists(shape):
    checked = SPEC.check_options()
    labels = np.ones(shape, np.float32)
    value, grad = harness.value_and_grad(
        harness.jit(lambda l, s: SPEC.compute(l, s, None, checked, "keras_ops")[0]),
        labels, np.zeros(shape, np.float32))
    assert value.shape == shape[:1] and grad.shape == shape
    assert np.all(value == 0.0)


def test_training_discount_equals_the_oracle():
    count = np.array([1, 4, 7], np.int32)
    for alpha in (1.0, 0.4, 0.0, -1.0, -0.3):
        with arrays.use("keras_ops"):
            got = harness.to_numpy(
                k_soft_rank.training_discount(7, ops.convert_to_tensor(count), alpha, "float32"))
        want = [oracles_soft_ndcg.training_discount(7, c, alpha) for c in count]
        harness.assert_close(got, want, what=str(alpha))
    # alpha = 1: the regular nDCG discount 1/log2(2 + r) up to the count
    np.testing.assert_allclose(oracles_soft_ndcg.training_discount(7, 4, 1.0),
                               np.where(np.arange(7) < 4, 1 / np.log2(2 + np.arange(7)), 0))


def test_class_computes_through_the_keras_ops_body():
    labels, scores = harness.CASES["mixed"]
    assert isinstance(tfrx.losses.get(KEY), tfrx.losses.SoftNDCGLoss)
    loss = tfrx.losses.SoftNDCGLoss(topn=3, sigma=0.5)
    want, _ = _oracle(labels, scores, {"topn": 3, "sigma": 0.5})
    got = harness.jit(loss)(ops.convert_to_tensor(labels), ops.convert_to_tensor(scores))
    harness.assert_close(float(harness.to_numpy(got)), want.mean())


def test_tiny_model_fits_with_softndcg():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(8, 5, 3)).astype(np.float32)
    labels = rng.integers(0, 3, size=(8, 5)).astype(np.float32)
    labels[:, 4] = -1.0  # padding
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.Dense(1),
                              keras.layers.Reshape((5,))])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=tfrx.losses.get(KEY))
    history = model.fit(features, labels, batch_size=4, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))
    assert -1.0 <= history.history["loss"][-1] < 0.0


@pytest.mark.skipif(harness.BACKEND != "jax", reason="jax.jit")
def test_jax_jit_of_value_and_grad_equals_the_oracle():
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    labels, scores = harness.CASES["bad_input"]
    options = {"topn": 3, "method": "normal"}
    checked = SPEC.check_options(**options)

    @jax.jit
    @jax.value_and_grad
    def total(s):
        losses, weights, _ = SPEC.compute(jnp.asarray(labels), s, None, checked, "keras_ops")
        return jnp.sum(jnp.where(jnp.isnan(losses), 0.0, losses * weights))

    value, grad = total(jnp.asarray(scores))
    want, want_grad = _oracle(labels, scores, options)
    harness.assert_close(float(value), np.nansum(want))
    harness.assert_close(np.asarray(grad), want_grad, rtol=2e-5, atol=2e-6)
