"""Plackett-Luce sampling and log-probabilities against NumPy oracles and statistics."""
import itertools

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

from support.oracles_pl import pl_log_prob, softmax
from tfr_extensions.ops import plackett_luce as pl

SCORES = [0.5, -0.3, 1.2, 0.0, -1.0]
# Level of every statistical test below: with fixed seeds they are deterministic,
# and a correct sampler fails one with probability ALPHA per seed.
ALPHA = 1e-3


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_first_position_frequencies_match_softmax_chi_square(temperature):
    num_samples = 20000
    rankings = pl.sample_rankings(tf.constant([SCORES]), num_samples=num_samples, seed=3,
                                  temperature=temperature, topn=1)
    counts = np.bincount(rankings.numpy()[0, :, 0], minlength=len(SCORES))
    expected = softmax(SCORES, temperature) * num_samples
    _, p_value = scipy.stats.chisquare(counts, expected)
    assert p_value > ALPHA, (counts, expected)


def test_pairwise_order_frequencies_match_plackett_luce():
    num_samples = 20000
    rankings = pl.sample_rankings(tf.constant([SCORES]), num_samples=num_samples, seed=11)
    positions = np.argsort(rankings.numpy()[0], axis=-1)  # [S, L]: position of doc i
    s = np.asarray(SCORES)
    for i, j in itertools.combinations(range(len(SCORES)), 2):
        # Under PL, P(i before j) = e^{s_i} / (e^{s_i} + e^{s_j}) (Luce's choice axiom).
        prob = 1.0 / (1.0 + np.exp(s[j] - s[i]))
        hits = int(np.sum(positions[:, i] < positions[:, j]))
        p_value = scipy.stats.binomtest(hits, num_samples, prob).pvalue
        # Bonferroni over the 10 pairs keeps the family at level ALPHA.
        assert p_value > ALPHA / 10, (i, j, hits / num_samples, prob)


def test_samples_are_permutations_with_padding_last():
    mask = tf.constant([[True, False, True, False, True, True]] * 2)
    scores = tf.constant([[0.0, 50.0, 1.0, 100.0, -2.0, 0.5], [5.0] * 6])
    rankings = pl.sample_rankings(scores, mask, num_samples=50, seed=0).numpy()
    for ranking in rankings.reshape(-1, 6):
        assert sorted(ranking.tolist()) == list(range(6))
        assert set(ranking[:4].tolist()) == {0, 2, 4, 5}
    placed = pl.ranking_mask(rankings, mask).numpy()
    assert placed[..., :4].all() and not placed[..., 4:].any()


def test_topn_shapes_and_short_lists():
    scores = tf.constant([[1.0, 2.0, 3.0]])
    assert pl.sample_rankings(scores, num_samples=4, seed=0, topn=2).shape == [1, 4, 2]
    # A list shorter than topn: the ranking has list_size positions.
    assert pl.sample_rankings(scores, num_samples=4, seed=0, topn=10).shape == [1, 4, 3]
    dynamic = tf.function(lambda s: pl.sample_rankings(s, seed=0, topn=10),
                          input_signature=[tf.TensorSpec([None, None], tf.float32)])
    assert dynamic(scores).shape == [1, 1, 3]
    # Only two valid documents: trailing positions are padded and marked so.
    mask = tf.constant([[True, False, True]])
    rankings = pl.sample_rankings(scores, mask, num_samples=3, seed=1, topn=10)
    np.testing.assert_array_equal(pl.ranking_mask(rankings, mask).numpy()[0],
                                  [[True, True, False]] * 3)


def test_all_padding_list_gives_zero_log_prob_and_zero_gradient():
    scores = tf.constant([[1.0, -2.0, 3.0], [0.5, 0.1, 0.2]], tf.float64)
    mask = tf.constant([[False] * 3, [True] * 3])
    rankings = pl.sample_rankings(scores, mask, num_samples=2, seed=0, topn=2)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        log_prob = pl.plackett_luce_log_prob(scores, rankings, mask)
    grad = tape.gradient(log_prob, scores).numpy()
    assert np.all(log_prob.numpy()[0] == 0.0)
    assert np.all(grad[0] == 0.0) and np.all(np.isfinite(grad))


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_log_prob_sums_to_one_over_all_permutations(temperature):
    perms = np.array(list(itertools.permutations(range(5))), np.int32)[None]
    log_probs = pl.plackett_luce_log_prob(
        tf.constant([SCORES], tf.float64), perms, temperature=temperature)
    assert np.exp(log_probs.numpy()).sum() == pytest.approx(1.0, abs=1e-12)
    # Top-2 prefixes: every ordered pair once.
    prefixes = np.array(list(itertools.permutations(range(5), 2)), np.int32)[None]
    log_probs = pl.plackett_luce_log_prob(
        tf.constant([SCORES], tf.float64), prefixes, temperature=temperature)
    assert np.exp(log_probs.numpy()).sum() == pytest.approx(1.0, abs=1e-12)


def test_log_prob_matches_numpy_oracle_with_padding_and_topn():
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(3, 6)) * 3
    valid = np.array([[1, 1, 1, 1, 1, 1], [1, 0, 1, 1, 0, 1], [0, 1, 0, 0, 0, 0]], bool)
    rankings = np.stack([np.stack([rng.permutation(6) for _ in range(4)]) for _ in range(3)])
    for topn in (None, 1, 3):
        got = pl.plackett_luce_log_prob(scores, rankings.astype(np.int32), valid, topn=topn,
                                        temperature=0.7).numpy()
        for b, k in itertools.product(range(3), range(4)):
            prefix = rankings[b, k] if topn is None else rankings[b, k, :topn]
            want = pl_log_prob(scores[b], prefix, valid[b], temperature=0.7)
            assert got[b, k] == pytest.approx(want, abs=1e-10)


def test_log_prob_gradient_matches_finite_differences():
    scores = tf.constant([[0.3, -1.1, 2.0, 0.4, -0.2, 1.5]], tf.float64)
    mask = tf.constant([[True, True, False, True, True, True]])
    rankings = tf.constant([[[4, 0, 5], [2, 5, 1]]])  # top-3 prefixes, one holds padding

    def fn(s):
        return pl.plackett_luce_log_prob(s, rankings, mask, temperature=0.8)

    theoretical, numerical = tf.test.compute_gradient(fn, [scores])
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=1e-7)
    # The padded document (index 2) has exactly zero gradient.
    assert np.all(theoretical[0][:, 2] == 0.0)


def test_extreme_scores_are_finite():
    scores = tf.constant([[1e4, -1e4, 0.0, 1e4, -1e4]])
    rankings = pl.sample_rankings(scores, num_samples=3, seed=0)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        log_prob = pl.plackett_luce_log_prob(scores, rankings)
    grad = tape.gradient(log_prob, scores)
    assert np.all(np.isfinite(log_prob.numpy())) and np.all(np.isfinite(grad.numpy()))
    # The 1e4 documents always come first; the -1e4 ones last.
    assert set(rankings.numpy()[0, :, :2].ravel().tolist()) == {0, 3}


def test_seeds_are_reproducible_and_xla_matches_graph():
    scores = tf.constant([SCORES] * 3)
    first = pl.sample_rankings(scores, num_samples=8, seed=(1, 2), topn=3)
    again = pl.sample_rankings(scores, num_samples=8, seed=(1, 2), topn=3)
    other = pl.sample_rankings(scores, num_samples=8, seed=(1, 3), topn=3)
    np.testing.assert_array_equal(first.numpy(), again.numpy())
    assert np.any(first.numpy() != other.numpy())
    xla = tf.function(lambda s: pl.sample_rankings(s, num_samples=8, seed=(1, 2), topn=3),
                      jit_compile=True)(scores)
    np.testing.assert_array_equal(first.numpy(), xla.numpy())
    noise = pl.uniform_noise([1000], tf.constant([4, 5]), tf.float64).numpy()
    assert noise.min() > 0.0 and noise.max() < 1.0


@pytest.mark.parametrize("kwargs, arg", [
    ({"temperature": 0.0}, "temperature"), ({"temperature": -1.0}, "temperature"),
    ({"num_samples": 0}, "num_samples"), ({"num_samples": 1.5}, "num_samples"),
    ({"topn": 0}, "topn"),
])
def test_bad_arguments_raise_value_error(kwargs, arg):
    with pytest.raises(ValueError, match=arg):
        pl.sample_rankings(tf.constant([SCORES]), seed=0, **kwargs)
    if "temperature" in kwargs:
        with pytest.raises(ValueError, match=arg):
            pl.plackett_luce_log_prob(tf.constant([SCORES]), [[0, 1]], **kwargs)


def test_long_rankings_use_the_linear_memory_paths_and_match_the_oracle():
    """300 positions: beyond the one-hot (64) and pairwise (256) thresholds."""
    rng = np.random.default_rng(5)
    scores = rng.normal(size=(1, 300)) * 2
    valid = np.ones((1, 300), bool)
    valid[0, 250:] = False
    rankings = pl.sample_rankings(scores, valid, num_samples=2, seed=0).numpy()
    got = pl.plackett_luce_log_prob(scores, rankings, valid).numpy()
    for k in range(2):
        assert got[0, k] == pytest.approx(pl_log_prob(scores[0], rankings[0, k], valid[0]),
                                          abs=1e-9)
    prefix = pl.plackett_luce_log_prob(scores, rankings, valid, topn=100).numpy()
    assert prefix[0, 0] == pytest.approx(
        pl_log_prob(scores[0], rankings[0, 0, :100], valid[0]), abs=1e-9)


def test_fused_sampling_log_probs_match_the_generic_ones(monkeypatch):
    scores = tf.constant([[0.0, 0.0, 0.0, 0.0, 0.0, -1.0], [0.3, -1.0, 2.0, 0.1, 0.0, 1.0]],
                         tf.float64)
    mask = tf.constant([[True] * 6, [True, True, False, True, True, True]])
    for topn in (2, 4, 6, None):
        rankings, fused = pl.sample_rankings_with_log_probs(
            scores, mask, num_samples=3, seed=4, topn=topn)
        generic = pl.plackett_luce_position_log_probs(scores, rankings, mask)
        np.testing.assert_allclose(fused.numpy(), generic.numpy(), atol=1e-12)
        np.testing.assert_array_equal(
            rankings.numpy(), pl.sample_rankings(scores, mask, 3, seed=4, topn=topn).numpy())
    # Without noise, keys tie exactly at the top-n boundary: top_k takes the
    # lower indices, and the tied documents after them stay in the denominators.
    monkeypatch.setattr(pl, "gumbel_noise", lambda shape, seed, dtype: tf.zeros(shape, dtype))
    rankings, fused = pl.sample_rankings_with_log_probs(scores, mask, 1, seed=4, topn=2)
    assert rankings.numpy()[0, 0].tolist() == [0, 1]
    want = [np.log(1 / (5 + np.exp(-1.0))), np.log(1 / (4 + np.exp(-1.0)))]
    np.testing.assert_allclose(fused.numpy()[0, 0], want, rtol=1e-12)


@pytest.mark.parametrize("scale", [1e4, 1e10, 1e30, 3e38])
@pytest.mark.parametrize("positions", [3, 300])
def test_documents_tied_at_any_magnitude_share_their_probability_exactly(scale, positions):
    """Two documents tied at s share the first place: log P = -log 2, at s = 1e30
    too, where s - logsumexp(s, s) rounds to 0 in float32. Rankings longer than
    256 positions (cumulative_logsumexp) are exact up to |s| * epsilon."""
    size = max(positions, 4)
    scores = np.full((1, size), -scale, np.float32)
    scores[0, :2] = scale
    rankings = tf.constant([[np.arange(size)]], tf.int32)
    with tf.GradientTape() as tape:
        s = tf.constant(scores)
        tape.watch(s)
        log_prob = pl.plackett_luce_log_prob(s, rankings, topn=2)
    grad = tape.gradient(log_prob, s).numpy()
    assert log_prob.numpy()[0, 0] == pytest.approx(-np.log(2.0), rel=1e-6)
    np.testing.assert_allclose(grad[0, :2], [0.5, -0.5], atol=1e-6)
    assert (grad[0, 2:] == 0).all()


def test_an_empty_batch_has_a_zero_size_gradient():
    scores = tf.zeros([0, 5])
    with tf.GradientTape() as tape:
        tape.watch(scores)
        rankings, log_probs = pl.sample_rankings_with_log_probs(scores, num_samples=2, seed=0,
                                                                topn=3)
        total = tf.reduce_sum(log_probs)
    assert rankings.shape == (0, 2, 3) and tape.gradient(total, scores).shape == (0, 5)
