"""Differentiable building blocks: pure TensorFlow functions of tensors.

Beside them: :mod:`~tfr_extensions.ops.lists` (list and mask conventions),
:mod:`~tfr_extensions.ops.validation` (argument checks),
:mod:`~tfr_extensions.ops.numerics` (``safe_divide``, ``log1mexp``) and
:mod:`~tfr_extensions.ops.vocabulary` (the metric names). Their ``keras.ops``
twins, for Keras 3 on JAX and PyTorch, are :mod:`tfr_extensions.keras_ops` (the
same module and function names). The vocabulary, the checks and the constants
(:mod:`~tfr_extensions.ops.conventions`) import no framework and are shared by
both; without TensorFlow installed, they are all this package holds.
"""
from tfr_extensions.backend import HAS_TENSORFLOW
from tfr_extensions.ops import conventions, validation, vocabulary
from tfr_extensions.ops import rank_metrics  # (written once, on every framework)
from tfr_extensions.ops.plackett_luce import (  # (written once, on every framework)
    plackett_luce_log_prob,
    sample_rankings,
)
from tfr_extensions.ops.rank_distributions import rank_distributions  # (the same)

if HAS_TENSORFLOW:
    from tfr_extensions.ops import lists, numerics, sorting
    from tfr_extensions.ops.twin_sigmoid import (
        twin_sigmoid,
        twin_sigmoid_derivative,
        twin_sigmoid_ranks,
    )
