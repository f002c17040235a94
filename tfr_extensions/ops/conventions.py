"""The constants of the tensor conventions (described in :mod:`tfr_extensions.ops.lists`),
shared by :mod:`tfr_extensions.ops` and :mod:`tfr_extensions.keras_ops`; no framework."""

#: The label of a padded document (TF-Ranking's ``utils.is_label_valid``: any
#: label < 0 is padding); what ragged inputs and padded arrays are filled with.
PADDING_LABEL = -1.0

#: The largest label the losses accept: gains up to ``2^31 - 1``, which leaves every sum
#: of gains and every cost far below float32's overflow. A list with a larger valid label
#: (``+inf`` included) gets the loss NaN (:class:`tfr_extensions.losses.RankingLoss`).
MAX_LABEL = 31.0

#: How SoftRank's rank distributions are computed (``method=`` of
#: ``rank_distributions`` and of the SoftNDCG loss): the exact Rank-Binomial
#: recursion, its normal approximation, or ``"auto"`` (exact up to a list length).
RANK_DISTRIBUTION_METHODS = ("exact", "normal", "auto")
