"""ExptUtility and MDPRank: REINFORCE estimators against exact enumeration and
closed forms, logging of the sampled metric, and the ListMLE contrast."""

import numpy as np
import pytest
import tensorflow as tf

from support.oracles_pl import dcg_at, expected_ndcg_gradient, ndcg_at, pl_log_prob, softmax
from support.stack import needs_tf_ranking, tensorflow_ops_suite
import tfr_extensions as tfrx
from tfr_extensions.arrays import tie_keys
from tfr_extensions.backend import keras
from tfr_extensions.losses import policy_gradient
from tfr_extensions.ops import lists
from tfr_extensions.ops import plackett_luce as pl

LABELS = [2.0, 0.0, 1.0, 0.0]
SCORES = [0.2, 0.5, -0.3, 0.1]
LOSSES = {
    "expected_utility": lambda **kw: tfrx.losses.ExpectedUtilityLoss(**kw),
    "expected_utility_baseline": lambda **kw: tfrx.losses.ExpectedUtilityLoss(baseline=True, **kw),
    "mdprank": lambda **kw: tfrx.losses.MDPRankLoss(**kw),
}


def _gradient(loss, labels, scores):
    scores = tf.constant(scores, tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        value = loss(tf.constant(labels, tf.float64), scores)
    return value, tape.gradient(value, scores)


@tensorflow_ops_suite
@pytest.mark.parametrize("topn", [4, 2])
@pytest.mark.parametrize("kind", sorted(LOSSES))
def test_mean_estimate_converges_to_exact_gradient_of_expected_ndcg(kind, topn):
    """All 24 permutations (or 12 ordered top-2 prefixes) give the exact
    gradient of E[nDCG@topn]; the REINFORCE estimate averaged over 10 seeds of
    4000 samples each matches it within 5 standard errors (+1e-3)."""
    exact = expected_ndcg_gradient(SCORES, LABELS, topn)
    loss = LOSSES[kind](topn=topn, num_samples=4000, seed=7)
    estimates = np.stack([-_gradient(loss, [LABELS], [SCORES])[1].numpy()[0]
                          for _ in range(10)])  # each call draws fresh samples
    mean = estimates.mean(axis=0)
    stderr = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    assert np.all(np.abs(mean - exact) <= 5 * stderr + 1e-3), (mean, exact, stderr)
    assert np.abs(exact).max() > 0.01  # the check is not vacuous


def _rankings_of_first_call(seed, scores, mask, num_samples, topn):
    """The rankings a loss built with ``seed`` samples at its first call."""
    step_seed = lists.seed_tensor([tie_keys.stream_seed(seed), 0])  # (its step 0)
    return pl.sample_rankings(scores, mask, num_samples, seed=step_seed, topn=topn).numpy()


def _position_grad(scores, ranking, valid):
    """Closed form d log P(a_t|s_t) / d s for each position t (PL): e_{a_t} - softmax(remaining)."""
    remaining = [d for d in range(len(scores)) if valid[d]]
    grads = []
    for doc in ranking:
        if not valid[doc]:
            grads.append(np.zeros(len(scores)))
            continue
        g = np.zeros(len(scores))
        g[remaining] -= softmax(np.asarray(scores)[remaining])
        g[doc] += 1.0
        grads.append(g)
        remaining.remove(doc)
    return np.array(grads)


def test_single_call_matches_paper_closed_forms():
    """Eq. 5 and Eq. 7 for the very rankings the loss sampled, values and gradients."""
    labels = np.array([[2.0, 0.0, 1.0, -1.0, 3.0], [0.0, 1.0, 0.0, 0.0, -1.0]])
    scores = np.array([[0.3, 1.0, -0.5, 2.0, 0.0], [0.1, -0.2, 0.4, 0.0, 5.0]])
    valid = labels >= 0
    topn, num_samples, gamma = 3, 3, 0.8
    rankings = _rankings_of_first_call(5, scores, valid, num_samples, topn)
    eu_value, eu_grad = _gradient(tfrx.losses.ExpectedUtilityLoss(
        topn=topn, num_samples=num_samples, seed=5), labels, scores)
    mdp_value, mdp_grad = _gradient(tfrx.losses.MDPRankLoss(
        gamma=gamma, topn=topn, num_samples=num_samples, seed=5), labels, scores)
    want = {"eu_value": 0.0, "mdp_value": 0.0,
            "eu_grad": np.zeros_like(scores), "mdp_grad": np.zeros_like(scores)}
    batch = len(labels)
    for b in range(batch):
        clean = np.where(valid[b], labels[b], 0.0)
        ideal = dcg_at(clean, np.argsort(-clean, kind="stable")[:topn])
        for k in range(num_samples):
            ranking = [d for d in rankings[b, k] if valid[b, d]]
            metric = ndcg_at(clean, ranking, topn)
            rewards = [(2.0 ** clean[d] - 1) / np.log2(2.0 + t) / ideal for t, d in enumerate(ranking)]
            weights = [sum(gamma ** i * rewards[i] for i in range(t, len(ranking)))
                       for t in range(len(ranking))]  # gamma^t G_t
            log_prob = pl_log_prob(scores[b], ranking, valid[b])
            pos_grads = _position_grad(scores[b], ranking, valid[b])
            want["eu_value"] -= metric * log_prob / num_samples / batch
            want["eu_grad"][b] -= metric * pos_grads.sum(axis=0) / num_samples / batch
            pos_log_probs = [pl_log_prob(scores[b], ranking[:t + 1], valid[b])
                             - pl_log_prob(scores[b], ranking[:t], valid[b])
                             for t in range(len(ranking))]
            want["mdp_value"] -= np.dot(weights, pos_log_probs) / num_samples / batch
            want["mdp_grad"][b] -= weights @ pos_grads / num_samples / batch
    assert float(eu_value) == pytest.approx(want["eu_value"], abs=1e-10)
    assert float(mdp_value) == pytest.approx(want["mdp_value"], abs=1e-10)
    np.testing.assert_allclose(eu_grad.numpy(), want["eu_grad"], atol=1e-10)
    np.testing.assert_allclose(mdp_grad.numpy(), want["mdp_grad"], atol=1e-10)
    assert np.all(eu_grad.numpy()[0, 3] == 0.0) and np.all(mdp_grad.numpy()[1, 4] == 0.0)


@pytest.mark.parametrize("metric", ["ndcg", "precision", "ap", "ap_min", "nerr"])
def test_sampled_metric_matches_exact_metric_of_the_sampled_ranking(metric):
    labels = tf.constant([[2.0, 0.0, 1.0, -1.0, 3.0, 0.0]], tf.float64)
    scores = tf.constant([[0.3, 1.0, -0.5, 2.0, 0.0, 0.2]], tf.float64)
    valid = labels >= 0
    rankings = pl.sample_rankings(scores, valid, num_samples=5, seed=2, topn=3)
    got = policy_gradient.sampled_metric(metric, tf.where(valid, labels, 0.0), rankings, valid)
    # The same rankings scored by tfrx.metrics: scores that sort in sample order.
    fn = tfrx.metrics.metric_function(metric)
    for k in range(5):
        order_scores = np.zeros(6)
        order_scores[rankings.numpy()[0, k]] = [3.0, 2.0, 1.0]
        want = fn(labels, order_scores[None], topn=3)
        assert float(got[0, k]) == pytest.approx(float(want[0]), abs=1e-12)


def test_logged_sampled_metric_and_keras_fit():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(16, 8, 3)).astype(np.float32)
    labels = np.clip(np.round(features[..., 0] + rng.normal(size=(16, 8)) * 0.3), 0, 2)
    labels[0] = 0.0  # a list without relevant documents
    labels[1, 5:] = -1.0  # padding
    for loss in (tfrx.losses.ExpectedUtilityLoss(topn=5, seed=0),
                 tfrx.losses.MDPRankLoss(topn=5, num_samples=2, seed=0)):
        model = keras.Sequential([keras.layers.Dense(1), keras.layers.Flatten()])
        metric = tfrx.losses.SampledRankingMetric(loss)
        assert metric.name == "sampled_ndcg_5"
        model.compile(keras.optimizers.Adam(0.05), loss=loss, metrics=[metric])
        history = model.fit(features, labels.astype(np.float32), batch_size=8, epochs=2,
                            verbose=0)
        values = history.history["sampled_ndcg_5"]
        assert len(values) == 2 and all(0.0 < v <= 1.0 for v in values)
        assert np.isfinite(history.history["loss"]).all()
        # The metric is the mean of the per-list sampled nDCG of the last call.
        y, s = tf.constant(labels[2:6], tf.float32), model(features[2:6])
        loss(y, s)
        assert 0.0 < float(loss.sampled_metric) <= 1.0


@pytest.mark.parametrize("name", ["expected_utility", "mdprank"])
def test_padding_no_relevant_extremes_and_short_lists(name):
    labels = tf.constant([[2.0, 0.0, -1.0, 1.0], [0.0, 0.0, 0.0, 0.0],
                          [-1.0] * 4, [1.0, -1.0, -1.0, -1.0]])
    scores = tf.constant([[1e4, -1e4, 5.0, 0.0], [1.0, 2.0, 3.0, 4.0],
                          [1.0, 2.0, 3.0, 4.0], [-1e4, 1e4, 0.0, 0.0]])
    loss = tfrx.losses.get(name, topn=10, num_samples=3, seed=1)  # topn > list size
    with tf.GradientTape() as tape:
        tape.watch(scores)
        value = loss(labels, scores)
    grad = tape.gradient(value, scores).numpy()
    assert np.isfinite(float(value)) and np.all(np.isfinite(grad))
    assert grad[0, 2] == 0.0 and np.all(grad[1:3] == 0.0) and np.all(grad[3, 1:] == 0.0)
    # A one-document list: log P = 0 for every ranking, so the gradient is 0 up
    # to float32 rounding (not the 1e-4 of a log-space cumulative gradient at 1e4).
    assert abs(grad[3, 0]) < 1e-6
    per_list = loss.call(labels, scores).numpy()
    assert np.all(per_list[1:] == 0.0)


@tensorflow_ops_suite
@pytest.mark.parametrize("name", ["expected_utility", "mdprank"])
def test_xla_matches_graph_and_eager_and_mixed_precision(name):
    labels = tf.constant([[2.0, 0.0, 1.0, 0.0, -1.0], [0.0, 1.0, 0.0, 3.0, 1.0]])
    scores = tf.constant([[0.3, -0.2, 0.1, 0.5, 9.0], [1.0, 0.0, -1.0, 0.2, 0.3]])
    make = lambda: tfrx.losses.get(name, num_samples=5, topn=3, seed=(3, 4))  # noqa: E731
    graph = tf.function(make().__call__)(labels, scores)
    xla = tf.function(make().__call__, jit_compile=True)(labels, scores)
    eager = make()(labels, scores)
    assert float(graph) == pytest.approx(float(xla), rel=1e-5)
    assert float(eager) == pytest.approx(float(xla), rel=1e-5)
    half = make()(labels, tf.cast(scores, tf.float16))
    assert half.dtype == tf.float32 and np.isfinite(float(half))


@pytest.mark.parametrize("cls, kwargs, arg", [
    (tfrx.losses.ExpectedUtilityLoss, {"temperature": 0.0}, "temperature"),
    (tfrx.losses.ExpectedUtilityLoss, {"num_samples": 0}, "num_samples"),
    (tfrx.losses.ExpectedUtilityLoss, {"metric": "mrr"}, "metric"),
    (tfrx.losses.ExpectedUtilityLoss, {"topn": -3}, "topn"),
    (tfrx.losses.MDPRankLoss, {"temperature": -1.0}, "temperature"),
    (tfrx.losses.MDPRankLoss, {"num_samples": 0}, "num_samples"),
    (tfrx.losses.MDPRankLoss, {"gamma": 1.5}, "gamma"),
    (tfrx.losses.MDPRankLoss, {"gamma": 0.0}, "gamma"),
])
def test_bad_arguments_raise_value_error(cls, kwargs, arg):
    with pytest.raises(ValueError, match=arg):
        cls(**kwargs)


@needs_tf_ranking
def test_list_mle_optimizes_ideal_rankings_unlike_sampled_ones():
    """The contrast of Section 4.1 / Figure 1: TF-Ranking's ListMLE (through
    ``tfrx.losses.get``) is minus the PL log-likelihood (Eq. 3 = Eq. 12) of the
    ideal ranking, whose nDCG is 1, while the policy-gradient losses learn from
    sampled rankings whose nDCG is far below 1 at the same scores."""
    labels = tf.constant([[0.0, 7.0, 1.0, 4.0, 2.0, 6.0, 3.0, 5.0]])  # no ties
    scores = tf.constant([[0.1, -0.2, 0.3, 0.0, 0.2, -0.1, 0.05, 0.15]])
    ideal = tf.argsort(labels, direction="DESCENDING", stable=True)
    list_mle = tfrx.losses.get("list_mle_loss")
    assert float(list_mle(labels, scores)) == pytest.approx(
        float(-pl.plackett_luce_log_prob(scores, ideal)[0]), rel=1e-5)
    assert float(tfrx.metrics.ndcg(labels, labels, topn=3)[0]) == 1.0
    for name in ("expected_utility", "mdprank"):
        loss = tfrx.losses.get(name, topn=3, num_samples=200, seed=0)
        loss(labels, scores)
        assert float(loss.sampled_metric) < 0.6


def test_sampled_dcg_rewards_divide_by_the_ideal_dcg_at_the_rankings_size():
    labels = tf.constant([[2.0, 0.0, 1.0, 0.0, 3.0, 0.0], [0.0] * 6, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]],
                         tf.float64)
    mask = tf.constant([[True] * 6, [True] * 6, [True, False, True, True, False, False]])
    labels = tf.where(mask, labels, 0.0)
    ideal_order = tf.argsort(labels, direction="DESCENDING", stable=True)  # [3, 6]
    for size in (1, 3, 6):
        rankings = tf.stack([ideal_order[:, :size], ideal_order[:, ::-1][:, :size]], axis=1)
        rewards = policy_gradient.sampled_dcg_rewards(labels, rankings, mask)  # [3, 2, size]
        dcgs = policy_gradient.sampled_dcg_rewards(labels, rankings, mask, normalize=False)
        # the ideal ranking's nDCG@size is 1 (0 without a relevant document)
        np.testing.assert_allclose(tf.reduce_sum(rewards, -1)[:, 0], [1.0, 0.0, 1.0],
                                   rtol=1e-12)
        for b in range(3):
            for s in range(2):  # the ideal ranking, the reversed one (oracles: support.oracles_pl)
                y, ranking = labels[b].numpy(), rankings[b, s].numpy()
                assert float(tf.reduce_sum(rewards[b, s])) == pytest.approx(
                    ndcg_at(y, ranking, size), rel=1e-12, abs=1e-15)
                assert float(tf.reduce_sum(dcgs[b, s])) == pytest.approx(
                    dcg_at(y, ranking), rel=1e-12, abs=1e-15)
