"""Extreme scores, written once against the array namespace: the clipping that keeps
differences of scores, and their squares, finite.

>>> xp = arrays.namespace()
>>> dtype_max(xp.zeros((1,), "float32")) == float(np.finfo(np.float32).max)
True
"""
import numpy as np

from tfr_extensions import arrays


def dtype_max(x) -> float:
    """The largest finite value of ``x``'s floating dtype."""
    return float(np.finfo(arrays.namespace().dtype_name(x)).max)


def clip_scores(scores, squared: bool = False):
    """Scores clipped to +-``dtype.max / 4`` (``squared``: +-``sqrt(dtype.max) / 4``): differences
    of two, and their squares, stay finite. Gradient 1 inside, 0 beyond (``tf.clip_by_value``'s)."""
    xp = arrays.namespace()
    largest = dtype_max(scores)
    bound = (largest ** 0.5 if squared else largest) / 4.0
    dtype = xp.dtype_name(scores)
    return xp.clip(scores, xp.constant(-bound, dtype), xp.constant(bound, dtype))
