"""``keras_ops.sorting``, ``ops.rank_metrics`` and ``tfrx.metrics.RankingMetric``
on Keras 3's JAX and PyTorch backends against the float64 NumPy oracles: the metrics of ranks and
their rank derivatives (:mod:`support.oracles_rank_metrics`, Eq. 13-16 and 29-33 of
the twin-sigmoid paper), the exact metrics (:mod:`support.oracles`), and sorts,
positions and midranks from NumPy and SciPy, on the shared cases."""
import numpy as np
import pytest
import scipy.stats

from keras import ops

import harness
from support import oracles, oracles_rank_metrics
import tfr_extensions as tfrx
from tfr_extensions.ops import rank_metrics
from tfr_extensions.keras_ops import sorting as k_sorting

METRICS = ("ndcg", "ap", "ap_min", "precision", "nerr")
TOPNS = (None, 3)


def ranks_of(labels, scores, jitter=0.0, seed=0):
    """``(labels with padding 0, fractional ranks, mask, int positions)`` in NumPy: the
    ranks of a stable descending sort (NaN as 0), plus ``jitter * U[0, 1)``, which
    keeps the order."""
    mask = labels >= 0
    keys = np.where(mask, np.nan_to_num(scores, nan=0.0, posinf=0.0, neginf=0.0), -np.inf)
    order = np.argsort(-keys, axis=-1, kind="stable")
    positions = np.empty_like(order)
    np.put_along_axis(positions, order, np.arange(1, labels.shape[1] + 1)[None], axis=-1)
    rng = np.random.default_rng(seed)
    ranks = positions + jitter * rng.random(positions.shape)
    return (np.where(mask, labels, 0.0).astype(np.float32), ranks.astype(np.float32), mask,
            positions.astype(np.int32))


def oracle_of_ranks(metric, labels, ranks, mask, positions, topn):
    """``(values [B], rank gradients [B, L])`` of the oracle, 0 at padding."""
    values, grads = np.zeros(len(labels)), np.zeros(labels.shape)
    for b, (y, r, keep, p) in enumerate(zip(labels, ranks, mask, positions)):
        values[b], grads[b, keep] = oracles_rank_metrics.metric_of_ranks(
            y[keep], r[keep], p[keep], metric, topn)
    return values, grads


def exact_oracle(metric, labels, scores, topn):
    canonical = tfrx.ops.vocabulary.canonical_metric(metric)
    return np.array([oracles.METRIC_ORACLES[canonical](y, s, topn)
                     for y, s in zip(labels, scores)])


# -- rank metrics -------------------------------------------------------------------------

def test_the_oracle_of_ranks_at_exact_ranks_is_the_exact_metric_and_eq_29_33():
    """At integer ranks (= positions, distinct scores) the oracle of ranks equals
    :mod:`support.oracles`' exact metrics and their closed-form rank derivatives."""
    labels, scores = harness.CASES["mixed"]
    for y, s in zip(labels, scores):
        keep = y >= 0
        y, s = y[keep].astype(np.float64), s[keep].astype(np.float64)
        positions = oracles_rank_metrics.positions_of(s)
        for metric in METRICS:
            for topn in (None, 2):
                value, grad = oracles_rank_metrics.metric_of_ranks(y, positions, positions,
                                                                   metric, topn)
                assert value == pytest.approx(oracles.METRIC_ORACLES[metric](y, s, topn),
                                              abs=1e-12)
                np.testing.assert_allclose(grad, oracles.metric_rank_gradient(y, s, metric, topn),
                                           rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("topn", TOPNS)
@pytest.mark.parametrize("metric", METRICS)
def test_metrics_of_ranks_value_and_autodiff_gradient_equal_the_oracle(metric, topn):
    labels, ranks, mask, positions = ranks_of(*harness.merged_cases(), jitter=0.4)
    ours = rank_metrics.rank_metric_function(metric)
    value, grad = harness.value_and_grad(
        lambda y, r, m: ours(y, r, m, topn), labels, ranks, mask)
    want, want_grad = oracle_of_ranks(metric, labels, ranks, mask, positions, topn)
    harness.assert_close(value, want, what="value")
    harness.assert_close(grad, want_grad, what="gradient")
    assert np.any(want_grad != 0) and np.all(grad[~mask] == 0)


def test_value_and_rank_gradient_equal_the_oracle():
    labels, ranks, mask, positions = ranks_of(*harness.merged_cases(), jitter=0.3)
    for metric in METRICS:
        for topn in TOPNS:
            value, rank_grad = rank_metrics.value_and_rank_gradient(
                metric, labels, ranks, mask, topn, positions)
            want, want_grad = oracle_of_ranks(metric, labels, ranks, mask, positions, topn)
            what = f"{metric}@{topn}"
            harness.assert_close(harness.to_numpy(value), want, what=what)
            harness.assert_close(harness.to_numpy(rank_grad), want_grad, what=what)


# One metric per case in its own shape (the grids above run on all cases at once,
# padded to one shape): the rank metric, the exact metric of scores and the sorts.
PER_CASE = [(name, METRICS[i % len(METRICS)], TOPNS[i % 2])
            for i, name in enumerate(sorted(harness.CASES))]


@pytest.mark.parametrize("name,metric,topn", PER_CASE)
def test_every_case_in_its_own_shape(name, metric, topn):
    labels, scores = harness.CASES[name]
    prepared, ranks, mask, positions = ranks_of(labels, scores, jitter=0.3)
    scores = np.nan_to_num(scores, nan=0.0, posinf=np.inf)  # NaN: no order
    finite = np.nan_to_num(scores, posinf=0.0)
    keys = _distinct_tie_keys(scores.shape)
    gains = np.where(mask, np.abs(finite), 0.0).astype(np.float32)

    def ours(prepared, ranks, mask, positions, labels, scores, finite, keys, gains):
        return (*rank_metrics.value_and_rank_gradient(metric, prepared, ranks, mask, topn,
                                                        positions),
                rank_metrics.exact_metric(metric, labels, scores, topn),
                k_sorting.exact_ranks(finite, mask), k_sorting.exact_ranks(finite, mask, keys),
                k_sorting.midranks(finite, mask), k_sorting.sort_descending(gains, mask, topn))

    got = [harness.to_numpy(x) for x in harness.jit(ours)(
        prepared, ranks, mask, positions, labels, scores, finite, keys, gains)]
    want, want_grad = oracle_of_ranks(metric, prepared, ranks, mask, positions, topn)
    harness.assert_close(got[0], want, what="value")
    harness.assert_close(got[1], want_grad, what="rank gradient")
    harness.assert_close(got[2], exact_oracle(metric, labels, scores, topn), what="exact metric")
    _check_sorts(finite, mask, keys, gains, topn, *got[3:])


def test_the_papers_example_values():
    labels = np.array([[0.0, 1.0]], np.float32)
    ranks = np.array([[1.0, 2.0]], np.float32)
    value, grad = rank_metrics.value_and_rank_gradient("precision", labels, ranks, labels >= 0)
    assert float(harness.to_numpy(value)[0]) == 0.5 and harness.to_numpy(grad)[0, 1] == -0.25
    ideal = rank_metrics.ideal_dcg(np.array([[0.0, 1.0, 2.0]], np.float32),
                                     np.array([[True] * 3]))
    harness.assert_close(harness.to_numpy(ideal), [3.0 + 1.0 / np.log2(3.0)])


def test_exact_metrics_of_scores_equal_the_oracles():
    labels, scores = harness.merged_cases()
    scores = np.nan_to_num(scores, nan=0.0, posinf=np.inf)  # NaN: no order
    for alias in ("ndcg", "map", "ap_min", "precision", "nerr"):
        for topn in TOPNS:
            got = rank_metrics.exact_metric(alias, labels, scores, topn)
            harness.assert_close(harness.to_numpy(got), exact_oracle(alias, labels, scores, topn),
                                 what=f"{alias}@{topn}")


def test_names_and_bad_arguments():
    assert rank_metrics.rank_metric_function("map") is rank_metrics.average_precision
    assert set(rank_metrics.RANK_METRICS) == set(tfrx.ops.vocabulary.CANONICAL_METRICS)
    with pytest.raises(ValueError, match="metric"):
        rank_metrics.rank_metric_function("mrr")
    with pytest.raises(ValueError, match="topn"):
        rank_metrics.exact_metric("ndcg", [[1.0]], [[1.0]], topn=0)


# -- sorting ------------------------------------------------------------------------------

def _distinct_tie_keys(shape):
    """Tie keys as :func:`random_tie_keys` gives them: distinct within each list
    (a random permutation of 0..L-1 per list), here from NumPy."""
    rng = np.random.default_rng(1)
    return np.argsort(rng.random(shape), axis=-1).astype(np.int32)


def _check_sorts(scores, mask, keys, gains, topn, positions, keyed_positions, midranks,
                 sorted_gains):
    """The sorts against NumPy and SciPy: positions by descending score (ties to the
    lower index, or to the larger key; padded documents in the last positions),
    midranks (0 at padding), the valid values sorted descending (0 after them)."""
    index = np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
    for got, tie in ((positions, -index), (keyed_positions, keys)):
        order = np.lexsort((index, -tie, -np.where(mask, scores, -np.inf)), axis=-1)
        want = np.argsort(order, axis=-1) + 1
        np.testing.assert_array_equal(np.where(mask, got, 0), np.where(mask, want, 0))
        np.testing.assert_array_equal(np.sort(np.where(mask, 0, got), axis=-1),
                                      np.sort(np.where(mask, 0, want), axis=-1))
    for row, (s, v) in enumerate(zip(scores, mask)):
        np.testing.assert_array_equal(midranks[row][v], scipy.stats.rankdata(-s[v]))
        np.testing.assert_array_equal(midranks[row][~v], 0.0)
        want = np.sort(gains[row][v])[::-1]
        want = np.pad(want, (0, len(s) - len(want)))[:topn]
        np.testing.assert_array_equal(sorted_gains[row], want)


def test_exact_ranks_midranks_and_sorted_values_equal_numpy():
    labels, scores = harness.merged_cases()
    scores = np.nan_to_num(scores, nan=0.0, posinf=0.0)
    mask = labels >= 0
    keys = _distinct_tie_keys(scores.shape)
    gains = np.where(mask, np.abs(scores), 0.0).astype(np.float32)
    for topn in (None, 3):
        _check_sorts(scores, mask, keys, gains, topn,
                     *(harness.to_numpy(x) for x in (
                         k_sorting.exact_ranks(scores, mask),
                         k_sorting.exact_ranks(scores, mask, keys),
                         k_sorting.midranks(scores, mask),
                         k_sorting.sort_descending(gains, mask, topn))))


def test_orders_positions_and_signed_zeros():
    scores = np.array([[0.0, -0.0, 2.0, -1.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0]], np.float32)
    mask = np.array([[True, True, True, True, False], [True] * 5])
    positions = harness.to_numpy(k_sorting.exact_ranks(scores, mask))
    np.testing.assert_array_equal(positions, [[2, 3, 1, 4, 5], [1, 2, 3, 4, 5]])  # -0 ties +0
    keys = np.array([[0, 1, 2, 3, 4], [3, 9, 4, 0, 5]], np.int32)  # distinct in each list
    np.testing.assert_array_equal(harness.to_numpy(k_sorting.exact_ranks(scores, mask, keys)),
                                  [[3, 2, 1, 4, 5], [4, 1, 3, 5, 2]])
    order = k_sorting.order_from_positions(ops.convert_to_tensor(positions))
    np.testing.assert_array_equal(harness.to_numpy(k_sorting.inverse_order(order)), positions)
    np.testing.assert_array_equal(harness.to_numpy(k_sorting.midranks(scores, mask)),
                                  [[2.5, 2.5, 1.0, 4.0, 0.0], [3.0] * 5])


def test_random_tie_keys_are_seeded_and_in_range():
    a = harness.to_numpy(k_sorting.random_tie_keys((3, 50), 7))
    b = harness.to_numpy(k_sorting.random_tie_keys((3, 50), 7))
    c = harness.to_numpy(k_sorting.random_tie_keys((3, 50), (7, 1)))
    np.testing.assert_array_equal(a, b)
    assert a.dtype == np.int32 and a.min() >= 0 and a.max() < 2**31
    assert len(np.unique(a)) == a.size and not np.array_equal(a, c)
    assert a.max() > 2**30  # the high bits are used


# -- RankingMetric on every backend -------------------------------------------------------

def _reference_weights(metric, sample_weight, labels):
    """Per-list weights from a sample weight, by the rules RankingMetric documents
    (per item: TF-Ranking's label-weighted mean over the metric's relevance; a list
    without relevance gets the mean of the others, 1 when none has both)."""
    batch = len(labels)
    if sample_weight is None:
        return np.ones(batch)
    weights = np.asarray(sample_weight, np.float64)
    if weights.ndim == 0:
        return np.full(batch, float(weights))
    if weights.ndim == 1 or weights.shape[1] == 1:
        return weights.reshape(-1)
    valid = labels >= 0
    y = np.maximum(labels, 0.0).astype(np.float64)
    canonical = tfrx.ops.vocabulary.canonical_metric(metric)
    rel = np.where(valid, 2.0 ** y - 1.0 if canonical in ("ndcg", "nerr") else (y > 0), 0.0)
    weights = np.where(valid, weights, 0.0)
    has_weight, has_relevance = weights.sum(1) > 0, rel.sum(1) > 0
    weighted = np.divide((weights * rel).sum(1), rel.sum(1), out=np.zeros(batch),
                         where=has_relevance)
    both = has_weight & has_relevance
    mean = weighted[both].mean() if both.any() else 1.0
    return np.where(has_weight, np.where(has_relevance, weighted, mean), 0.0)


def _expected_result(metric, topn, rule, updates):
    """``RankingMetric``'s mean over ``updates`` (``(labels, scores, sample_weight)``
    each), by its documented rules on the oracle's values."""
    total = count = 0.0
    for labels, scores, sample_weight in updates:
        values = exact_oracle(metric, labels, scores, topn)
        relevant = harness.relevant_lists(labels)
        weights = (labels >= 0).any(-1).astype(np.float64)  # lists of no valid document
        if rule == "exclude":
            weights *= relevant
        elif rule == "one":
            values = np.where(relevant, values, 1.0)
        weights *= _reference_weights(metric, sample_weight, labels)
        total += np.sum(values * weights)
        count += np.sum(weights)
    return total / count


def _weights(kind, labels):
    rng = np.random.default_rng(5)
    batch, size = labels.shape
    return {"none": None, "scalar": np.float32(2.5),
            "list": rng.random(batch).astype(np.float32),
            "list_column": rng.random((batch, 1)).astype(np.float32),
            "item": rng.random((batch, size)).astype(np.float32)}[kind]


WEIGHTS = ["none", "scalar", "list", "list_column", "item"]


@pytest.mark.parametrize("rule", ["zero", "exclude", "one"])
def test_ranking_metric_equals_the_oracle_over_two_updates(rule):
    """Each sample-weight form under each ``no_relevant`` rule (one metric each),
    accumulated over two updates (the mixed and the tied lists)."""
    labels, scores = harness.CASES["mixed"]
    tied_labels, tied_scores = harness.CASES["ties"]
    tied_labels = np.pad(tied_labels, [(0, 0), (0, 1)], constant_values=-1.0)
    tied_scores = np.pad(tied_scores, [(0, 0), (0, 1)])
    for weights in WEIGHTS:
        index = ["zero", "exclude", "one"].index(rule) + WEIGHTS.index(weights)
        metric, topn = (("ndcg", 3), ("map", None), ("ap_min", 3), ("precision", 3),
                        ("nerr", None))[index % 5]
        m = tfrx.metrics.RankingMetric(metric, topn=topn, no_relevant=rule)
        updates = [(labels, scores, _weights(weights, labels)),
                   (tied_labels, tied_scores, _weights(weights, tied_labels))]
        for y, s, w in updates:
            m.update_state(y, s, sample_weight=w)
        harness.assert_close(harness.to_numpy(m.result()),
                             _expected_result(metric, topn, rule, updates),
                             what=f"{metric}@{topn} {weights}")


def test_ranking_metric_takes_keras_rs_dicts_and_float16_scores():
    labels, scores = harness.CASES["mixed"]
    mask = labels >= 0
    m = tfrx.metrics.RankingMetric("ndcg", topn=3)
    half = scores.astype(np.float16)
    m.update_state({"labels": np.where(mask, labels, 7.0), "mask": mask}, half)
    want = _expected_result("ndcg", 3, "zero", [(labels, half.astype(np.float32), None)])
    harness.assert_close(harness.to_numpy(m.result()), want)
