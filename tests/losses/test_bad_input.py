"""Bad input, for every registered loss: the policy of ``tfr_extensions.losses.base``.

Every distinct configuration that ``tfrx.losses.get`` builds from our names
(the 12 twin-sigmoid presets and each other class's default) runs on: a NaN,
+inf or -inf score of a valid document; NaN and infinite scores of padded
documents; a batch of 0 lists; lists of one document; all-padded lists; lists
without relevant documents; all-tied scores; scores of +-1e30 (tied and
distinct) and +-3e38; labels 2.5 and 31; labels above the loss's maximum.

Each check asserts the exact outcome: NaN for the list with a non-finite
score or an out-of-range label (and exactly zero gradient for it, the other
lists unchanged); 0 and zero gradient where the policy says so; elsewhere the
value and gradient of an independent float64 NumPy oracle
(``support.oracles_bad_input``), or, for losses that draw random
rankings or break ties randomly, one of the values (and the matching
gradient) that the oracle gives for each possible ranking.

TF-Ranking's names (which ``tfrx.losses.get`` passes to TF-Ranking where it
imports) keep TF-Ranking's own behaviour and are not checked here.

It runs on tf215 (:data:`support.stack.TF_OPS_SUITES_ON`); on Keras 3 the backend-neutral
suite (``tests/neutral/test_neutral_losses.py``) holds every backend to the same policy.
"""
import math

import numpy as np
import pytest
import tensorflow as tf
from tfr_extensions.backend import keras

import tfr_extensions as tfrx
from tfr_extensions.arrays import tie_keys
from support.loss_modes import value_and_grad
from support import oracles
from support.loss_options import QUICK_TO_COMPILE
from support.oracles_bad_input import oracle_candidates
from support.stack import tensorflow_ops_suite
from tfr_extensions.ops import lists

pytestmark = tensorflow_ops_suite


def _distinct_configurations():
    """One name per distinct loss configuration that our names build."""
    seen, names = set(), []
    for name in tfrx.losses.names(classes=False, tf_ranking=False):
        config = build(name).get_config()
        key = (type(build(name)).__name__,
               tuple(sorted((k, repr(v)) for k, v in config.items() if k != "name")))
        if key not in seen:
            seen.add(key)
            names.append(name)
    return names


def build(name, **kwargs):
    if "seed" in tfrx.losses.get(name).get_config():
        kwargs.setdefault("seed", 0)
    return tfrx.losses.get(name, **kwargs)


NAMES = _distinct_configurations()
#: one name per class (its registry key), for the (slower) graph and XLA runs
CLASS_NAMES = tfrx.losses.names(classes=False, presets=False, tf_ranking=False)
PAD = -1.0
NAN, INF = float("nan"), float("inf")


def run(name, labels, scores, sample_weight=None, **kwargs):
    """Per-list values ``[B]`` and gradients ``[B, L]`` (eager, reduction none)."""
    value, grad = value_and_grad(build(name, reduction="none", **kwargs), labels, scores,
                                 sample_weight)
    return value.numpy().reshape(-1), grad.numpy()


# --- the oracles (support.oracles_bad_input): one list of valid documents at a time


def test_every_registered_loss_has_a_per_list_oracle():
    """A loss registers its oracle (``@oracles.per_list_oracle(key)`` in a
    ``tests/support/oracles_*`` module); none is skipped."""
    assert set(oracles.load_per_list_oracles()) == set(CLASS_NAMES)

def _family(name):
    loss = build(name)
    return loss.spec.key, loss.get_config()


def assert_matches_oracle(name, labels, scores, rtol=2e-5, atol=1e-6, grad_atol=2e-5):
    """The loss's per-list values and gradients equal an oracle candidate; padded
    documents get exactly zero gradient. Returns the per-list values.

    Tolerances are float32's (WassRank's Sinkhorn iterations in float32 resolve
    its costs of about 1e2 / lambda to a relative 1e-4); gradients relative to
    the largest entry."""
    if _family(name)[0] == "wassrank":
        rtol, grad_atol = max(rtol, 5e-4), max(grad_atol, 5e-4)
    values, grads = run(name, labels, scores)
    labels64, scores64 = np.asarray(labels, np.float64), np.asarray(scores, np.float32).astype(
        np.float64)
    assert np.isfinite(values).all() and np.isfinite(grads).all(), (values, grads)
    assert (grads[labels64 < 0] == 0).all()
    for b in range(len(labels64)):
        keep = labels64[b] >= 0
        candidates = oracle_candidates(*_family(name), labels64[b][keep], scores64[b][keep])
        close = [grad for value, grad in candidates
                 if np.isclose(values[b], value, rtol=rtol, atol=atol)]
        assert close, f"list {b}: {values[b]} is none of {sorted(v for v, _ in candidates)[:8]}"
        scale = max(1.0, max(np.abs(g).max(initial=0.0) for g in close))
        assert any(np.allclose(grads[b][keep], grad, rtol=0, atol=grad_atol * scale)
                   for grad in close), (grads[b][keep], close[:3])
    return values


# --- the cases --------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", [NAN, INF, -INF], ids=["nan", "inf", "-inf"])
def test_a_non_finite_valid_score_makes_its_list_nan_with_zero_gradient(name, bad):
    """List 0 has a non-finite valid score, list 2 NaN/inf scores on padding.
    List 0: NaN, zero gradient. Lists 1-2: exactly as with those scores finite
    (same shape, so the same random draws). The mean is NaN, also when list 0
    has sample weight 0."""
    labels = np.array([[2, 0, 1, 0, PAD], [1, 0, 2, 0, 0], [0, 1, PAD, 2, PAD]], np.float32)
    scores = np.array([[bad, 0.3, -0.2, 0.5, 0.1], [0.4, -0.6, 0.2, 0.9, -0.1],
                       [0.2, -0.5, NAN, 0.7, -INF]], np.float32)
    reference = np.nan_to_num(scores, nan=0.25, posinf=0.75, neginf=-0.75)
    values, grads = run(name, labels, scores)
    expected_values, expected_grads = run(name, labels, reference)
    assert np.isnan(values[0]) and (grads[0] == 0).all()
    np.testing.assert_array_equal(values[1:], expected_values[1:])
    np.testing.assert_array_equal(grads[1:], expected_grads[1:])
    assert (grads[labels < 0] == 0).all()
    assert np.isnan(build(name)(labels, scores).numpy())
    assert np.isnan(build(name)(labels, scores, sample_weight=[[0.0], [1.0], [1.0]]).numpy())


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("label", [31.5, 1000.0, INF], ids=["31.5", "1000", "inf"])
def test_a_label_above_the_maximum_makes_its_list_nan_with_zero_gradient(name, label):
    labels = np.array([[label, 0, 1, 0, PAD], [1, 0, 2, 0, 0]], np.float32)
    scores = np.array([[0.2, 0.3, -0.2, 0.5, 0.1], [0.4, -0.6, 0.2, 0.9, -0.1]], np.float32)
    values, grads = run(name, labels, scores)
    expected_values, expected_grads = run(name, np.where(labels > 31, 31, labels), scores)
    assert np.isnan(values[0]) and (grads[0] == 0).all()
    assert values[1] == expected_values[1] and (grads[1] == expected_grads[1]).all()


def test_wassrank_lowers_the_maximum_label_for_a_larger_gain_base():
    assert build("wassrank").max_label == lists.MAX_LABEL == 31
    loss_16 = build("wassrank", gain_base=16.0)
    assert loss_16.max_label == 16.0  # costs 16^y below 2^64
    labels = np.array([[16.0, 0.0, 1.0], [16.5, 0.0, 1.0]], np.float32)
    values, grads = run("wassrank", labels, [[0.1, 0.5, -0.2]] * 2, gain_base=16.0)
    assert np.isfinite(values[0]) and np.isnan(values[1]) and (grads[1] == 0).all()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", [(0, 5), (0, 0), (0, 300), (2, 0)])
def test_a_batch_of_zero_lists_or_of_empty_lists_gives_zero(name, shape):
    labels = np.zeros(shape, np.float32)
    for reduction in ("auto", "sum"):
        value, grad = value_and_grad(build(name, reduction=reduction), labels, labels)
        assert value.numpy() == 0.0 and grad.shape == shape
        assert (grad.numpy() == 0).all()
    value, _ = value_and_grad(build(name, reduction="none"), labels, labels)
    assert value.shape[0] == shape[0]


@pytest.mark.parametrize("name", CLASS_NAMES)
@pytest.mark.parametrize("xla", [False, True], ids=["graph", "xla"])
def test_a_batch_of_zero_lists_in_graph_mode_and_under_xla(name, xla):
    loss = build(name, **QUICK_TO_COMPILE.get(name, {}))
    static = tf.function(lambda l, s: value_and_grad(loss, l, s), jit_compile=xla)
    for shape in [(0, 5), (0, 0)] if xla else [(0, 0)]:
        value, grad = static(tf.zeros(shape), tf.zeros(shape))
        assert value.numpy() == 0.0 and grad.shape == shape
    if not xla:  # a batch size known only when run, as in Keras's fit
        dynamic = tf.function(lambda l, s: value_and_grad(loss, l, s),
                              input_signature=[tf.TensorSpec([None, 5])] * 2)
        value, grad = dynamic(tf.zeros((0, 5)), tf.zeros((0, 5)))
        assert value.numpy() == 0.0 and grad.shape == (0, 5)


@pytest.mark.parametrize("name", NAMES)
def test_lists_of_one_document(name):
    """One relevant document: every metric is 1 (twin-sigmoid, SoftNDCG,
    ApproxNDCG, NeuralNDCG: loss -1); no pair, no transport, log P = 0 (the others: 0).
    Zero gradient. LambdaLoss's NDCG-Loss1 sums the pair (i, i) too (allRank's
    definition): G_1 / D_1 * -log2(1/2) = 1."""
    labels = np.array([[2.0], [0.0], [PAD]], np.float32)
    values = assert_matches_oracle(name, labels, np.array([[0.3], [-0.7], [NAN]], np.float32))
    kind, config = _family(name)
    if kind == "lambda_loss" and config["weighting"] == "ndcg_loss1":
        assert values[0] == 1.0
    else:
        assert values[0] == (-1.0 if kind in ("twin_sigmoid", "softndcg", "approx_ndcg",
                                              "neural_ndcg") else 0.0)
    assert (values[1:] == 0).all()


@pytest.mark.parametrize("name", NAMES)
def test_all_padded_lists_and_lists_without_relevant_documents_give_zero(name):
    labels = np.array([[PAD] * 4, [0, 0, 0, PAD], [0, 0, 0, 0]], np.float32)
    scores = np.array([[NAN, INF, -INF, 1.0], [1e30, -1e30, 0.5, NAN], [0.0, 0.0, 1.0, -2.0]],
                      np.float32)
    values, grads = run(name, labels, scores)
    assert (values == 0).all() and (grads == 0).all()
    assert build(name)(labels, scores).numpy() == 0


@pytest.mark.parametrize("name", NAMES)
def test_all_tied_scores(name):
    """List 0: all labels equal (every ranking is ideal: twin-sigmoid -1,
    ExptUtility log 4!, MDPRank sum_t G_t log(4 - t)); list 1: mixed labels.
    Tie breaking picks one of the rankings of the oracle."""
    labels = np.array([[1, 1, 1, 1, PAD], [2, 0, 1, 0, 0]], np.float32)
    scores = np.array([[0.5, 0.5, 0.5, 0.5, NAN], [0.0] * 5], np.float32)
    values = assert_matches_oracle(name, labels, scores)
    kind, _ = _family(name)
    if kind == "twin_sigmoid":
        assert np.isclose(values[0], -1.0, rtol=1e-6, atol=0)
    if kind == "expected_utility":
        assert np.isclose(values[0], math.log(24.0), rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_scores_of_plus_minus_1e30(name):
    """Distinct scores of +-1e30 and +-5e29, and two relevant documents tied at
    1e30 (PL losses: log P = -log 2 exactly, where f - logsumexp(f) gives 0)."""
    labels = np.array([[2, 0, 1, 0, 0, PAD], [1, 1, 0, 0, PAD, PAD]], np.float32)
    scores = np.array([[1e30, -1e30, 5e29, -5e29, 0.0, INF],
                       [1e30, 1e30, -1e30, 0.0, NAN, -1e30]], np.float32)
    values = assert_matches_oracle(name, labels, scores)
    kind, _ = _family(name)
    if kind in ("expected_utility", "mdprank"):
        assert np.isclose(values[1], math.log(2.0), rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_scores_of_plus_minus_3e38(name):
    """Near float32's maximum: differences overflow, yet values and gradients
    are finite and exact (RankNet and the hinge clip at +-max/4, SoftNDCG's
    rank distributions saturate: see their docstrings)."""
    labels = np.array([[1, 0, 2, 0, PAD], [0, 1, 0, 2, 1]], np.float32)
    scores = np.array([[3e38, -3e38, 1.0, 0.0, -INF], [-3e38, -3e38, 3e38, 3e38, 0.5]],
                      np.float32)
    assert_matches_oracle(name, labels, scores)


@pytest.mark.parametrize("name", NAMES)
def test_fractional_labels_are_graded(name):
    """Label 2.5 has gain 2^2.5 - 1; 0.5 and 0.25 are relevant (binary metrics)."""
    labels = np.array([[2.5, 0, 1, 0, PAD], [0.5, 0, 0, 0.25, 0]], np.float32)
    scores = np.array([[0.4, -0.3, 1.1, 0.2, 0.0], [-0.2, 0.6, 0.1, 0.3, -0.9]], np.float32)
    assert_matches_oracle(name, labels, scores)


LABELS_31 = np.array([[31, 0, 1, 0, 30, PAD], [31, 31, 0, 2, 0, 0]], np.float32)
SCORES_31 = np.array([[0.5, -0.25, 1.0, 0.25, -1.0, 0.0], [0.75, 0.5, 2.0, -0.5, 0.25, 1.5]],
                     np.float32)  # float16-representable


@pytest.mark.parametrize("name", NAMES)
def test_label_31_does_not_overflow_and_is_exact(name):
    """Gain 2^31 - 1 (2^31 in float32); nERR's R = (2^31 - 1) / 2^31 rounds to 1.
    WassRank: finite, but its costs 4^31 are beyond what entropic transport at
    lambda = 0.1 resolves (module docstring), so only finiteness is asserted."""
    if _family(name)[0] == "wassrank":
        values, grads = run(name, LABELS_31, SCORES_31)
        assert np.isfinite(values).all() and np.isfinite(grads).all()
        assert (grads[LABELS_31 < 0] == 0).all()
        return
    assert_matches_oracle(name, LABELS_31, SCORES_31, rtol=1e-5, grad_atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_label_31_under_the_mixed_float16_policy(name):
    """float16 scores (what a mixed_float16 model outputs) compute in float32:
    the same values and gradients as float32 scores, all finite."""
    single = run(name, LABELS_31, SCORES_31)
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        half = run(name, LABELS_31, SCORES_31.astype(np.float16))
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert half[0].dtype == np.float32 and np.isfinite(half[0]).all()
    np.testing.assert_array_equal(half[0], single[0])
    # d loss / d float16 scores: float32's rounded to float16 (WassRank's, of
    # about 4^31 at label 31, overflow to inf there: the model's float16
    # gradients overflow, and LossScaleOptimizer skips the step)
    assert half[1].dtype == np.float16
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(half[1], single[1].astype(np.float16))
    if _family(name)[0] != "wassrank":
        assert np.isfinite(half[1]).all()


# --- graph mode and XLA -----------------------------------------------------------

MIXED_LABELS = np.array([
    [2, 0, 1, 0, PAD, PAD],   # NaN valid score
    [2, 0, 1, 0, 0, PAD],     # +-1e30 and an inf on padding
    [1, 1, 1, 1, PAD, PAD],   # all tied
    [0, 0, 0, PAD, PAD, PAD],  # no relevant document
    [PAD] * 6,                # all padded
    [5, 0, 2.5, 0, 1, 0],     # fractional labels
    [1, 0, 40, 0, PAD, PAD],  # label above the maximum
], np.float32)
MIXED_SCORES = np.array([
    [NAN, 0.2, 0.4, -0.1, 0.0, 0.0],
    [1e30, -1e30, 5e29, -5e29, 0.0, INF],
    [0.5, 0.5, 0.5, 0.5, NAN, 0.0],
    [0.1, 0.9, -0.3, NAN, 0.0, 0.0],
    [NAN, INF, -INF, 0.0, 1.0, 2.0],
    [0.5, -0.25, 1.0, 0.25, -1.0, 0.0],
    [0.1, 0.2, 0.3, 0.4, 0.0, 0.0],
], np.float32)


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_the_loss_function_applies_the_same_policy(name):
    """The public function (what a custom loop or a GBDT objective calls) gives
    the class's per-list values and gradients on the mixed batch: the policy
    is applied in one place. Its ``mask`` argument is padding too."""
    loss = build(name, reduction="none")
    want_values, want_grads = run(name, MIXED_LABELS, MIXED_SCORES)
    options = loss.options
    if options.get("seed") is not None:  # the seed of the class's first call
        options["seed"] = [tie_keys.stream_seed(options["seed"]), 0]  # (its step 0)
    scores = tf.constant(MIXED_SCORES)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        losses, weights = loss.spec.function(MIXED_LABELS, scores, **options)
        total = tf.reduce_sum(tf.where(tf.math.is_nan(losses), 0.0, losses * weights))
    np.testing.assert_array_equal((losses * weights).numpy(), want_values)
    np.testing.assert_array_equal(tape.gradient(total, scores).numpy(), want_grads)
    assert np.isnan(losses.numpy()[[0, 6]]).all()
    # mask=False is padding: the label -1 rows as a mask give the same per-list values
    mask = MIXED_LABELS >= 0
    masked, _ = loss.spec.function(np.where(mask, MIXED_LABELS, 7.0), scores, mask=mask,
                                   **options)
    np.testing.assert_array_equal(masked.numpy(), losses.numpy())
    empty_losses, empty_weights = loss.spec.function(np.zeros((0, 4)), np.zeros((0, 4)),
                                                     **options)
    assert empty_losses.shape == empty_weights.shape == (0,)


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_bad_input_policy_holds_in_graph_mode_and_under_xla(name):
    """One batch mixing the cases: graph mode and XLA give the eager values and
    gradients (NaN lists 0 and 6, zeros for lists 3-4 and for padding)."""
    options = QUICK_TO_COMPILE.get(name, {})
    eager = run(name, MIXED_LABELS, MIXED_SCORES, **options)
    assert np.isnan(eager[0][[0, 6]]).all() and np.isfinite(np.delete(eager[0], [0, 6])).all()
    assert (eager[0][[3, 4]] == 0).all() and (eager[1][[0, 3, 4, 6]] == 0).all()
    for xla in (False, True):
        loss = build(name, reduction="none", **options)
        value, grad = tf.function(lambda l, s: value_and_grad(loss, l, s), jit_compile=xla)(
            MIXED_LABELS, MIXED_SCORES)
        np.testing.assert_allclose(value.numpy().reshape(-1), eager[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grad.numpy(), eager[1], rtol=1e-4, atol=1e-5)
        assert (grad.numpy()[MIXED_LABELS < 0] == 0).all()
