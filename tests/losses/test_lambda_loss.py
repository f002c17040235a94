"""LambdaLoss (``tfrx.losses.lambda_loss``, ``LambdaLoss``) on TensorFlow: values and
gradients against the NumPy oracle of the paper's schemes
(:mod:`support.oracles_lambda`), graph mode = XLA, dtypes, the class, and TF-Ranking.

TF-Ranking 0.5.5 (``PairwiseLogisticLoss`` with a lambda weight; tf215 only) agrees
where its definitions are ours, after these conversions: its pair loss is
``log(1 + exp(-(s_i - s_j) / T))``, natural log (ours is log2) with ``temperature =
1 / sigma``; its DCG lambda weights are multiplied by the padded list size L (a
heuristic of ``AbstractDCGLambdaWeight.pair_weights``); with ``reduction="none"`` the
Keras class returns per-document sums, whose row sum is the list's loss. Then, with
``topn=None``:

* ``ndcg_loss2`` = ``NDCGLambdaWeightV2()`` / (L ln 2);
* ``ndcg_loss2pp`` (mu) = ``NDCGLambdaWeight(smooth_fraction=1/(1+mu))`` * (1 + mu) /
  (L ln 2) (its weight is ``(1 - f) delta + f |1/D_i - 1/D_j|``; ``NDCGLambdaWeightV2``
  has no LambdaRank term, so it is NDCG-Loss2, not 2++);
* ``lambdarank`` = ``NDCGLambdaWeight(smooth_fraction=1)`` / (L ln 2);
* ``ranknet`` = ``PairwiseLogisticLoss()`` / ln 2.

Where they differ: with ``topn``, allRank and we keep the pairs whose predicted ranks
are both within k; TF-Ranking's V1 weight keeps the pairs where either one is (and
sets the discount of a document past k to 0), and its V2 keeps every pair and
multiplies those past k by ``1 / (1 - 1/log2(1 + max(r_i, r_j)))``. TF-Ranking has
no NDCG-Loss1, breaks score ties at random (we: by index), and its per-list weight
in a ``SUM_OVER_BATCH_SIZE`` reduction differs; those are not compared.
"""
import json
import math

import numpy as np
import pytest
import tensorflow as tf

from support import oracles_lambda
from support.stack import needs_tf_ranking, tensorflow_ops_suite, tfr
import tfr_extensions as tfrx
from tfr_extensions.losses.lambda_framework import WEIGHTINGS

SUM = "sum"


def random_lists(batch=5, size=8, seed=0, dtype=np.float64):
    """Graded labels 0..3 (so tied labels), padding at the end and in the middle, a
    list without a relevant document; distinct scores."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, size=(batch, size)).astype(dtype)
    labels[0, 5:] = -1.0
    labels[1, 2] = -1.0
    labels[2] = np.where(labels[2] >= 0, 0.0, -1.0)  # no relevant document
    labels[3, :3] = [2.0, 2.0, 2.0]  # tied labels
    return labels, rng.normal(size=(batch, size)).astype(dtype)


def per_list_and_grad(labels, scores, **options):
    """The function's ``losses * weights`` ``[B]`` and its gradient ``[B, L]``."""
    scores = tf.convert_to_tensor(scores)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        losses, weights = tfrx.losses.lambda_loss(labels, scores, **options)
        total = losses * weights
    return total.numpy(), tape.gradient(total, scores).numpy(), weights.numpy()


def oracle(labels, scores, **options):
    values, grads = zip(*(oracles_lambda.lambda_loss_and_gradient(y, s, **options)
                          for y, s in zip(labels, scores)))
    return np.array(values), np.array(grads)


@pytest.mark.parametrize("topn", [None, 3])
@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_values_and_gradients_equal_the_oracle(weighting, topn):
    labels, scores = random_lists()
    for sigma, mu in [(1.0, 10.0), (2.5, 0.5)]:
        options = dict(weighting=weighting, sigma=sigma, mu=mu, topn=topn)
        values, grads, weights = per_list_and_grad(labels, scores, **options)
        want_values, want_grads = oracle(labels, scores, **options)
        np.testing.assert_allclose(values, want_values, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(grads, want_grads, rtol=1e-10, atol=1e-14)
        np.testing.assert_array_equal(weights, [1, 1, 0, 1, 1])
        assert (grads[labels < 0] == 0).all() and (grads[2] == 0).all() and values[2] == 0
        assert np.abs(grads).max() > 0


@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_tied_scores_rank_by_index_as_the_oracle_does(weighting):
    labels = np.array([[0.0, 2.0, 1.0, 0.0, 1.0, -1.0]])
    scores = np.array([[0.5, 0.5, -0.2, 0.5, -0.2, 0.5]])
    values, grads, _ = per_list_and_grad(labels, scores, weighting=weighting)
    want_values, want_grads = oracle(labels, scores, weighting=weighting)
    np.testing.assert_allclose(values, want_values, rtol=1e-12)
    np.testing.assert_allclose(grads, want_grads, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_the_oracle_gradient_is_the_derivative_of_its_value(weighting):
    """Central differences of the value oracle (float64), so the loss is held to a
    checked gradient; and TensorFlow's own finite differences of the loss."""
    labels, scores = random_lists(seed=1)
    for y, s in zip(labels, scores):
        _, grad = oracles_lambda.lambda_loss_and_gradient(y, s, weighting, 1.5, 3.0, 4)
        eps, numeric = 1e-6, np.zeros(len(s))
        for i in range(len(s)):
            step = np.eye(len(s))[i] * eps
            numeric[i] = (oracles_lambda.lambda_loss(y, s + step, weighting, 1.5, 3.0, 4)
                          - oracles_lambda.lambda_loss(y, s - step, weighting, 1.5, 3.0, 4)) / (
                              2 * eps)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)
    theoretical, numerical = tf.test.compute_gradient(
        lambda s: tf.reduce_sum(tf.math.multiply(*tfrx.losses.lambda_loss(
            labels, s, weighting=weighting, topn=4))), [tf.constant(scores)])
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=1e-6)


def test_long_lists_equal_the_oracle():
    labels, scores = random_lists(size=200, seed=2)
    for weighting, topn in [("ndcg_loss2pp", None), ("ndcg_loss1", 20)]:
        values, grads, _ = per_list_and_grad(labels, scores, weighting=weighting, topn=topn)
        want_values, want_grads = oracle(labels, scores, weighting=weighting, topn=topn)
        np.testing.assert_allclose(values, want_values, rtol=1e-10)
        np.testing.assert_allclose(grads, want_grads, rtol=1e-8, atol=1e-13)


@tensorflow_ops_suite
@pytest.mark.parametrize("size", [9, 200])  # XLA counts ranks at 9, sorts at 200 (TF 2.15)
@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_xla_equals_graph_mode(weighting, size):
    labels, scores = random_lists(batch=4, size=size, seed=3, dtype=np.float32)
    for topn in (None, 3):
        def run(s, topn=topn):
            with tf.GradientTape() as tape:
                tape.watch(s)
                losses, weights = tfrx.losses.lambda_loss(labels, s, weighting=weighting,
                                                          topn=topn)
                total = losses * weights
            return total, tape.gradient(total, s)

        graph = tf.function(run)(tf.constant(scores))
        xla = tf.function(run, jit_compile=True)(tf.constant(scores))
        for got, want in zip(xla, graph):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=2e-5, atol=1e-6)
        if size == 9:  # float32 in graph mode against the float64 oracle
            want_values, want_grads = oracle(labels, scores, weighting=weighting, topn=topn)
            np.testing.assert_allclose(graph[0].numpy(), want_values, rtol=2e-5, atol=1e-6)
            np.testing.assert_allclose(graph[1].numpy(), want_grads, rtol=2e-5, atol=1e-6)


@tensorflow_ops_suite
def test_lists_of_a_thousand_documents_under_xla():
    labels, scores = random_lists(batch=4, size=1000, seed=4, dtype=np.float32)
    loss = tfrx.losses.LambdaLoss()

    @tf.function(jit_compile=True)
    def step(s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            value = loss(labels, s)
        return value, tape.gradient(value, s)

    value, grad = step(tf.constant(scores))
    assert np.isfinite(value.numpy()) and value.numpy() > 0 and np.isfinite(grad.numpy()).all()
    assert (grad.numpy()[labels < 0] == 0).all()


def test_float64_and_float32():
    labels, scores = random_lists()
    for dtype in (tf.float64, tf.float32, tf.float16):
        losses, weights = tfrx.losses.lambda_loss(labels, tf.cast(scores, dtype))
        want = tf.float64 if dtype == tf.float64 else tf.float32
        assert losses.dtype == weights.dtype == want


@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_the_class_equals_the_function_and_its_presets(weighting):
    labels, scores = random_lists(dtype=np.float32)
    losses, weights = tfrx.losses.lambda_loss(labels, scores, weighting=weighting, topn=5)
    per_list = tfrx.losses.LambdaLoss(weighting=weighting, topn=5, reduction="none")
    np.testing.assert_allclose(per_list(labels, scores).numpy()[:, 0],
                               (losses * weights).numpy(), rtol=1e-6)
    reduced = tfrx.losses.get(f"lambda_{weighting}", topn=5)(labels, scores)
    np.testing.assert_allclose(reduced.numpy(), np.sum(losses * weights) / len(labels),
                               rtol=1e-6)
    assert tfrx.losses.get(f"lambda_{weighting}").get_config()["weighting"] == weighting
    assert tfrx.losses.LambdaLoss().name == "lambda_loss"


def test_get_config_round_trips_through_json():
    loss = tfrx.losses.LambdaLoss(weighting="ndcg_loss2", sigma=0.7, mu=2.0, topn=4,
                                  reduction=SUM, name="mine")
    config = json.loads(json.dumps(loss.get_config()))
    again = tfrx.losses.LambdaLoss.from_config(config)
    assert again.get_config() == loss.get_config() and again.name == "mine"
    assert {k: config[k] for k in ("weighting", "sigma", "mu", "topn")} == dict(
        weighting="ndcg_loss2", sigma=0.7, mu=2.0, topn=4)
    labels, scores = random_lists(dtype=np.float32)
    np.testing.assert_allclose(again(labels, scores).numpy(), loss(labels, scores).numpy())


def test_extreme_scores_stay_finite_with_zero_gradient_at_padding():
    labels = tf.constant([[2.0, 0.0, 1.0, -1.0, 0.0], [1.0, 2.0, 0.0, 1.0, -1.0]])
    for values in ([[-1e4, 1e4, 0.0, 3e4, 5.0], [1e30, -1e30, 3e38, -3e38, 1e30]],
                   [[3e38, -3e38, 1.0, 0.0, 2.0], [-3e38, 3e38, 1e4, 0.0, 0.0]]):
        scores = tf.Variable(values, dtype=tf.float32)
        for weighting in WEIGHTINGS:
            with tf.GradientTape() as tape:
                value = tfrx.losses.LambdaLoss(weighting=weighting, mu=1e6)(labels, scores)
            grad = tape.gradient(value, scores).numpy()
            assert np.isfinite(value.numpy()) and np.isfinite(grad).all(), weighting
            assert grad[0, 3] == 0 and grad[1, 4] == 0


def test_bad_options_name_the_option():
    with pytest.raises(ValueError, match=r"`weighting` must be one of \['ranknet', 'lambdarank', "
                                         r"'ndcg_loss1', 'ndcg_loss2', 'ndcg_loss2pp'\]"):
        tfrx.losses.LambdaLoss(weighting="ndcg_loss3")
    for option, value in [("sigma", 0.0), ("sigma", -1.0), ("mu", -0.5), ("topn", 0),
                          ("topn", 2.0)]:
        with pytest.raises(ValueError, match=f"`{option}`"):
            tfrx.losses.LambdaLoss(**{option: value})
        with pytest.raises(ValueError, match=f"`{option}`"):
            tfrx.losses.lambda_loss([[1.0, 0.0]], [[0.0, 1.0]], **{option: value})


# --- TF-Ranking (tf215) ------------------------------------------------------------------

def _tfr_per_list(labels, scores, lambda_weight, sigma):
    loss = tfr.keras.losses.PairwiseLogisticLoss(lambda_weight=lambda_weight,
                                                 temperature=1.0 / sigma, reduction="none")
    scores = tf.convert_to_tensor(scores)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        per_list = tf.reduce_sum(loss(labels, scores), axis=1)
    return per_list.numpy(), tape.gradient(per_list, scores).numpy()


@needs_tf_ranking
@pytest.mark.parametrize("weighting", ["ndcg_loss2pp", "ndcg_loss2", "lambdarank", "ranknet"])
def test_tf_ranking_pairwise_logistic_with_its_ndcg_lambda_weights(weighting):
    """The conversions of the module docstring, per list, value and gradient (float32,
    distinct scores: TF-Ranking shuffles tied ones)."""
    labels, scores = random_lists(dtype=np.float32)
    size, ln2 = labels.shape[1], math.log(2.0)
    for sigma, mu in [(1.0, 10.0), (1.7, 3.0)]:
        lambda_weight, scale = {
            "ndcg_loss2pp": (tfr.keras.losses.NDCGLambdaWeight(smooth_fraction=1 / (1 + mu)),
                             (1 + mu) / (size * ln2)),
            "ndcg_loss2": (tfr.keras.losses.NDCGLambdaWeightV2(), 1 / (size * ln2)),
            "lambdarank": (tfr.keras.losses.NDCGLambdaWeight(smooth_fraction=1.0),
                           1 / (size * ln2)),
            "ranknet": (None, 1 / ln2)}[weighting]
        theirs, their_grads = _tfr_per_list(labels, scores, lambda_weight, sigma)
        ours, our_grads, _ = per_list_and_grad(labels, scores, weighting=weighting,
                                               sigma=sigma, mu=mu)
        np.testing.assert_allclose(ours, theirs * scale, rtol=2e-6, atol=1e-7)
        np.testing.assert_allclose(our_grads, their_grads * scale, rtol=2e-5, atol=1e-6)


@needs_tf_ranking
def test_tf_ranking_differs_with_a_cutoff():
    """With topn, TF-Ranking's V1 and V2 weights keep pairs that we (and allRank) drop
    (module docstring): the values differ, as documented."""
    labels, scores = random_lists(dtype=np.float32)
    ours, _, _ = per_list_and_grad(labels, scores, weighting="ndcg_loss2", topn=2)
    theirs, _ = _tfr_per_list(labels, scores, tfr.keras.losses.NDCGLambdaWeightV2(topn=2), 1.0)
    scaled = theirs / (labels.shape[1] * math.log(2.0))
    assert np.all(ours <= scaled + 1e-6) and not np.allclose(ours, scaled)
