"""The two implementations against each other: the TensorFlow bodies and ops
(:mod:`tfr_extensions.ops`) and the ``keras.ops`` ones (:mod:`tfr_extensions.keras_ops`)
give the same values and gradients on a few shared inputs, for every registered loss
(``tfrx.losses.names``, so a new loss cannot skip it), the metrics (exact, of ranks,
``RankingMetric``'s per-list values and weights), the sorts and the public ops.

Each implementation stands on the NumPy oracles by itself (``tests/losses``,
``tests/ops`` for TensorFlow; the other files of ``tests/keras_ops`` and
``tests/neutral`` for ``keras.ops``); this file is the one place that compares them,
and the only file of this suite that imports TensorFlow: it is skipped where TensorFlow
is not installed. The ``keras.ops`` side runs on Keras's backend (the suite runs on JAX and
PyTorch), the TensorFlow side with TensorFlow's eager ops and ``tf.GradientTape``.
"""
import importlib

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow", reason="compares the TensorFlow implementation with "
                         "the keras.ops one: TensorFlow is not installed here")

from keras import ops  # noqa: E402

import harness  # noqa: E402
from support.loss_options import EXAMPLES  # noqa: E402
import tfr_extensions as tfrx  # noqa: E402
from tfr_extensions import arrays  # noqa: E402
from tfr_extensions.keras_ops import sorting as k_sorting  # noqa: E402
from tfr_extensions.ops import list_metrics  # noqa: E402
from tfr_extensions.ops import plackett_luce as pl  # noqa: E402
from tfr_extensions.ops import rank_metrics  # noqa: E402
from tfr_extensions.ops import sorting as tf_sorting  # noqa: E402

# (modules whose package exports a function of the same name)
# (Plackett-Luce and the rank distributions are one module each, written against
# tfr_extensions.arrays: the two fillings compare under arrays.use)
rd = importlib.import_module("tfr_extensions.ops.rank_distributions")
tf_rb = importlib.import_module("tfr_extensions.ops.rank_binomial")
tf_twin = importlib.import_module("tfr_extensions.ops.twin_sigmoid")

KEYS = tfrx.losses.names(classes=False, presets=False, tf_ranking=False)
#: two option sets per loss, the examples it declares (``@loss_function(examples=...)``):
#: every option changed, then a second set (twin-sigmoid's breaks the shared inputs' ties
#: with a seed: every framework draws the same keys, ``tfr_extensions.arrays.tie_keys``).
#: The sampled losses draw their rankings on the keras.ops side, and the TensorFlow
#: implementation is fed the same ones.
OPTION_SETS = EXAMPLES
#: float32 tolerances (rtol, atol) where rounding differs more than 1e-5: WassRank's
#: Sinkhorn resolves costs of 10^2 / lambda to ~1e-4 relative (its module docstring);
#: NeuralNDCG's Sinkhorn iterations amplify rounding in the gradient
FLOAT32_TOLERANCE = {"wassrank": (2e-3, 1e-5), "neural_ndcg": (1e-4, 2e-6)}
SAMPLED = ("expected_utility", "mdprank")


def test_every_registered_loss_declares_two_option_sets():
    assert set(OPTION_SETS) == set(KEYS)
    assert all(len(OPTION_SETS[key]) >= 2 for key in KEYS), "declare two examples"


def tf_value_and_grad(fn, *args, argnum=1):
    """``(fn(*args), d sum(fn(*args)) / d args[argnum])`` for a TensorFlow function."""
    tensors = [tf.convert_to_tensor(a) if isinstance(a, np.ndarray) else a for a in args]
    # (the TensorFlow ops compute with TensorFlow's array namespace on any Keras backend:
    # what they share, the bad-input screening, asks for the namespace when it runs)
    with tf.GradientTape() as tape, arrays.use("tensorflow"):
        tape.watch(tensors[argnum])
        out = fn(*tensors)
        total = tf.reduce_sum(out)
    grad = tape.gradient(total, tensors[argnum])
    grad = tf.zeros_like(tensors[argnum]) if grad is None else grad
    return out.numpy(), grad.numpy()


def _screened_scores(labels, scores):
    valid = labels >= 0
    return np.where(np.isfinite(scores), scores, 0.0).astype(scores.dtype), valid


def _feed_keras_ops_rankings(monkeypatch, options, labels, scores):
    """The TensorFlow policy-gradient bodies sample the rankings that the keras.ops
    body samples with ``options["seed"]`` (the two implementations draw from different
    streams): the same sampler call, on the screened scores the body sees."""
    screened, valid = _screened_scores(labels, scores)
    with arrays.use("keras_ops"):
        rankings = harness.to_numpy(pl.sample_rankings(
            screened, valid, options["num_samples"], seed=options["seed"],
            temperature=options["temperature"], topn=options["topn"]))
    keras_ops_sampler = pl.sample_rankings_with_log_probs

    def sampler(scores, mask, num_samples, seed, temperature, topn):
        if arrays.current() != "tensorflow":  # the keras.ops body: its own draws
            return keras_ops_sampler(scores, mask, num_samples, seed=seed,
                                     temperature=temperature, topn=topn)
        del num_samples, seed, topn  # (the keras.ops rankings)
        fixed = tf.constant(rankings)
        return fixed, pl.plackett_luce_position_log_probs(scores, fixed, mask,
                                                         temperature=temperature)

    monkeypatch.setattr(pl, "sample_rankings_with_log_probs", sampler)


def _compare_loss(key, kwargs, labels, scores, monkeypatch, rtol, atol):
    spec = tfrx.losses.get(key).spec
    options = spec.check_options(**kwargs)
    if key in SAMPLED:
        _feed_keras_ops_rankings(monkeypatch, options, labels, scores)
    value, grad = harness.body_value_and_grad(key, labels, scores, **kwargs)  # (compiled)
    want, want_grad = tf_value_and_grad(harness.per_list_loss(spec, options, "tensorflow"),
                                        labels, scores)
    assert value.dtype == want.dtype == scores.dtype
    harness.assert_close(value, want, rtol=rtol, atol=atol, what=f"{key} {kwargs} value")
    # (unnormalized pair sums, e.g. LambdaLoss's ranknet weighting: float32 cancellation,
    # so the absolute floor scales with the largest gradient entry)
    scale = max(1.0, float(np.max(np.abs(want_grad), initial=0.0)))
    harness.assert_close(grad, want_grad, rtol=rtol, atol=atol * scale,
                         what=f"{key} {kwargs} gradient")
    harness.assert_policy(value, grad, labels, scores, spec.label_limit(options))


@pytest.mark.parametrize("which", [0, 1], ids=["every_option", "second_set"])
@pytest.mark.parametrize("key", KEYS)
def test_every_loss_agrees_on_the_shared_cases(key, which, monkeypatch):
    """float32, the short shared cases in one batch: padding, ties (all tied too), a
    list without relevant documents, one valid document, list size 1, bad input."""
    labels, scores = harness.merged_cases(harness.SHORT_CASES)
    rtol, atol = FLOAT32_TOLERANCE.get(key, (1e-5, 2e-6))
    _compare_loss(key, OPTION_SETS[key][which], labels, scores, monkeypatch, rtol, atol)


#: float64 comparisons that fail for a known reason in the keras.ops implementation
#: (none: keras.ops.cumsum's float64 on Keras 3.15's PyTorch backend, which cost MDPRank's
#: returns their precision, is torch.cumsum in the namespace, arrays/keras_namespace.py)
FLOAT64_KNOWN_FAILURES = {}


@pytest.mark.parametrize("key", [
    pytest.param(key, marks=pytest.mark.xfail(
        reason=FLOAT64_KNOWN_FAILURES[harness.BACKEND, key], strict=True))
    if (harness.BACKEND, key) in FLOAT64_KNOWN_FAILURES else key for key in KEYS])
def test_every_loss_agrees_in_float64(key, monkeypatch):
    """float64 (JAX under ``jax_enable_x64``) on the mixed case, to rounding (on JAX the
    twin-sigmoid backward is float64 to ~1e-6 relative only: see
    test_keras_ops_twin_sigmoid.py)."""
    labels, scores = (x.astype(np.float64) for x in harness.CASES["mixed"])
    rtol = 1e-5 if key == "twin_sigmoid" and harness.BACKEND == "jax" else 1e-9
    with harness.float64():
        _compare_loss(key, OPTION_SETS[key][0], labels, scores, monkeypatch, rtol, 1e-12)


def test_softndcg_and_wassrank_agree_at_extreme_float64_scales(monkeypatch):
    """Scores of 1e160 pass SoftRank's bound 2^509 of the scaled scores (clamped,
    tied); WassRank's log-space iterations at labels up to 4 (the long lists)."""
    labels, scores = (x.astype(np.float64) for x in harness.CASES["mixed"])
    with harness.float64():
        _compare_loss("softndcg", {"topn": 6}, labels, scores * 1e160, monkeypatch, 1e-9, 1e-12)
        _compare_loss("wassrank", {}, *(x.astype(np.float64) for x in harness.CASES["long"]),
                      monkeypatch, 1e-9, 1e-12)


# -- metrics -------------------------------------------------------------------------------

METRICS = ("ndcg", "ap", "ap_min", "precision", "nerr")


def _merged_inputs():
    labels, scores = harness.merged_cases()
    return labels, np.nan_to_num(scores, nan=0.0, posinf=np.inf)  # NaN: no order in either


def _keras_ops(function):
    """``function`` run with the ``keras.ops`` filling of the namespace."""
    def run(*args, **kwargs):
        with arrays.use("keras_ops"):
            return function(*args, **kwargs)
    return run


def _tensorflow(function):
    """``function`` run with the TensorFlow filling of the namespace."""
    def run(*args, **kwargs):
        with arrays.use("tensorflow"):
            return function(*args, **kwargs)
    return run


def test_exact_metrics_agree():
    """``rank_metrics.exact_metric`` and ``list_metrics.exact_metric`` (one
    function), with each filling of the namespace."""
    labels, scores = _merged_inputs()
    for alias in ("ndcg", "map", "ap_min", "precision", "nerr"):
        for topn in (None, 3):
            got = _keras_ops(rank_metrics.exact_metric)(alias, labels, scores, topn)
            want = _tensorflow(list_metrics.exact_metric)(alias, labels, scores, topn)
            harness.assert_close(harness.to_numpy(got), want.numpy(), what=f"{alias}@{topn}")


def test_metrics_of_ranks_and_their_rank_gradients_agree():
    labels, scores = _merged_inputs()
    mask = labels >= 0
    positions = harness.to_numpy(k_sorting.exact_ranks(np.nan_to_num(scores, posinf=0.0), mask))
    ranks = (positions + 0.4 * np.random.default_rng(0).random(positions.shape)).astype(np.float32)
    labels = np.where(mask, labels, 0.0).astype(np.float32)
    for metric in METRICS:
        for topn in (None, 3):
            what = f"{metric}@{topn}"
            function = rank_metrics.rank_metric_function(metric)
            value, grad = harness.value_and_grad(
                _keras_ops(lambda y, r, m: function(y, r, m, topn)), labels, ranks, mask)
            want, want_grad = tf_value_and_grad(
                _tensorflow(lambda y, r, m: function(y, r, m, topn)), labels, ranks, mask)
            harness.assert_close(value, want, what=what)
            harness.assert_close(grad, want_grad, what=what)
            value, rank_grad = _keras_ops(rank_metrics.value_and_rank_gradient)(
                metric, labels, ranks, mask, topn, positions)
            want, want_grad = _tensorflow(rank_metrics.value_and_rank_gradient)(
                metric, tf.constant(labels), tf.constant(ranks), tf.constant(mask), topn,
                tf.constant(positions))
            harness.assert_close(harness.to_numpy(value), want.numpy(), what=what)
            harness.assert_close(harness.to_numpy(rank_grad), want_grad.numpy(), what=what)


def _sample_weights(kind, labels):
    rng = np.random.default_rng(5)
    batch, size = labels.shape
    return {"none": None, "scalar": np.float32(2.5),
            "list": rng.random(batch).astype(np.float32),
            "list_column": rng.random((batch, 1)).astype(np.float32),
            "item": rng.random((batch, size)).astype(np.float32)}[kind]


def test_ranking_metric_values_and_weights_agree():
    """What ``RankingMetric`` averages (per-list values and weights), for every metric,
    ``no_relevant`` rule and sample-weight form."""
    labels, scores = _merged_inputs()
    scores = np.nan_to_num(scores, posinf=0.0)
    for rule in ("zero", "exclude", "one"):
        for weights in ("none", "scalar", "list", "list_column", "item"):
            sample_weight = _sample_weights(weights, labels)
            for metric, topn in (("ndcg", 3), ("map", None), ("ap_min", 3), ("p", 3),
                                 ("nerr", None)):
                got = _keras_ops(list_metrics.metric_values_and_weights)(
                    metric, labels, scores, topn, rule, sample_weight)
                want = _tensorflow(list_metrics.metric_values_and_weights)(
                    metric, labels, scores, topn, rule, sample_weight)
                for part, a, b in zip(("values", "weights"), got, want):
                    harness.assert_close(harness.to_numpy(a), b.numpy(),
                                         what=f"{metric}@{topn} {rule} {weights} {part}")


def test_sorts_agree():
    labels, scores = _merged_inputs()
    scores = np.nan_to_num(scores, posinf=0.0)
    mask = labels >= 0
    keys = np.argsort(np.random.default_rng(1).random(scores.shape), axis=-1).astype(np.int32)
    tf_mask = tf.constant(mask)

    def valid(x):  # padded positions: unspecified
        return np.where(mask, harness.to_numpy(x), 0)

    np.testing.assert_array_equal(valid(k_sorting.exact_ranks(scores, mask)),
                                  valid(tf_sorting.exact_ranks(tf.constant(scores), tf_mask)))
    np.testing.assert_array_equal(
        valid(k_sorting.exact_ranks(scores, mask, keys)),
        valid(tf_sorting.exact_ranks(tf.constant(scores), tf_mask, tf.constant(keys))))
    np.testing.assert_array_equal(harness.to_numpy(k_sorting.midranks(scores, mask)),
                                  tf_sorting.midranks(tf.constant(scores), tf_mask).numpy())
    gains = np.where(mask, np.abs(scores), 0.0).astype(np.float32)
    for topn in (None, 3):
        np.testing.assert_array_equal(
            harness.to_numpy(k_sorting.sort_descending(gains, mask, topn)),
            tf_sorting.sort_descending(tf.constant(gains), tf_mask, topn).numpy())


# -- the public ops ------------------------------------------------------------------------

@pytest.mark.parametrize("gradient", ["type1", "type2", "type3"])
def test_twin_sigmoid_ops_agree(gradient):
    x = np.array([-1e30, -30.0, -2.0, -0.3, 0.0, 0.4, 1.5, 25.0, 1e30], np.float32)
    u = np.array([1.0, 1.0, -1.0, 0.0, 1.0, -1.0, 1.0, -1.0, -1.0], np.float32)
    with arrays.use("keras_ops"):
        value, grad = harness.jit_value_and_grad(
            lambda u, x: tf_twin.twin_sigmoid(x, 2.0, gradient, u), u, x)
    want, want_grad = tf_value_and_grad(lambda u, x: tf_twin.twin_sigmoid(x, 2.0, gradient, u),
                                        u, x)
    np.testing.assert_array_equal(value, want)
    harness.assert_close(grad, want_grad)
    labels, scores = harness.CASES["mixed"]
    weights = np.random.default_rng(3).normal(size=labels.shape).astype(np.float32)
    with arrays.use("keras_ops"):
        value, grad = harness.jit_value_and_grad(
            lambda y, s: tf_twin.twin_sigmoid_ranks(s, y, None, gradient, 0.7, False)
            * ops.convert_to_tensor(weights), labels, scores)
    want, want_grad = tf_value_and_grad(
        lambda y, s: tf_twin.twin_sigmoid_ranks(s, y, None, gradient, 0.7, False)
        * tf.constant(weights), labels, scores)
    harness.assert_close(value, want)
    harness.assert_close(grad, want_grad)


@pytest.mark.parametrize("method,topn,sinkhorn", [
    ("normal", 4, 0), ("exact", 3, 2), ("auto", None, 3)])
def test_rank_distributions_agree(method, topn, sinkhorn, monkeypatch):
    # the TF op as graph ops, not per-level XLA programs (the same values, as
    # tests/ops/test_rank_distributions.py checks; XLA compiles cost seconds)
    monkeypatch.setattr(tf_rb, "COMPILED_LEVELS_MIN_LIST_SIZE", 1 << 30)
    rng = np.random.default_rng(1)
    scores = rng.normal(size=(3, 11)).astype(np.float32)
    mask = rng.random((3, 11)) > 0.25
    mask[:, 0] = True
    weights = rng.normal(size=(3, 11, 11 if topn is None else topn)).astype(np.float32)
    options = dict(sigma=0.7, topn=topn, method=method, sinkhorn_iterations=sinkhorn)
    with arrays.use("keras_ops"):
        value, grad = harness.jit_value_and_grad(
            lambda m, s: ops.sum(rd.rank_distributions(s, m, **options)
                                 * ops.convert_to_tensor(weights), axis=(1, 2)), mask, scores)
    with arrays.use("tensorflow"):
        want, want_grad = tf_value_and_grad(
            lambda m, s: tf.reduce_sum(rd.rank_distributions(s, m, **options) * weights,
                                       axis=(1, 2)), mask, scores)
    harness.assert_close(value, want)
    harness.assert_close(grad, want_grad)


def test_plackett_luce_log_probabilities_agree():
    labels, scores = harness.merged_cases(harness.SHORT_CASES)
    scores, valid = _screened_scores(labels, scores)
    with arrays.use("keras_ops"):
        rankings = harness.to_numpy(pl.sample_rankings(scores, valid, num_samples=3, seed=1))

    def log_probs(concat, reshape, r, s):
        return concat([reshape(pl.plackett_luce_log_prob(s, r, valid), (-1,)),
                       0.7 * reshape(pl.plackett_luce_log_prob(
                           s, r, valid, topn=3, temperature=2.0), (-1,)),
                       1.3 * reshape(pl.plackett_luce_position_log_probs(
                           s, r[:, 0, :], valid, temperature=0.5), (-1,))], axis=0)

    with arrays.use("keras_ops"):
        value, grad = harness.jit_value_and_grad(
            lambda r, s: log_probs(ops.concatenate, ops.reshape, r, s), rankings, scores)
        keras_ops_mask = harness.to_numpy(pl.ranking_mask(rankings, valid))
    with arrays.use("tensorflow"):
        want, want_grad = tf_value_and_grad(
            lambda r, s: log_probs(tf.concat, tf.reshape, r, s), rankings, scores)
        tensorflow_mask = pl.ranking_mask(rankings, valid).numpy()
    harness.assert_close(value, want)
    harness.assert_close(grad, want_grad)
    np.testing.assert_array_equal(keras_ops_mask, tensorflow_mask)
