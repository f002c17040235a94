"""The keras.ops NeuralNDCG (:func:`tfr_extensions.losses.neural_ndcg_loss` through the ``keras.ops`` namespace) on each Keras 3
backend: against the float64 NumPy oracle (``support.oracles_neural_ndcg``), in float64 and
float32 and on every shared case, under ``jax.jit``, and against allRank's reference
implementation (``support.reference_allrank_neural_ndcg``, PyTorch, vendored verbatim).

allRank and ours compute the same per-list value and gradient (to float32 rounding: the
reference runs in float32 only) where allRank's assumptions hold:

* padding: allRank marks it by the label -1 exactly (``PADDED_Y_VALUE``; ours: any label <
  0) and masks NeuralSort's position rows with the documents' padding, so it needs the
  padding at the end of the list; padding elsewhere changes its value (shown below),
  never ours;
* eps: allRank divides by ``idcg + 1e-10`` (a relative 1e-10, below float32's rounding)
  and clamps Sinkhorn's sums at 1e-10 (inactive: every valid column has an entry >= 1/n);
* Sinkhorn's early stop: allRank stops when every list of the batch has converged, ours
  per list, so a batch's lists can differ by the last iterations' changes (below the
  tolerance, 1e-6); compared one list at a time they run the same iterations;
* lists without a relevant document: allRank leaves them out of its batch mean, ours
  gives them weight 0 (the same mean: ``sum(losses * weights) / sum(weights)``).
"""
import numpy as np
import pytest

import keras
from keras import ops

import harness
import tfr_extensions as tfrx
from support import oracles_neural_ndcg as oracle

FUNCTION = tfrx.losses.neural_ndcg_loss
PAD = -1.0
#: (temperature, topn, transposed)
VARIANTS = [(1.0, None, False), (1.0, None, True), (0.3, 3, False), (0.3, 3, True),
            (2.0, 5, False)]
VARIANT_IDS = [f"tau{t}-top{k}-{'T' if tr else 'N'}" for t, k, tr in VARIANTS]


def _keras_ops(labels, scores, **options):
    """Value and gradient of the keras.ops body on the backend (on JAX one program per
    option set for the session)."""
    return harness.body_value_and_grad("neural_ndcg", labels, scores, **options)


def _oracle(labels, scores, temperature=1.0, topn=None, transposed=False, iterations=50,
            tolerance=1e-6):
    values, grads = np.zeros(len(labels)), np.zeros(labels.shape)
    for b in range(len(labels)):
        keep = labels[b] >= 0
        values[b], grads[b, keep] = oracle.neural_ndcg(
            labels[b][keep].astype(np.float64), scores[b][keep].astype(np.float64),
            temperature, topn, transposed, iterations, tolerance)
    return values, grads


def _batch(seed, dtype=np.float32):
    """``[6, 7]``: padding at the end, in the middle and first, tied labels, a list
    without relevant documents, one valid document."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, size=(6, 7)).astype(dtype)
    scores = rng.normal(size=(6, 7)).astype(dtype)
    labels[0, 5:] = PAD
    labels[1, 2] = labels[1, 4] = PAD
    labels[2, :2] = PAD
    labels[3, 3:] = labels[3, 0]  # tied labels
    labels[4] = 0.0
    labels[5, 1:] = PAD
    labels[5, 0] = 3.0
    return labels, scores


# --- the NumPy oracle --------------------------------------------------------------------

@pytest.mark.parametrize("temperature,topn,transposed", VARIANTS, ids=VARIANT_IDS)
def test_float64_values_and_gradients_equal_the_oracle(temperature, topn, transposed):
    labels, scores = _batch(0, np.float64)
    options = dict(temperature=temperature, topn=topn, transposed=transposed)
    with harness.float64():
        value, grad = _keras_ops(labels, scores, **options)
    assert value.dtype == np.float64
    want_value, want_grad = _oracle(labels, scores, **options)
    harness.assert_close(value, want_value, rtol=1e-10, atol=1e-12)
    harness.assert_close(grad, want_grad, rtol=1e-8, atol=1e-11)
    assert (grad[labels < 0] == 0).all() and (grad[4] == 0).all() and (grad[5] == 0).all()
    assert value[5] == -1.0 and value[4] == 0.0


@pytest.mark.parametrize("temperature,topn,transposed", VARIANTS, ids=VARIANT_IDS)
def test_float32_values_and_gradients_equal_the_oracle(temperature, topn, transposed):
    labels, scores = _reference_lists()  # (the lists of allRank's test: one program for both)
    options = dict(temperature=temperature, topn=topn, transposed=transposed)
    value, grad = _keras_ops(labels, scores, **options)
    assert value.dtype == np.float32
    want_value, want_grad = _oracle(labels, scores, **options)
    harness.assert_close(value, want_value, rtol=2e-6, atol=1e-7)
    harness.assert_close(grad, want_grad, rtol=1e-4, atol=2e-6)


def test_padding_equals_deleting():
    labels, scores = _batch(2)
    value, grad = _keras_ops(labels, scores, topn=3)
    for b in range(len(labels)):
        keep = labels[b] >= 0
        alone, alone_grad = _keras_ops(labels[b:b + 1, keep], scores[b:b + 1, keep], topn=3)
        harness.assert_close(value[b], alone[0], rtol=1e-6)
        harness.assert_close(grad[b, keep], alone_grad[0], rtol=1e-5, atol=1e-7)
    assert (grad[labels < 0] == 0).all()


# --- every shared case --------------------------------------------------------------------

#: option sets checked on every shared case
CASE_OPTIONS = [{}, {"temperature": 0.4, "topn": 2, "transposed": True},
                {"sinkhorn_iterations": 7, "sinkhorn_tolerance": 0.0}]
CASE_OPTION_IDS = ["defaults", "tau-topn-transposed", "iterations"]
#: the oracle's names of the options
ORACLE_NAMES = {"temperature": "temperature", "topn": "topn", "transposed": "transposed",
                "sinkhorn_iterations": "iterations", "sinkhorn_tolerance": "tolerance"}


def _check_cases(labels, scores, options, what):
    value, grad = _keras_ops(labels, scores, **options)
    kwargs = {ORACLE_NAMES[k]: v for k, v in options.items()}
    want_value, want_grad = harness.expected_per_list(
        lambda y, s: oracle.neural_ndcg(y, s, **kwargs), labels, scores)
    harness.assert_close(value, want_value, rtol=2e-5, what=f"{what} value")
    harness.assert_close(grad, want_grad, rtol=1e-4, atol=2e-6, what=f"{what} gradient")
    harness.assert_policy(value, grad, labels, scores)


@pytest.mark.parametrize("options", CASE_OPTIONS, ids=CASE_OPTION_IDS)
def test_every_shared_case_equals_the_oracle(options):
    """Padding, ties (all scores tied included), no relevant document, list size 1 and
    bad input (broken lists: NaN, zero gradient), in one batch (the 70-document lists:
    in their own shape, below)."""
    _check_cases(*harness.merged_cases(harness.SHORT_CASES), options, "merged")


#: each shared case in its own shape (list size 1, 70 documents...), one option set each
PER_CASE = [(case, i % len(CASE_OPTIONS)) for i, case in enumerate(sorted(harness.CASES))]


@pytest.mark.parametrize("case,which", PER_CASE,
                         ids=[f"{c}-{CASE_OPTION_IDS[w]}" for c, w in PER_CASE])
def test_every_case_in_its_own_shape_equals_the_oracle(case, which):
    _check_cases(*harness.CASES[case], CASE_OPTIONS[which], case)


@pytest.mark.parametrize("shape", [(3, 0), (0, 4)])
def test_empty_batches_and_lists(shape):
    value, grad = _keras_ops(np.ones(shape, np.float32), np.zeros(shape, np.float32))
    assert value.shape == shape[:1] and grad.shape == shape and np.all(value == 0.0)


@pytest.mark.skipif(harness.BACKEND != "jax", reason="jax.jit")
def test_jax_jit_equals_eager_and_the_oracle_in_float64():
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    labels, scores = _batch(3, np.float64)
    fn = harness.per_list_loss(FUNCTION.spec, FUNCTION.spec.check_options(topn=4, transposed=True))
    with harness.float64():
        total = jax.value_and_grad(lambda s: jnp.sum(fn(jnp.asarray(labels), s)))
        value, grad = jax.jit(total)(jnp.asarray(scores))
        eager_value, eager_grad = total(jnp.asarray(scores))
        assert value.dtype == jnp.float64
    want_value, want_grad = _oracle(labels, scores, topn=4, transposed=True)
    harness.assert_close(float(value), want_value.sum(), rtol=1e-10)
    harness.assert_close(np.asarray(grad), want_grad, rtol=1e-8, atol=1e-11)
    harness.assert_close(float(eager_value), float(value), rtol=1e-12)
    harness.assert_close(np.asarray(eager_grad), np.asarray(grad), rtol=1e-10, atol=1e-13)


def test_the_class_computes_through_the_keras_ops_body_and_a_model_fits():
    labels, scores = _batch(4)
    loss = tfrx.losses.get("neural_ndcg_transposed", topn=3)
    want, _ = _oracle(labels, scores, topn=3, transposed=True)
    got = harness.jit(loss)(ops.convert_to_tensor(labels), ops.convert_to_tensor(scores))
    harness.assert_close(float(harness.to_numpy(got)), want.sum() / len(labels), rtol=1e-5)
    rng = np.random.default_rng(0)
    features = rng.normal(size=(8, 5, 3)).astype(np.float32)
    fit_labels = rng.integers(0, 3, size=(8, 5)).astype(np.float32)
    fit_labels[:, 4] = PAD
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.Dense(1),
                              keras.layers.Reshape((5,))])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=tfrx.losses.get("neural_ndcg"))
    history = model.fit(features, fit_labels, batch_size=4, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))


# --- allRank's reference -------------------------------------------------------------------

def _reference(variant, labels, scores, **kwargs):
    """allRank's loss and its gradient (PyTorch autograd) on a batch, float32."""
    ref = pytest.importorskip("support.reference_allrank_neural_ndcg")
    torch = ref.torch
    fn = ref.neuralNDCG_transposed if variant else ref.neuralNDCG
    s = torch.tensor(scores, dtype=torch.float32, requires_grad=True)
    value = fn(s, torch.tensor(labels, dtype=torch.float32), **kwargs)
    if not value.requires_grad:  # (no relevant document: a constant 0)
        return float(value), np.zeros(scores.shape, np.float32)
    value.backward()
    return float(value.detach()), s.grad.numpy()


def _reference_lists():
    """``[8, 7]`` float32: trailing padding (allRank's assumption), tied labels, graded
    labels 0-4, a list without relevant documents, one document, all scores tied."""
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 5, size=(8, 7)).astype(np.float32)
    scores = rng.normal(size=(8, 7)).astype(np.float32)
    labels[0, 5:] = PAD
    labels[1, 3:] = PAD
    labels[2] = [2, 2, 1, 1, 0, 0, PAD]  # tied labels
    labels[3] = [0, 0, 0, 0, PAD, PAD, PAD]  # no relevant document
    labels[4, 1:] = PAD  # one document
    labels[4, 0] = 1.0
    scores[5] = 0.3  # all scores tied
    labels[6, 6] = PAD
    return labels, scores


@pytest.mark.parametrize("temperature,topn,transposed", VARIANTS[:4], ids=VARIANT_IDS[:4])
def test_per_list_values_and_gradients_equal_allranks(temperature, topn, transposed):
    labels, scores = _reference_lists()
    value, grad = _keras_ops(labels, scores, temperature=temperature, topn=topn,
                             transposed=transposed)
    for b in range(len(labels)):
        want, want_grad = _reference(transposed, labels[b:b + 1], scores[b:b + 1],
                                     temperature=temperature, k=topn)
        harness.assert_close(value[b], want, rtol=2e-6, atol=1e-7, what=f"list {b}")
        harness.assert_close(grad[b], want_grad[0], rtol=1e-4, atol=2e-6, what=f"list {b}")
    assert (grad[labels < 0] == 0).all()


@pytest.mark.parametrize("transposed", [False, True])
def test_the_batch_mean_equals_allranks_to_its_sinkhorn_tolerance(transposed):
    """allRank's batch mean over lists with a relevant document is ours
    ``sum(losses * weights) / sum(weights)``; its Sinkhorn loop runs until the whole
    batch has converged, so lists that converged early take more iterations there
    (changes below the tolerance, 1e-6)."""
    labels, scores = _reference_lists()
    value, grad = _keras_ops(labels, scores, temperature=0.5, transposed=transposed)
    weights = np.any(labels > 0, axis=1).sum()
    want, want_grad = _reference(transposed, labels, scores, temperature=0.5)
    harness.assert_close(value.sum() / weights, want, rtol=1e-5)
    harness.assert_close(grad / weights, want_grad, rtol=1e-3, atol=1e-5)


def test_allrank_needs_trailing_padding_ours_does_not():
    """Padding in the middle: allRank's value differs from the unpadded list's (it masks
    position rows by the documents' padding); ours equals it."""
    labels = np.array([[2.0, PAD, 0.0, 1.0, 3.0]], np.float32)
    scores = np.array([[0.2, 0.0, -0.4, 0.9, 0.5]], np.float32)
    keep = labels[0] >= 0
    unpadded, _ = _reference(False, labels[:, keep], scores[:, keep])
    trailing, _ = _reference(False, np.concatenate([labels[:, keep], [[PAD]]], axis=1),
                             np.concatenate([scores[:, keep], [[0.0]]], axis=1))
    middle, _ = _reference(False, labels, scores)
    assert trailing == pytest.approx(unpadded, rel=1e-6)
    assert abs(middle - unpadded) > 1e-3
    ours, _ = _keras_ops(labels, scores)
    harness.assert_close(ours[0], unpadded, rtol=2e-6)
