"""rank_metrics.value_and_rank_gradient: the metric and d metric / d ranks
against Eq. 13-16 and Eq. 29, 31-33 computed in NumPy (tests/support/oracles.py)."""
import itertools

import numpy as np
import pytest
import tensorflow as tf

from support import oracles
from tfr_extensions.ops import rank_metrics, sorting, vocabulary


def lists_with_padding(batch=6, size=12, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.choice(5, size=(batch, size), p=[0.4, 0.25, 0.15, 0.12, 0.08]).astype(float)
    labels[:, -3:] = -1.0
    labels[1, 4] = -1.0  # padding in the middle of a list
    labels[2] = np.where(labels[2] >= 0, 0.0, -1.0)  # no relevant document
    scores = rng.normal(size=(batch, size))
    return labels, scores


def assert_equal_the_oracles(metric, topn, labels, scores, value, grad):
    """Each list's value and rank gradient against Eq. 13-16 and 29, 31-33 in NumPy."""
    for b in range(len(labels)):
        keep = labels[b] >= 0
        np.testing.assert_allclose(
            value[b].numpy(), oracles.METRIC_ORACLES[metric](labels[b], scores[b], topn),
            rtol=1e-12)
        expected = np.zeros(len(labels[b]))
        if (labels[b][keep] > 0).any():
            expected[keep] = oracles.metric_rank_gradient(labels[b][keep], scores[b][keep],
                                                          metric, topn)
        np.testing.assert_allclose(grad[b].numpy(), expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("metric,topn", list(itertools.product(
    ["precision", "ap", "ap_min", "ndcg", "nerr"], [None, 1, 4])))
def test_value_and_rank_gradient_equal_the_papers_equations(metric, topn):
    labels, scores = lists_with_padding(seed=3)
    mask = tf.constant(labels >= 0)
    positions = sorting.exact_ranks(tf.constant(scores), mask)
    ranks = tf.cast(positions, tf.float64)
    value, grad = rank_metrics.value_and_rank_gradient(
        metric, tf.constant(np.maximum(labels, 0.0)), ranks, mask, topn, positions)
    assert_equal_the_oracles(metric, topn, labels, scores, value, grad)
    assert (grad.numpy()[labels < 0] == 0).all()
    assert (grad.numpy()[2] == 0).all() and value[2].numpy() == 0.0


@pytest.mark.parametrize("size", [12, 45])
@pytest.mark.parametrize("metric,topn", [("ap", None), ("ap", 4), ("ap_min", 4),
                                         ("nerr", None), ("nerr", 4)])
def test_position_sums_under_xla_equal_the_papers_equations(metric, topn, size):
    # Under XLA positions are counted; AP's suffix sums and ERR's products are one
    # pairwise pass for lists of one block of columns (12), cumulative sums in
    # position order beyond (45).
    labels, scores = lists_with_padding(size=size, seed=5)
    mask = tf.constant(labels >= 0)

    @tf.function(jit_compile=True)
    def compiled(labels, scores):
        positions = sorting.exact_ranks(scores, mask)
        return rank_metrics.value_and_rank_gradient(
            metric, labels, tf.cast(positions, scores.dtype), mask, topn, positions)

    value, grad = compiled(tf.constant(np.maximum(labels, 0.0)), tf.constant(scores))
    assert_equal_the_oracles(metric, topn, labels, scores, value, grad)


def test_err_where_a_stop_probability_is_one():
    # In float32 a label of 30 stops with probability (2^30 - 1) / 2^30 = 1.0: log(1 - R)
    # is -inf there, and the documents after it get exp(-inf) = 0 under XLA (pairwise
    # sums, 30 documents), as the cumulative product gives them eagerly.
    labels = tf.constant([[30.0, 1.0, 0.0, 2.0, 30.0, 1.0] * 5], tf.float32)
    scores = tf.constant([np.linspace(-1.0, 1.0, 30)], tf.float32)  # the last on top
    mask = tf.ones_like(labels, tf.bool)

    def nerr(s):
        positions = sorting.exact_ranks(s, mask)
        return rank_metrics.value_and_rank_gradient(
            "nerr", labels, tf.cast(positions, s.dtype), mask, None, positions)

    value, grad = (t.numpy() for t in tf.function(nerr, jit_compile=True)(scores))
    eager_value, eager_grad = (t.numpy() for t in nerr(scores))
    assert np.isfinite(value).all() and np.isfinite(grad).all()
    np.testing.assert_allclose(value, eager_value, rtol=1e-6)
    np.testing.assert_allclose(grad, eager_grad, rtol=1e-6, atol=1e-30)
    # Only the top document (label 1) and the label-30 one below it reach a stop.
    assert np.flatnonzero(grad[0]).tolist() == [28, 29]


def test_rank_gradient_equals_autodiff_of_the_metric_at_shared_ranks():
    # Without tie breaking, tied documents share a mid-rank; the derivative
    # must still be the metric's own (positions held constant).
    labels = tf.constant([[2.0, 1.0, 0.0, 3.0, 1.0, -1.0]], tf.float64)
    ranks = tf.constant([[1.5, 1.5, 4.0, 3.0, 5.0, 0.0]], tf.float64)
    mask = labels >= 0
    labels = tf.maximum(labels, 0.0)
    for metric, fn in rank_metrics.RANK_METRICS.items():
        with tf.GradientTape() as tape:
            tape.watch(ranks)
            autodiff_value = fn(labels, ranks, mask, 3)
        value, grad = rank_metrics.value_and_rank_gradient(metric, labels, ranks, mask, 3)
        np.testing.assert_allclose(value.numpy(), autodiff_value.numpy(), rtol=1e-14)
        np.testing.assert_allclose(grad.numpy(), tape.gradient(autodiff_value, ranks).numpy(),
                                   rtol=1e-14, atol=1e-16)


def test_one_formula_per_name_of_the_vocabulary():
    assert set(rank_metrics.RANK_METRICS) == set(vocabulary.CANONICAL_METRICS)
    for name in vocabulary.METRIC_NAMES:
        assert rank_metrics.rank_metric_function(name) is rank_metrics.RANK_METRICS[
            vocabulary.canonical_metric(name)]
    labels = tf.constant([[2.0, 1.0, 0.0]])
    ranks = tf.constant([[1.0, 3.0, 2.0]])
    mask = labels >= 0
    by_alias = rank_metrics.value_and_rank_gradient("map", labels, ranks, mask, 2)
    by_name = rank_metrics.value_and_rank_gradient("ap", labels, ranks, mask, 2)
    for a, b in zip(by_alias, by_name):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
