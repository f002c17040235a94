"""``keras_ops.twin_sigmoid`` and the twin-sigmoid loss body against the TensorFlow
implementation (``tfr_extensions.ops.twin_sigmoid``, ``tfrx.losses.twin_sigmoid_loss``)
on the shared cases: values, type1/2/3 gradients, random tie breaking, huge score
spreads, the Keras class, ``model.fit`` and ``jax.jit``."""
import importlib

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf

import keras
from keras import ops

import harness
import tfr_extensions as tfrx
from tfr_extensions.keras_ops import sorting as k_sorting
from tfr_extensions.keras_ops import twin_sigmoid as k_twin
from tfr_extensions.keras_ops.losses import twin_sigmoid as k_loss
from tfr_extensions.ops import list_metrics as tf_list_metrics
from tfr_extensions.ops import rank_metrics as tf_rank_metrics

tf_twin = importlib.import_module("tfr_extensions.ops.twin_sigmoid")  # the package exports a
# function of that name

METRICS = ("ndcg", "ap", "ap_min", "precision", "nerr")
GRADIENTS = ("type1", "type2", "type3")
LOSS = tfrx.losses.twin_sigmoid_loss  # .spec.compute(..., "keras_ops"): the keras.ops body


def TF_LOSS(labels, scores, **options):  # pylint: disable=invalid-name
    """The TensorFlow implementation of the loss function (whatever Keras's backend)."""
    checked = LOSS.spec.check_options(**options)
    return LOSS.spec.compute(labels, scores, None, checked, "tensorflow")[:2]


def merged_cases():
    """Every shared case in one batch, padded (label -1, score 0) to the longest list
    (one shape: JAX compiles its eager ops once per shape)."""
    parts = list(harness.cases())
    size = max(labels.shape[1] for _, labels, _ in parts)
    labels = np.concatenate([np.pad(y, [(0, 0), (0, size - y.shape[1])], constant_values=-1.0)
                             for _, y, _ in parts])
    scores = np.concatenate([np.pad(s, [(0, 0), (0, size - s.shape[1])]) for _, _, s in parts])
    return labels, scores


def value_and_grad_once(fn, *args, argnum=1):
    """``harness.value_and_grad`` for a function called once in its shape: on JAX as
    one compiled program (``jax.jit``), several times faster there than compiling its
    eager ops one by one."""
    if harness.BACKEND != "jax":
        return harness.value_and_grad(fn, *args, argnum=argnum)
    import jax  # pylint: disable=import-outside-toplevel

    def total(x, *rest):
        call = list(rest)
        call.insert(argnum, x)
        out = fn(*call)
        return ops.sum(out), out

    rest = [a for i, a in enumerate(args) if i != argnum]
    (_, out), grad = jax.jit(jax.value_and_grad(total, has_aux=True))(args[argnum], *rest)
    return harness.to_numpy(out), harness.to_numpy(grad)


def neutral_loss(**options):
    """Per-list losses of the keras.ops body, behind the shared bad-input screening."""
    checked = LOSS.spec.check_options(**options)
    return lambda labels, scores: LOSS.spec.compute(labels, scores, None, checked, "keras_ops")[0]


def tf_loss(**options):
    return lambda labels, scores: TF_LOSS(labels, scores, **options)[0]


def check_loss(labels, scores, what="", rtol=1e-5, once=False, **options):
    """The keras.ops loss's value and gradient = the TF function's; returns the gradient.
    ``once``: the only call in this shape (see :func:`value_and_grad_once`)."""
    run = value_and_grad_once if once else harness.value_and_grad
    value, grad = run(neutral_loss(**options), labels, scores)
    want_value, want_grad = harness.tf_value_and_grad(tf_loss(**options), labels, scores)
    what = f"{what} {options}"
    harness.assert_close(value, want_value, rtol=rtol, what="value " + what)
    harness.assert_close(grad, want_grad, rtol=rtol, what="gradient " + what)
    return grad


@pytest.mark.parametrize("gradient", GRADIENTS)
@pytest.mark.parametrize("metric", METRICS)
def test_loss_value_and_gradient_equal_tf(metric, gradient):
    labels, scores = merged_cases()
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
    check_loss(labels, scores, name, once=True, metric=metric, topn=topn, gradient=gradient,
               tie_break=False)


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_tie_breaking_without_ties_equals_tf(gradient):
    labels, scores = merged_cases()
    tie_free = np.arange(scores.size, dtype=np.float32).reshape(scores.shape)
    scores = np.random.default_rng(2).permutation(tie_free.ravel()).reshape(scores.shape) / 50.0
    for metric in METRICS[GRADIENTS.index(gradient)::3]:  # each metric under one type
        check_loss(labels, scores, metric=metric, topn=3, gradient=gradient, tie_break=True,
                   seed=0)


def _metric_with_tie_keys(metric, gradient, topn, labels, scores, seed):
    """TF's value and gradient with the tie keys that keras_ops draws from ``seed``."""
    keys = tf.constant(harness.to_numpy(k_sorting.random_tie_keys(scores.shape, seed)))

    def fn(labels, scores):
        valid = labels >= 0
        labels = tf.where(valid, labels, 0.0)
        ranks, positions = tf_twin.exact_forward_ranks(scores, valid, True, None, keys)
        value, rank_gradient = tf_rank_metrics.value_and_rank_gradient(
            metric, labels, ranks, valid, topn, positions)
        return tf_twin.with_twin_sigmoid_gradient(value, rank_gradient, scores, labels, valid,
                                                  gradient, 1.0)

    return harness.tf_value_and_grad(fn, labels, scores)


@pytest.mark.skipif(harness.BACKEND == "jax", reason="float64 needs jax_enable_x64")
def test_float64_scores_compute_in_float64():
    labels, scores = merged_cases()
    labels, scores = labels.astype(np.float64), scores.astype(np.float64)
    for i, metric in enumerate(METRICS):
        options = dict(metric=metric, topn=(None, 3)[i % 2], gradient=GRADIENTS[i % 3],
                       tie_break=False)
        value, grad = harness.value_and_grad(neutral_loss(**options), labels, scores)
        want_value, want_grad = harness.tf_value_and_grad(tf_loss(**options), labels, scores)
        assert value.dtype == grad.dtype == np.float64
        harness.assert_close(value, want_value, rtol=1e-12, atol=1e-14, what=metric)
        harness.assert_close(grad, want_grad, rtol=1e-9, atol=1e-14, what=metric)


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_tie_breaking_on_ties_equals_tf_with_the_same_keys(gradient):
    labels, scores = harness.CASES["ties"]
    for i, metric in enumerate(METRICS):
        if i % 3 != GRADIENTS.index(gradient):
            continue  # each metric under one type
        topn = (None, 3)[i % 2]
        for seed in (3, 4):
            value, grad = harness.value_and_grad(
                lambda y, s: k_loss.twin_sigmoid_loss(y, s, metric=metric, topn=topn,
                                                      gradient=gradient, seed=seed)[0],
                labels, scores)
            want_value, want_grad = _metric_with_tie_keys(metric, gradient, topn, labels,
                                                          scores, seed)
            harness.assert_close(-value, want_value, what=f"{metric} value")
            harness.assert_close(-grad, want_grad, what=f"{metric} gradient")


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
def test_every_list_length_path_equals_tf_and_the_lexicographic_order(list_size):
    """Up to 32 documents (JAX: tanh form only), up to 1024 (JAX: positions by
    counting, fused column blocks) and beyond (JAX: one two-key sort): positions
    from random tie keys equal NumPy's lexicographic order (score, then key, then
    index, padding last), midranks equal SciPy's, and the tie-broken loss and its
    gradient equal TF's."""
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
    for metric, gradient, topn in (("ndcg", "type3", None), ("ap", "type1", 10),
                                   ("nerr", "type2", 5)):
        value, grad = value_and_grad_once(
            lambda y, s: k_loss.twin_sigmoid_loss(y, s, metric=metric, topn=topn,
                                                  gradient=gradient, seed=5)[0],
            labels, scores)
        want_value, want_grad = _metric_with_tie_keys(metric, gradient, topn, labels, scores, 5)
        harness.assert_close(-value, want_value, what=f"{metric} value")
        harness.assert_close(-grad, want_grad, what=f"{metric} gradient")


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
        losses, _ = k_loss.twin_sigmoid_loss(labels, scores, metric=metric, topn=topn, seed=11)
        values = -harness.to_numpy(losses)
        assert len(np.unique(values)) >= 3  # the lists were tie-broken differently
        stderr = values.std() / np.sqrt(lists)
        assert abs(values.mean() - expected[metric]) < 4 * stderr, metric


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_gradients_stay_finite_for_huge_score_spreads(gradient):
    labels, scores = merged_cases()
    broken = np.any((labels >= 0) & ~np.isfinite(scores), axis=-1) | np.any(labels > 31, axis=-1)
    for k, scale in enumerate((1e4, 1e30)):
        huge = scores * np.float32(scale)
        for i, metric in enumerate(METRICS):
            options = dict(metric=metric, topn=3, gradient=gradient, tie_break=False)
            if i == (GRADIENTS.index(gradient) + 2 * k) % 5:  # one metric each: against TF,
                # which takes tanh per pair there, exact only to an absolute 1e-7 of alpha_b
                check_loss(labels, huge, f"x{scale}", rtol=1e-4, **options)
                continue
            value, grad = harness.value_and_grad(neutral_loss(**options), labels, huge)
            assert np.all(np.isfinite(grad)) and np.all(np.isfinite(value[~broken]))
            assert np.all(np.isnan(value[broken])) and np.any(grad != 0)


@pytest.mark.parametrize("gradient", GRADIENTS)
def test_elementwise_twin_sigmoid_and_ranks_equal_tf(gradient):
    x = np.array([-1e30, -30.0, -2.0, -0.3, 0.0, 0.4, 1.5, 25.0, 1e30], np.float32)
    u = np.array([1.0, 1.0, -1.0, 0.0, 1.0, -1.0, 1.0, -1.0, -1.0], np.float32)
    value, grad = value_and_grad_once(
        lambda u, x: k_twin.twin_sigmoid(x, 2.0, gradient, u), u, x)
    want_value, want_grad = harness.tf_value_and_grad(
        lambda u, x: tf_twin.twin_sigmoid(x, 2.0, gradient, u), u, x)
    np.testing.assert_array_equal(value, [0, 0, 0, 0, 0.5, 1, 1, 1, 1])
    np.testing.assert_array_equal(value, want_value)
    harness.assert_close(grad, want_grad)
    labels, scores = harness.CASES["mixed"]
    weights = np.random.default_rng(3).normal(size=labels.shape).astype(np.float32)
    weights = ops.convert_to_tensor(weights)
    value, grad = value_and_grad_once(
        lambda y, s: k_twin.twin_sigmoid_ranks(s, y, None, gradient, 0.7, False) * weights,
        labels, scores)
    tf_weights = tf.constant(harness.to_numpy(weights))
    want_value, want_grad = harness.tf_value_and_grad(
        lambda y, s: tf_twin.twin_sigmoid_ranks(s, y, None, gradient, 0.7, False) * tf_weights,
        labels, scores)
    harness.assert_close(value, want_value)
    harness.assert_close(grad, want_grad)


def test_bad_options_raise():
    with pytest.raises(ValueError, match="gradient"):
        k_twin.twin_sigmoid(np.ones(2, np.float32), gradient="type4")
    with pytest.raises(ValueError, match="labels"):
        k_twin.twin_sigmoid_ranks(np.ones((1, 2), np.float32), gradient="type2")
    with pytest.raises(ValueError, match="alpha_b"):
        k_twin.twin_sigmoid_ranks(np.ones((1, 2), np.float32), alpha_b=0.0)


def test_keras_class_computes_the_tf_functions_value():
    labels, scores = merged_cases()
    labels = np.minimum(labels, 4.0)  # no broken list: the mean is finite
    scores = np.random.default_rng(4).permutation(scores.size).reshape(scores.shape) / 50.0
    scores = scores.astype(np.float32)  # tie-free: the draws of the two differ
    loss = tfrx.losses.get("twin_ndcg_type3", seed=0)
    value, grad = harness.value_and_grad(lambda y, s: loss(y, s), labels, scores)
    losses, weights = TF_LOSS(labels, scores, metric="ndcg", gradient="type3", seed=0)
    harness.assert_close(value, np.mean(losses.numpy() * weights.numpy()))
    _, want_grad = harness.tf_value_and_grad(
        lambda y, s: tf.reduce_mean(tf.multiply(*TF_LOSS(y, s, metric="ndcg", gradient="type3",
                                                      seed=0))), labels, scores)
    harness.assert_close(grad, want_grad)


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
    want = tf_list_metrics.exact_metric("ndcg", labels, scores, 3).numpy().mean()
    harness.assert_close(model.evaluate(features, labels, batch_size=16, verbose=0,
                                        return_dict=True)["ndcg_3"], want)


@pytest.mark.skipif(harness.BACKEND != "jax", reason="jax.jit")
def test_body_and_its_gradient_run_under_jax_jit():
    import jax  # pylint: disable=import-outside-toplevel
    labels, scores = harness.CASES["ties"]

    def total(scores, seed, tie_break):
        losses, weights = k_loss.twin_sigmoid_loss(
            labels, scores, mask=labels >= 0, metric="nerr", topn=3, gradient="type2",
            tie_break=tie_break, seed=seed)
        return ops.sum(losses * weights)

    seed = keras.random.SeedGenerator(5).next()
    fn = jax.value_and_grad(lambda s, seed: total(s, seed, True))
    value, grad = jax.jit(fn)(scores, seed)
    eager_value, eager_grad = fn(scores, seed)
    harness.assert_close(value, eager_value)
    harness.assert_close(grad, eager_grad)
    want_value, want_grad = harness.tf_value_and_grad(
        lambda y, s: tf.reduce_sum(tf.multiply(*TF_LOSS(y, s, metric="nerr", topn=3,
                                                     gradient="type2", tie_break=False))),
        labels, scores)
    value, grad = jax.jit(jax.value_and_grad(lambda s: total(s, None, False)))(scores)
    harness.assert_close(value, want_value)
    harness.assert_close(grad, want_grad)
