"""The keras.ops bodies of RankNet, the NDCG-beta hinge, ApproxNDCG and ListNet
(``tfr_extensions/keras_ops/losses/{pairwise,listwise}.py``) against the float64 NumPy
oracles (:mod:`support.oracles`, :mod:`support.oracles_pairwise`,
:mod:`support.oracles_listwise`): per-list values and gradients on every shared case
(padding, ties, no relevant document, list size 1, long lists, bad input), through the
decorator's screening (``fn.spec.compute(..., "keras_ops")``), and at extreme scores
(the clipping each loss documents); the Keras classes compute on the backend;
``model.fit`` trains with them; ``jax.jit`` compiles them.
"""
import numpy as np
import pytest

import keras
from keras import ops

import harness
from support import oracles, oracles_listwise, oracles_pairwise
import tfr_extensions as tfrx

#: (registry key, options): each loss with its defaults and with every option changed
CONFIGS = [
    ("ranknet", {}), ("ranknet", {"sigma": 2.0}),
    ("ndcg_beta_hinge", {}), ("ndcg_beta_hinge", {"margin": 0.5, "squared": True}),
    ("approx_ndcg", {}), ("approx_ndcg", {"temperature": 0.7}),
    ("listnet", {}), ("listnet", {"temperature": 0.3}),
]
CONFIG_IDS = [f"{key}-{'-'.join(map(str, kwargs.values())) or 'defaults'}"
              for key, kwargs in CONFIGS]
KEYS = ["ranknet", "ndcg_beta_hinge", "approx_ndcg", "listnet"]


def oracle(key, **kwargs):
    """``(labels, scores) -> (loss * weight, gradient)`` of one list's valid documents,
    with the loss's default options under ``kwargs``."""
    options = tfrx.losses.get(key).spec.check_options(**kwargs)
    if key == "ranknet":
        return lambda y, s: oracles_pairwise.ranknet_with_clipping(y, s, options["sigma"])
    if key == "ndcg_beta_hinge":
        return lambda y, s: oracles_pairwise.ndcg_beta_hinge_with_clipping(
            y, s, options["margin"], options["squared"])
    if key == "approx_ndcg":
        return lambda y, s: oracles_listwise.approx_ndcg(y, s, options["temperature"])
    return lambda y, s: oracles_listwise.listnet(y, s, options["temperature"])


def test_the_oracles_with_clipping_agree_with_the_plain_ones_at_ordinary_scores():
    """The clipping-aware pairwise oracles equal the plain value oracles of
    :mod:`support.oracles` (and their gradients) where no clip is active."""
    labels, scores = harness.CASES["mixed"]
    for y, s in zip(labels, scores):
        keep = y >= 0
        y, s = y[keep].astype(np.float64), s[keep].astype(np.float64)
        if (y > 0).any() and len(y) > 1:
            value, grad = oracles_pairwise.ranknet_with_clipping(y, s, 1.5)
            assert value == pytest.approx(oracles.ranknet(y, s, 1.5), rel=1e-12)
            np.testing.assert_allclose(grad, oracles_pairwise.ranknet_gradient(y, s, 1.5),
                                       rtol=1e-12, atol=1e-15)
        value, grad = oracles_pairwise.ndcg_beta_hinge_with_clipping(y, s, 0.5, True)
        assert value == pytest.approx(oracles.ndcg_beta_hinge(y, s, 0.5, True), rel=1e-12)


def check(key, kwargs, labels, scores, what=""):
    value, grad = harness.body_value_and_grad(key, labels, scores, **kwargs)
    want, want_grad = harness.expected_per_list(oracle(key, **kwargs), labels, scores)
    harness.assert_close(value, want, what=f"{key} {what} value")
    harness.assert_close(grad, want_grad, rtol=2e-5, atol=2e-6, what=f"{key} {what} gradient")
    harness.assert_policy(value, grad, labels, scores)
    return value, grad


@pytest.mark.parametrize("key,kwargs", CONFIGS, ids=CONFIG_IDS)
def test_values_and_gradients_equal_the_oracles_on_every_case(key, kwargs):
    """Every shared case in one batch (one program per loss and options)."""
    labels, scores = harness.merged_cases()
    _, grad = check(key, kwargs, labels, scores)
    assert np.abs(grad).max() > 0


#: each shared case in its own shape (list size 1, 70 documents...), one loss each
PER_CASE = [(case, KEYS[i % len(KEYS)]) for i, case in enumerate(sorted(harness.CASES))]


@pytest.mark.parametrize("case,key", PER_CASE, ids=[f"{c}-{k}" for c, k in PER_CASE])
def test_every_case_in_its_own_shape_equals_the_oracle(case, key):
    check(key, {}, *harness.CASES[case], what=case)


@pytest.mark.parametrize("key", KEYS)
def test_extreme_and_tied_scores_equal_the_oracles(key):
    """Scores near float32's maximum (differences overflow, clipping) and +-1e30."""
    labels = np.array([[1, 0, 2, 0, -1], [0, 1, 0, 2, 1], [2, 0, 1, 0, 0], [1, 1, 0, 0, -1]],
                      np.float32)
    scores = np.array([[3e38, -3e38, 1.0, 0.0, -3e38], [-3e38, -3e38, 3e38, 3e38, 0.5],
                       [1e30, -1e30, 5e29, -5e29, 0.0], [1e30, 1e30, -1e30, 0.0, 7.0]],
                      np.float32)
    value, grad = check(key, {}, labels, scores, "extreme")
    assert np.isfinite(value).all() and np.isfinite(grad).all()


def _is_backend_tensor(x) -> bool:
    """A tensor of Keras's backend (not a TensorFlow tensor on JAX or PyTorch)."""
    if harness.BACKEND == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        return isinstance(x, jax.Array)
    if harness.BACKEND == "torch":
        import torch  # pylint: disable=import-outside-toplevel
        return isinstance(x, torch.Tensor)
    return ops.is_tensor(x)


@pytest.mark.parametrize("key", KEYS)
def test_the_keras_class_computes_on_the_backend(key):
    """``tfrx.losses.get(key)``'s reduced loss and gradient on Keras's backend equal
    the oracle's ``sum(loss * weight) / batch``, also with per-list sample weights and
    keras-rs's ``{"labels", "mask"}`` (on JAX under ``jax.jit``; eager JAX gives the
    same, test_jax_jit_gives_the_eager_values...)."""
    labels, scores = harness.CASES["mixed"]
    loss = tfrx.losses.get(key)
    values, grads = harness.expected_per_list(oracle(key), labels, scores)
    sample_weight = np.linspace(0.5, 1.5, len(labels)).astype(np.float32)[:, None]
    calls = [(1.0, lambda l, s: loss(l, s)),
             (sample_weight[:, 0], lambda l, s: loss(l, s, sample_weight=sample_weight)),
             (1.0, lambda l, s: loss({"labels": ops.where(l >= 0, l, 0.0), "mask": l >= 0}, s))]
    results = harness.jit_values_and_grads([call for _, call in calls], labels, scores)
    for (weights, _), (value, grad) in zip(calls, results):  # (eager: below)
        weights = np.broadcast_to(weights, values.shape)
        harness.assert_close(value, np.sum(values * weights) / len(labels), what=key)
        harness.assert_close(grad, grads * weights[:, None] / len(labels), rtol=2e-5,
                             atol=1e-7, what=key)
    out = loss(labels, scores)  # a tensor of Keras's backend
    assert _is_backend_tensor(out) and keras.backend.standardize_dtype(out.dtype) == "float32"


@pytest.mark.parametrize("key", KEYS)
def test_a_batch_of_zero_lists_or_of_empty_lists_gives_zero(key):
    loss = tfrx.losses.get(key)
    for shape in [(0, 5), (2, 0), (0, 0)]:
        zeros = np.zeros(shape, np.float32)
        value, grad = harness.jit_value_and_grad(lambda l, s: loss(l, s), zeros, zeros)
        assert value == 0.0 and grad.shape == shape and (grad == 0).all()


@pytest.mark.parametrize("key", ["approx_ndcg", "ranknet"])  # one per family
def test_a_tiny_model_fits(key):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    features = rng.normal(size=(16, 6, 3)).astype(np.float32)
    labels = np.clip(np.round(features[..., 0] + rng.normal(size=(16, 6)) * 0.3), 0, 3)
    labels = labels.astype(np.float32)
    labels[:, 5] = -1.0  # padding
    model = keras.Sequential([keras.Input((6, 3)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(1), keras.layers.Reshape((6,))])
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=tfrx.losses.get(key))
    history = model.fit(features, labels, batch_size=8, epochs=3, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


@pytest.mark.skipif(harness.BACKEND != "jax", reason="jax.jit: the JAX backend's suite")
@pytest.mark.parametrize("key", KEYS)
def test_jax_jit_gives_the_eager_values_and_gradients(key):
    """The Keras class's reduced loss and gradient under ``jax.jit`` equal eager
    JAX's (the bodies under ``jax.jit`` on every case, bad input included, are
    held to the oracles above)."""
    import jax  # pylint: disable=import-outside-toplevel
    labels, scores = harness.CASES["mixed"]
    loss = tfrx.losses.get(key)
    value_and_grad = jax.value_and_grad(lambda s, l: loss(l, s))
    value, grad = jax.jit(value_and_grad)(scores, labels)
    eager_value, eager_grad = value_and_grad(scores, labels)
    harness.assert_close(harness.to_numpy(value), harness.to_numpy(eager_value))
    harness.assert_close(harness.to_numpy(grad), harness.to_numpy(eager_grad))
