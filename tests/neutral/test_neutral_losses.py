"""The losses' functions (:mod:`tfr_extensions.losses`) on every Keras 3 backend, with or
without TensorFlow: every registered loss (``tfrx.losses.names``, so a new one cannot
skip this suite) against the independent NumPy oracles of ``tests/support`` or, where
none exists (policy gradient), by finite differences in float64; the bad-input
policy; properties (masking = deleting padded documents, permutations, seeds);
compiled = eager; float64. The Keras classes: ``test_neutral_keras_losses.py``; the
lists, options and runners both use: :mod:`support.loss_suite`.

Gradients come from the backend's own autodiff (:mod:`support.autodiff`). Imports
numpy, scipy, pytest, tfr_extensions and ``support`` only.
"""
import numpy as np
import pytest

from tfr_extensions import backend

if not backend.IS_KERAS_3:
    pytest.skip("Keras 2: the losses compute with TensorFlow's ops there (tests/losses); this "
                "suite is Keras 3's, on each of its backends", allow_module_level=True)

import tfr_extensions as tfrx  # noqa: E402
from tfr_extensions.ops import vocabulary  # noqa: E402
from support import autodiff, oracles, oracles_listwise, oracles_pairwise, oracles_softrank  # noqa: E402,E501
from support.loss_suite import (  # noqa: E402
    BACKEND, BAD, CLASSES, FUNCTIONS, KEYS, LABELS, OPTIONS, PROPERTY_RTOL, RELEVANT, SAMPLED,
    SCORES, SEEDED, VALID, assert_close, per_list, run)
from support.loss_options import QUICK_TO_COMPILE  # noqa: E402

SOFTRANK = oracles_softrank


def test_every_registered_loss_has_a_per_list_oracle():
    """The oracles come from the registry of ``support.oracles`` (a loss's
    ``@oracles.per_list_oracle(key)``), so no loss is left out of
    :func:`test_every_registered_loss_equals_its_per_list_oracle`."""
    assert set(KEYS) <= set(oracles.load_per_list_oracles())
    assert set(SAMPLED) <= set(SEEDED)
    assert len(np.unique(SCORES)) == SCORES.size  # distinct: exact ranks without ties


@pytest.mark.parametrize("key", KEYS)
def test_every_registered_loss_equals_its_per_list_oracle(key):
    """Each list's ``losses * weights`` and gradient (the backend's autodiff) equal one
    of the (value, gradient) candidates of the loss's NumPy oracle
    (:func:`support.oracles_bad_input.oracle_candidates`: one for a deterministic loss,
    every ranking for a sampled one); padded documents get exactly zero gradient."""
    from support.oracles_bad_input import oracle_candidates  # pylint: disable=import-outside-toplevel
    losses, weights, grads = run(key)
    config = CLASSES[key](**OPTIONS[key]).get_config()
    rtol = PROPERTY_RTOL.get(key, 2e-5)
    values = losses * weights
    assert (grads[~VALID] == 0).all()
    for b, (y, s) in enumerate(zip(LABELS.astype(np.float64), SCORES.astype(np.float64))):
        keep = y >= 0
        candidates = oracle_candidates(key, config, y[keep], s[keep])
        close = [grad for value, grad in candidates
                 if np.isclose(values[b], value, rtol=rtol, atol=1e-6)]
        assert close, f"list {b}: {values[b]} is none of {sorted(v for v, _ in candidates)[:8]}"
        scale = max(1.0, max(np.abs(g).max(initial=0.0) for g in close))
        assert any(np.allclose(grads[b][keep], grad, rtol=0, atol=max(rtol, 2e-5) * scale)
                   for grad in close), (grads[b][keep], close[:3])


# --- values and gradients against the oracles ------------------------------------------

@pytest.mark.parametrize("metric", vocabulary.CANONICAL_METRICS)
def test_twin_sigmoid_is_minus_the_exact_metric_with_the_papers_gradient(metric):
    for gradient, topn, alpha_b in [("type1", None, 1.0), ("type2", 3, 0.7), ("type3", 5, 2.5)]:
        losses, weights, grad = run("twin_sigmoid", metric=metric, gradient=gradient,
                                    topn=topn, alpha_b=alpha_b)
        what = f"{metric} {gradient} topn={topn} alpha_b={alpha_b}"
        expected = [-oracles.METRIC_ORACLES[metric](y, s, topn) for y, s in zip(LABELS, SCORES)]
        assert_close(losses, expected, what=what)
        np.testing.assert_array_equal(weights, RELEVANT.astype(np.float32))
        expected_grad = [oracles.twin_loss_gradient(y, s, metric, topn, alpha_b, gradient)
                         for y, s in zip(LABELS, SCORES)]
        assert_close(grad, expected_grad, rtol=2e-5, atol=2e-6, what=what)
        assert np.abs(grad).max() > 0


@pytest.mark.parametrize("temperature", [0.1, 0.5])
def test_approx_ndcg_equals_its_oracle(temperature):
    losses, weights, grad = run("approx_ndcg", temperature=temperature)
    values, grads = per_list(lambda y, s: oracles_listwise.approx_ndcg(y, s, temperature))
    assert_close(losses * weights, values)
    assert_close(grad, grads, rtol=2e-5, atol=2e-6)
    np.testing.assert_array_equal(weights, RELEVANT.astype(np.float32))


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_listnet_equals_its_oracle(temperature):
    losses, weights, grad = run("listnet", temperature=temperature)
    values, grads = per_list(lambda y, s: oracles_listwise.listnet(y, s, temperature))
    assert_close(losses * weights, values)
    assert_close(grad, grads, rtol=2e-5, atol=2e-6)
    assert_close(weights, np.where(VALID, LABELS, 0).sum(axis=1))  # the label sums


@pytest.mark.parametrize("sigma", [0.5, 1.0])
def test_softndcg_equals_the_rank_binomial_oracle(sigma):
    losses, weights, grad = run("softndcg", sigma=sigma, method="exact")

    def oracle(y, s):
        if not (y > 0).any():
            return 0.0, np.zeros(len(y))
        value, gradient = SOFTRANK.soft_ndcg_and_gradient(s, y, sigma)
        return -value, -gradient

    values, grads = per_list(oracle)
    assert_close(losses * weights, values)
    assert_close(grad, grads, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("sigma", [1.0, 2.5])
def test_ranknet_equals_its_oracle(sigma):
    losses, weights, grad = run("ranknet", sigma=sigma)
    values = [oracles.ranknet(y, s, sigma) if r else 0.0
              for y, s, r in zip(LABELS, SCORES, RELEVANT)]
    assert_close(losses * weights, values)
    assert_close(grad, [oracles_pairwise.ranknet_gradient(y, s, sigma)
                        for y, s in zip(LABELS, SCORES)], atol=2e-6)
    np.testing.assert_array_equal(weights, RELEVANT.astype(np.float32))


@pytest.mark.parametrize("margin,squared", [(1.0, False), (0.5, True)])
def test_ndcg_beta_hinge_equals_its_oracle(margin, squared):
    losses, weights, grad = run("ndcg_beta_hinge", margin=margin, squared=squared)
    values = [oracles.ndcg_beta_hinge(y, s, margin, squared) for y, s in zip(LABELS, SCORES)]
    assert_close(losses * weights, values)
    assert_close(grad, [oracles_pairwise.ndcg_beta_hinge_gradient(y, s, margin, squared)
                        for y, s in zip(LABELS, SCORES)], atol=2e-6)
    assert np.all(weights[RELEVANT] > 0) and np.all(weights[~RELEVANT] == 0)


def test_pairwise_gradient_oracles_are_the_derivatives_of_their_values():
    """The closed forms of support.oracles_pairwise against central differences of the
    value oracles (float64 NumPy), so the loss is held to a checked oracle."""
    rng = np.random.default_rng(5)
    y = np.array([2.0, 0.0, 1.0, 0.0, 3.0, -1.0])
    s = rng.normal(size=6)
    cases = [(oracles.ranknet, oracles_pairwise.ranknet_gradient, {"sigma": 1.5}),
             (oracles.ndcg_beta_hinge, oracles_pairwise.ndcg_beta_hinge_gradient,
              {"margin": 1.0, "squared": True}),
             (oracles.ndcg_beta_hinge, oracles_pairwise.ndcg_beta_hinge_gradient,
              {"margin": 0.5, "squared": False})]
    for value, gradient, kwargs in cases:
        eps, numeric = 1e-6, np.zeros(6)
        for i in range(5):
            step = np.eye(6)[i] * eps
            numeric[i] = (value(y, s + step, **kwargs) - value(y, s - step, **kwargs)) / (2 * eps)
        np.testing.assert_allclose(gradient(y, s, **kwargs), numeric, rtol=1e-6, atol=1e-8)


def _wassrank_oracle(y, s, cost_type, target, regularization, iterations, **cost_options):
    """WassRank's ``<P, C>`` by the plain log-space Sinkhorn algorithm in NumPy, and the
    dual-potential gradient ``a_i (f_i - <a, f>)``; 0 without a relevant document."""
    if not (y > 0).any():
        return 0.0, np.zeros(len(y))
    cost = oracles_pairwise.wassrank_cost(y, cost_type, **cost_options)
    a = oracles_pairwise.softmax(s)
    if target == "softmax":
        columns, b = np.ones(len(y), bool), oracles_pairwise.softmax(y)
    else:  # the normalized gains, over the documents that have any
        gains = 2.0 ** y - 1.0
        columns = gains > 0
        b = gains[columns] / gains.sum()
    plan, f, _ = SOFTRANK.sinkhorn_numpy(a, b, cost[:, columns], regularization, iterations)
    return float(np.sum(plan * cost[:, columns])), a * (f - a @ f)


@pytest.mark.parametrize("cost_type,target", [("eg", "gain"), ("dg", "softmax")])
def test_wassrank_equals_plain_sinkhorn_with_the_dual_gradient(cost_type, target):
    options = dict(cost_type=cost_type, target=target, regularization=0.5,
                   sinkhorn_iterations=30, epsilon_scaling=False, gain_base=2.0,
                   non_rele_gap=5.0, var_penalty=0.5)
    losses, weights, grad = run("wassrank", **options)
    values, grads = per_list(lambda y, s: _wassrank_oracle(
        y, s, cost_type, target, 0.5, 30, gain_base=2.0, non_rele_gap=5.0, var_penalty=0.5))
    assert_close(losses * weights, values, rtol=1e-4, atol=1e-5)
    assert_close(grad, grads, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(weights, RELEVANT.astype(np.float32))


def test_wassrank_gradient_is_the_gradient_of_entropic_transport_at_convergence():
    """At convergence the dual potential is the gradient of OT_lambda(softmax(s), b) =
    <P, C> - lambda H(P): central differences of the NumPy oracle (float64)."""
    y = np.array([2.0, 0.0, 1.0, 3.0], np.float32)
    s = np.array([0.2, 0.9, -0.4, 0.1], np.float32)
    _, _, grad = run("wassrank", labels=y[None], scores=s[None], regularization=1.0,
                     sinkhorn_iterations=300, cost_type="dg", target="softmax",
                     epsilon_scaling=False)
    cost = oracles_pairwise.wassrank_cost(y, "dg")
    b = oracles_pairwise.softmax(y)

    def objective(scores):
        return SOFTRANK.entropic_ot(oracles_pairwise.softmax(scores), b, cost, 1.0, 300)

    eps, numeric = 1e-6, np.zeros(4)
    for i in range(4):
        step = np.eye(4)[i] * eps
        numeric[i] = (objective(s + step) - objective(s - step)) / (2 * eps)
    assert_close(grad[0], numeric, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("key,options", [
    ("expected_utility", {}),  # topn 10 >= every list: full rankings
    ("expected_utility", {"metric": "ap", "topn": 3, "num_samples": 3, "baseline": True}),
    ("mdprank", {"gamma": 0.8, "topn": 3, "num_samples": 2}),
    ("mdprank", {"normalize": False}),
])
def test_policy_gradient_surrogates_by_finite_differences_in_float64(key, options):
    """With a fixed seed the sampled rankings and their rewards are constants of the
    scores (a small step moves no Gumbel key past another), so the surrogate's gradient
    (the REINFORCE estimator) is its derivative: central differences per list along
    random directions. Padded documents get exactly zero gradient."""
    with autodiff.float64():
        labels, scores = LABELS.astype(np.float64), SCORES.astype(np.float64)
        losses, weights, grad = run(key, labels, scores, **options)
        assert losses.dtype == np.float64 and grad.dtype == np.float64
        assert np.all(np.isfinite(losses)) and np.all(grad[~VALID] == 0)
        rng, eps = np.random.default_rng(1), 1e-6
        for _ in range(2):
            direction = rng.normal(size=scores.shape) * VALID
            up, _, _ = run(key, labels, scores + eps * direction, **options)
            down, _, _ = run(key, labels, scores - eps * direction, **options)
            numeric = (up - down) * weights / (2 * eps)
            assert_close(np.sum(grad * direction, axis=1), numeric, rtol=1e-6, atol=1e-8)
        assert np.abs(grad[RELEVANT]).max() > 0


@pytest.mark.parametrize("key", SAMPLED)
def test_policy_gradient_surrogates_are_minus_weighted_log_probabilities(key):
    """The sampled rewards are in [0, 1] (nDCG / AP of a sampled ranking), and the
    surrogate is minus reward-weighted log-probabilities (<= 0): so >= 0, 0 without a
    relevant document, and the logged sampled metric lies in [0, 1]."""
    losses, weights, _ = run(key, num_samples=4)
    assert np.all(losses >= 0) and np.all(losses[~RELEVANT] == 0)
    loss = tfrx.losses.get(key, seed=3, num_samples=4)
    loss(LABELS, SCORES)
    assert 0.0 < float(autodiff.to_numpy(loss.sampled_metric)) <= 1.0


# --- properties over the registry ------------------------------------------------------

@pytest.mark.parametrize("key", KEYS)
def test_finite_at_extreme_and_tied_scores(key):
    for scores in (SCORES * 1e4, -SCORES * 1e4, np.full_like(SCORES, 0.5),
                   np.where(VALID, 3e4, 0.0).astype(np.float32)):
        losses, weights, grad = run(key, scores=scores)
        assert np.all(np.isfinite(losses)) and np.all(np.isfinite(weights)), key
        assert np.all(np.isfinite(grad)) and np.all(grad[~VALID] == 0), key


@pytest.mark.parametrize("key", KEYS)
def test_padding_is_ignored_whatever_its_score(key):
    """Padded documents (label -1, or ``mask`` False) change nothing, NaN and
    infinite scores included, and get exactly zero gradient."""
    losses, weights, grad = run(key)
    for fill in (np.nan, np.inf, -np.inf, 1e30, -5.0):
        padded = np.where(VALID, SCORES, fill).astype(np.float32)
        again = run(key, scores=padded)
        for name, actual, expected in zip(("losses", "weights", "grad"), again,
                                          (losses, weights, grad)):
            np.testing.assert_array_equal(actual, expected, err_msg=f"{key} {name} {fill}")
    # the mask argument narrows validity as label -1 does (another program: rounding)
    masked = run(key, labels=np.where(VALID, LABELS, 3.0).astype(np.float32), mask=VALID)
    for actual, expected in zip(masked, (losses, weights, grad)):
        assert_close(actual, expected, rtol=1e-6, atol=1e-7)
    assert np.all(masked[2][~VALID] == 0)


#: lists of 5 valid documents padded to 7 in different places (one without a relevant
#: document), and the same lists with their padding deleted
PADDED_LABELS = np.array([[2.0, -1.0, 0.0, 1.0, -1.0, 0.0, 3.0],
                          [-1.0, -1.0, 1.0, 0.0, 2.0, 0.0, 4.0],
                          [0.0, 1.0, 0.0, 0.0, 1.0, -1.0, -1.0],
                          [0.0, -1.0, 0.0, 0.0, -1.0, 0.0, 0.0]], np.float32)
DELETED_LABELS = PADDED_LABELS[PADDED_LABELS >= 0].reshape(4, 5)
DELETED_SCORES = SCORES[PADDED_LABELS >= 0].reshape(4, 5)


@pytest.mark.parametrize("key", [key for key in KEYS if key not in SAMPLED])
def test_masking_equals_deleting_the_padded_documents(key):
    losses, weights, grad = run(key, labels=PADDED_LABELS)
    deleted = run(key, labels=DELETED_LABELS, scores=DELETED_SCORES)
    rtol = PROPERTY_RTOL.get(key, 1e-5)
    assert_close(deleted[0], losses, rtol=rtol, what=key)
    assert_close(deleted[1], weights)
    assert_close(deleted[2], grad[PADDED_LABELS >= 0].reshape(4, 5), rtol=rtol, atol=1e-6)
    assert np.all(grad[PADDED_LABELS < 0] == 0)


@pytest.mark.parametrize("key", [key for key in KEYS if key not in SAMPLED])
def test_permuting_the_documents_of_a_list_permutes_the_gradient(key):
    losses, weights, grad = run(key)
    order = np.random.default_rng(3).permutation(LABELS.shape[1])
    again = run(key, labels=LABELS[:, order], scores=SCORES[:, order])
    rtol = PROPERTY_RTOL.get(key, 1e-5)
    assert_close(again[0], losses, rtol=rtol)
    assert_close(again[1], weights)
    assert_close(again[2], grad[:, order], rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("key", SEEDED)
def test_a_seed_replays_its_draws_and_another_seed_draws_others(key):
    first, second = run(key, seed=11), run(key, seed=11)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    other = run(key, seed=12)
    assert (not np.array_equal(other[2], first[2])) == (key in SAMPLED)
    if key in SAMPLED:  # fresh randomness without a seed
        assert not np.array_equal(run(key, seed=None)[2], run(key, seed=None)[2])


@pytest.mark.parametrize("key", SEEDED)
def test_a_seeded_class_draws_afresh_at_every_call_and_replays_from_its_seed(key):
    def calls(loss):
        return [float(autodiff.to_numpy(loss(LABELS, SCORES))) for _ in range(3)]

    values = calls(CLASSES[key](seed=5))
    assert values == calls(CLASSES[key](seed=5))
    if key in SAMPLED:
        assert len(set(values)) == 3


# --- the bad-input policy ----------------------------------------------------------------

@pytest.mark.parametrize("key", KEYS)
def test_a_broken_list_is_nan_with_zero_gradient_while_the_others_train(key):
    """A NaN or infinite score of a valid document, or a label above the maximum:
    that list's loss is NaN and its gradient exactly 0; the other lists keep their
    values and gradients (the same draws: the seed and shapes are unchanged)."""
    clean = run(key, total="losses")
    broken = BAD.any(axis=1)
    assert broken.tolist() == [True, False, True, True]
    for what, labels, scores in [
            ("nan score", LABELS, np.where(BAD, np.nan, SCORES)),
            ("+inf score", LABELS, np.where(BAD, np.inf, SCORES)),
            ("-inf score", LABELS, np.where(BAD, -np.inf, SCORES)),
            ("label 40", np.where(BAD, 40.0, LABELS), SCORES)]:
        losses, weights, grad = run(key, labels=labels.astype(np.float32),
                                    scores=scores.astype(np.float32), total="losses")
        assert np.all(np.isnan(losses[broken])), (key, what)
        assert np.all(grad[broken] == 0), (key, what)
        assert_close(losses[~broken], clean[0][~broken], what=f"{key} {what}")
        assert_close(grad[~broken], clean[2][~broken], what=f"{key} {what}")
        np.testing.assert_array_equal(weights[~broken], clean[1][~broken])


@pytest.mark.parametrize("key", KEYS)
def test_a_broken_list_makes_the_keras_loss_nan_and_the_other_lists_train(key):
    scores = np.where(BAD & (np.arange(4) == 0)[:, None], np.nan, SCORES).astype(np.float32)
    broken_loss, clean_loss = (CLASSES[key](**OPTIONS[key]) for _ in range(2))
    value, grad = autodiff.value_and_grad(broken_loss, LABELS, scores)
    clean_value, clean = autodiff.value_and_grad(clean_loss, LABELS, SCORES)
    assert np.isnan(value) and np.isfinite(clean_value) and np.all(grad[0] == 0)
    assert_close(grad[1:], clean[1:], atol=1e-7)


@pytest.mark.parametrize("key", KEYS)
def test_no_list_no_document_all_padding_and_no_relevant_document(key):
    for shape in ((0, 7), (0, 0)):
        losses, weights, grad = run(key, labels=np.zeros(shape, np.float32),
                                    scores=np.zeros(shape, np.float32))
        assert losses.shape == weights.shape == (0,) and grad.shape == shape
        empty = autodiff.to_numpy(CLASSES[key](**OPTIONS[key])(
            np.zeros(shape, np.float32), np.zeros(shape, np.float32)))
        assert float(empty) == 0.0
    labels = np.concatenate([np.full((1, 7), -1.0, np.float32), LABELS[1:]])  # all padding
    losses, weights, grad = run(key, labels=labels)  # list 1: no relevant document
    assert np.all(np.isfinite(losses)) and np.all(weights[:2] == 0) and np.all(weights[2:] > 0)
    assert np.all(grad[:2] == 0) and np.abs(grad[2:]).max() > 0


# --- compiled = eager, dtypes ---------------------------------------------------------------

#: on PyTorch, the losses compiled by ``torch.compile`` here (tens of seconds each on CI's
#: CPUs): twin-sigmoid, whose custom gradients are the likeliest to break a graph capture
TORCH_COMPILED = ("twin_sigmoid",)
TORCH_COMPILE_SKIP = ("torch.compile takes tens of seconds per loss on CI's CPUs: "
                      f"{', '.join(TORCH_COMPILED)} stands for the others (PyTorch's model.fit "
                      "runs eagerly by default)")


@pytest.mark.parametrize("key", KEYS)
def test_compiled_value_and_gradient_equal_eager(key):
    if BACKEND == "torch" and key not in TORCH_COMPILED:
        pytest.skip(TORCH_COMPILE_SKIP)
    function, options = FUNCTIONS[key], {**OPTIONS[key], **QUICK_TO_COMPILE.get(key, {})}

    def fn(y, s):
        losses, weights = function(y, s, **options)
        return losses * weights

    value, grad = autodiff.compiled_value_and_grad(fn, LABELS, SCORES)
    eager_value, eager_grad = autodiff.value_and_grad(fn, LABELS, SCORES)
    rtol = PROPERTY_RTOL.get(key, 1e-5)  # (XLA fuses and reorders the sums)
    assert_close(value, eager_value, rtol=rtol)
    assert_close(grad, eager_grad, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("key", KEYS)
def test_gradient_through_a_compiled_loss_equals_eager(key):
    """``grad(jit(loss))`` (JAX's other order): the loss compiled alone, differentiated
    outside; custom gradients must not capture the compiled program's tracers."""
    if BACKEND == "torch":
        pytest.skip("on PyTorch a compiled function's gradient is its compiled backward: "
                    "test_compiled_value_and_gradient_equal_eager")
    function, options = FUNCTIONS[key], {**OPTIONS[key], **QUICK_TO_COMPILE.get(key, {})}

    def fn(y, s):
        losses, weights = function(y, s, **options)
        return losses * weights

    value, grad = autodiff.value_and_grad(autodiff.compiled(fn), LABELS, SCORES)
    eager_value, eager_grad = autodiff.value_and_grad(fn, LABELS, SCORES)
    rtol = PROPERTY_RTOL.get(key, 1e-5)
    assert_close(value, eager_value, rtol=rtol)
    assert_close(grad, eager_grad, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("key", KEYS)
def test_float64_scores_compute_in_float64(key):
    with autodiff.float64():
        losses, weights, grad = run(key, LABELS.astype(np.float64), SCORES.astype(np.float64))
        assert losses.dtype == weights.dtype == grad.dtype == np.float64
        assert np.all(np.isfinite(losses)) and np.all(np.isfinite(grad))
        single = run(key)
    if key not in SAMPLED:  # (float64 draws its noise with more bits: other samples)
        assert_close(losses, single[0], rtol=1e-4, atol=1e-5)
        assert_close(grad, single[2], rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("weighting", ["ranknet", "lambdarank", "ndcg_loss1", "ndcg_loss2",
                                       "ndcg_loss2pp"])
def test_lambda_loss_matches_its_oracle(weighting):
    """LambdaLoss per list against support.oracles_lambda (the paper's weighting schemes
    as allRank sums them, loops over pairs in float64): value and gradient, without and
    with a cutoff; weight 1 for lists with a relevant document, else 0."""
    from support import oracles_lambda  # pylint: disable=import-outside-toplevel
    for options in ({}, {"sigma": 1.7, "mu": 3.0, "topn": 3}):
        losses, weights, grad = run("lambda_loss", weighting=weighting, **options)
        values, grads = per_list(lambda y, s, o=options: oracles_lambda.lambda_loss_and_gradient(
            y, s, weighting, **o))
        assert_close(losses * weights, values, what=f"{weighting} {options}")
        assert_close(grad, grads, rtol=2e-5, atol=2e-6, what=f"{weighting} {options}")
        np.testing.assert_array_equal(weights, RELEVANT.astype(np.float32))
        assert np.abs(grad).max() > 0


@pytest.mark.parametrize("transposed", [False, True])
def test_neural_ndcg_matches_its_oracle(transposed):
    """NeuralNDCG per list against support.oracles_neural_ndcg (NeuralSort's relaxed
    sorting, Sinkhorn scaling with allRank's stopping rule, nDCG@k; a hand-written float64
    backward pass): value and gradient at two temperatures, without and with a cutoff;
    weight 1 for lists with a relevant document, else 0."""
    from support import oracles_neural_ndcg  # pylint: disable=import-outside-toplevel
    for options in ({}, {"temperature": 0.3, "topn": 3}):
        losses, weights, grad = run("neural_ndcg", transposed=transposed, **options)
        values, grads = per_list(lambda y, s, o=options: oracles_neural_ndcg.neural_ndcg(
            y, s, transposed=transposed, **o))
        assert_close(losses * weights, values, what=f"transposed={transposed} {options}")
        assert_close(grad, grads, rtol=1e-4, atol=2e-6, what=f"transposed={transposed} {options}")
        np.testing.assert_array_equal(weights, RELEVANT.astype(np.float32))
        assert np.abs(grad).max() > 0
