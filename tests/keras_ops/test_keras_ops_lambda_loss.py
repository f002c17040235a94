"""The keras.ops body of LambdaLoss (``tfr_extensions/keras_ops/losses/lambda_loss.py``)
on Keras's backend (JAX under ``jax.jit``, PyTorch, TensorFlow): per-list values and
gradients against the NumPy oracle (:mod:`support.oracles_lambda`), against the
TensorFlow body on every shared case (padding, ties, no relevant document, list size
1, long lists, bad input), and against allRank's ``lambdaLoss``, the reference
(vendored verbatim in :mod:`support.reference_allrank_lambda`; needs PyTorch, which
the keras3 stack has).

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
from tfr_extensions.losses.lambda_loss import WEIGHTINGS

FUNCTION = tfrx.losses.lambda_loss
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




def keras_ops_value_and_grad(labels, scores, **options):
    options = FUNCTION.spec.check_options(**options)
    return harness.jit_value_and_grad(harness.per_list_loss(FUNCTION.spec, options, "keras_ops"),
                                      labels, scores)


@pytest.mark.parametrize("options", CONFIGS, ids=CONFIG_IDS)
def test_the_body_equals_the_oracle(options):
    labels, scores = lists()
    value, grad = keras_ops_value_and_grad(labels, scores, **options)
    want = [oracles_lambda.lambda_loss_and_gradient(y, s, **options)
            for y, s in zip(labels, scores)]
    harness.assert_close(value, [v for v, _ in want], what="value")
    harness.assert_close(grad, [g for _, g in want], rtol=2e-5, atol=2e-6, what="gradient")
    assert (grad[labels < 0] == 0).all() and (grad[2] == 0).all() and value[2] == 0


#: (options, case): the defaults of each weighting on every shared case, changed
#: options on two
BODY_CASES = ([({"weighting": w}, case) for w in WEIGHTINGS for case in sorted(harness.CASES)]
              + [(options, case) for options in CONFIGS if "topn" in options
                 for case in ("mixed", "bad_input")])


@pytest.mark.parametrize("options,case", BODY_CASES,
                         ids=[f"{'-'.join(map(str, o.values()))}-{c}" for o, c in BODY_CASES])
def test_values_and_gradients_equal_the_tensorflow_body(options, case):
    labels, scores = harness.CASES[case]
    checked = FUNCTION.spec.check_options(**options)
    value, grad = harness.jit_value_and_grad(
        harness.per_list_loss(FUNCTION.spec, checked, "keras_ops"), labels, scores)
    want_value, want_grad = harness.tf_value_and_grad(
        harness.per_list_loss(FUNCTION.spec, checked, "tensorflow"), labels, scores)
    harness.assert_close(value, want_value, what=f"{case} value")
    # (ranknet's unnormalized sums over ~L^2 / 2 pairs: float32 cancellation, so the
    # absolute floor scales with the largest gradient entry)
    scale = max(1.0, float(np.nanmax(np.abs(want_grad), initial=0.0)))
    harness.assert_close(grad, want_grad, atol=1e-6 * scale, what=f"{case} gradient")
    assert (grad[labels < 0] == 0).all()
    if case == "bad_input":  # lists 0, 1 and 3 are broken: NaN, zero gradient
        assert np.isnan(value[[0, 1, 3]]).all() and (grad[[0, 1, 3]] == 0).all()
        assert np.isfinite(value[2])


@pytest.mark.parametrize("topn", [None, 3])
@pytest.mark.parametrize("weighting", WEIGHTINGS)
def test_equals_allrank_per_list(weighting, topn):
    """allRank's ``lambdaLoss(y_pred, y_true, weighing_scheme=..., k=topn, sigma, mu)``
    one list at a time (its sum over the batch), value and gradient."""
    torch = pytest.importorskip("torch")
    from support import reference_allrank_lambda  # pylint: disable=import-outside-toplevel
    labels, scores = lists(seed=1)
    sigma, mu = 1.3, 4.0
    value, grad = keras_ops_value_and_grad(labels, scores, weighting=weighting, sigma=sigma,
                                           mu=mu, topn=topn)
    for b in range(len(labels)):
        y_pred = torch.tensor(scores[b:b + 1], requires_grad=True)
        reference = reference_allrank_lambda.lambdaLoss(
            y_pred, torch.tensor(labels[b:b + 1]), weighing_scheme=ALLRANK_SCHEMES[weighting],
            k=topn, sigma=sigma, mu=mu)
        reference.backward()
        harness.assert_close(value[b], reference.item(), what=f"list {b} value")
        harness.assert_close(grad[b], y_pred.grad.numpy()[0], rtol=2e-5, atol=2e-6,
                             what=f"list {b} gradient")


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
