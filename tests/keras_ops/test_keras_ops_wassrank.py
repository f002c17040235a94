"""keras.ops WassRank (``tfr_extensions/losses/wassrank.py`` on the keras.ops namespace) against the float64
NumPy oracle (:mod:`support.oracles_wassrank`: the ground costs, plain or epsilon-scaled
log-space Sinkhorn, the dual-potential gradient).

Float32 WassRank resolves :math:`(f_i + g_j - C_{ij})/\\lambda` only to the
rounding unit of :math:`C_{max}/\\lambda` (the loss module's docstring: about 1e-4
relative with the default options and labels up to 7): one unit of rounding in a
potential of a few hundred moves the plan by ~1e-4 relative. The implementation is
therefore held to rtol 1e-9 in float64, where that amplification is harmless, and to
2e-3 in float32.
"""
import importlib

import numpy as np
import pytest

import keras
from keras import ops

import harness
from support import oracles_wassrank
import tfr_extensions as tfrx
from tfr_extensions import arrays

k_wassrank = importlib.import_module("tfr_extensions.losses.wassrank")
KEY = "wassrank"
SPEC = tfrx.losses.wassrank_loss.spec


def _check(options, cases, rtol, atol=1e-12):
    checked = SPEC.check_options(**options)
    for name, labels, scores in cases:
        value, grad = harness.body_value_and_grad(KEY, labels, scores, **options)
        want, want_grad = harness.expected_per_list(
            lambda y, s: oracles_wassrank.wassrank(y, s, **checked), labels, scores,
            SPEC.label_limit(checked))
        assert value.dtype == scores.dtype, name
        harness.assert_close(value, want, rtol=rtol, atol=atol, what=f"{name} value")
        harness.assert_close(grad, want_grad, rtol=rtol, atol=atol, what=f"{name} gradient")
        harness.assert_policy(value, grad, labels, scores, SPEC.label_limit(checked))


def test_float64_values_and_gradients_equal_the_oracle():
    """Every shared case with the default options ("eg" costs, "gain" target,
    epsilon scaling); two with other costs, target and schedule."""
    with harness.float64():
        _check({}, harness.cases(dtype=np.float64), rtol=1e-9)
        cases = [(name, labels, scores) for name, labels, scores in harness.cases(dtype=np.float64)
                 if name in ("mixed", "ties")]
        _check({"cost_type": "ddg", "target": "softmax", "epsilon_scaling": False,
                "regularization": 0.5}, cases, rtol=1e-9)


def test_float32_values_and_gradients_equal_the_oracle():
    _check({}, [(name,) + harness.CASES[name] for name in ("mixed", "long")], rtol=2e-3,
           atol=1e-6)


@pytest.mark.parametrize("cost_type", ["eg", "dg", "ddg", "p1", "p2"])
def test_cost_matrix_equals_the_oracle(cost_type):
    for case in ("mixed", "ties"):
        labels, _ = harness.CASES[case]
        mask = labels >= 0
        labels = np.where(mask, labels, 0.0).astype(np.float32)
        with arrays.use("keras_ops"):
            got = harness.to_numpy(harness.jit(
                lambda l, m: k_wassrank.cost_matrix(l, m, cost_type, gain_base=3.0,
                                                    var_penalty=1.5))(
                ops.convert_to_tensor(labels), ops.convert_to_tensor(mask)))
        for b, (y, keep) in enumerate(zip(labels, mask)):
            want = np.zeros((len(y), len(y)))
            want[np.ix_(keep, keep)] = oracles_wassrank.ground_cost(
                y[keep], cost_type, gain_base=3.0, var_penalty=1.5)
            harness.assert_close(got[b], want, what=f"{cost_type} {case} list {b}")


def test_ideal_positions_sort_labels_descending_ties_by_index_padding_last():
    labels = np.array([[2., 0., 2., -1., 1., 0.], [1., 1., 1., 1., -1., -1.]], np.float32)
    mask = labels >= 0
    labels = np.where(mask, labels, 0.0)
    # (the costs' ideal positions: exact_ranks of the labels)
    got = harness.to_numpy(arrays.namespace("keras_ops").sorting.exact_ranks(
        ops.convert_to_tensor(labels), ops.convert_to_tensor(mask)))
    for b, (y, keep) in enumerate(zip(labels, mask)):
        np.testing.assert_array_equal(got[b][keep], oracles_wassrank.ideal_positions(y[keep]))
        np.testing.assert_array_equal(got[b][~keep], keep.sum() + np.arange(1, (~keep).sum() + 1))
    np.testing.assert_array_equal(got, [[1, 4, 2, 6, 3, 5], [1, 2, 3, 4, 5, 6]])


@pytest.mark.parametrize("shape", [(3, 0), (0, 4)])
def test_empty_batches_and_lists(shape):
    checked = SPEC.check_options()
    value, grad = harness.value_and_grad(
        harness.jit(lambda l, s: SPEC.compute(l, s, None, checked, "keras_ops")[0]),
        np.ones(shape, np.float32), np.zeros(shape, np.float32))
    assert value.shape == shape[:1] and grad.shape == shape
    assert np.all(value == 0.0)


def test_class_computes_through_the_keras_ops_body():
    labels, scores = harness.CASES["mixed"]
    loss = tfrx.losses.get(KEY)
    assert isinstance(loss, tfrx.losses.WassRankLoss)
    want, _ = harness.expected_per_list(oracles_wassrank.wassrank, labels, scores)
    got = harness.jit(loss)(ops.convert_to_tensor(labels), ops.convert_to_tensor(scores))
    harness.assert_close(float(harness.to_numpy(got)), want.mean(), rtol=2e-3)


def test_tiny_model_fits_with_wassrank():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(8, 5, 3)).astype(np.float32)
    labels = rng.integers(0, 3, size=(8, 5)).astype(np.float32)
    labels[:, 4] = -1.0  # padding
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.Dense(1),
                              keras.layers.Reshape((5,))])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=tfrx.losses.get(KEY))
    history = model.fit(features, labels, batch_size=4, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))


@pytest.mark.skipif(harness.BACKEND != "jax", reason="jax.jit")
def test_jax_jit_of_value_and_grad_equals_the_oracle_in_float64():
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    labels, scores = (x.astype(np.float64) for x in harness.CASES["bad_input"])
    checked = SPEC.check_options(cost_type="p2", target="softmax")
    with harness.float64():

        @jax.jit
        @jax.value_and_grad
        def total(s):
            losses, weights, _ = SPEC.compute(jnp.asarray(labels), s, None, checked, "keras_ops")
            return jnp.sum(jnp.where(jnp.isnan(losses), 0.0, losses * weights))

        value, grad = total(jnp.asarray(scores))
        assert value.dtype == jnp.float64
    want, want_grad = harness.expected_per_list(
        lambda y, s: oracles_wassrank.wassrank(y, s, **checked), labels, scores)
    harness.assert_close(float(value), np.nansum(want), rtol=1e-9)
    harness.assert_close(np.asarray(grad), want_grad, rtol=1e-9, atol=1e-12)
