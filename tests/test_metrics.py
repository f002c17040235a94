"""Exact metrics against the NumPy oracle and TF-Ranking's Keras metrics."""
import json

import numpy as np
import pytest
import tensorflow as tf

from tfr_extensions.backend import keras

from support import oracles
import tfr_extensions as tfrx
from support.stack import needs_tf_ranking, tfr

FUNCTIONS = {
    "ndcg": tfrx.metrics.ndcg,
    "ap": tfrx.metrics.average_precision,
    "ap_min": tfrx.metrics.average_precision_min,
    "precision": tfrx.metrics.precision,
    "nerr": tfrx.metrics.nerr,
}


def random_lists(batch=16, size=12, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.choice(5, size=(batch, size), p=[0.55, 0.2, 0.12, 0.08, 0.05]).astype(np.float32)
    lengths = rng.integers(1, size + 1, size=batch)
    labels[np.arange(size)[None] >= lengths[:, None]] = -1.0
    labels[0, :] = np.where(labels[0] >= 0, 0.0, -1.0)  # no relevant document
    scores = rng.permutation(batch * size).reshape(batch, size).astype(np.float32) / 7.0
    return labels, scores


@pytest.mark.parametrize("metric", sorted(FUNCTIONS))
@pytest.mark.parametrize("topn", [None, 1, 3, 5, 10, 30])
def test_exact_metrics_equal_the_numpy_oracle(metric, topn):
    labels, scores = random_lists(seed=topn or 0)
    got = FUNCTIONS[metric](labels, scores, topn=topn).numpy()
    expected = [oracles.METRIC_ORACLES[metric](labels[b], scores[b], topn)
                for b in range(len(labels))]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-7)


@needs_tf_ranking
@pytest.mark.parametrize("topn", [None, 1, 5, 10])
@pytest.mark.parametrize("metric,tfr_metric", [
    ("ndcg", "NDCGMetric"), ("ap", "MeanAveragePrecisionMetric"), ("precision", "PrecisionMetric"),
])
def test_mean_over_lists_equals_tf_ranking(metric, tfr_metric, topn):
    labels, scores = random_lists(seed=11)
    ours = FUNCTIONS[metric](labels, scores, topn=topn).numpy()
    theirs = getattr(tfr.keras.metrics, tfr_metric)(topn=topn)(labels, scores).numpy()
    # TF-Ranking counts lists without relevant documents as 0, like ours.
    np.testing.assert_allclose(ours.mean(), theirs, rtol=1e-5)


def test_mask_argument_equals_padding_labels():
    labels, scores = random_lists(seed=3)
    mask = labels >= 0
    dense_labels = np.where(mask, labels, 0.0)
    for fn in FUNCTIONS.values():
        np.testing.assert_allclose(fn(dense_labels, scores, 5, mask=mask).numpy(),
                                   fn(labels, scores, 5).numpy())


def test_lists_without_relevant_or_valid_documents_score_zero():
    labels = tf.constant([[0.0, 0.0, -1.0], [-1.0, -1.0, -1.0], [0.0, 2.0, 1.0]])
    scores = tf.constant([[0.3, 0.1, 0.2], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    for fn in FUNCTIONS.values():
        values = fn(labels, scores).numpy()
        assert values[0] == 0.0 and values[1] == 0.0 and np.isfinite(values).all()
    np.testing.assert_array_equal(tfrx.metrics.has_relevant(labels).numpy(), [False, False, True])


def test_ties_are_broken_by_index():
    # all-tied scores rank documents in list order
    labels = tf.constant([[0.0, 1.0, 2.0]])
    np.testing.assert_allclose(tfrx.metrics.ndcg(labels, tf.zeros([1, 3])).numpy(),
                               oracles.ndcg(np.array([0.0, 1.0, 2.0]), np.array([3.0, 2.0, 1.0])))


def test_every_name_of_the_vocabulary_gives_its_metric():
    labels, scores = random_lists(seed=7)
    for alias, canonical in [("map", "ap"), ("average_precision", "ap"), ("p", "precision"),
                             ("map_min", "ap_min"), ("ndcg", "ndcg"), ("nerr", "nerr")]:
        assert tfrx.metrics.metric_function(alias) is FUNCTIONS[canonical]
        want = FUNCTIONS[canonical](labels, scores, topn=5).numpy()
        metric = tfrx.metrics.RankingMetric(alias, topn=5)
        metric.update_state(labels, scores)
        np.testing.assert_allclose(metric.result().numpy(), want.mean(), rtol=1e-6)
        assert metric.name == f"{alias}_5"  # named as given
    assert set(tfrx.metrics.METRIC_FUNCTIONS) == set(tfrx.ops.vocabulary.CANONICAL_METRICS)


def test_the_two_map_normalizations():
    """AP@k over R (TF-Ranking) and over min(k, R) (LightGBM): equal without a
    cutoff or with at most k relevant documents, else AP over R is smaller."""
    labels = tf.constant([[1.0, 1.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0, 0.0]])
    scores = tf.constant([[5.0, 4.0, 3.0, 2.0, 1.0]] * 2)
    by_r = tfrx.metrics.average_precision(labels, scores, topn=2).numpy()
    by_min = tfrx.metrics.average_precision_min(labels, scores, topn=2).numpy()
    np.testing.assert_allclose(by_r, [2.0 / 4.0, 1.0])  # (1 + 1) / R, R = 4
    np.testing.assert_allclose(by_min, [1.0, 1.0])  # (1 + 1) / min(2, 4)
    np.testing.assert_allclose(tfrx.metrics.average_precision_min(labels, scores).numpy(),
                               tfrx.metrics.average_precision(labels, scores).numpy())


def test_bad_arguments():
    with pytest.raises(ValueError, match="topn"):
        tfrx.metrics.ndcg([[1.0]], [[1.0]], topn=0)
    with pytest.raises(ValueError, match="same shape"):
        tfrx.metrics.ndcg([[1.0, 0.0]], [[1.0]])
    with pytest.raises(ValueError, match="rank"):
        tfrx.metrics.ndcg([1.0, 0.0], [1.0, 0.0])
    with pytest.raises(ValueError, match=r"`metric` must be one of \['ndcg', 'ap', 'map'"):
        tfrx.metrics.RankingMetric("mrr")
    with pytest.raises(ValueError, match="no_relevant"):
        tfrx.metrics.RankingMetric("ndcg", no_relevant="drop")


def test_keras_metric_wrapper_averages_and_serializes():
    labels, scores = random_lists(seed=5)
    metric = tfrx.metrics.RankingMetric("nerr", topn=10)
    metric.update_state(labels[:8], scores[:8])
    metric.update_state(labels[8:], scores[8:])
    expected = np.mean([oracles.nerr(labels[b], scores[b], 10) for b in range(len(labels))])
    np.testing.assert_allclose(metric.result().numpy(), expected, rtol=1e-5)
    config = json.loads(json.dumps(keras.metrics.serialize(metric)))
    clone = keras.metrics.deserialize(config)
    assert (clone.name, clone.get_config()["topn"]) == ("nerr_10", 10)
