"""``keras_ops.sorting`` and ``keras_ops.rank_metrics`` against their TensorFlow
twins (``tfr_extensions.ops.sorting``, ``tfr_extensions.ops.rank_metrics``,
``tfr_extensions.metrics``) on the shared cases, and ``tfrx.metrics.RankingMetric``
on every Keras 3 backend against its TensorFlow result."""
import numpy as np
import pytest
import tensorflow as tf

import keras
from keras import ops

import harness
import tfr_extensions as tfrx
from tfr_extensions.keras_ops import list_metrics as k_list_metrics
from tfr_extensions.keras_ops import rank_metrics as k_rank_metrics
from tfr_extensions.keras_ops import sorting as k_sorting
from tfr_extensions.ops import list_metrics as tf_list_metrics
from tfr_extensions.ops import rank_metrics as tf_rank_metrics
from tfr_extensions.ops import sorting as tf_sorting

METRICS = ("ndcg", "ap", "ap_min", "precision", "nerr")
TOPNS = (None, 3)


def merged_cases():
    """Every shared case in one batch, padded (label -1, score 0) to the longest list."""
    parts = list(harness.cases())
    size = max(labels.shape[1] for _, labels, _ in parts)
    labels = np.concatenate([np.pad(y, [(0, 0), (0, size - y.shape[1])], constant_values=-1.0)
                             for _, y, _ in parts])
    scores = np.concatenate([np.pad(s, [(0, 0), (0, size - s.shape[1])]) for _, _, s in parts])
    return labels, scores


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


# -- rank metrics -------------------------------------------------------------------------

@pytest.mark.parametrize("topn", TOPNS)
@pytest.mark.parametrize("metric", METRICS)
def test_metrics_of_ranks_value_and_autodiff_gradient_equal_tf(metric, topn):
    labels, ranks, mask, _ = ranks_of(*merged_cases(), jitter=0.4)
    ours = k_rank_metrics.rank_metric_function(metric)
    theirs = tf_rank_metrics.rank_metric_function(metric)
    value, grad = harness.value_and_grad(
        lambda y, r, m: ours(y, r, m, topn), labels, ranks, mask)
    want_value, want_grad = harness.tf_value_and_grad(
        lambda y, r, m: theirs(y, r, m, topn), labels, ranks, mask)
    harness.assert_close(value, want_value, what="value")
    harness.assert_close(grad, want_grad, what="gradient")
    assert np.any(want_grad != 0)


def _check_value_and_rank_gradient(labels, ranks, mask, positions, metric, topn, what):
    value, rank_grad = k_rank_metrics.value_and_rank_gradient(
        metric, labels, ranks, mask, topn, positions)
    want_value, want_grad = tf_rank_metrics.value_and_rank_gradient(
        metric, tf.constant(labels), tf.constant(ranks), tf.constant(mask), topn,
        tf.constant(positions))
    what = f"{what} {metric}@{topn}"
    harness.assert_close(harness.to_numpy(value), want_value.numpy(), what=what)
    harness.assert_close(harness.to_numpy(rank_grad), want_grad.numpy(), what=what)


def test_value_and_rank_gradient_equal_tf():
    labels, ranks, mask, positions = ranks_of(*merged_cases(), jitter=0.3)
    for metric in METRICS:
        for topn in TOPNS:
            _check_value_and_rank_gradient(labels, ranks, mask, positions, metric, topn, "all")


def compiled(fn):
    """``fn`` as one program on JAX (``jax.jit``: its eager ops compile one by one
    per shape, slower for a single call), as is elsewhere."""
    if harness.BACKEND == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        return jax.jit(fn)
    return fn


# One metric per case in its own shape (the grids above run on all cases at once,
# padded to one shape): the rank metric, the exact metric of scores and the sorts.
PER_CASE = [(name, METRICS[i % len(METRICS)], TOPNS[i % 2])
            for i, name in enumerate(sorted(harness.CASES))]


@pytest.mark.parametrize("name,metric,topn", PER_CASE)
def test_every_case_in_its_own_shape(name, metric, topn):
    labels, scores = harness.CASES[name]
    prepared, ranks, mask, positions = ranks_of(labels, scores, jitter=0.3)
    scores = np.nan_to_num(scores, nan=0.0, posinf=np.inf)  # NaN: no order, in TF neither
    finite = np.nan_to_num(scores, posinf=0.0)
    keys = _distinct_tie_keys(scores.shape)
    gains = np.where(mask, np.abs(finite), 0.0).astype(np.float32)

    def ours(prepared, ranks, mask, positions, labels, scores, finite, keys, gains):
        return (*k_rank_metrics.value_and_rank_gradient(metric, prepared, ranks, mask, topn,
                                                        positions),
                k_rank_metrics.exact_metric_function(metric)(labels, scores, topn),
                k_sorting.exact_ranks(finite, mask), k_sorting.exact_ranks(finite, mask, keys),
                k_sorting.midranks(finite, mask), k_sorting.sort_descending(gains, mask, topn))

    got = [harness.to_numpy(x) for x in compiled(ours)(
        prepared, ranks, mask, positions, labels, scores, finite, keys, gains)]
    t = tf.constant
    want = (*tf_rank_metrics.value_and_rank_gradient(metric, t(prepared), t(ranks), t(mask), topn,
                                                     t(positions)),
            tf_list_metrics.exact_metric(metric, labels, scores, topn),
            tf_sorting.exact_ranks(t(finite), t(mask)),
            tf_sorting.exact_ranks(t(finite), t(mask), t(keys)),
            tf_sorting.midranks(t(finite), t(mask)),
            tf_sorting.sort_descending(t(gains), t(mask), topn))
    for what, a, b in zip(["value", "rank gradient", "exact metric"], got, want):
        harness.assert_close(a, b.numpy(), what=what)
    for what, a, b in zip(["ranks", "ranks by keys"], got[3:5], want[3:5]):  # valid only
        np.testing.assert_array_equal(np.where(mask, a, 0), np.where(mask, b.numpy(), 0), what)
    for what, a, b in zip(["midranks", "sorted"], got[5:], want[5:]):
        np.testing.assert_array_equal(a, b.numpy(), what)


def test_the_papers_example_values():
    labels = np.array([[0.0, 1.0]], np.float32)
    ranks = np.array([[1.0, 2.0]], np.float32)
    value, grad = k_rank_metrics.value_and_rank_gradient("precision", labels, ranks, labels >= 0)
    assert float(harness.to_numpy(value)[0]) == 0.5 and harness.to_numpy(grad)[0, 1] == -0.25
    ideal = k_rank_metrics.ideal_dcg(np.array([[0.0, 1.0, 2.0]], np.float32),
                                     np.array([[True] * 3]))
    harness.assert_close(harness.to_numpy(ideal), [3.0 + 1.0 / np.log2(3.0)])


def test_exact_metrics_of_scores_equal_tfrx_metrics():
    labels, scores = merged_cases()
    scores = np.nan_to_num(scores, nan=0.0, posinf=np.inf)  # NaN: no order, in TF neither
    for alias in ("ndcg", "map", "ap_min", "precision", "nerr"):
        for topn in TOPNS:
            got = k_rank_metrics.exact_metric_function(alias)(labels, scores, topn)
            want = tf_list_metrics.exact_metric(alias, labels, scores, topn)
            harness.assert_close(harness.to_numpy(got), want.numpy(), what=f"{alias}@{topn}")


def test_names_and_bad_arguments():
    assert k_rank_metrics.rank_metric_function("map") is k_rank_metrics.average_precision
    assert set(k_rank_metrics.RANK_METRICS) == set(tfrx.ops.vocabulary.CANONICAL_METRICS)
    with pytest.raises(ValueError, match="metric"):
        k_rank_metrics.rank_metric_function("mrr")
    with pytest.raises(ValueError, match="topn"):
        k_rank_metrics.exact_metric("ndcg", [[1.0]], [[1.0]], topn=0)


# -- sorting ------------------------------------------------------------------------------

def _distinct_tie_keys(shape):
    """Tie keys as :func:`random_tie_keys` gives them: distinct within each list
    (a random permutation of 0..L-1 per list), here from NumPy."""
    rng = np.random.default_rng(1)
    return np.argsort(rng.random(shape), axis=-1).astype(np.int32)


def test_exact_ranks_midranks_and_sorted_values_equal_tf():
    labels, scores = merged_cases()
    scores = np.nan_to_num(scores, nan=0.0, posinf=0.0)
    mask = labels >= 0
    keys = _distinct_tie_keys(scores.shape)
    keep = lambda x: np.where(mask, harness.to_numpy(x), 0)  # padded positions: unspecified
    tf_mask = tf.constant(mask)
    np.testing.assert_array_equal(keep(k_sorting.exact_ranks(scores, mask)),
                                  keep(tf_sorting.exact_ranks(tf.constant(scores), tf_mask)))
    np.testing.assert_array_equal(
        keep(k_sorting.exact_ranks(scores, mask, keys)),
        keep(tf_sorting.exact_ranks(tf.constant(scores), tf_mask, tf.constant(keys))))
    np.testing.assert_array_equal(harness.to_numpy(k_sorting.midranks(scores, mask)),
                                  tf_sorting.midranks(tf.constant(scores), tf_mask).numpy())
    gains = np.where(mask, np.abs(scores), 0.0).astype(np.float32)
    for topn in (None, 3):
        np.testing.assert_array_equal(
            harness.to_numpy(k_sorting.sort_descending(gains, mask, topn)),
            tf_sorting.sort_descending(tf.constant(gains), tf_mask, topn).numpy())


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

def _tf_expected(metric, topn, rule, updates):
    """``RankingMetric``'s mean over ``updates`` (``(labels, scores, sample_weight)``
    each), from the TensorFlow functions."""
    total = count = 0.0
    for labels, scores, sample_weight in updates:
        values = tf_list_metrics.exact_metric(metric, labels, scores, topn).numpy()
        values = values.astype(np.float64)
        valid = labels >= 0
        weights = valid.any(-1).astype(np.float64)
        relevant = tf_list_metrics.has_relevant(labels).numpy()
        if rule == "exclude":
            weights *= relevant
        elif rule == "one":
            values = np.where(relevant, values, 1.0)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, np.float32)
            if sample_weight.ndim == 2 and sample_weight.shape[1] == labels.shape[1]:
                canonical = tfrx.ops.vocabulary.canonical_metric(metric)
                relevance = (2.0 ** np.maximum(labels, 0) - 1 if canonical in ("ndcg", "nerr")
                             else (labels > 0).astype(np.float32))
                sample_weight = tf_list_metrics.per_list_weights(  # per update: batch-dependent
                    tf.constant(sample_weight), tf.constant(relevance, tf.float32),
                    tf.constant(valid)).numpy()
            weights *= np.reshape(sample_weight, (-1,)) if sample_weight.ndim else sample_weight
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


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("rule", ["zero", "exclude", "one"])
def test_ranking_metric_equals_its_tensorflow_result(rule, weights):
    labels, scores = harness.CASES["mixed"]
    tied_labels, tied_scores = harness.CASES["ties"]
    tied_labels = np.pad(tied_labels, [(0, 0), (0, 1)], constant_values=-1.0)
    tied_scores = np.pad(tied_scores, [(0, 0), (0, 1)])
    index = ["zero", "exclude", "one"].index(rule) + WEIGHTS.index(weights)
    for metric, topn in [(("ndcg", 3), ("map", None), ("ap_min", 3), ("precision", 3),
                          ("nerr", None))[index % 5]]:  # one metric each (JAX compiles per op)
        m = tfrx.metrics.RankingMetric(metric, topn=topn, no_relevant=rule)
        updates = [(labels, scores, _weights(weights, labels)),
                   (tied_labels, tied_scores, _weights(weights, tied_labels))]
        for y, s, w in updates:
            m.update_state(y, s, sample_weight=w)
        want = _tf_expected(metric, topn, rule, updates)
        harness.assert_close(harness.to_numpy(m.result()), want, what=f"{metric}@{topn}")


def test_ranking_metric_takes_keras_rs_dicts_and_float16_scores():
    labels, scores = harness.CASES["mixed"]
    mask = labels >= 0
    m = tfrx.metrics.RankingMetric("ndcg", topn=3)
    m.update_state({"labels": np.where(mask, labels, 7.0), "mask": mask},
                   scores.astype(np.float16))
    want = _tf_expected("ndcg", 3, "zero", [(labels, scores.astype(np.float16), None)])
    harness.assert_close(harness.to_numpy(m.result()), want)


@pytest.mark.skipif(harness.BACKEND != "tensorflow", reason="compares the two paths directly")
def test_keras_ops_path_equals_the_tensorflow_path_on_the_tensorflow_backend():
    labels, scores = merged_cases()
    scores = np.nan_to_num(scores, nan=0.0, posinf=0.0)
    for rule in ("zero", "exclude", "one"):
        for weights in ("none", "item", "list"):
            sample_weight = _weights(weights, labels)
            tf_metric = tfrx.metrics.RankingMetric("nerr", topn=3, no_relevant=rule)
            neutral = tfrx.metrics.RankingMetric("nerr", topn=3, no_relevant=rule)
            tf_metric.update_state(labels, scores, sample_weight=sample_weight)
            values, list_weights = k_list_metrics.metric_values_and_weights(
                "nerr", labels, scores, 3, rule, sample_weight)  # the keras.ops path
            keras.metrics.Mean.update_state(neutral, values, sample_weight=list_weights)
            harness.assert_close(harness.to_numpy(neutral.result()),
                                 harness.to_numpy(tf_metric.result()), what=rule + weights)
