"""Differentiable building blocks: pure TensorFlow functions of tensors."""
from tfr_extensions.ops import lists, rank_metrics, sorting
from tfr_extensions.ops.twin_sigmoid import (
    twin_sigmoid,
    twin_sigmoid_derivative,
    twin_sigmoid_ranks,
)
