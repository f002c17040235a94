r"""Numerical tricks that keep values and gradients finite, written once against the array
namespace: each masks the *argument* of its division or log (``where`` back-propagates
``0 * inf = NaN`` from an unmasked branch).

>>> xp = arrays.namespace()
>>> safe = safe_divide(xp.convert_to_tensor([1.0, 2.0]), xp.convert_to_tensor([4.0, 0.0]))
>>> xp.convert_to_numpy(safe).tolist()
[0.25, 0.0]
"""
import math

from tfr_extensions import arrays


def safe_divide(numerator, denominator):
    """``numerator / denominator`` where ``denominator > 0``, else 0 (a list without relevant
    documents, an empty batch; broadcasting), with a finite gradient everywhere."""
    xp = arrays.namespace()
    numerator = xp.convert_to_tensor(numerator)
    denominator = xp.cast(denominator, numerator.dtype)
    positive = denominator > 0
    ratio = numerator / xp.where(positive, denominator, xp.ones_like(denominator))
    return xp.where(positive, ratio, xp.zeros_like(ratio))


def log1mexp(x):
    r""":math:`\log(1 - e^x)` for ``x < 0`` without cancellation (Maechler, "Accurately
    Computing log(1 - exp(-|a|))", 2012): ``log(-expm1(x))`` for :math:`x > -\log 2`,
    ``log1p(-exp(x))`` below, each branch's argument masked.

    >>> round(float(log1mexp(arrays.namespace().convert_to_tensor(-1e-8, "float64"))), 4)
    -18.4207
    """
    xp = arrays.namespace()
    x = xp.convert_to_tensor(x)
    near_zero = x > -math.log(2.0)
    safe_near = xp.where(near_zero, x, -xp.ones_like(x))
    safe_far = xp.where(near_zero, -xp.ones_like(x), x)
    return xp.where(near_zero, xp.log(-xp.expm1(safe_near)), xp.log1p(-xp.exp(safe_far)))
