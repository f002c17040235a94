"""The ``keras.ops`` filling of the array namespace (Keras 3 on JAX and PyTorch).

Every public name of ``keras.ops``, then the names that differ from it:

* ``constant``, ``full``, ``full_like``, ``maximum``, ``minimum``: Python numbers
  filled on the device (:mod:`tfr_extensions.keras_ops.numerics`: on PyTorch,
  ``keras.ops`` copies them from host memory, which waits for the GPU), and
  ``maximum``/``minimum`` keep float64;
* ``safe_divide``, ``log1mexp``, ``dtype_name``;
* the helper modules of the ``keras.ops`` implementation, under the names their
  TensorFlow twins have in :mod:`tfr_extensions.arrays.tensorflow_namespace`.
"""
from keras import ops as _ops

globals().update({name: getattr(_ops, name) for name in dir(_ops) if not name.startswith("_")})

# pylint: disable=wrong-import-position,unused-import
from tfr_extensions.keras_ops import (approx_ranks, list_metrics, lists, numerics,  # noqa: E402
                                      plackett_luce, rank_distributions, rank_metrics, screening,
                                      sorting)
from tfr_extensions.keras_ops import random, sinkhorn  # noqa: E402
from tfr_extensions.keras_ops import twin_sigmoid as twin_sigmoid_ops  # noqa: E402
from tfr_extensions.keras_ops.lists import dtype_name  # noqa: E402,F401
from tfr_extensions.keras_ops.numerics import (constant, full, full_like, log1mexp,  # noqa: E402,F401
                                               maximum, minimum, safe_divide)

#: which filling this is
IMPLEMENTATION = "keras_ops"
