"""keras.ops WassRank against the TensorFlow body (tfr_extensions.losses.wassrank).

Float32 WassRank resolves :math:`(f_i + g_j - C_{ij})/\\lambda` only to the
rounding unit of :math:`C_{max}/\\lambda` (the TF module's docstring: about 1e-4
relative with the default options and labels up to 7): one unit of difference
between two backends' ``exp``/``log`` in a potential of a few hundred moves the
plan by ~1e-4 relative. The two implementations are therefore held to rtol
1e-9 in float64, where that amplification is harmless, and to 2e-3 in float32.
"""
import contextlib
import importlib

import numpy as np
import pytest
import tensorflow as tf

import keras
from keras import ops

import harness
import tfr_extensions as tfrx
from tfr_extensions.ops.losses import wassrank as tf_wassrank

k_wassrank = importlib.import_module("tfr_extensions.keras_ops.losses.wassrank")
tf_sorting = importlib.import_module("tfr_extensions.ops.sorting")


def _float64():
    """Float64 tensors on the backend (JAX needs ``jax_enable_x64``)."""
    if harness.BACKEND == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        return jax.enable_x64(True)
    return contextlib.nullcontext()


def _jit(fn):
    """``fn`` under ``jax.jit`` on JAX (one program per shape, where op-by-op JAX
    compiles every primitive, and every loop, separately), else ``fn``."""
    if harness.BACKEND == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        return jax.jit(fn)
    return fn


def _value_and_grad(fn, *args):
    """``harness.value_and_grad`` of ``_jit(fn)``."""
    return harness.value_and_grad(_jit(fn), *args)


def _check(options, cases, rtol):
    fn = tfrx.losses.wassrank_loss
    checked = fn.spec.check_options(**options)
    for name, labels, scores in cases:
        value, grad = _value_and_grad(
            lambda l, s: fn.spec.compute(l, s, None, checked, "keras_ops")[0], labels, scores)
        tf_value, tf_grad = harness.tf_value_and_grad(
            lambda l, s: fn.spec.compute(l, s, None, checked, "tensorflow")[0], labels, scores)
        assert value.dtype == tf_value.dtype, name
        harness.assert_close(value, tf_value, rtol=rtol, what=f"{name} value")
        harness.assert_close(grad, tf_grad, rtol=rtol, what=f"{name} gradient")


def test_float64_values_and_gradients_equal_the_tf_body():
    """Every shared case with the default options ("eg" costs, "gain" target,
    epsilon scaling); two with other costs, target and schedule."""
    with _float64():
        _check({}, harness.cases(dtype=np.float64), rtol=1e-9)
        cases = [(name, labels, scores) for name, labels, scores in harness.cases(dtype=np.float64)
                 if name in ("mixed", "ties")]
        _check({"cost_type": "ddg", "target": "softmax", "epsilon_scaling": False,
                "regularization": 0.5}, cases, rtol=1e-9)


def test_float32_values_and_gradients_equal_the_tf_body():
    _check({}, [(name,) + harness.CASES[name] for name in ("mixed", "long")], rtol=2e-3)


@pytest.mark.parametrize("cost_type", ["eg", "dg", "ddg", "p1", "p2"])
def test_cost_matrix_equals_tf(cost_type):
    for case in ("mixed", "ties"):
        labels, _ = harness.CASES[case]
        mask = labels >= 0
        labels = np.where(mask, labels, 0.0).astype(np.float32)
        got = _jit(lambda l, m: k_wassrank.cost_matrix(l, m, cost_type, gain_base=3.0,
                                                       var_penalty=1.5))(
            ops.convert_to_tensor(labels), ops.convert_to_tensor(mask))
        want = tf_wassrank.cost_matrix(tf.constant(labels), tf.constant(mask), cost_type,
                                       gain_base=3.0, var_penalty=1.5)
        harness.assert_close(harness.to_numpy(got), want.numpy(), what=f"{cost_type} {case}")


def test_ideal_positions_equal_tf_exact_ranks():
    labels = np.array([[2., 0., 2., -1., 1., 0.], [1., 1., 1., 1., -1., -1.]], np.float32)
    mask = labels >= 0
    labels = np.where(mask, labels, 0.0)
    got = harness.to_numpy(k_wassrank._ideal_positions(  # pylint: disable=protected-access
        ops.convert_to_tensor(labels), ops.convert_to_tensor(mask)))
    want = tf_sorting.exact_ranks(tf.constant(labels), tf.constant(mask)).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(3, 0), (0, 4)])
def test_empty_batches_and_lists(shape):
    fn = tfrx.losses.wassrank_loss
    checked = fn.spec.check_options()
    value, grad = _value_and_grad(lambda l, s: fn.spec.compute(l, s, None, checked, "keras_ops")[0],
                                  np.ones(shape, np.float32), np.zeros(shape, np.float32))
    assert value.shape == shape[:1] and grad.shape == shape
    assert np.all(value == 0.0)


def test_class_computes_through_the_keras_ops_body():
    labels, scores = harness.CASES["mixed"]
    loss = tfrx.losses.get("wassrank")
    assert isinstance(loss, tfrx.losses.WassRankLoss)
    spec = tfrx.losses.wassrank_loss.spec  # the TensorFlow implementation, the reference
    losses, weights, _ = spec.compute(labels, scores, None, spec.check_options(), "tensorflow")
    got = _jit(loss)(ops.convert_to_tensor(labels), ops.convert_to_tensor(scores))
    harness.assert_close(float(harness.to_numpy(got)),
                         float(np.mean(losses.numpy() * weights.numpy())), rtol=2e-3)


def test_tiny_model_fits_with_wassrank():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(8, 5, 3)).astype(np.float32)
    labels = rng.integers(0, 3, size=(8, 5)).astype(np.float32)
    labels[:, 4] = -1.0  # padding
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.Dense(1),
                              keras.layers.Reshape((5,))])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=tfrx.losses.get("wassrank"))
    history = model.fit(features, labels, batch_size=4, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))


@pytest.mark.skipif(harness.BACKEND != "jax", reason="jax.jit")
def test_jax_jit_of_value_and_grad_equals_tf():
    import jax  # pylint: disable=import-outside-toplevel
    import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
    labels, scores = (x.astype(np.float64) for x in harness.CASES["bad_input"])
    fn = tfrx.losses.wassrank_loss
    checked = fn.spec.check_options(cost_type="p2", target="softmax")
    with _float64():

        @jax.jit
        @jax.value_and_grad
        def total(s):
            losses = fn.spec.compute(jnp.asarray(labels), s, None, checked, "keras_ops")[0]
            return jnp.sum(jnp.where(jnp.isnan(losses), 0.0, losses))

        value, grad = total(jnp.asarray(scores))
        assert value.dtype == jnp.float64
    tf_value, tf_grad = harness.tf_value_and_grad(
        lambda l, s: fn.spec.compute(l, s, None, checked, "tensorflow")[0], labels, scores)
    harness.assert_close(float(value), np.nansum(tf_value), rtol=1e-9)
    harness.assert_close(np.asarray(grad), tf_grad, rtol=1e-9)
