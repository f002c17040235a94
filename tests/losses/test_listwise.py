"""ApproxNDCGLoss (approxndcg-revisited Eq. 3-6) and ListNetLoss (TF-Ranking's softmax loss).

Where TF-Ranking imports (tf215), both equal its Keras classes, value and
gradient, reduced and per list, on padding, ties, lists without relevant
documents and per-list sample weights; everywhere, they equal float64 NumPy
oracles (``oracles_listwise``) and finite differences, and follow the
bad-input policy.
"""
import numpy as np
import pytest
import tensorflow as tf

from support import oracles_listwise
import tfr_extensions as tfrx
from support.stack import needs_tf_ranking, tensorflow_ops_suite, tfr

PAD = -1.0


def batch(seed=0, dtype=np.float32):
    """Labels and scores ``[7, 8]``: padding at the end, first and in the middle, a
    list without relevant documents, one valid document, ties, fractional labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, size=(7, 8)).astype(dtype)
    scores = rng.normal(size=(7, 8)).astype(dtype)
    labels[0, 5:] = PAD
    labels[1, :3] = PAD
    labels[1, 5] = PAD
    labels[2] = np.where(labels[2] >= 0, 0.0, PAD)  # no relevant document
    labels[3, 1:] = PAD  # one valid document
    labels[3, 0] = 2.0
    scores[4, 4:] = scores[4, :4]  # ties
    labels[4, 4:] = labels[4, :4]
    scores[5] = 0.25  # all tied
    labels[6, :3] = [2.5, 0.5, 0.0]  # fractional labels
    return labels, scores


def value_and_grad(loss, labels, scores, **kwargs):
    scores = tf.constant(scores)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        value = loss(labels, scores, **kwargs)
    return value.numpy(), tape.gradient(value, scores).numpy()


# --- TF-Ranking's classes -------------------------------------------------------------

#: (our key, TF-Ranking's class name, options shared by both)
PEERS = [("approx_ndcg", "ApproxNDCGLoss", {}), ("approx_ndcg", "ApproxNDCGLoss",
                                                  {"temperature": 0.5}),
         ("listnet", "SoftmaxLoss", {}), ("listnet", "SoftmaxLoss", {"temperature": 0.5})]
PEER_IDS = [f"{key}-{kwargs.get('temperature', 'default')}" for key, _, kwargs in PEERS]


@needs_tf_ranking
@pytest.mark.parametrize("key,peer,kwargs", PEERS, ids=PEER_IDS)
@pytest.mark.parametrize("reduction", ["auto", "sum", "none"])
@pytest.mark.parametrize("seed", [0, 1])
def test_equals_tf_rankings_class_value_and_gradient(key, peer, kwargs, reduction, seed):
    labels, scores = batch(seed)
    ours = tfrx.losses.get(key, reduction=reduction, **kwargs)
    theirs = getattr(tfr.keras.losses, peer)(reduction=reduction, **kwargs)
    value, grad = value_and_grad(ours, labels, scores)
    want_value, want_grad = value_and_grad(theirs, labels, scores)
    np.testing.assert_allclose(value.reshape(-1), want_value.reshape(-1), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-7)
    assert np.abs(want_grad).max() > 1e-3  # a real gradient to compare
    assert (grad[labels < 0] == 0).all() and (grad[2] == 0).all()


@needs_tf_ranking
@pytest.mark.parametrize("key,peer,kwargs", PEERS[::2], ids=PEER_IDS[::2])
def test_equals_tf_ranking_with_per_list_sample_weights(key, peer, kwargs):
    labels, scores = batch(2)
    weights = np.random.default_rng(3).uniform(0.0, 2.0, size=(len(labels), 1)).astype(np.float32)
    value, grad = value_and_grad(tfrx.losses.get(key), labels, scores, sample_weight=weights)
    want_value, want_grad = value_and_grad(getattr(tfr.keras.losses, peer)(), labels, scores,
                                           sample_weight=weights)
    np.testing.assert_allclose(value, want_value, rtol=1e-5)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-7)


@needs_tf_ranking
def test_listnet_weights_are_tf_rankings_per_list_weights():
    """``(losses, weights)`` of the function are TF-Ranking's ``compute_per_list``
    (where the weight is 0, TF-Ranking's loss is that of uniform targets, ours 0)."""
    labels, scores = batch(4)
    losses, weights = tfrx.losses.listnet_loss(labels, scores)
    impl = tfr.keras.losses.SoftmaxLoss()._loss
    want_losses, want_weights = impl.compute_per_list(labels, scores, None)
    np.testing.assert_allclose(weights.numpy(), want_weights.numpy(), rtol=1e-6)
    relevant = weights.numpy() > 0
    assert relevant.sum() == len(labels) - 1 and (losses.numpy()[~relevant] == 0).all()
    np.testing.assert_allclose(losses.numpy()[relevant], want_losses.numpy()[relevant],
                               rtol=1e-5, atol=1e-7)


# --- every stack: oracles, finite differences, bad input -------------------------------

@pytest.mark.parametrize("key,oracle,kwargs", [
    ("approx_ndcg", oracles_listwise.approx_ndcg, {}),
    ("approx_ndcg", oracles_listwise.approx_ndcg, {"temperature": 1.7}),
    ("listnet", oracles_listwise.listnet, {}),
    ("listnet", oracles_listwise.listnet, {"temperature": 0.3}),
])
def test_per_list_values_and_gradients_equal_the_oracle(key, oracle, kwargs):
    labels, scores = batch(5, np.float64)
    value, grad = value_and_grad(tfrx.losses.get(key, reduction="none", **kwargs), labels,
                                 scores)
    for b in range(len(labels)):
        keep = labels[b] >= 0
        want_value, want_grad = oracle(labels[b][keep], scores[b][keep], **kwargs)
        np.testing.assert_allclose(value[b], want_value, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(grad[b][keep], want_grad, rtol=1e-10, atol=1e-14)
        assert (grad[b][~keep] == 0).all()


def test_reduced_loss_is_the_weighted_sum_over_the_batch_size():
    labels, scores = batch(6)
    for key in ("approx_ndcg", "listnet"):
        losses, weights = tfrx.losses.get(key).spec.function(labels, scores)
        np.testing.assert_allclose(tfrx.losses.get(key)(labels, scores).numpy(),
                                   np.sum(losses.numpy() * weights.numpy()) / len(labels),
                                   rtol=1e-6)
    _, weights = tfrx.losses.listnet_loss(labels, scores)
    np.testing.assert_allclose(weights.numpy(), np.where(labels >= 0, labels, 0).sum(axis=1))
    _, weights = tfrx.losses.approx_ndcg_loss(labels, scores)
    np.testing.assert_array_equal(weights.numpy(), [1, 1, 0, 1, 1, 1, 1])


def test_a_small_temperature_approaches_the_exact_ndcg():
    labels = np.array([[3.0, 0.0, 1.0, 2.0, PAD]])
    scores = np.array([[0.1, 0.9, 0.5, -0.3, 5.0]])
    losses, _ = tfrx.losses.approx_ndcg_loss(labels, scores, temperature=1e-4)
    exact = tfrx.metrics.ndcg(labels, scores)
    np.testing.assert_allclose(-losses.numpy(), np.reshape(exact.numpy(), -1), rtol=1e-12)


@tensorflow_ops_suite
@pytest.mark.parametrize("key", ["approx_ndcg", "listnet"])
@pytest.mark.parametrize("temperature", [0.1, 1.0, 3.0])
def test_gradients_match_finite_differences(key, temperature):
    labels, scores = batch(7, np.float64)
    loss = tfrx.losses.get(key, temperature=temperature, reduction="sum")
    theoretical, numerical = tf.test.compute_gradient(
        lambda s: loss(labels, s), [tf.constant(scores)], delta=1e-5)  # (steep at T = 0.1)
    np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-6, atol=1e-8)
    grads = theoretical[0].reshape(scores.shape)
    assert (grads[labels < 0] == 0).all() and (grads[2] == 0).all()


@pytest.mark.parametrize("key", ["approx_ndcg", "listnet"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
def test_a_bad_score_makes_its_list_nan_with_zero_gradient(key, bad):
    labels, scores = batch(8)
    broken = scores.copy()
    broken[0, 1] = bad  # a valid document
    broken[1, 0] = bad  # padding: ignored
    value, grad = value_and_grad(tfrx.losses.get(key, reduction="none"), labels, broken)
    want_value, want_grad = value_and_grad(tfrx.losses.get(key, reduction="none"), labels,
                                           scores)
    value = value.reshape(-1)
    assert np.isnan(value[0]) and (grad[0] == 0).all()
    np.testing.assert_array_equal(value[1:], want_value.reshape(-1)[1:])
    np.testing.assert_array_equal(grad[1:], want_grad[1:])
    assert np.isnan(tfrx.losses.get(key)(labels, broken).numpy())


@pytest.mark.parametrize("key", ["approx_ndcg", "listnet"])
def test_extreme_scores_give_finite_values_and_gradients(key):
    labels = np.array([[1, 0, 2, 0, PAD], [0, 1, 0, 2, 1]], np.float32)
    scores = np.array([[3e38, -3e38, 1.0, 0.0, -np.inf], [-3e38, -3e38, 3e38, 3e38, 0.5]],
                      np.float32)
    oracle = getattr(oracles_listwise, key)
    value, grad = value_and_grad(tfrx.losses.get(key, reduction="none"), labels, scores)
    assert np.isfinite(value).all() and np.isfinite(grad).all()
    for b in range(2):
        keep = labels[b] >= 0
        want_value, want_grad = oracle(labels[b][keep], scores[b][keep].astype(np.float64))
        np.testing.assert_allclose(value.reshape(-1)[b], want_value, rtol=1e-6)
        np.testing.assert_allclose(grad[b][keep], want_grad, atol=1e-6)
