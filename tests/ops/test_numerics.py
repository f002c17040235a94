"""numerics: safe_divide and log1mexp against NumPy, with finite gradients."""
import numpy as np
import tensorflow as tf

from tfr_extensions.ops import numerics


def test_safe_divide_is_the_quotient_or_zero_with_finite_gradients():
    numerator = tf.constant([[1.0, 2.0], [3.0, -4.0]], tf.float64)
    denominator = tf.constant([[4.0], [0.0]], tf.float64)
    with tf.GradientTape() as tape:
        tape.watch([numerator, denominator])
        value = numerics.safe_divide(numerator, denominator)
    np.testing.assert_array_equal(value.numpy(), [[0.25, 0.5], [0.0, 0.0]])
    grad_n, grad_d = tape.gradient(value, [numerator, denominator])
    np.testing.assert_array_equal(grad_n.numpy(), [[0.25, 0.25], [0.0, 0.0]])
    np.testing.assert_allclose(grad_d.numpy(), [[-3.0 / 16.0], [0.0]])
    assert numerics.safe_divide(tf.constant(1.0), tf.constant(-2.0)).numpy() == 0.0


def test_log1mexp_matches_numpy_and_is_finite():
    x = tf.constant([-1e-8, -0.1, -0.69, -0.7, -5.0, -50.0], tf.float64)
    np.testing.assert_allclose(numerics.log1mexp(x).numpy(), np.log(-np.expm1(x.numpy())),
                               rtol=1e-12, atol=1e-15)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(numerics.log1mexp(x))
    grad = tape.gradient(y, x).numpy()
    np.testing.assert_allclose(grad, -np.exp(x.numpy()) / -np.expm1(x.numpy()), rtol=1e-10)
