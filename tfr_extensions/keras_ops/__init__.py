"""The ``keras.ops`` implementation of the array math of the ops, for Keras 3 on JAX and
PyTorch (and on TensorFlow, for comparison): the same module and function names as
:mod:`tfr_extensions.ops` (``tfrx.ops.sorting.exact_ranks`` and
``tfrx.keras_ops.sorting.exact_ranks``). A loss's math, ``rank_metrics``, ``list_metrics``
and ``approx_ranks`` are written once, against :mod:`tfr_extensions.arrays`; the options
and their checks, metric names, constants, bad-input policy and Keras classes are shared,
and the classes pick the implementation by Keras's backend
(:func:`tfr_extensions.backend.uses_tensorflow_ops`).

This package imports no TensorFlow. Its functions take and return backend tensors
(``jax.Array``, ``torch.Tensor``) and run under ``jax.jit`` and ``torch.compile``.
"""
