"""Differentiable building blocks: pure TensorFlow functions of tensors.

Beside them: :mod:`~tfr_extensions.ops.lists` (list and mask conventions),
:mod:`~tfr_extensions.ops.validation` (argument checks),
:mod:`~tfr_extensions.ops.numerics` (``safe_divide``, ``log1mexp``) and
:mod:`~tfr_extensions.ops.vocabulary` (the metric names).
"""
from tfr_extensions.ops import lists, numerics, rank_metrics, sorting, validation, vocabulary
from tfr_extensions.ops.twin_sigmoid import (
    twin_sigmoid,
    twin_sigmoid_derivative,
    twin_sigmoid_ranks,
)
from tfr_extensions.ops.plackett_luce import plackett_luce_log_prob, sample_rankings
from tfr_extensions.ops.rank_distributions import rank_distributions
