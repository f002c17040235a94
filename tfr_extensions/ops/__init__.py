"""Differentiable building blocks: pure functions of tensors, on every framework.

The ranking ops are written once against the array namespace
(:func:`tfr_extensions.arrays.namespace`: TensorFlow's ops on Keras 2 and on Keras 3's
TensorFlow backend, ``keras.ops`` on JAX and PyTorch): :mod:`~tfr_extensions.ops.rank_metrics`,
:mod:`~tfr_extensions.ops.list_metrics`, :mod:`~tfr_extensions.ops.approx_ranks`,
:mod:`~tfr_extensions.ops.screening` (the bad-input policy),
:mod:`~tfr_extensions.ops.plackett_luce`, :mod:`~tfr_extensions.ops.rank_distributions`
and :mod:`~tfr_extensions.ops.twin_sigmoid`.
The modules that are TensorFlow's own (the sorts, the seeds, the XLA programs,
:mod:`~tfr_extensions.ops.rank_binomial`, :mod:`~tfr_extensions.ops.sinkhorn`,
:mod:`~tfr_extensions.ops.ragged`) have their ``keras.ops`` counterparts in
:mod:`tfr_extensions.keras_ops`, under the same names. The vocabulary, the checks and the
constants (:mod:`~tfr_extensions.ops.conventions`) import no framework.
"""
from tfr_extensions.backend import HAS_TENSORFLOW
from tfr_extensions.ops import conventions, validation, vocabulary
from tfr_extensions.ops import rank_metrics  # (written once, on every framework)
from tfr_extensions.ops.plackett_luce import (  # (written once, on every framework)
    plackett_luce_log_prob,
    sample_rankings,
)
from tfr_extensions.ops.rank_distributions import rank_distributions  # (the same)
from tfr_extensions.ops.twin_sigmoid import (  # (the same)
    twin_sigmoid,
    twin_sigmoid_derivative,
    twin_sigmoid_ranks,
)

if HAS_TENSORFLOW:
    from tfr_extensions.ops import lists, numerics, sorting

#: the public names (the API reference documents these; the modules of the
#: implementation are in its "implementation" part)
__all__ = ["twin_sigmoid", "twin_sigmoid_ranks", "twin_sigmoid_derivative",
           "rank_distributions", "sample_rankings", "plackett_luce_log_prob"]
