"""LambdaLoss's math (``tfr_extensions/losses/lambda_loss.py``) in its keras.ops filling
on Keras's backend (JAX under ``jax.jit``, PyTorch, TensorFlow): per-list values and
gradients against the NumPy oracle (:mod:`support.oracles_lambda`) on every shared
case (padding, ties, no relevant document, list size 1, long lists, bad input), and
against allRank's ``lambdaLoss``, the reference (vendored verbatim in
:mod:`support.reference_allrank_lambda`; needs PyTorch, which the keras3 stack has).

allRank's conventions, accounted for here: label -1 marks padding (ours too); it
sums every list of the batch into one number (``reduction="sum"``), so it runs one
list at a time for per-list values; it clamps the sigmoid and its power at
``eps = 1e-10`` (a pair's term saturates at ``-log2(1e-10) = 33.2``, where ours,
``softplus(-x) / ln 2``, keeps growing): the scores here keep every term below that.
It computes the discounts in float32 (``pos_idxs.float()``), hence float32
tolerances even on float64 lists.
"""

import numpy as np
import pytest

import harness
from support import oracles_lambda
import tfr_extensions as tfrx
from tfr_extensions.losses.lambda_framework import WEIGHTINGS

KEY = "lambda_loss"
#: options: each weighting with its defaults, and with every option changed
CONFIGS = ([{"weighting": w} for w in WEIGHTINGS]
           + [{"weighting": w, "sigma": 1.7, "mu": 3.0, "topn": 3} for w in WEIGHTINGS])
CONFIG_IDS = ["-".join(map(str, c.values())) for c in CONFIGS]
#: allRank's names of the weighting schemes
ALLRANK_SCHEMES = {"ranknet": "rankNet_scheme", "lambdarank": "lambdaRank_scheme",
                   "ndcg_loss1": "ndcgLoss1_scheme", "ndcg_loss2": "ndcgLoss2_scheme",
                   "ndcg_loss2pp": "ndcgLoss2PP_scheme"}


def lists(seed=0, batch=5, size=9):
    """Graded labels with ties, padding at the end and in the middle, a list without
    a relevant document; distinct scores of moderate size (allRank's eps, above)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, size=(batch, size)).astype(np.float32)
    labels[0, 6:] = -1.0
    labels[1, 3] = -1.0
    labels[2] = np.where(labels[2] >= 0, 0.0, -1.0)
    return labels, rng.normal(size=(batch, size)).astype(np.float32)


def check_against_the_oracle(labels, scores, options, what=""):
    value, grad = harness.body_value_and_grad(KEY, labels, scores, **options)
    want, want_grad = harness.expected_per_list(
        lambda y, s: oracles_lambda.lambda_loss_and_gradient(y, s, **options), labels, scores)
    harness.assert_close(value, want, what=f"{what} value")
    # (ranknet's unnormalized sums over ~L^2 / 2 pairs: float32 cancellation, so the
    # absolute floor scales with the largest gradient entry)
    scale = max(1.0, float(np.max(np.abs(want_grad))))
    harness.assert_close(grad, want_grad, rtol=2e-5, atol=2e-6 * scale, what=f"{what} gradient")
    harness.assert_policy(value, grad, labels, scores)
    return value, grad


@pytest.mark.parametrize("options", CONFIGS, ids=CONFIG_IDS)
def test_values_and_gradients_equal_the_oracle_on_every_case(options):
    """The short shared cases in one batch (one program per option set; the
    70-document lists: in their own shape, below)."""
    labels, scores = harness.merged_cases(harness.SHORT_CASES)
    _, grad = check_against_the_oracle(labels, scores, options, str(options))
    assert np.abs(grad).max() > 0


#: each shared case in its own shape (list size 1, 70 documents...), one weighting each
PER_CASE = [(case, CONFIGS[i % len(CONFIGS)]) for i, case in enumerate(sorted(harness.CASES))]


@pytest.mark.parametrize("case,options", PER_CASE, ids=[c for c, _ in PER_CASE])
def test_every_case_in_its_own_shape_equals_the_oracle(case, options):
    check_against_the_oracle(*harness.CASES[case], options, case)


@pytest.mark.parametrize("options", CONFIGS, ids=CONFIG_IDS)
def test_equals_allrank_per_list(options):
    """allRank's ``lambdaLoss(y_pred, y_true, weighing_scheme=..., k=topn, sigma, mu)``
    one list at a time (its sum over the batch), value and gradient, on the lists of
    the shared cases that it takes (the program of the oracle test above, on the same
    batch): not the tied ones (its ``torch.sort`` orders ties arbitrarily) nor the
    broken ones (NaN is ours)."""
    torch = pytest.importorskip("torch")
    from support import reference_allrank_lambda  # pylint: disable=import-outside-toplevel
    labels, scores = harness.merged_cases(harness.SHORT_CASES)
    value, grad = harness.body_value_and_grad(KEY, labels, scores, **options)
    checked = tfrx.losses.lambda_loss.spec.check_options(**options)
    valid = labels >= 0
    tied = [len(np.unique(s[keep])) < keep.sum() for s, keep in zip(scores, valid)]
    rows = np.flatnonzero(~np.array(tied) & ~harness.broken_lists(labels, scores))
    assert len(rows) >= 10
    for b in rows:
        y_pred = torch.tensor(scores[b:b + 1], requires_grad=True)
        reference = reference_allrank_lambda.lambdaLoss(
            y_pred, torch.tensor(labels[b:b + 1]),
            weighing_scheme=ALLRANK_SCHEMES[checked["weighting"]], k=checked["topn"],
            sigma=checked["sigma"], mu=checked["mu"])
        reference.backward()
        harness.assert_close(value[b], reference.item(), what=f"list {b} value")
        harness.assert_close(grad[b], y_pred.grad.numpy()[0], rtol=2e-5,
                             atol=2e-6, what=f"list {b} gradient")


@pytest.mark.skipif(harness.BACKEND != "jax", reason="jax.jit: the JAX backend's suite")
def test_the_class_under_jax_jit_equals_eager():
    import jax  # pylint: disable=import-outside-toplevel
    labels, scores = lists(seed=2)
    loss = tfrx.losses.LambdaLoss(topn=4)
    value_and_grad = jax.value_and_grad(lambda s, l: loss(l, s))
    value, grad = jax.jit(value_and_grad)(scores, labels)
    eager_value, eager_grad = value_and_grad(scores, labels)
    harness.assert_close(harness.to_numpy(value), harness.to_numpy(eager_value))
    harness.assert_close(harness.to_numpy(grad), harness.to_numpy(eager_grad))
