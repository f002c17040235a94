"""The constants of the tensor conventions, shared by both implementations.

:mod:`tfr_extensions.ops` (TensorFlow) and :mod:`tfr_extensions.keras_ops`
(``keras.ops``: JAX, PyTorch) read them from here; this module imports no
framework. The conventions themselves are described in
:mod:`tfr_extensions.ops.lists`.
"""

#: The label of a padded document (TF-Ranking's ``utils.is_label_valid``: any
#: label < 0 is padding); what ragged inputs and padded arrays are filled with.
PADDING_LABEL = -1.0

#: The largest label the losses accept: gains up to ``2^31 - 1`` (exact in
#: float64, ``2^31`` in float32), which leaves every sum of gains, every ratio
#: of nERR and every cost of the losses many orders of magnitude below
#: float32's overflow. A loss gives a list with a larger valid label (``+inf``
#: included) the value NaN (see :class:`tfr_extensions.losses.RankingLoss`).
MAX_LABEL = 31.0

#: How SoftRank's rank distributions are computed (``method=`` of
#: ``rank_distributions`` and of the SoftNDCG loss): the exact Rank-Binomial
#: recursion, its normal approximation, or ``"auto"`` (exact up to a list length).
RANK_DISTRIBUTION_METHODS = ("exact", "normal", "auto")
