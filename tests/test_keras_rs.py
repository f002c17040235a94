"""keras-rs interoperability (issue 21): its ``{"labels", "mask"}`` inputs, its metrics
beside our losses in one ``fit``, and ``RankingMetric`` against its NDCG, MAP and
Precision@k.

Where the two differ (``RankingMetric``'s docstring lists it) the tests pin each side
against an independent NumPy computation instead: a per-list ``sample_weight`` of a
list without relevant documents, item weights inside NDCG and MAP, and ties (keras-rs
0.4 shuffles them whatever ``shuffle_ties`` says). The dict inputs are tested on every
stack; the rest needs keras-rs (the keras3 stack).
"""
import numpy as np
import pytest
import tensorflow as tf

from support import oracles
import tfr_extensions as tfrx
from tfr_extensions import backend
from tfr_extensions.backend import keras

try:
    import keras_rs
except ImportError:  # Keras 2 stacks: keras-rs needs Keras 3
    keras_rs = None

needs_keras_rs = pytest.mark.skipif(keras_rs is None or not backend.IS_KERAS_3,
                                    reason="needs keras-rs (Keras 3 stack)")

#: ``RankingMetric`` name -> keras-rs class
KERAS_RS = {"ndcg": "NDCG", "ap": "MeanAveragePrecision", "precision": "PrecisionAtK"}
#: the per-list value of each metric, by the independent NumPy oracles (distinct scores)
ORACLES = {"ndcg": oracles.ndcg, "ap": oracles.average_precision,
           "precision": oracles.precision}
TOLERANCE = 1e-6


def random_lists(batch=12, list_size=8, seed=0):
    """Integer labels 0..4 with padding (-1, also in the middle of a list), a list
    without a relevant document and a fully padded list; distinct scores."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, size=(batch, list_size)).astype(np.float32)
    labels[rng.uniform(size=labels.shape) < 0.2] = -1.0
    labels[:, 0] = np.maximum(labels[:, 0], 1.0)  # a relevant document in every list ...
    labels[1] = np.where(labels[1] >= 0, 0.0, -1.0)  # ... but list 1
    labels[2] = -1.0  # fully padded
    scores = rng.permutation(batch * list_size).reshape(batch, list_size).astype(np.float32)
    scores = scores / (batch * list_size) + rng.normal(size=scores.shape).astype(np.float32)
    return labels, scores


def keras_rs_metric(name, k):
    return getattr(keras_rs.metrics, KERAS_RS[name])(k=k, shuffle_ties=False, seed=0)


def ours_and_theirs(name, k, labels, scores, sample_weight=None, y_true=None):
    ours = tfrx.metrics.RankingMetric(name, topn=k)
    theirs = keras_rs_metric(name, k)
    y_true = labels if y_true is None else y_true
    ours.update_state(y_true, scores, sample_weight=sample_weight)
    theirs.update_state(y_true, scores, sample_weight=sample_weight)
    return float(ours.result()), float(theirs.result())


def weighted_mean(values, weights):
    return float(np.sum(np.asarray(values) * weights) / np.sum(weights))


def tf_ranking_list_weights(weights, relevance):
    """TF-Ranking's ``_per_example_weights_to_per_list_weights`` (metrics_impl.py), in
    NumPy with loops: sum(w rel) / sum(rel) per list; a list without relevance but with
    weight gets the mean of that over the lists that have both (1 if none); a list
    whose weights sum to 0 gets 0."""
    weights, relevance = np.asarray(weights, np.float64), np.asarray(relevance, np.float64)
    per_list, both = [], []
    for w, r in zip(weights, relevance):
        per_list.append(np.sum(w * r) / np.sum(r) if np.sum(r) > 0 else 0.0)
        both.append(np.sum(w) > 0 and np.sum(r) > 0)
    default = np.sum(per_list) / np.sum(both) if np.any(both) else 1.0
    return np.array([0.0 if np.sum(w) <= 0 else (p if np.sum(r) > 0 else default)
                     for w, r, p in zip(weights, relevance, per_list)])


def relevance(name, labels):
    """What weighs items into a list: the gain for nDCG, label > 0 for AP and Precision."""
    valid = labels >= 0
    if name == "ndcg":
        return np.where(valid, 2.0 ** np.maximum(labels, 0) - 1.0, 0.0)
    return np.where(valid, (labels > 0).astype(np.float64), 0.0)


def oracle_values(name, k, labels, scores):
    return np.array([ORACLES[name](y, s, k) for y, s in zip(labels, scores)])


# -- keras-rs's {"labels", "mask"} -------------------------------------------------------

@pytest.mark.parametrize("name,options", [
    ("twin_ndcg_type3", dict(topn=4)), ("softndcg", {}), ("ranknet", {}),
    ("expected_utility", dict(seed=3, num_samples=2)), ("mdprank", dict(seed=4))])
def test_losses_take_the_keras_rs_dict(name, options):
    """``{"labels", "mask"}`` = the labels with masked documents set to -1, also with
    per-item weights and for the gradient; the mask really masks (a loss without it
    differs)."""
    labels, scores = random_lists(batch=6, seed=1)
    labels = np.where(labels < 0, 0.0, labels).astype(np.float32)  # only the mask pads
    mask = np.random.default_rng(2).uniform(size=labels.shape) > 0.3
    mask[:, 0] = True
    padded = np.where(mask, labels, -1.0).astype(np.float32)
    weights = np.random.default_rng(3).uniform(0.5, 2.0, size=labels.shape).astype(np.float32)
    scores = tf.constant(scores)

    def value_and_gradient(y_true):
        loss = tfrx.losses.get(name, **options)  # a new instance: the same seeded draws
        with tf.GradientTape() as tape:
            tape.watch(scores)
            value = loss(y_true, scores, sample_weight=weights)
        return float(value), tape.gradient(value, scores).numpy()

    value, gradient = value_and_gradient({"labels": labels, "mask": mask})
    expected, expected_gradient = value_and_gradient(padded)
    assert value == pytest.approx(expected, rel=1e-6, abs=1e-7)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-5, atol=1e-7)
    assert np.all(gradient[~mask] == 0.0)
    assert value_and_gradient(labels)[0] != pytest.approx(expected, rel=1e-4)


def test_ranking_metric_takes_the_keras_rs_dict():
    labels, scores = random_lists(seed=4)
    mask = np.random.default_rng(5).uniform(size=labels.shape) > 0.25
    for name in ("ndcg", "ap", "nerr"):
        with_dict = tfrx.metrics.RankingMetric(name, topn=3)
        with_dict.update_state({"labels": labels, "mask": mask}, scores)
        padded = tfrx.metrics.RankingMetric(name, topn=3)
        padded.update_state(np.where(mask, labels, -1.0), scores)
        assert float(with_dict.result()) == pytest.approx(float(padded.result()), abs=1e-7)
        unmasked = tfrx.metrics.RankingMetric(name, topn=3)
        unmasked.update_state(labels, scores)
        assert float(unmasked.result()) != pytest.approx(float(padded.result()), abs=1e-4)


# -- one fit with our loss and keras-rs's metrics ------------------------------------------

@needs_keras_rs
def test_fit_with_our_loss_and_keras_rs_metrics():
    data = tfrx.data.synthetic(num_queries=64, num_features=6, seed=0, list_size=(4, 10))
    train = tfrx.data.ranking_dataset(data, list_size=10, batch_size=16, seed=0)
    keras.utils.set_random_seed(0)
    model = tfrx.models.scorer("R2.L", 6, hidden_units=16)
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=tfrx.losses.get("twin_ndcg_type3", seed=1),
                  metrics=[keras_rs.metrics.NDCG(k=5, name="rs_ndcg"),
                           keras_rs.metrics.MeanAveragePrecision(k=5, name="rs_map"),
                           tfrx.metrics.RankingMetric("ndcg", topn=5),
                           tfrx.metrics.RankingMetric("ap", topn=5)])
    history = model.fit(train, epochs=4, verbose=0).history
    for key in ("rs_ndcg", "rs_map", "loss"):
        assert np.all(np.isfinite(history[key])), key
    assert history["rs_ndcg"][-1] > history["rs_ndcg"][0] + 0.05, history["rs_ndcg"]
    assert history["rs_map"][-1] > history["rs_map"][0] + 0.05, history["rs_map"]
    assert history["loss"][-1] < history["loss"][0]
    # and they are our metrics' numbers (float scores from a model do not tie)
    np.testing.assert_allclose(history["rs_ndcg"], history["ndcg_5"], atol=TOLERANCE)
    np.testing.assert_allclose(history["rs_map"], history["ap_5"], atol=TOLERANCE)


# -- RankingMetric = keras-rs's metrics ------------------------------------------------------

@needs_keras_rs
@pytest.mark.parametrize("name", sorted(KERAS_RS))
@pytest.mark.parametrize("k", [1, 3, 5, None])
def test_ranking_metric_equals_keras_rs(name, k):
    labels, scores = random_lists()
    # the oracle first: both are the mean over the lists with a valid document
    expected = np.mean(oracle_values(name, k, labels, scores)[np.any(labels >= 0, axis=1)])
    ours, theirs = ours_and_theirs(name, k, labels, scores)
    assert ours == pytest.approx(expected, abs=TOLERANCE)
    assert theirs == pytest.approx(expected, abs=TOLERANCE)
    # the mask of the dict, a scalar weight
    mask = np.random.default_rng(6).uniform(size=labels.shape) > 0.2
    ours, theirs = ours_and_theirs(name, k, labels, scores,
                                   y_true={"labels": labels, "mask": mask})
    assert ours == pytest.approx(theirs, abs=TOLERANCE)
    assert ours_and_theirs(name, k, labels, scores, sample_weight=2.5) == pytest.approx(
        (expected, expected), abs=TOLERANCE)
    # ties between documents of equal labels change nothing
    tied = scores.copy()
    tied[:, 1] = np.where(labels[:, 1] == labels[:, 0], tied[:, 0], tied[:, 1])
    assert np.sum((tied[:, 1] == tied[:, 0]) & (labels[:, 0] >= 0)) >= 2
    ours, theirs = ours_and_theirs(name, k, labels, tied)
    assert ours == pytest.approx(theirs, abs=TOLERANCE)


@needs_keras_rs
@pytest.mark.parametrize("name", sorted(KERAS_RS))
def test_per_list_weights_equal_keras_rs_on_lists_with_relevant_documents(name):
    labels, scores = random_lists(seed=7)
    keep = np.any(labels > 0, axis=1)  # drops the list without relevance and the padded one
    labels, scores = labels[keep], scores[keep]
    weights = np.random.default_rng(8).uniform(0.2, 3.0, size=len(labels)).astype(np.float32)
    expected = weighted_mean(oracle_values(name, 3, labels, scores), weights)
    for sample_weight in (weights, weights[:, None]):
        ours, theirs = ours_and_theirs(name, 3, labels, scores, sample_weight=sample_weight)
        assert ours == pytest.approx(expected, abs=TOLERANCE)
        assert theirs == pytest.approx(expected, abs=TOLERANCE)


@needs_keras_rs
@pytest.mark.parametrize("name", sorted(KERAS_RS))
def test_per_list_weight_of_a_list_without_relevant_documents(name):
    """Ours weighs that list (value 0) by its own weight; keras-rs (as TF-Ranking)
    broadcasts the weight over the items and gives the list the mean weight of the
    lists with relevance (``get_list_weights``)."""
    labels, scores = random_lists(seed=9)
    labels, scores = labels[[0, 1, 3, 4, 5]], scores[[0, 1, 3, 4, 5]]  # list 1: no relevance
    weights = np.array([1.0, 4.0, 0.5, 2.0, 1.5], np.float32)
    values = oracle_values(name, 3, labels, scores)
    assert values[1] == 0.0
    ours, theirs = ours_and_theirs(name, 3, labels, scores, sample_weight=weights)
    assert ours == pytest.approx(weighted_mean(values, weights), abs=TOLERANCE)
    broadcast = np.where(labels >= 0, weights[:, None], 0.0)
    rule = tf_ranking_list_weights(broadcast, relevance(name, labels))
    assert rule[1] == pytest.approx(np.mean(weights[[0, 2, 3, 4]]))
    assert theirs == pytest.approx(weighted_mean(values, rule), abs=TOLERANCE)
    assert abs(ours - theirs) > 1e-3


@needs_keras_rs
@pytest.mark.parametrize("name", sorted(KERAS_RS))
def test_per_item_weights(name):
    """Positive item weights: both turn them into list weights by TF-Ranking's rule
    (checked against the NumPy rule); Precision@k then equals keras-rs, while keras-rs's
    nDCG and MAP also weigh the items inside each list's value, which ours does not."""
    labels, scores = random_lists(seed=10)
    weights = np.random.default_rng(11).uniform(0.5, 2.0, size=labels.shape).astype(np.float32)
    values = oracle_values(name, 3, labels, scores)
    list_weights = tf_ranking_list_weights(np.where(labels >= 0, weights, 0.0),
                                           relevance(name, labels))
    assert list_weights[2] == 0.0 and list_weights[1] > 0  # padded; no relevance: the mean
    expected = weighted_mean(values, list_weights)
    ours, theirs = ours_and_theirs(name, 3, labels, scores, sample_weight=weights)
    assert ours == pytest.approx(expected, abs=TOLERANCE)
    if name == "precision":
        assert theirs == pytest.approx(expected, abs=TOLERANCE)
    else:
        assert abs(ours - theirs) > 1e-4
    # the package's own rule is the same NumPy rule
    valid = tf.constant(labels >= 0)
    np.testing.assert_allclose(
        tfrx.metrics.per_list_weights(tf.constant(weights), tf.constant(
            relevance(name, labels), tf.float32), valid), list_weights, rtol=1e-6)


@needs_keras_rs
def test_keras_rs_shuffles_ties_even_with_shuffle_ties_false():
    """keras-rs 0.4's ``update_state`` always passes a mask to ``sort_by_scores``, which
    then shuffles ties whatever ``shuffle_ties`` says: on tied documents of different
    labels its value depends on its seed, ours does not (ties go to the lower index,
    one of keras-rs's outcomes). When this fails, keras-rs keeps the input order of
    ties: then compare tied lists directly and update ``RankingMetric``'s docstring."""
    labels = np.array([[0.0, 1.0, 2.0, 0.0, 3.0]], np.float32)
    scores = np.zeros_like(labels)
    ours = float(tfrx.metrics.ndcg(labels, scores, topn=3)[0])
    assert ours == pytest.approx(oracles.ndcg(labels[0], np.array([5., 4., 3., 2., 1.]), 3))
    outcomes = set()
    for seed in range(12):
        metric = keras_rs.metrics.NDCG(k=3, shuffle_ties=False, seed=seed)
        metric.update_state(labels, scores)
        outcomes.add(round(float(metric.result()), 6))
    assert len(outcomes) > 1, outcomes
