"""The constants of the tensor conventions (described in :mod:`tfr_extensions.ops.lists`),
shared by :mod:`tfr_extensions.ops` and :mod:`tfr_extensions.keras_ops`; no framework."""

#: The label ragged inputs and padded arrays are filled with (any label < 0 is padding).
PADDING_LABEL = -1.0

#: The largest label the losses accept: gains up to ``2^31 - 1``, sums far below float32's
#: overflow; a list with a larger valid label (``+inf`` too) gets the loss NaN.
MAX_LABEL = 31.0

#: ``method=`` of ``rank_distributions`` and the SoftNDCG loss: the exact Rank-Binomial
#: recursion, its normal approximation, or ``"auto"`` (exact up to a list length).
RANK_DISTRIBUTION_METHODS = ("exact", "normal", "auto")
