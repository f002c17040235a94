"""RankNetLoss (Eq. 1-4, tie targets 1/2) and NDCGBetaHingeLoss (Eq. 12-20)."""
import itertools

import numpy as np
import pytest
import tensorflow as tf

from tfr_extensions.backend import keras

from support import oracles
from support.stack import tensorflow_ops_suite
import tfr_extensions as tfrx
from tfr_extensions.losses import pairwise

SUM = "sum"


def random_lists(batch=4, size=7, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, size=(batch, size)).astype(np.float64)
    labels[:, -1] = -1.0
    labels[1, 1] = -1.0
    labels[2] = np.where(labels[2] >= 0, 0.0, -1.0)  # no relevant document
    return labels, rng.normal(size=(batch, size))


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
def test_ranknet_equals_eq_4_per_list(sigma):
    labels, scores = random_lists(seed=1)
    got = tfrx.losses.RankNetLoss(sigma=sigma, reduction=SUM)(labels, scores).numpy()
    expected = sum(oracles.ranknet(labels[b], scores[b], sigma) for b in range(len(labels)))
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_ranknet_tied_labels_have_target_one_half():
    loss = tfrx.losses.RankNetLoss(reduction=SUM)
    labels = tf.constant([[1.0, 1.0]])
    s = tf.Variable([[0.7, -0.2]], dtype=tf.float64)
    with tf.GradientTape() as tape:
        value = loss(labels, s)
    grad = tape.gradient(value, s).numpy()[0]
    # C = -1/2 log P - 1/2 log(1 - P): minimized at equal scores, pulls them together
    p = 1 / (1 + np.exp(-0.9))
    np.testing.assert_allclose(value.numpy(), -0.5 * np.log(p) - 0.5 * np.log(1 - p), rtol=1e-12)
    np.testing.assert_allclose(grad, [p - 0.5, 0.5 - p], rtol=1e-12)


@tensorflow_ops_suite
@pytest.mark.parametrize("name", ["ranknet", "ndcg_beta_hinge"])
def test_gradients_match_finite_differences(name):
    labels, scores = random_lists(seed=2)
    loss = tfrx.losses.get(name, reduction=SUM)
    theoretical, numerical = tf.test.compute_gradient(
        lambda s: loss(labels, s), [tf.constant(scores)])
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=1e-6)
    grads = theoretical[0].reshape(scores.shape)
    assert (grads[labels < 0] == 0).all() and (grads[2] == 0).all()


@pytest.mark.parametrize("squared,margin", [(False, 1.0), (True, 1.0), (False, 0.3)])
def test_ndcg_beta_hinge_equals_eq_20(squared, margin):
    labels, scores = random_lists(seed=3)
    loss = tfrx.losses.NDCGBetaHingeLoss(margin=margin, squared=squared, reduction=SUM)
    expected = sum(oracles.ndcg_beta_hinge(labels[b], scores[b], margin, squared)
                   for b in range(len(labels)))
    np.testing.assert_allclose(loss(labels, scores).numpy(), expected, rtol=1e-12)


def test_pair_weights_turn_ranking_errors_into_one_minus_ndcg_beta():
    # Eq. 15-17: 1 - NDCG_beta(g) = sum_{y_i > y_j} tau_ij [s_i <= s_j]
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 4, size=(1, 8)).astype(np.float64)
    weights = pairwise.ndcg_beta_pair_weights(tf.constant(labels), tf.constant(labels >= 0))
    weights = weights.numpy()[0]
    ideal = oracles.dcg_beta(np.sort(labels[0])[::-1])
    for perm in itertools.islice(itertools.permutations(range(8)), 0, 40320, 997):
        scores = -np.array(perm, dtype=float)  # document perm[k] ... ranked by scores
        order = np.argsort(-scores, kind="stable")
        one_minus = 1 - oracles.dcg_beta(labels[0][order]) / ideal
        errors = (scores[:, None] <= scores[None, :]).astype(float)
        np.testing.assert_allclose((weights * errors).sum(), one_minus, atol=1e-12)


def test_extreme_scores_stay_finite():
    labels = tf.constant([[2.0, 0.0, 1.0, -1.0]])
    scores = tf.Variable([[-1e4, 1e4, 0.0, 3e4]])
    for loss in (tfrx.losses.RankNetLoss(), tfrx.losses.NDCGBetaHingeLoss(squared=True)):
        with tf.GradientTape() as tape:
            value = loss(labels, scores)
        grad = tape.gradient(value, scores).numpy()
        assert np.isfinite(value.numpy()) and np.isfinite(grad).all() and grad[0, 3] == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="sigma"):
        tfrx.losses.RankNetLoss(sigma=0)
    with pytest.raises(ValueError, match="margin"):
        tfrx.losses.NDCGBetaHingeLoss(margin=-1)
