"""``ops.twin_sigmoid`` (on the keras.ops filling) and the twin-sigmoid loss body against the float64 NumPy
oracles of the paper (:mod:`support.oracles_twin_sigmoid`: the metric at the exact
ranks of Eq. 12, the rank Jacobian of Eq. 17-18 with the derivatives of Eq. 11, 20 and
21; :mod:`support.oracles` for the element-wise derivatives) on the shared cases:
values, type1/2/3 gradients, random tie breaking, huge score spreads, every list-length
path, the Keras class, ``model.fit`` and ``jax.jit``."""
import importlib

import numpy as np
import pytest
import scipy.stats

import keras
from keras import ops

import harness
from support import oracles, oracles_twin_sigmoid
import tfr_extensions as tfrx
from tfr_extensions.keras_ops import sorting as k_sorting

# (the module: tfr_extensions.ops exports its function twin_sigmoid under the same name)
k_twin = importlib.import_module("tfr_extensions.ops.twin_sigmoid")

METRICS = ("ndcg", "ap", "ap_min", "precision", "nerr")
GRADIENTS = ("type1", "type2", "type3")
KEY = "twin_sigmoid"


def keras_ops_loss(labels, scores, mask=None, **options):
    """``(losses, weights)`` of the loss's ``keras.ops`` math through the screening (on
    PyTorch too, where the public function runs the PyTorch-native body)."""
    spec = tfrx.losses.twin_sigmoid_loss.spec
    losses, weights, _ = spec.compute(labels, scores, mask, spec.check_options(**options),
                                      "keras_ops")
    return losses, weights


def oracle(tie_keys=None, **options):
    """``(labels, scores) -> (loss * weight, gradient)`` of one list's valid documents,
    for the loss's options (``tie_keys``: the valid documents' keys, per list)."""
    checked = tfrx.losses.twin_sigmoid_loss.spec.check_options(**options)
    checked.pop("seed")
    return lambda y, s: oracles_twin_sigmoid.twin_sigmoid_loss(y, s, tie_keys=tie_keys,
                                                               **checked)


def check_loss(labels, scores, what="", rtol=2e-5, atol=2e-6, compiled=False, **options):
    """The body's value and gradient (through the screening) = the oracle's; returns
    the gradient. Op by op on JAX unless ``compiled`` (the grids below run dozens of
    option sets on one shape: JAX compiles each primitive once, where it would compile
    a whole program per option set)."""
    value, grad = harness.body_value_and_grad(KEY, labels, scores, compiled, **options)
    want, want_grad = harness.expected_per_list(oracle(**options), labels, scores)
    what = f"{what} {options}"
    harness.assert_close(value, want, rtol=rtol, what="value " + what)
    harness.assert_close(grad, want_grad, rtol=rtol, atol=atol, what="gradient " + what)
    harness.assert_policy(value, grad, labels, scores)
    return grad


def test_the_oracle_at_distinct_scores_is_the_papers_closed_form():
    """The array oracle equals :mod:`support.oracles`' loops (exact metric, Eq. 17-21)
    where the scores are distinct."""
    labels, scores = harness.CASES["mixed"]
    for y, s in zip(labels, scores):
        keep = y >= 0
        y, s = y[keep].astype(np.float64), s[keep].astype(np.float64)
        for metric, gradient, topn in (("ndcg", "type1", None), ("ap", "type2", 3),
                                       ("nerr", "type3", 2), ("precision", "type1", 3),
                                       ("ap_min", "type3", 2)):
            value, grad = oracles_twin_sigmoid.twin_sigmoid_loss(y, s, metric, topn, gradient,
                                                                 1.5)
            assert value == pytest.approx(-oracles.METRIC_ORACLES[metric](y, s, topn), abs=1e-12)
            np.testing.assert_allclose(
                grad, oracles.twin_loss_gradient(y, s, metric, topn, 1.5, gradient),
                rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("gradient", GRADIENTS)
@pytest.mark.parametrize("metric", METRICS)
def test_loss_value_and_gradient_equal_the_oracle(metric, gradient):
    """The short shared cases in one batch (the long lists: below, in their own shape
    and on every list-length path); tied scores share their mean position (Eq. 12)."""
    labels, scores = harness.merged_cases(harness.SHORT_CASES)
    for topn in (None, 3):
        grad = check_loss(labels, scores, metric=metric, topn=topn, gradient=gradient,
                          alpha_b=1.5, tie_break=False)
        assert np.any(grad != 0)


# One configuration per case in its own shape (the grid above runs on all of them).
PER_CASE = [(name, METRICS[i % 5], GRADIENTS[i % 3], (None, 3)[i % 2])
            for i, name in enumerate(sorted(harness.CASES))]


@pytest.mark.parametrize("name,metric,gradient,topn", PER_CASE)
def test_every_case_in_its_own_shape(name, metric, gradient, topn):
    labels, scores = harness.CASES[name]
    check_loss(labels, scores, name, compiled=True, metric=metric, topn=topn,
               gradient=gradient, tie_break=False)


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_tie_breaking_without_ties_equals_the_oracle(gradient):
    labels, _ = harness.merged_cases(harness.SHORT_CASES)
    tie_free = np.arange(labels.size, dtype=np.float32).reshape(labels.shape)
    scores = np.random.default_rng(2).permutation(tie_free.ravel()).reshape(labels.shape) / 50.0
    for metric in METRICS[GRADIENTS.index(gradient)::3]:  # each metric under one type
        check_loss(labels, scores.astype(np.float32), metric=metric, topn=3, gradient=gradient,
                   tie_break=True, seed=0)


#: the relative accuracy of float64 gradients: on JAX the twin-sigmoid backward is
#: float64 only to about 1e-7 relative (seen in this suite's oracle comparison; the
#: values are exact to rounding), elsewhere to rounding
FLOAT64_GRADIENT_RTOL = 1e-6 if harness.BACKEND == "jax" else 1e-9


def test_float64_scores_compute_in_float64():
    labels, scores = harness.merged_cases(harness.SHORT_CASES, np.float64)
    with harness.float64():
        for i, metric in enumerate(METRICS):
            options = dict(metric=metric, topn=(None, 3)[i % 2], gradient=GRADIENTS[i % 3],
                           tie_break=False)
            value, grad = harness.body_value_and_grad(KEY, labels, scores, False, **options)
            want, want_grad = harness.expected_per_list(oracle(**options), labels, scores)
            assert value.dtype == grad.dtype == np.float64
            harness.assert_close(value, want, rtol=1e-12, atol=1e-14, what=metric)
            harness.assert_close(grad, want_grad, rtol=FLOAT64_GRADIENT_RTOL, atol=1e-14,
                                 what=metric)


def _oracle_with_tie_keys(metric, gradient, topn, labels, scores, seed):
    """The oracle with the tie keys that keras_ops draws from ``seed``: ties go to the
    larger key."""
    keys = harness.to_numpy(k_sorting.random_tie_keys(scores.shape, seed))
    values, grads = np.zeros(len(labels)), np.zeros(labels.shape)
    for b, (y, s, k) in enumerate(zip(labels, scores, keys)):
        keep = y >= 0
        values[b], grads[b, keep] = oracles_twin_sigmoid.twin_sigmoid_loss(
            y[keep], s[keep], metric, topn, gradient, 1.0, tie_break=True, tie_keys=k[keep])
    return values, grads


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_tie_breaking_on_ties_equals_the_oracle_with_the_same_keys(gradient):
    labels, scores = harness.CASES["ties"]
    for i, metric in enumerate(METRICS):
        if i % 3 != GRADIENTS.index(gradient):
            continue  # each metric under one type
        topn = (None, 3)[i % 2]
        for seed in (3, 4):
            value, grad = harness.value_and_grad(
                lambda y, s: keras_ops_loss(y, s, metric=metric, topn=topn,
                                            gradient=gradient, seed=seed)[0],
                labels, scores)
            want, want_grad = _oracle_with_tie_keys(metric, gradient, topn, labels, scores, seed)
            harness.assert_close(value, want, what=f"{metric} value")
            harness.assert_close(grad, want_grad, rtol=2e-5, atol=2e-6, what=f"{metric} gradient")


def _tied_padded_lists(list_size, seed):
    """Four lists of ``list_size`` with scores on a grid of 0.25 (many ties), one
    list half padded, one with every valid score tied."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, size=(4, list_size)).astype(np.float32)
    labels[1, list_size // 2:] = -1.0
    scores = (np.round(rng.normal(size=(4, list_size)) * 4) / 4).astype(np.float32)
    scores[2] = 0.75
    return labels, scores


@pytest.mark.parametrize("list_size", (20, 70, 1100))
def test_every_list_length_path_equals_the_oracle_and_the_lexicographic_order(list_size):
    """Up to 32 documents (JAX: tanh form only), up to 1024 (JAX: positions by
    counting, fused column blocks) and beyond (JAX: one two-key sort): positions
    from random tie keys equal NumPy's lexicographic order (score, then key, then
    index, padding last), midranks equal SciPy's, and the tie-broken loss and its
    gradient equal the oracle's with the same keys."""
    labels, scores = _tied_padded_lists(list_size, list_size)
    valid = labels >= 0
    keys = harness.to_numpy(k_sorting.random_tie_keys(scores.shape, 5))
    positions = harness.to_numpy(k_sorting.exact_ranks(scores, valid, keys))
    index = np.broadcast_to(np.arange(list_size), scores.shape)
    order = np.lexsort((index, -keys, -np.where(valid, scores, -np.inf)), axis=-1)
    np.testing.assert_array_equal(positions, np.argsort(order, axis=-1) + 1)
    midranks = harness.to_numpy(k_sorting.midranks(scores, valid))
    for row, (s, v) in enumerate(zip(scores, valid)):
        np.testing.assert_array_equal(midranks[row][v], scipy.stats.rankdata(-s[v]))
        np.testing.assert_array_equal(midranks[row][~v], 0.0)
    configs = (("ndcg", "type3", None), ("ap", "type1", 10), ("nerr", "type2", 5))
    results = harness.jit_values_and_grads(
        [lambda y, s, m=m, g=g, k=k: keras_ops_loss(y, s, metric=m, topn=k,
                                                    gradient=g, seed=5)[0]
         for m, g, k in configs], labels, scores)
    for (metric, gradient, topn), (value, grad) in zip(configs, results):
        want, want_grad = _oracle_with_tie_keys(metric, gradient, topn, labels, scores, 5)
        harness.assert_close(value, want, what=f"{metric} value")
        harness.assert_close(grad, want_grad, rtol=2e-5, atol=2e-6, what=f"{metric} gradient")


def test_tie_broken_ranks_are_random_permutations_consistent_with_the_scores():
    _, scores = harness.CASES["ties"]
    mask = np.ones(scores.shape, bool)
    draws = set()
    for seed in range(6):
        ranks, positions = (harness.to_numpy(x) for x in k_twin.exact_forward_ranks(
            scores, mask, True, seed))
        np.testing.assert_array_equal(ranks, positions)
        for s, r in zip(scores, ranks):
            assert sorted(r) == list(range(1, len(r) + 1))
            higher = s[:, None] > s[None, :]
            assert np.all((r[:, None] < r[None, :])[higher])  # a higher score ranks first
        draws.add(tuple(ranks[1]))  # the all-tied list
    assert len(draws) >= 5


def test_mean_value_over_random_tie_breaks_is_the_expectation():
    """An all-tied list's nDCG and Precision@2 under random tie breaking average to
    their expectation over uniform random permutations."""
    gains_labels = np.array([3.0, 0.0, 1.0, 2.0, 0.0], np.float32)
    n, lists = len(gains_labels), 2000
    labels = np.tile(gains_labels, (lists, 1))
    scores = np.zeros_like(labels)
    gains = 2.0 ** gains_labels - 1
    ideal = np.sum(np.sort(gains)[::-1] / np.log2(np.arange(2, n + 2)))
    expected = {"ndcg": gains.sum() * np.mean(1 / np.log2(np.arange(2, n + 2))) / ideal,
                "precision": np.mean(gains_labels > 0)}
    for metric, topn in (("ndcg", None), ("precision", 2)):
        losses, _ = keras_ops_loss(labels, scores, metric=metric, topn=topn, seed=11)
        values = -harness.to_numpy(losses)
        assert len(np.unique(values)) >= 3  # the lists were tie-broken differently
        stderr = values.std() / np.sqrt(lists)
        assert abs(values.mean() - expected[metric]) < 4 * stderr, metric


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_gradients_stay_finite_for_huge_score_spreads(gradient):
    labels, scores = harness.merged_cases(harness.SHORT_CASES)
    broken = harness.broken_lists(labels, scores)
    for k, scale in enumerate((1e4, 1e30)):
        huge = scores * np.float32(scale)
        for i, metric in enumerate(METRICS):
            options = dict(metric=metric, topn=3, gradient=gradient, tie_break=False)
            if i == (GRADIENTS.index(gradient) + 2 * k) % 5:  # one metric each: against the
                # oracle (the body takes tanh per pair there, exact only to an absolute
                # 1e-7 of alpha_b)
                check_loss(labels, huge, f"x{scale}", rtol=1e-4, atol=1e-6, **options)
                continue
            value, grad = harness.body_value_and_grad(KEY, labels, huge, False, **options)
            assert np.all(np.isfinite(grad)) and np.all(np.isfinite(value[~broken]))
            assert np.all(np.isnan(value[broken])) and np.any(grad != 0)


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_elementwise_twin_sigmoid_and_ranks_equal_the_papers_derivatives(gradient):
    x = np.array([-1e30, -30.0, -2.0, -0.3, 0.0, 0.4, 1.5, 25.0, 1e30], np.float32)
    u = np.array([1.0, 1.0, -1.0, 0.0, 1.0, -1.0, 1.0, -1.0, -1.0], np.float32)
    value, grad = harness.jit_value_and_grad(
        lambda u, x: k_twin.twin_sigmoid(x, 2.0, gradient, u), u, x)
    np.testing.assert_array_equal(value, [0, 0, 0, 0, 0.5, 1, 1, 1, 1])
    with np.errstate(over="ignore"):
        want_grad = [oracles.twin_derivative(float(z), float(v), 2.0, gradient)
                     for z, v in zip(x, u)]
    harness.assert_close(grad, want_grad)
    # the ranks of Eq. 12 (midranks at ties, 0 at padding) and their Jacobian (Eq. 17-18)
    labels, scores = harness.CASES["mixed"]
    weights = np.random.default_rng(3).normal(size=labels.shape).astype(np.float32)
    value, grad = harness.jit_value_and_grad(
        lambda y, s: k_twin.twin_sigmoid_ranks(s, y, None, gradient, 0.7, False)
        * ops.convert_to_tensor(weights), labels, scores)
    want, want_grad = np.zeros(labels.shape), np.zeros(labels.shape)
    for b, (y, s, w) in enumerate(zip(labels, scores, weights)):
        keep = y >= 0
        ranks, _ = oracles_twin_sigmoid.ranks_and_positions(s[keep])
        want[b, keep] = ranks * w[keep]
        want_grad[b, keep] = w[keep] @ oracles_twin_sigmoid.rank_jacobian(y[keep], s[keep], 0.7,
                                                                         gradient)
    harness.assert_close(value, want)
    harness.assert_close(grad, want_grad)


def test_bad_options_raise():
    with pytest.raises(ValueError, match="gradient"):
        k_twin.twin_sigmoid(np.ones(2, np.float32), gradient="type4")
    with pytest.raises(ValueError, match="labels"):
        k_twin.twin_sigmoid_ranks(np.ones((1, 2), np.float32), gradient="type2")
    with pytest.raises(ValueError, match="alpha_b"):
        k_twin.twin_sigmoid_ranks(np.ones((1, 2), np.float32), alpha_b=0.0)


def test_keras_class_computes_the_oracles_mean():
    labels, _ = harness.merged_cases(harness.SHORT_CASES)
    labels = np.minimum(labels, 4.0)  # no broken list: the mean is finite
    scores = np.random.default_rng(4).permutation(labels.size).reshape(labels.shape) / 50.0
    scores = scores.astype(np.float32)  # tie-free: the seed's draws change nothing
    loss = tfrx.losses.get("twin_ndcg_type3", seed=0)
    value, grad = harness.value_and_grad(lambda y, s: loss(y, s), labels, scores)
    want, want_grad = harness.expected_per_list(oracle(metric="ndcg", gradient="type3"),
                                                labels, scores)
    harness.assert_close(value, want.mean())
    harness.assert_close(grad, want_grad / len(labels), rtol=2e-5, atol=1e-7)


@pytest.mark.skipif(harness.BACKEND == "tensorflow", reason="the TensorFlow path's fit is "
                    "tests/losses/test_twin_sigmoid_loss.py's")
def test_model_fit_with_the_loss_and_ranking_metric():
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    features = rng.normal(size=(16, 8, 3)).astype(np.float32)
    labels = rng.integers(0, 3, size=(16, 8)).astype(np.float32)
    labels[:, 6:] = -1.0
    model = keras.Sequential([keras.Input((8, 3)), keras.layers.Dense(1),
                              keras.layers.Reshape((8,))])
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=tfrx.losses.get("twin_ndcg_type3", seed=0),
                  metrics=[tfrx.metrics.RankingMetric("ndcg", topn=3)])
    history = model.fit(features, labels, batch_size=8, epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert np.all(np.isfinite(history.history["ndcg_3"]))
    scores = harness.to_numpy(model.predict(features, verbose=0))
    want = np.mean([oracles.ndcg(y, s, 3) for y, s in zip(labels, scores)])
    harness.assert_close(model.evaluate(features, labels, batch_size=16, verbose=0,
                                        return_dict=True)["ndcg_3"], want)


@pytest.mark.skipif(harness.BACKEND != "jax", reason="jax.jit")
def test_body_and_its_gradient_run_under_jax_jit():
    import jax  # pylint: disable=import-outside-toplevel
    labels, scores = harness.CASES["ties"]

    def total(scores, seed, tie_break):
        losses, weights = keras_ops_loss(
            labels, scores, mask=labels >= 0, metric="nerr", topn=3, gradient="type2",
            tie_break=tie_break, seed=seed)
        return ops.sum(losses * weights)

    seed = keras.random.SeedGenerator(5).next()
    fn = jax.value_and_grad(lambda s, seed: total(s, seed, True))
    value, grad = jax.jit(fn)(scores, seed)
    eager_value, eager_grad = fn(scores, seed)
    harness.assert_close(value, eager_value)
    harness.assert_close(grad, eager_grad)
    want, want_grad = harness.expected_per_list(
        oracle(metric="nerr", topn=3, gradient="type2", tie_break=False), labels, scores)
    value, grad = jax.jit(jax.value_and_grad(lambda s: total(s, None, False)))(scores)
    harness.assert_close(value, want.sum())
    harness.assert_close(grad, want_grad, rtol=2e-5, atol=2e-6)
