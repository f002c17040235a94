"""The ``keras.ops`` implementation of the ops' array math, for Keras 3 on JAX and PyTorch
(and TensorFlow, for comparison), under the module and function names of
:mod:`tfr_extensions.ops` (``tfrx.keras_ops.sorting.exact_ranks``). A loss's math,
``rank_metrics``, ``list_metrics`` and ``approx_ranks`` are written once, against
:mod:`tfr_extensions.arrays`; options, checks, metric names, constants, bad-input policy and
Keras classes are shared, the classes picking the implementation by Keras's backend
(:func:`tfr_extensions.backend.uses_tensorflow_ops`). No TensorFlow is imported; functions
take and return backend tensors and run under ``jax.jit`` and ``torch.compile``.
"""
