r"""Numerical tricks that keep values and gradients finite: each masks the *argument* of its
division or log (``tf.where`` back-propagates ``0 * inf = NaN`` from an unmasked branch).

>>> safe_divide(tf.constant([1.0, 2.0]), tf.constant([4.0, 0.0])).numpy().tolist()
[0.25, 0.0]
"""
import math

import tensorflow as tf


def safe_divide(numerator: tf.Tensor, denominator: tf.Tensor) -> tf.Tensor:
    """``numerator / denominator`` where ``denominator > 0``, else 0 (a list without relevant
    documents, an empty batch; broadcasting), with a finite gradient everywhere."""
    numerator = tf.convert_to_tensor(numerator)
    denominator = tf.cast(denominator, numerator.dtype)
    positive = denominator > 0
    ratio = numerator / tf.where(positive, denominator, tf.ones_like(denominator))
    return tf.where(positive, ratio, tf.zeros_like(ratio))


def log1mexp(x: tf.Tensor) -> tf.Tensor:
    r""":math:`\log(1 - e^x)` for ``x < 0`` without cancellation (Maechler, "Accurately
    Computing log(1 - exp(-|a|))", 2012): ``log(-expm1(x))`` for :math:`x > -\log 2`,
    ``log1p(-exp(x))`` below, each branch's argument masked.

    >>> round(float(log1mexp(tf.constant(-1e-8, tf.float64))), 4)  # log(1e-8)
    -18.4207
    """
    x = tf.convert_to_tensor(x)
    near_zero = x > -math.log(2.0)
    safe_near = tf.where(near_zero, x, -tf.ones_like(x))
    safe_far = tf.where(near_zero, -tf.ones_like(x), x)
    return tf.where(near_zero, tf.math.log(-tf.math.expm1(safe_near)),
                    tf.math.log1p(-tf.exp(safe_far)))
