"""NeuralNDCGLoss (NeuralSort + Sinkhorn scaling, :mod:`tfr_extensions.losses.relaxed_sorting`),
TensorFlow body.

Values and gradients equal the float64 NumPy oracle (``support.oracles_neural_ndcg``,
written from the papers' definitions, its hand-written gradient checked by central
differences here), normal and transposed, with and without a cutoff, at several
temperatures; padding = deleting wherever it sits; lists without relevant documents;
ties; XLA = graph mode (the Sinkhorn loop's per-list stop included); float64; the
class = the function; configs. allRank's reference is compared on Keras 3's PyTorch
backend (``tests/keras_ops/test_keras_ops_neural_ndcg.py``).
"""
import json
import re

import numpy as np
import pytest
import tensorflow as tf

import tfr_extensions as tfrx
from support import oracles_neural_ndcg as oracle
from support.stack import tensorflow_ops_suite
from tfr_extensions.backend import keras
from tfr_extensions.losses import relaxed_sorting
from tfr_extensions.ops import sinkhorn

PAD = -1.0
#: (temperature, topn, transposed): each variant, with and without a cutoff, at three
#: temperatures
VARIANTS = [(1.0, None, False), (1.0, None, True), (0.3, 3, False), (0.3, 3, True),
            (2.5, 3, False), (2.5, None, True), (0.1, 5, False)]
VARIANT_IDS = [f"tau{t}-top{k}-{'T' if tr else 'N'}" for t, k, tr in VARIANTS]


def batch(seed=0, dtype=np.float64):
    """Labels and scores ``[7, 8]``: padding at the end, first and in the middle, a list
    without relevant documents, one valid document, tied labels, tied scores, fractional
    labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, size=(7, 8)).astype(dtype)
    scores = rng.normal(size=(7, 8)).astype(dtype)
    labels[0, 5:] = PAD
    labels[1, :3] = PAD
    labels[1, 5] = PAD
    labels[2] = np.where(labels[2] >= 0, 0.0, PAD)  # no relevant document
    labels[3, 1:] = PAD  # one valid document
    labels[3, 0] = 2.0
    labels[4, 4:] = labels[4, :4]  # tied labels
    scores[5, 4:] = scores[5, :4]  # tied scores
    labels[6, :3] = [2.5, 0.5, 0.0]  # fractional labels
    return labels, scores


def function_value_and_grad(labels, scores, **options):
    """Per-list ``(losses, weights)`` and the gradient of ``sum(losses * weights)``."""
    scores = tf.constant(scores)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        losses, weights = tfrx.losses.neural_ndcg_loss(labels, scores, **options)
        total = tf.reduce_sum(losses * weights)
    return losses.numpy(), weights.numpy(), tape.gradient(total, scores).numpy()


def oracle_per_list(labels, scores, **options):
    values, grads = np.zeros(len(labels)), np.zeros(labels.shape)
    for b in range(len(labels)):
        keep = labels[b] >= 0
        values[b], grads[b, keep] = oracle.neural_ndcg(labels[b][keep], scores[b][keep],
                                                       **options)
    return values, grads


def oracle_options(temperature, topn, transposed, iterations=50, tolerance=1e-6):
    return dict(temperature=temperature, topn=topn, transposed=transposed,
                iterations=iterations, tolerance=tolerance)


# --- the oracle -------------------------------------------------------------------------

@pytest.mark.parametrize("temperature,topn,transposed", VARIANTS, ids=VARIANT_IDS)
def test_the_oracle_gradient_is_the_derivative_of_its_value(temperature, topn, transposed):
    """The oracle's hand-written backward pass against central differences (float64, a
    fixed number of Sinkhorn iterations: tolerance 0, so the function is smooth)."""
    rng = np.random.default_rng(1)
    y = np.array([2.0, 0.0, 1.0, 3.0, 1.0, 0.0])
    s = rng.normal(size=6)
    options = oracle_options(temperature, topn, transposed, iterations=20, tolerance=0.0)
    _, grad = oracle.neural_ndcg(y, s, **options)
    eps, numeric = 1e-6, np.zeros(6)
    for i in range(6):
        step = np.eye(6)[i] * eps
        numeric[i] = (oracle.neural_ndcg(y, s + step, **options)[0]
                      - oracle.neural_ndcg(y, s - step, **options)[0]) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)
    assert np.abs(grad).max() > 1e-3


def test_the_oracle_at_a_small_temperature_is_minus_the_exact_ndcg():
    y, s = np.array([0.0, 1.0, 2.0, 1.0]), np.array([3.0, 2.0, 1.0, 0.5])
    exact = float(tfrx.metrics.ndcg(y[None], s[None], topn=3).numpy().reshape(-1)[0])
    for transposed in (False, True):
        value, _ = oracle.neural_ndcg(y, s, temperature=1e-3, topn=3, transposed=transposed)
        assert value == pytest.approx(-exact, rel=1e-9)


# --- values and gradients against the oracle --------------------------------------------

@pytest.mark.parametrize("temperature,topn,transposed", VARIANTS, ids=VARIANT_IDS)
def test_values_and_gradients_equal_the_oracle_in_float64(temperature, topn, transposed):
    labels, scores = batch(2)
    losses, weights, grad = function_value_and_grad(
        labels, scores, temperature=temperature, topn=topn, transposed=transposed)
    values, grads = oracle_per_list(labels, scores,
                                    **oracle_options(temperature, topn, transposed))
    assert losses.dtype == np.float64 and grad.dtype == np.float64
    np.testing.assert_allclose(losses * weights, values, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(grad, grads, rtol=1e-8, atol=1e-11)
    np.testing.assert_array_equal(weights, [1, 1, 0, 1, 1, 1, 1])
    assert (grad[labels < 0] == 0).all() and (grad[2] == 0).all() and (grad[3] == 0).all()
    assert losses[3] == -1.0  # one relevant document: nDCG 1


@pytest.mark.parametrize("temperature,topn,transposed", VARIANTS[:4], ids=VARIANT_IDS[:4])
def test_float32_values_and_gradients_equal_the_oracle(temperature, topn, transposed):
    labels, scores = batch(3, np.float32)
    losses, weights, grad = function_value_and_grad(
        labels, scores, temperature=temperature, topn=topn, transposed=transposed)
    values, grads = oracle_per_list(labels.astype(np.float64), scores.astype(np.float64),
                                    **oracle_options(temperature, topn, transposed))
    assert losses.dtype == np.float32
    np.testing.assert_allclose(losses * weights, values, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(grad, grads, rtol=1e-4, atol=2e-6)


@tensorflow_ops_suite
@pytest.mark.parametrize("transposed", [False, True])
def test_gradients_match_finite_differences(transposed):
    """TensorFlow's derivative through the Sinkhorn iterations (a fixed number:
    tolerance 0) against ``tf.test.compute_gradient``, float64."""
    labels, scores = batch(4)
    loss = tfrx.losses.NeuralNDCGLoss(temperature=0.5, topn=4, transposed=transposed,
                                      sinkhorn_iterations=15, sinkhorn_tolerance=0.0,
                                      reduction="sum")
    theoretical, numerical = tf.test.compute_gradient(
        lambda s: loss(labels, s), [tf.constant(scores)], delta=1e-6)
    np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-6, atol=1e-9)
    assert np.abs(theoretical[0]).max() > 1e-3


def test_the_two_variants_are_one_bilinear_form():
    """sum_r D_r (P g)_r = sum_i g_i (P^T D)_i: the variants are equal up to rounding."""
    labels, scores = batch(5)
    for topn in (None, 2):
        plain = function_value_and_grad(labels, scores, topn=topn)
        transposed = function_value_and_grad(labels, scores, topn=topn, transposed=True)
        for a, b in zip(plain, transposed):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_a_small_temperature_gives_minus_the_exact_ndcg():
    labels = np.array([[3.0, 0.0, 1.0, 2.0, PAD], [1.0, 2.0, 0.0, 0.0, 0.0]])
    scores = np.array([[0.1, 0.9, 0.5, -0.3, 5.0], [0.3, -0.2, 0.8, 0.1, -1.0]])
    for topn in (None, 2):
        exact = tfrx.metrics.ndcg(labels, scores, topn=topn).numpy().reshape(-1)
        for transposed in (False, True):
            losses, _ = tfrx.losses.neural_ndcg_loss(labels, scores, temperature=1e-4,
                                                     topn=topn, transposed=transposed)
            np.testing.assert_allclose(-losses.numpy(), exact, rtol=1e-9)


# --- padding, ties, lists without relevance ----------------------------------------------

@pytest.mark.parametrize("transposed", [False, True])
def test_padding_equals_deleting_wherever_it_sits(transposed):
    """Each list alone and unpadded against the same list padded at the front, in the
    middle and at the end, in one batch: the same value and gradient (the Sinkhorn
    iterations stop per list, so the batch's other lists change nothing), and
    exactly zero gradient at padding."""
    rng = np.random.default_rng(6)
    labels = np.array([[2, 0, 1, 0, 3], [0, 1, 1, 0, 2], [1, 0, 0, 0, 0]], np.float32)
    scores = rng.normal(size=labels.shape).astype(np.float32)
    padded_labels = np.full((3, 8), PAD, np.float32)
    padded_scores = rng.normal(size=(3, 8)).astype(np.float32) * 100
    slots = [[3, 4, 5, 6, 7], [0, 2, 4, 5, 7], [0, 1, 2, 3, 4]]
    for b, slot in enumerate(slots):
        padded_labels[b, slot], padded_scores[b, slot] = labels[b], scores[b]
    options = dict(temperature=0.7, topn=3, transposed=transposed)
    losses, weights, grad = function_value_and_grad(padded_labels, padded_scores, **options)
    for b, slot in enumerate(slots):
        alone = function_value_and_grad(labels[b:b + 1], scores[b:b + 1], **options)
        np.testing.assert_allclose(losses[b], alone[0][0], rtol=1e-6)
        assert weights[b] == alone[1][0]
        np.testing.assert_allclose(grad[b, slot], alone[2][0], rtol=1e-5, atol=1e-7)
    assert (grad[padded_labels < 0] == 0).all()


def test_a_mask_equals_padding_labels():
    labels, scores = batch(7, np.float32)
    mask = labels >= 0
    fed = np.where(mask, labels, 3.0)
    by_mask = tfrx.losses.neural_ndcg_loss(fed, scores, mask=mask, topn=3)
    by_labels = tfrx.losses.neural_ndcg_loss(labels, scores, topn=3)
    for a, b in zip(by_mask, by_labels):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_lists_without_relevant_documents_give_zero_loss_weight_and_gradient():
    labels = np.array([[0, 0, 0, PAD], [PAD] * 4, [0, 0, 1, 0]], np.float32)
    scores = np.array([[0.3, -1.0, 2.0, 1e30], [1.0, 2.0, 3.0, 4.0], [0.1, 0.2, 0.3, 0.4]],
                      np.float32)
    for transposed in (False, True):
        losses, weights, grad = function_value_and_grad(labels, scores, transposed=transposed)
        np.testing.assert_array_equal(losses[:2], [0, 0])
        np.testing.assert_array_equal(weights, [0, 0, 1])
        assert (grad[:2] == 0).all() and np.abs(grad[2]).max() > 0


def test_ties_in_scores_split_evenly_and_stay_finite():
    """All-equal scores: every row of P is uniform (already doubly stochastic), so
    NeuralNDCG is the mean gain's; tied scores at 1e30 as at 0; one document; 3e38."""
    labels = np.array([[1, 0, 2, 0], [2, 1, 0, PAD], [1, PAD, PAD, PAD], [1, 0, 2, 0]],
                      np.float32)
    scores = np.array([[0.5] * 4, [1e30, 1e30, -1e30, 0.0], [7.0, 0, 0, 0],
                       [3e38, -3e38, 1.0, 0.0]], np.float32)
    losses, weights, grad = function_value_and_grad(labels, scores)
    assert np.isfinite(losses).all() and np.isfinite(grad).all()
    gains = 2.0 ** np.array([1, 0, 2, 0]) - 1
    discounts = 1 / np.log2(np.arange(2, 6))
    expected = -(gains.mean() * discounts.sum()) / (np.sort(gains)[::-1] @ discounts)
    np.testing.assert_allclose(losses[0], expected, rtol=1e-6)
    assert losses[2] == -1.0 and (grad[2] == 0).all()
    values, grads = oracle_per_list(labels.astype(np.float64), scores.astype(np.float64),
                                    **oracle_options(1.0, None, False))
    np.testing.assert_allclose(losses * weights, values, rtol=1e-6)
    np.testing.assert_allclose(grad, grads, rtol=1e-5, atol=1e-6)


# --- Sinkhorn ---------------------------------------------------------------------------

@tensorflow_ops_suite
def test_sinkhorn_makes_the_valid_block_doubly_stochastic_and_stops_per_list():
    """The relaxed matrix after Sinkhorn: rows and columns of the valid block sum to 1
    within the tolerance, 0 elsewhere, and it equals the oracle's. With a loose
    tolerance a list stops after fewer iterations, and its value alone equals its
    value in a batch whose other list needs more."""
    labels, scores = batch(8)
    mask = tf.constant(labels >= 0)
    probs, rows = relaxed_sorting.neural_sort(tf.constant(scores), mask, 0.5)
    # (50 iterations, the default, leave column sums 4e-4 from 1 in one of these lists)
    scaled = sinkhorn.sinkhorn_scaling(probs, rows, mask, 2000, 1e-6).numpy()
    for b in range(len(labels)):
        keep = labels[b] >= 0
        n = int(keep.sum())
        block = scaled[b][:n][:, keep]
        want = oracle.relaxed_permutation(scores[b][keep], 0.5, iterations=2000)
        np.testing.assert_allclose(block, want, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(block.sum(axis=0), 1.0, atol=1e-6)
        np.testing.assert_allclose(block.sum(axis=1), 1.0, atol=1e-6)
        assert np.abs(scaled[b]).sum() == pytest.approx(n)
    easy = np.array([[0.0, 1.0, 2.0]])  # spread scores: nearly a permutation already
    hard = np.array([[0.0, 0.01, 0.02]])  # close scores: a long way from doubly stochastic
    labels3 = np.array([[0.0, 1.0, 2.0]])
    loose = dict(temperature=1.0, sinkhorn_tolerance=1e-2)
    alone = tfrx.losses.neural_ndcg_loss(labels3, easy, **loose)[0].numpy()
    together = tfrx.losses.neural_ndcg_loss(np.concatenate([labels3, labels3]),
                                            np.concatenate([easy, hard]), **loose)[0].numpy()
    assert together[0] == alone[0]
    strict = tfrx.losses.neural_ndcg_loss(labels3, easy, sinkhorn_tolerance=0.0)[0].numpy()
    assert strict[0] != alone[0]
    for tolerance in (1e-2, 0.0):
        want, _ = oracle.neural_ndcg(labels3[0], easy[0], tolerance=tolerance)
        got = tfrx.losses.neural_ndcg_loss(labels3, easy, sinkhorn_tolerance=tolerance)[0]
        assert float(got[0]) == pytest.approx(want, rel=1e-12)


# --- compilation, dtypes, the class -------------------------------------------------------

@tensorflow_ops_suite
@pytest.mark.parametrize("transposed,tolerance", [(False, 1e-6), (True, 0.0)])
def test_xla_equals_graph_mode(transposed, tolerance):
    labels, scores = batch(9, np.float32)
    # 12 Sinkhorn iterations, not the default 50: the equality does not depend on the
    # count, and XLA's compile time grows with it (the registry suite compiles the
    # defaults under XLA)
    loss = tfrx.losses.NeuralNDCGLoss(topn=3, transposed=transposed, sinkhorn_iterations=12,
                                      sinkhorn_tolerance=tolerance)

    def run(s):
        with tf.GradientTape() as tape:
            tape.watch(s)
            value = loss(labels, s)
        return value, tape.gradient(value, s)

    graph = tf.function(run)(tf.constant(scores))
    xla = tf.function(run, jit_compile=True)(tf.constant(scores))
    np.testing.assert_allclose(xla[0].numpy(), graph[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(xla[1].numpy(), graph[1].numpy(), rtol=1e-5, atol=1e-7)
    dynamic = tf.function(run, input_signature=[tf.TensorSpec([None, None], tf.float32)])
    np.testing.assert_allclose(dynamic(tf.constant(scores))[0].numpy(), graph[0].numpy(),
                               rtol=1e-6)
    # the tape outside the XLA program: the stored iterates reach the backward as tensors
    compiled_loss = tf.function(lambda s: loss(labels, s), jit_compile=True)
    s = tf.constant(scores)
    with tf.GradientTape() as tape:
        tape.watch(s)
        value = compiled_loss(s)
    np.testing.assert_allclose(value.numpy(), graph[0].numpy(), rtol=1e-6)
    np.testing.assert_allclose(tape.gradient(value, s).numpy(), graph[1].numpy(), rtol=1e-5,
                               atol=1e-7)


def test_float64_computes_in_float64_and_float16_in_float32():
    labels, scores = batch(10)
    value = tfrx.losses.NeuralNDCGLoss()(labels, scores)
    assert value.dtype == tf.float64
    half = tfrx.losses.NeuralNDCGLoss()(labels, scores.astype(np.float16))
    assert half.dtype == tf.float32
    np.testing.assert_allclose(half.numpy(), value.numpy(), rtol=2e-3)


def test_the_class_computes_the_function():
    labels, scores = batch(11, np.float32)
    options = dict(temperature=0.5, topn=3, transposed=True, sinkhorn_iterations=20,
                   sinkhorn_tolerance=1e-5)
    losses, weights = tfrx.losses.neural_ndcg_loss(labels, scores, **options)
    per_list = tfrx.losses.NeuralNDCGLoss(reduction="none", **options)(labels, scores)
    np.testing.assert_allclose(np.reshape(per_list.numpy(), -1),
                               losses.numpy() * weights.numpy(), rtol=1e-6)
    reduced = tfrx.losses.NeuralNDCGLoss(**options)(labels, scores)
    np.testing.assert_allclose(reduced.numpy(), np.sum(losses * weights) / len(labels),
                               rtol=1e-6)
    by_name = tfrx.losses.get("neural_ndcg_transposed", temperature=0.5, topn=3,
                              sinkhorn_iterations=20, sinkhorn_tolerance=1e-5)
    assert type(by_name) is tfrx.losses.NeuralNDCGLoss and by_name.options == options
    np.testing.assert_allclose(by_name(labels, scores).numpy(), reduced.numpy())


def test_config_round_trips_through_json():
    loss = tfrx.losses.NeuralNDCGLoss(temperature=0.25, topn=5, transposed=True,
                                      sinkhorn_iterations=9, sinkhorn_tolerance=1e-4,
                                      reduction="sum", name="mine")
    config = json.loads(json.dumps(loss.get_config()))
    assert {k: config[k] for k in loss.options} == loss.options
    again = tfrx.losses.NeuralNDCGLoss.from_config(config)
    assert again.get_config() == loss.get_config() and again.name == "mine"
    labels, scores = batch(12, np.float32)
    np.testing.assert_array_equal(again(labels, scores).numpy(), loss(labels, scores).numpy())
    restored = keras.losses.deserialize(json.loads(json.dumps(keras.losses.serialize(loss))))
    assert type(restored) is tfrx.losses.NeuralNDCGLoss
    assert restored.get_config() == loss.get_config()


@pytest.mark.parametrize("option,value,message", [
    ("temperature", 0.0, "`temperature` must be a positive finite number"),
    ("temperature", float("inf"), "`temperature` must be a positive finite number"),
    ("topn", 0, "`topn` must be None or an int >= 1"),
    ("topn", 2.5, "`topn` must be None or an int >= 1"),
    ("transposed", "yes", "`transposed`"),
    ("sinkhorn_iterations", 0, "`sinkhorn_iterations` must be an int >= 1"),
    ("sinkhorn_tolerance", -1e-3, "`sinkhorn_tolerance` must be a finite number in [0, inf)"),
])
def test_options_are_checked_with_clear_errors(option, value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        tfrx.losses.NeuralNDCGLoss(**{option: value})
    with pytest.raises(ValueError, match=f"`{option}`"):
        tfrx.losses.neural_ndcg_loss([[1.0, 0.0]], [[0.1, 0.2]], **{option: value})
