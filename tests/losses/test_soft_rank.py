"""SoftNDCGLoss (softrank.txt, Eq. 14-23, Section 4.7)."""
import numpy as np
import pytest
import tensorflow as tf

import tfr_extensions as tfrx
from tfr_extensions.losses.soft_rank import SoftNDCGLoss
from tfr_extensions.losses.soft_rank import training_discount
from support.loss_modes import graph_xla_and_half
from support.oracles_softrank import soft_ndcg_and_gradient, train_and_validate
from support.stack import tensorflow_ops_suite


def _batch(batch, size, seed, pad=True):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, size=(batch, size)).astype(np.float64)
    labels[:, 0] = 2.0  # every list has a relevant document
    if pad:
        lengths = rng.integers(2, size + 1, size=batch)
        labels = np.where(np.arange(size)[None] < lengths[:, None], labels, -1.0)
    return labels, rng.normal(size=(batch, size))


def _per_list(loss, labels, scores):
    loss = SoftNDCGLoss.from_config({**loss.get_config(), "reduction": "none"})
    return loss(labels, scores).numpy().ravel()


def test_value_and_gradient_match_paper_recursion():
    """Value = Eq. 15; gradient = Eq. 18-23 run independently in NumPy."""
    labels, scores = _batch(3, 6, seed=0, pad=False)
    loss = SoftNDCGLoss(sigma=0.8, method="exact")
    s = tf.constant(scores)
    with tf.GradientTape() as tape:
        tape.watch(s)
        per_list = SoftNDCGLoss(sigma=0.8, method="exact", reduction="none")(labels, s)
        total = tf.reduce_sum(per_list)
    grad = tape.gradient(total, s).numpy()
    for b in range(3):
        value, gradient = soft_ndcg_and_gradient(scores[b], labels[b], 0.8)
        np.testing.assert_allclose(-per_list.numpy()[b], value, atol=1e-12)
        np.testing.assert_allclose(-grad[b], gradient, atol=1e-10)
    np.testing.assert_allclose(float(loss(labels, scores)), -np.mean(
        [soft_ndcg_and_gradient(scores[b], labels[b], 0.8)[0] for b in range(3)]), atol=1e-12)


@tensorflow_ops_suite
@pytest.mark.parametrize("kwargs", [
    {"method": "exact"}, {"method": "exact", "topn": 3}, {"method": "normal", "topn": 4},
    {"method": "exact", "topn": 3, "discount_alpha": -0.5, "sinkhorn_iterations": 3},
    {"method": "exact", "discount_alpha": 0.3}])
def test_gradient_matches_finite_differences(kwargs):
    labels, scores = _batch(3, 7, seed=1)
    loss = SoftNDCGLoss(sigma=0.6, **kwargs)
    theoretical, numerical = tf.test.compute_gradient(
        lambda s: loss(labels, s), [tf.constant(scores)])
    np.testing.assert_allclose(theoretical[0], numerical[0], atol=1e-7)
    padded = labels < 0
    assert np.all(theoretical[0].reshape(labels.shape)[padded] == 0.0)


@pytest.mark.parametrize("topn", [None, 3])
def test_tends_to_exact_ndcg_as_sigma_goes_to_zero(topn):
    rng = np.random.default_rng(2)
    labels, _ = _batch(4, 8, seed=2)
    scores = rng.permuted(np.tile(np.arange(8.0), (4, 1)), axis=1)  # no ties
    exact = tfrx.metrics.ndcg(labels, scores, topn=topn).numpy()
    gaps = [np.abs(-_per_list(SoftNDCGLoss(sigma=sigma, topn=topn, method="exact"),
                              labels, scores) - exact).max() for sigma in (0.5, 0.1, 0.01)]
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-6


def test_training_discount_family():
    count = tf.constant([4, 2])
    d = {a: training_discount(5, count, a, tf.float64).numpy() for a in (1.0, 0.0, -1.0, 0.5, -0.5)}
    r, u = np.arange(4.0), np.arange(4.0) / 4
    np.testing.assert_allclose(d[1.0][0, :4], 1 / np.log2(2 + r))
    np.testing.assert_allclose(d[0.0][0, :4], 1 - u)
    np.testing.assert_allclose(d[-1.0][0, :4], 1 - u ** 2)
    np.testing.assert_allclose(d[0.5][0, :4], 0.5 / np.log2(2 + r) + 0.5 * (1 - u))
    np.testing.assert_allclose(d[-0.5][0, :4], (1 - u) + 0.5 * u * (1 - u))
    assert np.all(d[1.0][:, -1] == 0) and np.all(d[0.0][1, 2:] == 0)
    assert np.all(d[-1.0][0, :4] >= d[0.0][0, :4]) and np.all(d[0.0][0, :4] >= d[1.0][0, :4] - 0.4)


def test_lists_without_relevant_documents_and_extreme_scores():
    labels = tf.constant([[0.0, 0.0, -1.0], [1.0, 0.0, 2.0], [-1.0, -1.0, -1.0]])
    scores = tf.constant([[1e4, -1e4, 3.0], [1e4, -1e4, 0.0], [0.0, 1.0, 2.0]])
    for method in ("exact", "normal"):
        loss = SoftNDCGLoss(method=method, topn=2, reduction="none")
        with tf.GradientTape() as tape:
            tape.watch(scores)
            values = loss(labels, scores)
        grad = tape.gradient(values, scores).numpy()
        assert np.all(np.isfinite(values.numpy())) and np.all(np.isfinite(grad))
        assert values.numpy()[0] == 0 and values.numpy()[2] == 0
        assert np.all(grad[0] == 0) and np.all(grad[2] == 0)


@tensorflow_ops_suite
@pytest.mark.parametrize("method", ["exact", "normal"])
def test_xla_and_mixed_precision_give_the_same_values(method):
    labels, scores = _batch(4, 12, seed=5)
    graph, xla, half = graph_xla_and_half(SoftNDCGLoss(topn=5, method=method),
                                          tf.constant(labels, tf.float32), scores)
    assert half[0].dtype == tf.float32
    np.testing.assert_allclose(xla[0].numpy(), graph[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(xla[1].numpy(), graph[1].numpy(), atol=1e-6)
    np.testing.assert_allclose(half[0].numpy(), graph[0].numpy(), atol=1e-6)


@pytest.mark.parametrize("method", ["exact", "normal"])
def test_training_improves_validation_ndcg(method):
    before, after = train_and_validate(SoftNDCGLoss(topn=5, method=method))
    assert after > before + 0.1 and after > 0.8, (before, after)


def test_invalid_arguments():
    for kwargs, arg in [({"sigma": -1}, "sigma"), ({"topn": 0}, "topn"),
                        ({"discount_alpha": 2.0}, "discount_alpha"),
                        ({"method": "x"}, "method"), ({"sinkhorn_iterations": 1.5}, "sinkhorn")]:
        with pytest.raises(ValueError, match=arg):
            SoftNDCGLoss(**kwargs)
