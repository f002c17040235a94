"""tfrx.ops.rank_distributions: SoftRank's Rank-Binomial (softrank.txt, Eq. 8-12)."""
import numpy as np
import pytest
import tensorflow as tf

import tfr_extensions as tfrx
from support.oracles_softrank import (monte_carlo_ranks, rank_binomial,
                              rank_binomial_by_enumeration)

import importlib

rd = importlib.import_module("tfr_extensions.ops.rank_distributions")
#: the TensorFlow half of the exact recursion (its product tree, its loop over chunks)
rb = importlib.import_module("tfr_extensions.ops.rank_binomial")
rank_distributions = tfrx.ops.rank_distributions


def _lists(batch, size, seed, pad=True):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(batch, size))
    mask = np.ones((batch, size), bool)
    if pad:
        lengths = rng.integers(1, size + 1, size=batch)
        mask = np.arange(size)[None] < lengths[:, None]
        # padding anywhere, not only at the end
        mask = np.take_along_axis(mask, rng.permuted(np.tile(np.arange(size), (batch, 1)), axis=1), 1)
    return scores, mask


@pytest.mark.parametrize("size", [1, 2, 7, 40])
def test_exact_matches_recursion_oracle(size):
    scores, mask = _lists(3, size, seed=size)
    got = rank_distributions(scores, mask, sigma=0.7).numpy()
    want = np.stack([rank_binomial(s, 0.7, m) for s, m in zip(scores, mask)])
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_exact_matches_enumeration_of_contests():
    scores = np.array([[0.3, -1.2, 0.9, 0.0, 2.1]])
    got = rank_distributions(scores, sigma=0.8).numpy()[0]
    np.testing.assert_allclose(got, rank_binomial_by_enumeration(scores[0], 0.8), atol=1e-12)


def test_rows_sum_to_one_and_padding_takes_no_rank():
    scores, mask = _lists(4, 9, seed=1)
    probs = rank_distributions(scores, mask, sigma=0.5).numpy()
    n = mask.sum(1)
    for b in range(4):
        np.testing.assert_allclose(probs[b][mask[b]].sum(1), 1.0, atol=1e-12)
        assert np.all(probs[b][~mask[b]] == 0.0)
        assert np.all(probs[b][:, n[b]:] == 0.0)
        # (columns need not sum to 1: Eq. 12 approximates the true distribution)
        np.testing.assert_allclose(probs[b].sum(), n[b], atol=1e-12)


def test_monte_carlo_agreement():
    """Against sampling Gaussian scores and sorting (Section 3.2's generative
    process). The Rank-Binomial treats the contests of one document as
    independent, so it is exact for 2 documents and approximate beyond; with
    scores 1.5 sigma apart the total variation per document is below 0.05,
    and the expected ranks (Eq. 10, exact by linearity) agree within 0.01."""
    rng = np.random.default_rng(0)
    samples = 100_000
    pair = np.array([0.4, -0.3])
    tv = 0.5 * np.abs(rank_distributions(pair[None], sigma=1.0).numpy()[0]
                      - monte_carlo_ranks(pair, 1.0, samples, rng)).sum(1)
    assert tv.max() < 0.01
    spaced = np.array([0.0, 1.5, 3.0, 4.5, 6.0])
    probs = rank_distributions(spaced[None], sigma=1.0).numpy()[0]
    sampled = monte_carlo_ranks(spaced, 1.0, samples, rng)
    assert (0.5 * np.abs(probs - sampled).sum(1)).max() < 0.05
    random_scores = rng.normal(size=6) * 2.0
    probs = rank_distributions(random_scores[None], sigma=1.0).numpy()[0]
    sampled = monte_carlo_ranks(random_scores, 1.0, samples, rng)
    ranks = np.arange(6)
    np.testing.assert_allclose(probs @ ranks, sampled @ ranks, atol=0.01)
    assert (0.5 * np.abs(probs - sampled).sum(1)).max() < 0.3


@pytest.mark.parametrize("method", ["exact", "normal"])
def test_topn_columns_equal_full_distribution(method):
    scores, mask = _lists(3, 23, seed=4)
    full = rank_distributions(scores, mask, sigma=0.6, method=method).numpy()
    for topn in (1, 5, 23, 30):
        top = rank_distributions(scores, mask, sigma=0.6, topn=topn, method=method).numpy()
        assert top.shape == (3, 23, min(topn, 23))
        np.testing.assert_allclose(top, full[:, :, :min(topn, 23)], atol=1e-12)


def test_chunked_loop_equals_tree_and_dynamic_shapes():
    """Unknown list size (the while loop over chunks) = static (product tree)."""
    scores, mask = _lists(2, 70, seed=5)
    static = rank_distributions(scores, mask, sigma=0.9, topn=10).numpy()
    spec = tf.TensorSpec([None, None], tf.float64)

    @tf.function(input_signature=[spec, tf.TensorSpec([None, None], tf.bool)])
    def dynamic(s, m):
        return rank_distributions(s, m, sigma=0.9, topn=10)

    np.testing.assert_allclose(dynamic(scores, mask).numpy(), static, atol=1e-12)
    oracle = np.stack([rank_binomial(s, 0.9, m) for s, m in zip(scores, mask)])
    np.testing.assert_allclose(static, oracle[:, :, :10], atol=1e-12)


@pytest.mark.parametrize("topn", [10, None])
def test_chunked_loop_with_static_shapes(monkeypatch, topn):
    """Static lists longer than MAX_TREE_LIST_SIZE take the loop over chunks."""
    scores, mask = _lists(2, 70, seed=11)
    monkeypatch.setattr(rb, "MAX_TREE_LIST_SIZE", 32)
    probs = tf.function(lambda s: rank_distributions(s, mask, sigma=0.9, topn=topn))(scores)
    oracle = np.stack([rank_binomial(s, 0.9, m) for s, m in zip(scores, mask)])
    np.testing.assert_allclose(probs.numpy(), oracle[:, :, :topn], atol=1e-12)


def test_normal_approximation_is_close_to_exact_on_long_lists():
    scores, _ = _lists(2, 60, seed=6, pad=False)
    exact = rank_distributions(scores, sigma=1.0).numpy()
    normal = rank_distributions(scores, sigma=1.0, method="normal").numpy()
    np.testing.assert_allclose(normal.sum(-1), 1.0, atol=1e-9)
    tv = 0.5 * np.abs(exact - normal).sum(-1)
    assert tv.mean() < 0.05 and tv.max() < 0.2
    ranks = np.arange(60)
    np.testing.assert_allclose(normal @ ranks, exact @ ranks, atol=0.02)


def test_auto_switches_at_the_documented_list_size(monkeypatch):
    scores, mask = _lists(2, 12, seed=7)
    exact = rank_distributions(scores, mask, topn=4, method="exact").numpy()
    normal = rank_distributions(scores, mask, topn=4, method="normal").numpy()
    monkeypatch.setattr(rd, "AUTO_EXACT_MAX_LIST_SIZE", 12)
    np.testing.assert_allclose(rank_distributions(scores, mask, topn=4, method="auto"), exact)
    monkeypatch.setattr(rd, "AUTO_EXACT_MAX_LIST_SIZE", 11)
    np.testing.assert_allclose(rank_distributions(scores, mask, topn=4, method="auto"), normal)


@pytest.mark.parametrize("topn", [None, 3])
def test_sinkhorn_is_doubly_stochastic(topn):
    scores, mask = _lists(3, 8, seed=8)
    probs = rank_distributions(scores, mask, sigma=0.8, topn=topn,
                               sinkhorn_iterations=200).numpy()
    n = mask.sum(1)
    for b in range(3):
        rows = probs[b][mask[b]]
        cols = probs[b][:, :n[b]].sum(0)
        np.testing.assert_allclose(cols, 1.0, atol=1e-6)
        if topn is None or topn >= n[b]:
            np.testing.assert_allclose(rows.sum(1), 1.0, atol=1e-9)
        else:
            assert np.all(rows.sum(1) <= 1.0 + 1e-9)
        assert np.all(probs[b][~mask[b]] == 0.0)
    # Sinkhorn moves the Rank-Binomial towards the sampled distribution
    rng = np.random.default_rng(1)
    s = rng.normal(size=6)
    plain = rank_distributions(s[None], sigma=1.0).numpy()[0]
    scaled = rank_distributions(s[None], sigma=1.0, sinkhorn_iterations=50).numpy()[0]
    sampled = monte_carlo_ranks(s, 1.0, 50_000, rng)
    assert np.abs(scaled - sampled).sum() < np.abs(plain - sampled).sum()


@pytest.mark.parametrize("method,topn,sinkhorn", [("exact", None, 0), ("exact", 3, 0),
                                                  ("normal", 3, 0), ("exact", 3, 5)])
def test_gradients_match_finite_differences(method, topn, sinkhorn):
    rng = np.random.default_rng(9)
    scores = tf.constant(rng.normal(size=(2, 6)))
    mask = tf.constant([[True] * 6, [True, False, True, True, True, False]])
    weights = tf.constant(rng.normal(size=(2, 6, 6 if topn is None else topn)))

    def f(s):
        probs = rank_distributions(s, mask, sigma=0.7, topn=topn, method=method,
                                   sinkhorn_iterations=sinkhorn)
        return tf.reduce_sum(probs * weights, axis=[1, 2])

    theoretical, numerical = tf.test.compute_gradient(f, [scores])
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=1e-6)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        value = tf.reduce_sum(f(scores))
    grad = tape.gradient(value, scores).numpy()
    assert grad[1, 1] == 0.0 and grad[1, 5] == 0.0


@pytest.mark.parametrize("method", ["exact", "normal"])
def test_finite_at_extreme_scores_and_xla(method):
    scores = tf.constant([[1e4, -1e4, 0.0, 0.0, 3.0], [0.0] * 5], tf.float32)
    mask = tf.constant([[True] * 5, [False] * 5])

    def value_and_grad(s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            probs = rank_distributions(s, mask, topn=3, method=method)
            value = tf.reduce_sum(probs * tf.range(3, dtype=s.dtype))
        return probs, tape.gradient(value, s)

    probs, grad = tf.function(value_and_grad)(scores)
    assert np.all(np.isfinite(probs.numpy())) and np.all(np.isfinite(grad.numpy()))
    np.testing.assert_allclose(probs.numpy()[0, :2], [[1, 0, 0], [0, 0, 0]], atol=1e-6)
    assert np.all(probs.numpy()[1] == 0) and np.all(grad.numpy()[1] == 0)
    xla_probs, xla_grad = tf.function(value_and_grad, jit_compile=True)(scores)
    np.testing.assert_allclose(xla_probs.numpy(), probs.numpy(), atol=1e-5)
    np.testing.assert_allclose(xla_grad.numpy(), grad.numpy(), atol=1e-5)


def test_float16_inputs_compute_in_float32():
    probs = rank_distributions(tf.constant([[1.0, 0.0]], tf.float16))
    assert probs.dtype == tf.float32


@pytest.mark.parametrize("kwargs,arg", [({"sigma": 0.0}, "sigma"), ({"topn": 0}, "topn"),
                                        ({"method": "fast"}, "method"),
                                        ({"sinkhorn_iterations": -1}, "sinkhorn_iterations")])
def test_invalid_arguments(kwargs, arg):
    with pytest.raises(ValueError, match=arg):
        rank_distributions([[1.0, 0.0]], **kwargs)


@pytest.mark.parametrize("method", ["exact", "normal"])
def test_distributions_of_selected_columns_equal_those_rows(method):
    """``distributions_of`` for some documents (SoftNDCG's relevant ones) gives
    exactly their rows of the full matrix, zero rows for padded ones."""
    scores, mask = _lists(3, 12, seed=13)
    full = rank_distributions(scores, mask, sigma=0.8, topn=4, method=method).numpy()
    columns = np.array([[3, 0, 7], [11, 11, 2], [5, 9, 1]])
    got = rd.distributions_of(tf.constant(scores), tf.constant(mask), 0.8, 4, method,
                              tf.constant(columns)).numpy()
    want = np.take_along_axis(full, columns[:, :, None], axis=1)
    np.testing.assert_allclose(got, want, atol=1e-12)
    padded = ~np.take_along_axis(mask, columns, axis=1)
    assert padded.any() and np.all(got[padded] == 0.0)


def test_extreme_scores_and_padding_stay_finite_with_zero_gradient():
    """Padded documents take the scaled score -2 * scaled_score_bound: no
    inf - inf anywhere, and neither they nor pairs many sigma apart get a
    gradient or a NaN."""
    scores = tf.constant([[1e30, -1e30, 0.0, 5.0], [2.0, 1.0, 0.0, -1.0]], tf.float32)
    mask = tf.constant([[True, True, True, False], [True, False, True, False]])
    with tf.GradientTape() as tape:
        tape.watch(scores)
        probs = rank_distributions(scores, mask, sigma=1e-3, topn=3)
        value = tf.reduce_sum(probs * tf.constant([1.0, 2.0, 3.0]))
    grad = tape.gradient(value, scores).numpy()
    assert np.all(np.isfinite(probs.numpy())) and np.all(np.isfinite(grad))
    np.testing.assert_array_equal(probs.numpy()[0, :3], np.eye(3)[[0, 2, 1]])
    assert np.all(grad[~mask.numpy()] == 0.0)


def test_xla_takes_the_chunked_loop_past_its_tree_size():
    """Under XLA, lists longer than XLA_MAX_TREE_LIST_SIZE take the loop over
    chunks of XLA_CHUNK_SIZE; values and gradients equal graph mode's tree."""
    scores, mask = _lists(2, rb.XLA_MAX_TREE_LIST_SIZE + 6, seed=17)
    weights = tf.constant(np.arange(1.0, 11.0))

    def value_and_grad(s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            value = tf.reduce_sum(rank_distributions(s, mask, sigma=0.9, topn=10) * weights)
        return value, tape.gradient(value, s)

    s = tf.constant(scores)
    graph = tf.function(value_and_grad)(s)
    xla = tf.function(value_and_grad, jit_compile=True)(s)
    np.testing.assert_allclose(xla[0], graph[0], rtol=1e-10)
    np.testing.assert_allclose(xla[1], graph[1], atol=1e-10)
    oracle = np.stack([rank_binomial(v, 0.9, m) for v, m in zip(scores, mask)])
    np.testing.assert_allclose(float(xla[0]), (oracle[:, :, :10] * weights.numpy()).sum(),
                               rtol=1e-10)


@pytest.mark.parametrize("topn", [None, 10])
def test_tree_levels_compiled_by_xla_equal_the_oracle_and_graph_ops(monkeypatch, topn):
    # 140 documents make a tree of 256 leaves, past COMPILED_LEVELS_MIN_LIST_SIZE:
    # each level is an XLA program (outside XLA); below it, graph ops.
    assert rb.COMPILED_LEVELS_MIN_LIST_SIZE <= 256
    scores, mask = _lists(3, 140, seed=4)
    ranks = 140 if topn is None else topn
    weights = tf.constant(np.random.default_rng(5).normal(size=(3, 140, ranks)))

    def probs_and_grad():
        s = tf.constant(scores)
        with tf.GradientTape() as tape:
            tape.watch(s)
            probs = rank_distributions(s, mask, sigma=0.7, topn=topn)
            value = tf.reduce_sum(probs * weights)
        return probs.numpy(), tape.gradient(value, s).numpy()

    compiled = probs_and_grad()
    want = np.stack([rank_binomial(s, 0.7, m) for s, m in zip(scores, mask)])[..., :ranks]
    np.testing.assert_allclose(compiled[0], want, atol=1e-12)
    monkeypatch.setattr(rb, "COMPILED_LEVELS_MIN_LIST_SIZE", 10**9)
    graph_ops = probs_and_grad()
    np.testing.assert_allclose(compiled[0], graph_ops[0], atol=1e-13)
    np.testing.assert_allclose(compiled[1], graph_ops[1], rtol=1e-10, atol=1e-12)
    assert (compiled[1][~mask] == 0).all()


_ERF = tf.math.erf


def _erf_nan_past_sqrt_float64_max(x):
    """float64 ``erf`` as TF 2.21 computes it: NaN once |x| >= 2^512 (it squares
    x); float32 unchanged. Lets TF 2.15 catch what only 2.21 shows."""
    if x.dtype != tf.float64:
        return _ERF(x)
    return tf.where(tf.abs(x) < 2.0 ** 512, _ERF(x), tf.constant(np.nan, tf.float64))


def test_the_erf_emulation_is_nan_exactly_where_tf_2_21_is():
    x = tf.constant([1e150, 1.3e154, 1.35e154, 1e200, -1e200], tf.float64)
    got = _erf_nan_past_sqrt_float64_max(x).numpy()
    np.testing.assert_array_equal(got[:2], [1.0, 1.0])
    assert np.isnan(got[2:]).all()


# Float64 scores at +-1e200 (and 1e308, next to float64 max) with padding: every
# erf argument stays below 2^512, so nothing is NaN with TF 2.21's erf; the
# distributions equal the oracle's (scipy's erfc has no such limit).
HUGE_SCORES = np.array([[1e200, -1e200, 0.0, 3.0, 1e200, 0.5],
                        [-1e308, 2.0, 1e200, 0.0, 0.0, 0.0]])
HUGE_MASK = np.array([[True, True, True, True, False, True],
                      [True, True, True, False, False, False]])


@pytest.mark.parametrize("method,topn,loop,columns", [
    ("exact", None, False, False), ("exact", 3, False, False), ("exact", 3, True, False),
    ("exact", None, True, False), ("normal", 3, False, False), ("exact", 2, False, True),
    ("normal", None, False, True)])
def test_float64_scores_at_1e200_with_padding_are_finite_and_exact(monkeypatch, method, topn,
                                                                   loop, columns):
    monkeypatch.setattr(tf.math, "erf", _erf_nan_past_sqrt_float64_max)
    if loop:  # the while loop over chunks instead of the product tree
        monkeypatch.setattr(rb, "MAX_TREE_LIST_SIZE", 2)
    scores = tf.constant(HUGE_SCORES)
    mask = tf.constant(HUGE_MASK)
    picked = np.array([[3, 0, 4], [1, 0, 2]])
    ranks = 6 if topn is None else topn
    weights = tf.constant(np.random.default_rng(3).normal(size=(2, 3 if columns else 6, ranks)))

    def probs_and_grad(s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            if columns:
                probs = rd.distributions_of(s, mask, 0.8, topn, method, tf.constant(picked))
            else:
                probs = rank_distributions(s, mask, sigma=0.8, topn=topn, method=method)
            value = tf.reduce_sum(probs * weights)
        return probs, tape.gradient(value, s)

    probs, grad = tf.function(probs_and_grad)(scores)
    probs, grad = probs.numpy(), grad.numpy()
    assert np.isfinite(probs).all() and np.isfinite(grad).all()
    if method == "exact":
        oracle = np.stack([rank_binomial(s, 0.8, m) for s, m in zip(HUGE_SCORES, HUGE_MASK)])
        if columns:
            oracle = np.take_along_axis(oracle, picked[:, :, None], axis=1)
        np.testing.assert_allclose(probs, oracle[..., :ranks], atol=1e-12)
    else:  # the normal approximation: valid rows sum to 1 (over all ranks)
        rows = probs.sum(-1)
        valid = HUGE_MASK if not columns else np.take_along_axis(HUGE_MASK, picked, axis=1)
        if topn is None:
            np.testing.assert_allclose(rows[valid], 1.0, atol=1e-12)
        assert (rows[~valid] == 0).all()
    # Scores 1e200 apart or more get no gradient (the exact one underflows to 0);
    # nor does padding.
    assert (grad[HUGE_MASK == False] == 0).all()  # noqa: E712
    assert grad[0, 0] == grad[0, 1] == 0.0 and grad[1, 0] == grad[1, 2] == 0.0


def test_softndcg_at_1e200_equals_softndcg_at_1e3():
    """Scores 1e200 apart win with probability exactly 1, as scores 1e3 apart
    do (erf saturates past 6): SoftNDCG's value and gradient agree exactly, and
    neither is NaN with TF 2.21's float64 erf."""
    labels = tf.constant([[2.0, 0.0, 1.0, 1.0, -1.0], [0.0, 1.0, 3.0, -1.0, -1.0]], tf.float64)

    def value_and_grad(loss, scores):
        scores = tf.constant(scores)
        with tf.GradientTape() as tape:
            tape.watch(scores)
            value = loss(labels, scores)
        return value.numpy(), tape.gradient(value, scores).numpy()

    huge = np.array([[1e200, -1e200, 0.0, 3.0, 1e200], [-1e200, 2.0, 1e200, 0.0, 0.0]])
    moderate = np.where(np.abs(huge) > 1e100, np.sign(huge) * 1e3, huge)
    for method in ("exact", "normal"):
        loss = tfrx.losses.get("softndcg", topn=3, method=method)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(tf.math, "erf", _erf_nan_past_sqrt_float64_max)
            got = value_and_grad(loss, huge)
        want = value_and_grad(loss, moderate)
        assert np.isfinite(got[0]) and np.isfinite(got[1]).all()
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_infinite_and_huge_float32_scores_clamp_to_the_bound():
    """Scaled scores beyond the bound clamp to it: +-inf and +-3e38 rank like
    any score far above / below the rest."""
    scores = tf.constant([[np.inf, -np.inf, 0.0, 3e38, -3e38]], tf.float32)
    probs = rank_distributions(scores, sigma=1e-3).numpy()[0]
    assert np.isfinite(probs).all()
    np.testing.assert_array_equal(probs[2], np.eye(5)[2])  # 0 is third of five
    # beyond the bound, distinct scores tie: +inf and 3e38 share ranks 0 and 1
    np.testing.assert_allclose(probs[[0, 3]][:, :2], 0.5)
    assert rd.scaled_score_bound(tf.float32) == np.finfo(np.float32).max / 4


@pytest.mark.parametrize("dtype,scale", [(tf.float32, 1e30), (tf.float64, 1e100)])
def test_huge_scores_in_a_graph_keep_pairs_i_i_neutral(dtype, scale):
    """Inside tf.function (every training step), Grappler may reassociate
    ``(s_i - s_j) + z0`` into ``s_i - (s_j - z0)``, which loses z0 at huge
    scores and gave pairs i == j pi = 1/2; z0 is selected instead."""
    scores = np.array([[scale, -scale, 0.0, 3.0], [1.0, scale, 2.0, 0.0]])
    mask = np.array([[True, True, True, False], [True, True, True, True]])
    oracle = np.stack([rank_binomial(s, 1e-3, m) for s, m in zip(scores, mask)])
    for method, columns in (("exact", None), ("normal", None), ("exact", [[0, 1], [1, 3]])):
        def probs(s):
            if columns is None:
                return rank_distributions(s, mask, sigma=1e-3, method=method)
            return rd.distributions_of(s, tf.constant(mask), 1e-3, None, method,
                                       tf.constant(columns))
        got = tf.function(probs)(tf.constant(scores, dtype)).numpy()
        want = oracle if columns is None else np.take_along_axis(
            oracle, np.array(columns)[:, :, None], axis=1)
        np.testing.assert_allclose(got, want, atol=1e-6)


@pytest.mark.parametrize("shape", [(0, 6), (0, 0), (3, 0)])
def test_empty_batches_and_lists_have_zero_size_distributions_and_gradients(shape):
    distributions_of = importlib.import_module("tfr_extensions.ops.rank_distributions").distributions_of
    scores = tf.zeros(shape)
    columns = tf.zeros([shape[0], 1], tf.int32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(scores)
        full = tfrx.ops.rank_distributions(scores, topn=4)
        chosen = distributions_of(scores, tf.ones(shape, tf.bool), 1.0, 4, "exact", columns)
        totals = [tf.reduce_sum(full), tf.reduce_sum(chosen)]
    assert full.shape == (shape[0], shape[1], min(4, shape[1]))
    assert chosen.shape == (shape[0], 1, min(4, shape[1]))
    for total in totals:
        assert tape.gradient(total, scores).shape == shape
