"""WassRankLoss (Yu et al., WSDM 2019): entropic optimal transport between lists."""
import numpy as np
import pytest
import tensorflow as tf
from scipy.optimize import linprog
from scipy.special import softmax

from tfr_extensions.losses import wassrank as wassrank_spec
from tfr_extensions.losses import wassrank  # (the math and its helpers)
from tfr_extensions.losses.wassrank import WassRankLoss
from support.oracles_softrank import entropic_ot, sinkhorn_numpy, train_and_validate
from support.stack import tensorflow_ops_suite


def exact_transport(a, b, cost):
    """The unregularized optimal transport cost, by linear programming."""
    n, m = cost.shape
    rows = np.kron(np.eye(n), np.ones((1, m)))
    cols = np.kron(np.ones((1, n)), np.eye(m))
    result = linprog(cost.ravel(), A_eq=np.vstack([rows, cols]),
                     b_eq=np.concatenate([a, b]), bounds=(0, None), method="highs")
    return result.fun


def _distance(a, b, cost, regularization, iterations):
    mask = tf.ones([1, len(a)], tf.bool)
    f, g = tf.function(wassrank.sinkhorn_potentials)(
        tf.constant(np.log(a))[None], tf.constant(np.log(b))[None], tf.constant(cost)[None],
        mask, mask, regularization, iterations)
    plan = wassrank.transport_plan(f, g, tf.constant(cost)[None], mask, mask, regularization)
    return float(tf.reduce_sum(plan * cost)), plan.numpy()[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_sinkhorn_distance_tends_to_linear_programming_optimum(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
    cost = rng.random((4, 4)) * 3
    optimum = exact_transport(a, b, cost)
    gaps = []
    for regularization, iterations in ((0.5, 500), (0.1, 2000), (0.03, 8000)):
        value, plan = _distance(a, b, cost, regularization, iterations)
        np.testing.assert_allclose(plan.sum(1), a, atol=1e-9)
        np.testing.assert_allclose(plan.sum(0), b, atol=1e-6)
        gaps.append(abs(value - optimum))
    assert gaps[-1] < 1e-3 and gaps[0] > gaps[-1]


def test_loss_matches_numpy_oracle_and_linprog():
    labels = np.array([[2.0, 0.0, 1.0, 3.0, 0.0]])
    scores = np.array([[0.2, 0.9, -0.4, 0.1, 0.5]])
    mask = labels >= 0
    cost = wassrank.cost_matrix(tf.constant(labels), tf.constant(mask)).numpy()[0]
    a = softmax(scores[0])
    gains = 2.0 ** labels[0] - 1
    relevant = gains > 0
    b = gains[relevant] / gains.sum()
    plan, _, _ = sinkhorn_numpy(a, b, cost[:, relevant], 0.1, 20)
    loss = WassRankLoss(epsilon_scaling=False, reduction="none")
    np.testing.assert_allclose(loss(labels, scores).numpy()[0], np.sum(plan * cost[:, relevant]),
                               rtol=1e-10)
    precise = WassRankLoss(regularization=0.5, sinkhorn_iterations=3000, reduction="none")
    optimum = exact_transport(a, b, cost[:, relevant])
    assert abs(tf.function(precise)(labels, scores).numpy()[0] - optimum) < 0.05 * optimum


def test_cost_matrix_types():
    labels = tf.constant([[0.0, 1.0, 1.0, 2.0, -1.0]])
    mask = labels >= 0
    eg = wassrank.cost_matrix(tf.maximum(labels, 0), mask, "eg", gain_base=4.0,
                              non_rele_gap=10.0, var_penalty=0.5).numpy()[0]
    want = np.array([[0, 13, 13, 25], [13, 0, 0.5, 12], [13, 0.5, 0, 12], [25, 12, 12, 0]])
    np.testing.assert_allclose(eg[:4, :4], want)
    assert np.all(eg[4] == 0) and np.all(eg[:, 4] == 0)
    for cost_type in wassrank_spec.COST_TYPES:
        c = wassrank.cost_matrix(tf.maximum(labels, 0), mask, cost_type).numpy()[0]
        np.testing.assert_allclose(c, c.T)
        assert np.all(np.diag(c) == 0) and np.all(c >= 0)
    p1 = wassrank.cost_matrix(tf.maximum(labels, 0), mask, "p1").numpy()[0]
    assert p1[3, 0] == 3.0  # ideal positions: doc 3 first, doc 0 last


@tensorflow_ops_suite
def test_gradient_is_the_dual_potential_and_matches_entropic_ot():
    """The paper's gradient: a_i (f_i - <a, f>) through the softmax. At
    convergence it is the gradient of OT_lambda = <P, C> - lambda H(P)."""
    labels = np.array([[2.0, 0.0, 1.0, 3.0]])
    scores = tf.constant([[0.2, 0.9, -0.4, 0.1]], tf.float64)
    loss = WassRankLoss(regularization=1.0, sinkhorn_iterations=400, cost_type="dg",
                        target="softmax", epsilon_scaling=False, reduction="sum")
    with tf.GradientTape() as tape:
        tape.watch(scores)
        value = loss(labels, scores)
    grad = tape.gradient(value, scores).numpy()[0]
    cost = wassrank.cost_matrix(tf.constant(labels), tf.constant(labels >= 0), "dg").numpy()[0]
    a, b = softmax(scores.numpy()[0]), softmax(labels[0])
    _, f, _ = sinkhorn_numpy(a, b, cost, 1.0, 400)
    np.testing.assert_allclose(grad, a * (f - a @ f), atol=1e-10)
    eps, numeric = 1e-6, np.zeros(4)
    for i in range(4):
        step = np.eye(4)[i] * eps
        up = entropic_ot(softmax(scores.numpy()[0] + step), b, cost, 1.0, 400)
        down = entropic_ot(softmax(scores.numpy()[0] - step), b, cost, 1.0, 400)
        numeric[i] = (up - down) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, atol=1e-6)


def test_perfect_ranking_is_a_minimum_and_gradient_descends():
    """With target="softmax", scores equal to the labels reproduce the target:
    the transport cost is 0 (its minimum: costs are >= 0) and every
    perturbation raises it. The transport distance has a kink there (like |x|),
    so the gradient at that point is a subgradient, not 0; away from it a
    small step against the gradient lowers the loss as predicted."""
    labels = np.array([[3.0, 1.0, 0.0, 2.0, 1.0]])
    loss = WassRankLoss(target="softmax", reduction="sum")
    best = float(loss(labels, labels))
    assert 0.0 <= best < 1e-6
    rng = np.random.default_rng(0)
    for _ in range(10):
        assert float(loss(labels, labels + 0.5 * rng.normal(size=labels.shape))) > best
    assert float(loss(labels, -labels)) > best + 10.0
    gain_loss = WassRankLoss(reduction="sum")  # target = normalized gains
    ideal = np.where(labels > 0, np.log(np.maximum(2.0 ** labels - 1, 1.0)), -30.0)
    assert float(gain_loss(labels, ideal)) < 1e-3 < 10.0 < float(gain_loss(labels, -labels))
    for _ in range(4):
        scores = tf.constant(rng.normal(size=labels.shape))
        with tf.GradientTape() as tape:
            tape.watch(scores)
            value = gain_loss(labels, scores)
        grad = tape.gradient(value, scores)
        step = 1e-3
        predicted = -step * float(tf.reduce_sum(grad * grad))
        actual = float(gain_loss(labels, scores - step * grad)) - float(value)
        assert 2.0 * predicted < actual < 0.5 * predicted < 0.0  # within 2x of first order


def test_finite_with_large_score_ranges_padding_and_no_relevant():
    labels = tf.constant([[0.0, 2.0, 1.0, -1.0], [0.0, 0.0, 0.0, -1.0], [1.0, 0.0, 2.0, 3.0]])
    scores = tf.constant([[1e4, -1e4, 0.0, 7.0], [1e4, -1e4, 5.0, 0.0],
                          [-3e4, 2e4, 1e4, -1e4]])
    for target in wassrank_spec.TARGETS:
        for cost_type in wassrank_spec.COST_TYPES:
            loss = WassRankLoss(target=target, cost_type=cost_type, reduction="none")
            with tf.GradientTape() as tape:
                tape.watch(scores)
                values = loss(labels, scores)
            grad = tape.gradient(values, scores).numpy()
            assert np.all(np.isfinite(values.numpy())) and np.all(np.isfinite(grad))
            assert grad[0, 3] == 0.0 and values.numpy()[1] == 0.0 and np.all(grad[1] == 0)


@pytest.mark.parametrize("cost_type", ["ddg", "p1", "p2"])
def test_position_costs_break_label_ties_by_index(cost_type):
    """The ideal positions of the ``ddg``, ``p1`` and ``p2`` costs sort the
    labels with ties by index (PT-Ranking's), so permuting documents of one
    label changes the cost matrix; with distinct labels permuting changes nothing.
    (The registry suite's permutation check uses the label-only costs.)"""
    scores = np.array([[0.3, -0.4, 1.1, 0.2, -0.9]])
    permutation = np.array([3, 0, 4, 2, 1])
    loss = WassRankLoss(cost_type=cost_type, target="softmax", reduction="none")
    distinct = np.array([[2.0, 0.0, 1.0, 4.0, 3.0]])
    np.testing.assert_allclose(loss(distinct[:, permutation], scores[:, permutation]).numpy(),
                               loss(distinct, scores).numpy(), rtol=1e-12)
    tied = np.array([[2.0, 0.0, 1.0, 0.0, 1.0]])
    assert not np.allclose(loss(tied[:, permutation], scores[:, permutation]).numpy(),
                           loss(tied, scores).numpy(), rtol=1e-6)


def test_training_improves_validation_ndcg():
    before, after = train_and_validate(WassRankLoss())
    assert after > before + 0.1 and after > 0.8, (before, after)


def test_invalid_arguments():
    for kwargs, arg in [({"regularization": 0}, "regularization"),
                        ({"sinkhorn_iterations": 0}, "sinkhorn_iterations"),
                        ({"cost_type": "l2"}, "cost_type"), ({"target": "x"}, "target"),
                        ({"non_rele_gap": -1}, "non_rele_gap")]:
        with pytest.raises(ValueError, match=arg):
            WassRankLoss(**kwargs)
