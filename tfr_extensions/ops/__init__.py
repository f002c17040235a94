"""Differentiable building blocks: pure TensorFlow functions of tensors."""
from tfr_extensions.ops import lists, rank_metrics, sorting
from tfr_extensions.ops.twin_sigmoid import (
    twin_sigmoid,
    twin_sigmoid_derivative,
    twin_sigmoid_ranks,
)
from tfr_extensions.ops.plackett_luce import plackett_luce_log_prob, sample_rankings
from tfr_extensions.ops.rank_distributions import rank_distributions
