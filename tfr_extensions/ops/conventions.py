"""The tensor conventions (described in :mod:`tfr_extensions.ops.lists`) shared by every
implementation: the constants, and the gain and discount written once against the array namespace.

>>> xp = arrays.namespace()
>>> xp.convert_to_numpy(gains(xp.convert_to_tensor([[0., 1., 2.]]))).tolist()
[[0.0, 1.0, 3.0]]
"""
from tfr_extensions import arrays

#: The label ragged inputs and padded arrays are filled with (any label < 0 is padding).
PADDING_LABEL = -1.0

#: The name of a seeded loss's or model's step counter (variable, Keras 3 weights file entry).
SEED_STEP = "seed_step"

#: The largest label the losses accept: gains up to ``2^31 - 1``, sums far below float32's
#: overflow; a list with a larger valid label (``+inf`` too) gets the loss NaN.
MAX_LABEL = 31.0

#: ``method=`` of ``rank_distributions`` and the SoftNDCG loss: the exact Rank-Binomial
#: recursion, its normal approximation, or ``"auto"`` (exact up to a list length).
RANK_DISTRIBUTION_METHODS = ("exact", "normal", "auto")


def gains(labels):
    """The exponential gain 2^y - 1 (labels of padded documents must be 0)."""
    xp = arrays.namespace()
    return xp.power(xp.constant(2.0, xp.dtype_name(labels)), labels) - 1.0


def log2_discount(ranks):
    """1 / log2(1 + rank) for 1-based ranks (ranks >= 1, so no division by 0)."""
    xp = arrays.namespace()
    return xp.log(xp.constant(2.0, xp.dtype_name(ranks))) / xp.log1p(ranks)
