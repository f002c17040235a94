"""The ``keras.ops`` implementation: every op and loss body of the package, for
Keras 3 on JAX and PyTorch (and on TensorFlow, for comparison).

:mod:`tfr_extensions.ops` (TensorFlow) and this package are two implementations
of the same functions, with the same module and function names:
``tfrx.ops.sorting.exact_ranks`` and ``tfrx.keras_ops.sorting.exact_ranks``
(``rank_metrics``, ``list_metrics`` and ``approx_ranks`` are one module each in
:mod:`tfr_extensions.ops`, written against :mod:`tfr_extensions.arrays`). Only the
array math of the ops is written twice (a loss's math is written once, against
:mod:`tfr_extensions.arrays`): the options and their checks
(:mod:`tfr_extensions.ops.validation`), the metric names
(:mod:`tfr_extensions.ops.vocabulary`), the constants
(:mod:`tfr_extensions.ops.conventions`), the bad-input policy and the Keras
classes (:mod:`tfr_extensions.losses`, :class:`tfr_extensions.metrics.RankingMetric`)
are shared, and the classes pick the implementation by Keras's backend
(:func:`tfr_extensions.backend.uses_tensorflow_ops`). Tests hold the two to
equal values and gradients.

This package imports no TensorFlow. Its functions take and return backend
tensors (``jax.Array``, ``torch.Tensor``) and run under ``jax.jit`` and
``torch.compile``.
"""
