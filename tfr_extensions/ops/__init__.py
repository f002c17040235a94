"""Differentiable building blocks: pure functions of tensors, on every framework.

Written once against the array namespace (:func:`tfr_extensions.arrays.namespace`: TensorFlow's
ops on Keras 2 and Keras 3's TensorFlow backend, ``keras.ops`` on JAX and PyTorch):
:mod:`~tfr_extensions.ops.rank_metrics`, :mod:`~tfr_extensions.ops.list_metrics`,
:mod:`~tfr_extensions.ops.approx_ranks`, :mod:`~tfr_extensions.ops.screening` (the bad-input
policy), :mod:`~tfr_extensions.ops.plackett_luce`, :mod:`~tfr_extensions.ops.rank_distributions`
and :mod:`~tfr_extensions.ops.twin_sigmoid`. TensorFlow's own modules (the sorts, the seeds,
the XLA programs, :mod:`~tfr_extensions.ops.rank_binomial`, :mod:`~tfr_extensions.ops.sinkhorn`,
:mod:`~tfr_extensions.ops.ragged`) have ``keras.ops`` counterparts of the same names in
:mod:`tfr_extensions.keras_ops`. The vocabulary, the checks and the constants
(:mod:`~tfr_extensions.ops.conventions`) import no framework.
"""
from tfr_extensions.backend import HAS_TENSORFLOW
from tfr_extensions.ops import conventions, rank_metrics, validation, vocabulary
from tfr_extensions.ops.plackett_luce import plackett_luce_log_prob, sample_rankings
from tfr_extensions.ops.rank_distributions import rank_distributions
from tfr_extensions.ops.twin_sigmoid import (
    twin_sigmoid,
    twin_sigmoid_derivative,
    twin_sigmoid_ranks,
)

if HAS_TENSORFLOW:
    from tfr_extensions.ops import lists, numerics, sorting

#: the public names (the API reference; the implementation's modules are in its own part)
__all__ = ["twin_sigmoid", "twin_sigmoid_ranks", "twin_sigmoid_derivative",
           "rank_distributions", "sample_rankings", "plackett_luce_log_prob"]
