"""The exact metrics (:mod:`tfr_extensions.metrics`) and ``RankingMetric`` on every
Keras 3 backend, with or without TensorFlow, against the independent NumPy oracles of
:mod:`support.oracles`: every metric name of the vocabulary (aliases too), cutoffs,
ties, padding, the three ``no_relevant`` rules, per-list and per-item sample weights,
keras-rs's dict labels, configs, and ``model.evaluate`` (compiled on JAX).

Imports numpy, keras, pytest, tfr_extensions and ``support`` only.
"""
import json

import numpy as np
import pytest

from tfr_extensions import backend

if not backend.IS_KERAS_3:
    pytest.skip("Keras 2: the metrics compute with TensorFlow's ops there (tests/test_metrics.py);"
                " this suite is Keras 3's, on each of its backends", allow_module_level=True)

import keras  # noqa: E402

import tfr_extensions as tfrx  # noqa: E402
from tfr_extensions.ops import vocabulary  # noqa: E402
from support import oracles  # noqa: E402

LABELS = np.array([
    [2.0, 0.0, 1.0, 0.0, 3.0, -1.0, -1.0, -1.0],   # padded tail
    [0.0, 0.0, 0.0, -1.0, 0.0, 0.0, -1.0, -1.0],   # no relevant document
    [1.0, 0.0, -1.0, 2.5, 0.0, 1.0, 0.0, 4.0],     # padding inside, a fractional label
    [-1.0] * 8,                                    # no valid document
    [0.0, 1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0],
    [3.0, 3.0, 0.0, 1.0, 0.0, 2.0, 1.0, 0.0],      # ties of labels and of scores below
], np.float32)
SCORES = np.random.default_rng(0).normal(size=LABELS.shape).astype(np.float32)
SCORES[5, [1, 3, 4]] = SCORES[5, 0]  # tied scores: the lower index ranks first
SCORES[2, 2] = 100.0  # a padded document with the highest score: ranked last anyway
VALID = LABELS >= 0
RELEVANT = np.any(LABELS > 0, axis=1)
TOPNS = (None, 1, 3, 20)
#: each canonical metric's function of tfr_extensions.metrics
FUNCTIONS = tfrx.metrics.METRIC_FUNCTIONS


def to_numpy(x):
    return np.asarray(tfrx.metrics.to_numpy(x), np.float64)


def oracle_values(metric, labels=LABELS, scores=SCORES, topn=None):
    oracle = oracles.METRIC_ORACLES[vocabulary.canonical_metric(metric)]
    return np.array([oracle(y, s, topn) for y, s in zip(labels, scores)])


def relevance(metric, labels):
    """What weighs a per-item sample weight into a list's weight (the metric's own
    relevance): the gain for nDCG and nERR, label > 0 for AP and Precision."""
    y = np.maximum(labels, 0.0).astype(np.float64)
    return 2.0 ** y - 1.0 if vocabulary.canonical_metric(metric) in ("ndcg", "nerr") else \
        (y > 0).astype(np.float64)


def reference_weights(metric, sample_weight, labels=LABELS):
    """Per-list weights from a sample weight, by the rules RankingMetric documents."""
    batch = len(labels)
    if sample_weight is None:
        return np.ones(batch)
    weights = np.asarray(sample_weight, np.float64)
    if weights.ndim == 0:
        return np.full(batch, float(weights))
    if weights.ndim == 1 or weights.shape[1] == 1:
        return weights.reshape(-1)
    valid = labels >= 0
    rel = np.where(valid, relevance(metric, labels), 0.0)
    weights = np.where(valid, weights, 0.0)
    has_weight, has_relevance = weights.sum(1) > 0, rel.sum(1) > 0
    weighted = np.divide((weights * rel).sum(1), rel.sum(1), out=np.zeros(batch),
                         where=has_relevance)
    both = has_weight & has_relevance
    mean = weighted[both].mean() if both.any() else 1.0
    return np.where(has_weight, np.where(has_relevance, weighted, mean), 0.0)


def reference_result(metric, topn, no_relevant="zero", sample_weight=None, labels=LABELS,
                     scores=SCORES):
    """RankingMetric's mean by its documented rules, on the oracle's values."""
    values = oracle_values(metric, labels, scores, topn)
    valid, relevant = labels >= 0, np.any(labels > 0, axis=1)
    weights = valid.any(axis=1).astype(np.float64)  # lists with no valid document: skipped
    if no_relevant == "exclude":
        weights = weights * relevant
    elif no_relevant == "one":
        values = np.where(relevant, values, 1.0)
    weights = weights * reference_weights(metric, sample_weight, labels)
    return np.sum(values * weights) / np.sum(weights)


def result(metric, topn=None, no_relevant="zero", sample_weight=None, y_true=LABELS,
           scores=SCORES):
    m = tfrx.metrics.RankingMetric(metric, topn=topn, no_relevant=no_relevant)
    m.update_state(y_true, scores, sample_weight=sample_weight)
    return float(keras.ops.convert_to_numpy(m.result()))


# --- the exact per-list metrics -----------------------------------------------------------

@pytest.mark.parametrize("metric", vocabulary.CANONICAL_METRICS)
def test_exact_metrics_equal_the_oracles(metric):
    assert set(FUNCTIONS) == set(vocabulary.CANONICAL_METRICS)
    for topn in TOPNS:
        values = to_numpy(FUNCTIONS[metric](LABELS, SCORES, topn=topn))
        np.testing.assert_allclose(values, oracle_values(metric, topn=topn), rtol=1e-6,
                                   atol=1e-7, err_msg=f"{metric}@{topn}")
        assert np.all(values[~RELEVANT] == 0)
    perfect = np.where(VALID, LABELS, -np.inf)  # scores in label order: the ideal ranking
    ideal = to_numpy(FUNCTIONS[metric](LABELS, perfect.astype(np.float32), topn=3))
    np.testing.assert_allclose(ideal, oracle_values(metric, scores=perfect, topn=3), atol=1e-7)


@pytest.mark.parametrize("name", vocabulary.METRIC_NAMES)
def test_every_name_of_the_vocabulary_means_its_metric(name):
    function = tfrx.metrics.metric_function(name)
    assert function is FUNCTIONS[vocabulary.canonical_metric(name)]
    np.testing.assert_allclose(to_numpy(function(LABELS, SCORES, topn=3)),
                               oracle_values(name, topn=3), rtol=1e-6, atol=1e-7)


def test_mask_narrows_validity_and_has_relevant():
    mask = np.ones(LABELS.shape, bool)
    mask[0, 4] = mask[5, :2] = False  # the best documents of two lists
    padded = np.where(mask, LABELS, -1.0).astype(np.float32)
    for metric, function in FUNCTIONS.items():
        np.testing.assert_allclose(to_numpy(function(LABELS, SCORES, topn=5, mask=mask)),
                                   oracle_values(metric, padded, topn=5), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(to_numpy(tfrx.metrics.has_relevant(LABELS)), RELEVANT)
    np.testing.assert_array_equal(
        to_numpy(tfrx.metrics.has_relevant(LABELS, mask=np.arange(8) < 2)),
        np.any((LABELS > 0)[:, :2], axis=1))


def test_per_item_weights_become_list_weights_by_the_label_weighted_rule():
    weights = np.random.default_rng(1).uniform(0.5, 2.0, LABELS.shape).astype(np.float32)
    weights[4] = 0.0  # a list whose weights sum to 0
    for metric in ("ndcg", "precision"):
        rel = relevance(metric, LABELS).astype(np.float32)
        actual = to_numpy(tfrx.metrics.per_list_weights(weights, rel, VALID))
        np.testing.assert_allclose(actual, reference_weights(metric, weights), rtol=1e-6)
    # no list with both relevance and weight: the lists without relevance get 1
    lone = to_numpy(tfrx.metrics.per_list_weights(np.ones([2, 2], np.float32),
                                                  np.zeros([2, 2], np.float32),
                                                  np.ones([2, 2], bool)))
    np.testing.assert_array_equal(lone, [1.0, 1.0])


# --- RankingMetric -------------------------------------------------------------------------

@pytest.mark.parametrize("metric", vocabulary.CANONICAL_METRICS)
@pytest.mark.parametrize("no_relevant", tfrx.metrics.NO_RELEVANT_RULES)
def test_ranking_metric_follows_its_no_relevant_rule(metric, no_relevant):
    for topn in (None, 3):
        expected = reference_result(metric, topn, no_relevant)
        assert result(metric, topn, no_relevant) == pytest.approx(expected, rel=1e-6, abs=1e-7)
    # the three rules differ on this batch
    assert len({round(reference_result(metric, 3, rule), 6)
                for rule in tfrx.metrics.NO_RELEVANT_RULES}) == 3


@pytest.mark.parametrize("alias", [name for name in vocabulary.METRIC_NAMES
                                   if name not in vocabulary.CANONICAL_METRICS])
def test_ranking_metric_takes_every_alias(alias):
    m = tfrx.metrics.RankingMetric(alias, topn=3)
    assert m.name == f"{alias}_3"
    m.update_state(LABELS, SCORES)
    assert float(keras.ops.convert_to_numpy(m.result())) == pytest.approx(
        reference_result(vocabulary.canonical_metric(alias), 3), rel=1e-6, abs=1e-7)


@pytest.mark.parametrize("metric", vocabulary.CANONICAL_METRICS)
def test_ranking_metric_sample_weights(metric):
    rng = np.random.default_rng(2)
    per_list = rng.uniform(0.5, 3.0, len(LABELS)).astype(np.float32)
    per_item = rng.uniform(0.5, 2.0, LABELS.shape).astype(np.float32)
    per_item[4] = 0.0
    for weight, no_relevant in ((np.float32(2.5), "zero"), (per_list, "exclude"),
                                (per_list[:, None], "zero"), (per_item, "zero"),
                                (per_item, "exclude")):
        expected = reference_result(metric, 5, no_relevant, weight)
        assert result(metric, 5, no_relevant, weight) == pytest.approx(
            expected, rel=1e-6, abs=1e-7), (np.shape(weight), no_relevant)
    # per-item weights that differ only inside a list's relevance change its weight
    uniform = reference_result(metric, 5, "zero", np.ones(LABELS.shape))
    assert result(metric, 5, "zero", per_item) != pytest.approx(uniform)


def test_ranking_metric_accumulates_over_updates_and_resets():
    m = tfrx.metrics.RankingMetric("ndcg", topn=3, no_relevant="exclude")
    m.update_state(LABELS[:3], SCORES[:3])
    m.update_state(LABELS[3:], SCORES[3:])
    assert float(keras.ops.convert_to_numpy(m.result())) == pytest.approx(
        reference_result("ndcg", 3, "exclude"), rel=1e-6)
    m.reset_state()
    m.update_state(LABELS[:1], SCORES[:1])
    assert float(keras.ops.convert_to_numpy(m.result())) == pytest.approx(
        oracles.ndcg(LABELS[0], SCORES[0], 3), rel=1e-6)


def test_ranking_metric_takes_keras_rs_dict_labels_and_float16_scores():
    y_true = {"labels": np.where(VALID, LABELS, 1.0).astype(np.float32), "mask": VALID}
    for metric in vocabulary.CANONICAL_METRICS:
        assert result(metric, 3, "exclude", y_true=y_true) == pytest.approx(
            reference_result(metric, 3, "exclude"), rel=1e-6)
    half = SCORES.astype(np.float16)
    assert result("nerr", 5, scores=half) == pytest.approx(
        reference_result("nerr", 5, scores=half.astype(np.float32)), rel=1e-6)


def test_ranking_metric_names_and_config_round_trip():
    assert tfrx.metrics.RankingMetric("map", topn=10).name == "map_10"
    assert tfrx.metrics.RankingMetric("ndcg").name == "ndcg"
    assert tfrx.metrics.RankingMetric("p", 5, no_relevant="one").name == "p_5_one"
    m = tfrx.metrics.RankingMetric("ap_min", topn=4, name="mine", no_relevant="exclude")
    config = json.loads(json.dumps(m.get_config()))
    again = tfrx.metrics.RankingMetric.from_config(config)
    assert again.get_config() == m.get_config() and again.name == "mine"
    again.update_state(LABELS, SCORES)
    assert float(keras.ops.convert_to_numpy(again.result())) == pytest.approx(
        reference_result("ap_min", 4, "exclude"), rel=1e-6)
    restored = keras.metrics.deserialize(json.loads(json.dumps(keras.metrics.serialize(m))))
    assert type(restored) is tfrx.metrics.RankingMetric
    assert restored.get_config() == m.get_config()
    with pytest.raises(ValueError, match="metric"):
        tfrx.metrics.RankingMetric("mrr")
    with pytest.raises(ValueError, match="no_relevant"):
        tfrx.metrics.RankingMetric("ndcg", no_relevant="drop")


def test_ranking_metrics_in_model_evaluate_equal_the_oracles():
    """Compiled (JAX's jitted test step, TensorFlow's graph) and per batch of 2 lists:
    the means over all lists are the oracles'."""
    features = SCORES[..., None]  # a model that scores a document by its one feature
    model = keras.Sequential([keras.Input((8, 1)),
                              keras.layers.Dense(1, kernel_initializer="ones",
                                                 bias_initializer="zeros"),
                              keras.layers.Reshape((8,))])
    metrics = [tfrx.metrics.RankingMetric(name, topn=topn, no_relevant=rule)
               for name, topn, rule in (("ndcg", 5, "zero"), ("map", None, "exclude"),
                                        ("nerr", 3, "one"), ("p", 2, "zero"))]
    model.compile(loss=tfrx.losses.get("listnet"), metrics=metrics)
    logs = model.evaluate(features, LABELS, batch_size=6, verbose=0, return_dict=True)
    for m in metrics:
        config = m.get_config()
        assert logs[m.name] == pytest.approx(
            reference_result(config["metric"], config["topn"], config["no_relevant"]),
            rel=1e-5), m.name
