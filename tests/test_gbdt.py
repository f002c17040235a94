"""tfrx.gbdt: the twin-sigmoid LightGBM objective against the Keras loss, the
paper's closed form (tests/support/oracles.py), finite differences, LambdaMART's
Hessian, and both LightGBM APIs.

The objective is NumPy: this module imports without TensorFlow (the jax and torch
stacks run it); the comparisons with the Keras loss's TensorFlow gradient
(:func:`keras_gradient`) skip there, saying so."""
import itertools

import lightgbm as lgb
import numpy as np
import pytest

from support import oracles
import tfr_extensions as tfrx
from tfr_extensions import gbdt

METRICS = gbdt.SUPPORTED_METRICS
GRADIENTS = gbdt.GRADIENT_TYPES


def padded_batch(seed=0, batch=6, size=15, ties=False):
    """Labels (-1 = padding) and scores ``[batch, size]``: lists of lengths
    15, 9, 4, 12, 1, 7; list 2 has no relevant document, list 4 one document."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(5, size=(batch, size), p=[0.5, 0.2, 0.15, 0.1, 0.05]).astype(np.float64)
    lengths = np.array([15, 9, 4, 12, 1, 7])
    labels[np.arange(size)[None] >= lengths[:, None]] = -1.0
    labels[2, :4] = 0.0
    labels[4, 0] = 2.0
    scores = rng.normal(size=(batch, size))
    if ties:
        scores = np.round(scores)
    return labels, scores, lengths


def keras_gradient(labels, scores, **kwargs):
    """The Keras loss's float64 gradient by ``tf.GradientTape`` (skips without TensorFlow:
    the keras.ops loss is held to the same closed form in tests/neutral)."""
    tf = pytest.importorskip("tensorflow", reason="compares with the Keras loss's TensorFlow "
                             "gradient; TensorFlow is not installed here")
    loss = tfrx.losses.TwinSigmoidLoss(seed=0, **kwargs)  # mean over the batch
    s = tf.constant(scores)
    with tf.GradientTape() as tape:
        tape.watch(s)
        value = loss(labels, s)
    return tape.gradient(value, s).numpy()


def objective_of(metric="ndcg", gradient="type3", **kwargs):
    kwargs = {"seed": 0, "dtype": np.float64, **kwargs}
    return gbdt.twin_sigmoid_objective(metric, gradient, **kwargs)


@pytest.mark.parametrize("metric,gradient,topn",
                         list(itertools.product(METRICS, GRADIENTS, [None, 3])))
def test_gradient_is_batch_size_times_the_keras_loss_gradient(metric, gradient, topn):
    labels, scores, lengths = padded_batch(seed=2)
    expected = keras_gradient(labels, scores, metric=metric, topn=topn, gradient=gradient,
                              alpha_b=0.8)
    valid = labels >= 0
    grad, hess = objective_of(metric, gradient, topn=topn, alpha_b=0.8).gradients(
        scores[valid], labels[valid], lengths)
    # Keras: mean over the 6 lists of -M (weight 0 without a relevant document);
    # the objective: the sum over lists of -M.
    np.testing.assert_allclose(grad, len(labels) * expected[valid], rtol=1e-10, atol=1e-14)
    flat_list = np.repeat(np.arange(len(lengths)), lengths)
    for no_gradient in (2, 4):  # no relevant document; a single document
        assert (grad[flat_list == no_gradient] == 0).all()
        assert (hess[flat_list == no_gradient] == 0).all()
    assert np.abs(grad).max() > 0 and np.isfinite(hess).all()


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_float32_gradient_equals_the_papers_closed_form(gradient):
    labels, scores, lengths = padded_batch(seed=5)
    valid = labels >= 0
    objective = gbdt.twin_sigmoid_objective("ap", gradient, topn=5, alpha_b=1.7, seed=0)
    grad, _ = objective.gradients(scores[valid], labels[valid], lengths)
    expected = np.concatenate([
        oracles.twin_loss_gradient(labels[b], scores[b], "ap", 5, 1.7, gradient)[valid[b]]
        for b in range(len(labels))])
    np.testing.assert_allclose(grad, expected, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("metric,gradient", list(itertools.product(METRICS, GRADIENTS)))
def test_ties_without_tie_breaking_match_the_keras_loss(metric, gradient):
    """Tied documents share their mean position (sigma+(0) = 1/2) in both."""
    labels, scores, lengths = padded_batch(seed=3, ties=True)
    valid = labels >= 0
    expected = keras_gradient(labels, scores, metric=metric, topn=4, gradient=gradient,
                              tie_break=False)
    grad, _ = objective_of(metric, gradient, topn=4, tie_break=False).gradients(
        scores[valid], labels[valid], lengths)
    np.testing.assert_allclose(grad, len(labels) * expected[valid], rtol=1e-10, atol=1e-14)


def _gradient_at_order(labels, scores, positions, metric, gradient, alpha_b=1.0):
    """The closed form with the ranks ``positions`` (tie breaks) and the
    pairwise derivatives at ``scores`` (Eq. 17-21, 27-33)."""
    rank_gradient = oracles.metric_rank_gradient(labels, -positions.astype(float), metric, None)
    return -(rank_gradient @ oracles.rank_jacobian(labels, scores, alpha_b, gradient))


@pytest.mark.parametrize("metric,gradient", [("ndcg", "type3"), ("ap", "type1")])
def test_tie_breaking_draws_a_uniform_random_order_each_round(metric, gradient):
    """All four documents tied: each round's gradient is the closed form at one
    order of them, every order occurs, and a seed replays the sequence."""
    labels, scores = np.array([3.0, 2.0, 1.0, 0.0]), np.zeros(4)
    orders = list(itertools.permutations(range(1, 5)))
    candidates = np.stack([_gradient_at_order(labels, scores, np.array(p), metric, gradient)
                           for p in orders])
    objective = objective_of(metric, gradient, seed=7)
    seen = []
    for _ in range(240):
        grad, _ = objective.gradients(scores, labels, [4])
        match = np.flatnonzero(np.abs(candidates - grad).max(1) < 1e-12)
        assert len(match) == 1
        seen.append(match[0])
    counts = np.bincount(seen, minlength=len(orders))
    assert (counts > 0).all() and counts.max() < 30  # 10 expected per order
    replay = objective_of(metric, gradient, seed=7)
    assert [np.flatnonzero(np.abs(candidates - replay.gradients(scores, labels, [4])[0])
                           .max(1) < 1e-12)[0] for _ in range(20)] == seen[:20]


def test_tie_breaking_only_reorders_tied_documents():
    labels, scores = np.array([1.0, 2.0, 0.0, 1.0]), np.array([1.0, 0.5, 0.5, -2.0])
    objective = objective_of("ndcg", "type2")
    at = {order: _gradient_at_order(labels, scores, np.array(order), "ndcg", "type2")
          for order in [(1, 2, 3, 4), (1, 3, 2, 4)]}  # the two orders the scores allow
    seen = set()
    for _ in range(40):
        grad, _ = objective.gradients(scores, labels, [4])
        seen.update(o for o, g in at.items() if np.allclose(grad, g, rtol=1e-12, atol=1e-14))
    assert seen == set(at)


@pytest.mark.parametrize("metric,gradient", list(itertools.product(METRICS, GRADIENTS)))
def test_exact_hessian_is_the_derivative_of_the_gradient(metric, gradient):
    """Central differences of the gradient (the ranks do not change over
    +-1e-6): equal for type3; for type1/2 equal in absolute value (the
    floor disabled)."""
    rng = np.random.default_rng(1)
    group = [7, 12, 5, 9]
    labels = rng.integers(0, 3, size=sum(group)).astype(float)
    scores = rng.normal(size=sum(group))
    objective = objective_of(metric, gradient, alpha_b=0.7, hessian_floor=1e-12)
    _, hess = objective.gradients(scores, labels, group)
    eps, numeric = 1e-6, np.empty(len(scores))
    for k in range(len(scores)):
        up, down = scores.copy(), scores.copy()
        up[k] += eps
        down[k] -= eps
        numeric[k] = (objective.gradients(up, labels, group)[0][k]
                      - objective.gradients(down, labels, group)[0][k]) / (2 * eps)
    expected = numeric if gradient == "type3" else np.abs(numeric)
    np.testing.assert_allclose(hess, expected, rtol=1e-6, atol=1e-9)
    if gradient == "type3":
        assert (numeric >= -1e-9).all()  # positive without any change
    else:
        assert (numeric < -1e-6).any()  # type1/2: negative somewhere, hence |.|


@pytest.mark.parametrize("gradient,hessian", list(itertools.product(GRADIENTS, gbdt.HESSIANS)))
def test_hessian_is_positive_wherever_the_gradient_is_not_zero(gradient, hessian):
    rng = np.random.default_rng(4)
    group = [30, 8, 1, 20, 3]
    labels = rng.integers(0, 4, size=sum(group)).astype(float)
    for scores in (np.zeros(sum(group)),  # the first boosting round: all tied
                   np.round(rng.normal(size=sum(group)), 1), rng.normal(size=sum(group)) * 5):
        grad, hess = objective_of("ndcg", gradient, hessian=hessian).gradients(
            scores, labels, group)
        assert (hess >= 0).all()
        assert (hess[grad != 0] > 0).all()


def test_type1_exact_hessian_is_floored_at_ties():
    """sigma''(0) = 0: at the first round the exact type1 Hessian is the floor,
    hessian_floor times the pairwise curvature alpha^2 q(1-q)(|delta_k| + |delta_j|)."""
    labels, scores = np.array([2.0, 0.0, 1.0]), np.zeros(3)
    objective = objective_of("ndcg", "type1", tie_break=False, hessian_floor=0.5, alpha_b=2.0)
    _, hess = objective.gradients(scores, labels, [3])
    ranks = np.full(3, 2.0)  # midranks
    delta = -(2 ** labels - 1) / oracles.dcg_at(np.sort(labels)[::-1], None) / (
        np.log2(1 + ranks) ** 2 * (1 + ranks) * np.log(2))
    pairwise = [sum(4.0 * 0.25 * (abs(delta[k]) + abs(delta[j])) for j in range(3) if j != k)
                for k in range(3)]
    np.testing.assert_allclose(hess, 0.5 * np.array(pairwise), rtol=1e-12)


def test_lambdamart_hessian_is_lambdamarts_for_ndcg():
    """alpha^2 sum_j rho(1 - rho) |Delta nDCG_kj| over pairs with different
    labels, Delta nDCG from swapping the two documents' scores."""
    rng = np.random.default_rng(6)
    labels, scores = rng.integers(0, 4, size=11).astype(float), rng.normal(size=11)
    alpha = 1.5
    _, hess = objective_of("ndcg", "type3", hessian="lambdamart", alpha_b=alpha).gradients(
        scores, labels, [11])
    base = oracles.ndcg(labels, scores)
    expected = np.zeros(11)
    for k, j in itertools.permutations(range(11), 2):
        if labels[k] != labels[j]:
            swapped = scores.copy()
            swapped[[k, j]] = swapped[[j, k]]
            rho = 1.0 / (1.0 + np.exp(-alpha * (scores[k] - scores[j])))
            expected[k] += alpha ** 2 * rho * (1 - rho) * abs(oracles.ndcg(labels, swapped) - base)
    np.testing.assert_allclose(hess, expected, rtol=1e-10)


def test_padding_in_blocks_changes_nothing():
    """Lists of very different lengths share padded blocks: each list's
    gradient and Hessian equal those of the list alone."""
    rng = np.random.default_rng(8)
    group = [2, 3, 40, 5, 17, 3, 60, 9, 1, 4]
    labels = rng.integers(0, 3, size=sum(group)).astype(float)
    scores = rng.normal(size=sum(group))
    for hessian in gbdt.HESSIANS:
        objective = objective_of("nerr", "type2", topn=5, hessian=hessian, tie_break=False)
        grad, hess = objective.gradients(scores, labels, group)
        assert len(objective._layout.blocks) < sum(g > 1 for g in group)  # lists were batched
        offsets = np.concatenate([[0], np.cumsum(group)])
        for a, b in zip(offsets[:-1], offsets[1:]):
            alone = objective.gradients(scores[a:b], labels[a:b], [b - a])
            np.testing.assert_allclose(grad[a:b], alone[0], rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(hess[a:b], alone[1], rtol=1e-12, atol=1e-15)


def test_a_long_list_split_into_row_chunks_matches_the_keras_loss():
    rng = np.random.default_rng(9)
    labels = rng.choice(5, size=1300, p=[0.5, 0.3, 0.13, 0.05, 0.02]).astype(float)
    scores = rng.normal(size=1300)
    chunked = objective_of("ndcg", "type3", topn=10, block_pairs=1 << 14)
    grad, hess = chunked.gradients(scores, labels, [1300])
    assert sum(len(group.chunks) for group in chunked._layout.blocks[0].groups) > 10
    whole = objective_of("ndcg", "type3", topn=10).gradients(scores, labels, [1300])
    np.testing.assert_allclose(grad, whole[0], rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(hess, whole[1], rtol=1e-10, atol=1e-14)
    expected = keras_gradient(labels[None], scores[None], metric="ndcg", topn=10,
                              gradient="type3")[0]
    np.testing.assert_allclose(grad, expected, rtol=1e-9, atol=1e-14)


def test_widely_spread_scores_take_the_per_pair_logistic():
    """A spread over 60 / alpha_b (float32) leaves one exp per document inexact."""
    labels, scores, lengths = padded_batch(seed=10)
    valid = labels >= 0
    scores = scores * 50.0
    objective = gbdt.twin_sigmoid_objective("ndcg", "type1", alpha_b=1.0, seed=0)
    grad, hess = objective.gradients(scores[valid], labels[valid], lengths)
    expected = np.concatenate([oracles.twin_loss_gradient(labels[b], scores[b], "ndcg")[valid[b]]
                               for b in range(len(labels))])
    np.testing.assert_allclose(grad, expected, rtol=1e-4, atol=1e-7)
    assert np.isfinite(hess).all()


def test_layout_is_cached_per_dataset_and_threads_change_nothing(monkeypatch):
    monkeypatch.setattr(gbdt.threads, "THREADED_MIN_PAIRS", 0)  # threads even for this small data
    rng = np.random.default_rng(11)
    group = [20, 35, 12, 50, 7]
    labels = rng.integers(0, 3, size=sum(group)).astype(float)
    scores = np.round(rng.normal(size=sum(group)), 1)  # ties: the random draws matter
    one = objective_of("ap", "type3", num_threads=1, seed=3, block_pairs=1 << 9)
    two = objective_of("ap", "type3", num_threads=2, seed=3, block_pairs=1 << 9)
    first = one.gradients(scores, labels, group)
    layout = one._layout
    np.testing.assert_array_equal(first[0], two.gradients(scores, labels, group)[0])
    np.testing.assert_array_equal(one.gradients(scores, labels, group)[0],
                                  two.gradients(scores, labels, group)[0])
    assert one._layout is layout and len(layout.blocks) > 1
    labels[0] = 5 - labels[0]
    one.gradients(scores, labels, group)
    assert one._layout is not layout  # new labels, new layout


def test_weights_multiply_gradient_and_hessian():
    labels, scores, lengths = padded_batch(seed=12)
    valid = labels >= 0
    weight = np.linspace(0.5, 2.0, valid.sum())
    plain = objective_of().gradients(scores[valid], labels[valid], lengths)
    weighted = objective_of().gradients(scores[valid], labels[valid], lengths, weight)
    np.testing.assert_allclose(weighted[0], weight * plain[0], rtol=1e-12)
    np.testing.assert_allclose(weighted[1], weight * plain[1], rtol=1e-12)


def _toy_data(seed=13):
    data = tfrx.data.synthetic(num_queries=40, num_features=5, seed=seed, list_size=(5, 30))
    return data.features, data.labels, np.diff(data.query_offsets)


def _mean_ndcg5(labels, scores, group):
    offsets = np.concatenate([[0], np.cumsum(group)])
    values = [oracles.ndcg(labels[a:b], scores[a:b], 5) for a, b in zip(offsets[:-1], offsets[1:])
              if labels[a:b].max() > 0]
    return float(np.mean(values))


def test_lgb_train_and_the_sklearn_ranker_train_the_same_model():
    features, labels, group = _toy_data()
    params = {"num_leaves": 7, "min_data_in_leaf": 5, "learning_rate": 0.1, "verbose": -1,
              "deterministic": True, "num_threads": 1}
    objective = gbdt.twin_sigmoid_objective("ndcg", "type3", seed=0)
    booster = lgb.train({**params, "objective": objective},
                        lgb.Dataset(features, labels, group=group), num_boost_round=30)
    ranker = lgb.LGBMRanker(objective=gbdt.twin_sigmoid_objective("ndcg", "type3", seed=0),
                            n_estimators=30, **params)
    ranker.fit(features, labels, group=group)
    np.testing.assert_allclose(ranker.predict(features), booster.predict(features), rtol=1e-12)
    # lgb.train deep-copies its params: the object passed in is not advanced,
    # and training again with it replays the same tie breaks
    assert objective.rounds == 0
    again = lgb.train({**params, "objective": objective},
                      lgb.Dataset(features, labels, group=group), num_boost_round=30)
    np.testing.assert_array_equal(again.predict(features), booster.predict(features))
    before = _mean_ndcg5(labels, np.zeros(len(labels)), group)
    after = _mean_ndcg5(labels, booster.predict(features), group)
    assert after > before + 0.15  # it learns (ties in `before`: the original order)


def test_the_sklearn_api_needs_the_group():
    objective = gbdt.twin_sigmoid_objective()
    with pytest.raises(ValueError, match="group"):
        objective(np.zeros(3), np.zeros(3), None, None)


def test_bad_arguments_raise_value_errors_naming_the_argument():
    for kwargs, arg in [({"metric": "mrr"}, "metric"), ({"gradient": "type4"}, "gradient"),
                        ({"hessian": "fisher"}, "hessian"), ({"alpha_b": 0}, "alpha_b"),
                        ({"topn": 0}, "topn"), ({"topn": 2.5}, "topn"),
                        ({"seed": -1}, "seed"), ({"dtype": np.float16}, "dtype"),
                        ({"block_pairs": 0}, "block_pairs"), ({"num_threads": -2}, "num_threads"),
                        ({"hessian_floor": -1.0}, "hessian_floor")]:
        with pytest.raises(ValueError, match=arg):
            gbdt.twin_sigmoid_objective(**kwargs)
    objective = gbdt.twin_sigmoid_objective()
    with pytest.raises(ValueError, match="group"):
        objective.gradients(np.zeros(4), np.zeros(4), [3])
    with pytest.raises(ValueError, match="labels"):
        objective.gradients(np.zeros(2), np.array([1.0, -1.0]), [2])
    with pytest.raises(ValueError, match="scores"):
        objective.gradients(np.array([0.0, np.nan]), np.ones(2), [2])
    with pytest.raises(ValueError, match="weight"):
        objective.gradients(np.zeros(2), np.ones(2), [2], np.ones(3))
    with pytest.raises(ValueError, match="objective name"):
        gbdt.parse_objective_name("twin_ndcg")


def test_mq2008_fold1_gradient_equals_the_keras_loss(mq2008_dir):
    """On the real training lists (471 queries, up to 121 documents, many ties
    of labels), at random scores."""
    data = tfrx.data.read_libsvm(str(mq2008_dir / "Fold1" / "train.txt"))
    group = np.diff(data.query_offsets)
    scores = np.random.default_rng(14).normal(size=len(data.labels))
    grad, hess = objective_of("ndcg", "type3", topn=10).gradients(scores, data.labels, group)
    batch_labels = np.full((len(group), group.max()), -1.0)
    batch_scores = np.zeros(batch_labels.shape)
    valid = np.arange(group.max())[None] < group[:, None]
    batch_labels[valid], batch_scores[valid] = data.labels, scores
    expected = keras_gradient(batch_labels, batch_scores, metric="ndcg", topn=10,
                              gradient="type3")
    np.testing.assert_allclose(grad, len(group) * expected[valid], rtol=1e-9, atol=1e-13)
    assert (hess >= 0).all() and (hess[grad != 0] > 0).all()
