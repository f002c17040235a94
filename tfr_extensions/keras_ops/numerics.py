"""Constants, fills and element-wise extremes in ``keras.ops`` that keep a tensor's dtype and
device (the ``keras.ops`` namespace's ``constant``, ``full``, ``full_like``, ``minimum``,
``maximum``; :mod:`tfr_extensions.ops.numerics` holds the tricks written once).
"""
import keras
from keras import ops


def constant(value: float, dtype):
    """A Python number as a 0-d tensor of ``dtype`` (:func:`full`; ``ops.cast`` of a Python
    float goes through float32 on Keras's TensorFlow backend)."""
    return full((), value, dtype)


def full(shape, value: float, dtype):
    """``ops.full(shape, value, dtype)`` for a Python number, filled on the device: on PyTorch
    Keras copies it from host memory, which waits for every queued GPU kernel (PyTorch 120996).

    >>> full((2,), 0.5, "float64").dtype == ops.ones(1, "float64").dtype
    True
    """
    if keras.backend.backend() != "torch":
        if shape == ():  # (a Python number converted in ``dtype`` itself)
            return ops.convert_to_tensor(value, dtype=dtype)
        return ops.full(shape, value, dtype=dtype)
    import torch  # pylint: disable=import-outside-toplevel
    from keras.src.backend.torch import core  # pylint: disable=import-outside-toplevel
    return torch.full(tuple(shape), value, dtype=core.to_torch_dtype(dtype),
                      device=core.get_device())


def full_like(x, value: float):
    """``ops.full_like(x, value)`` for a Python number ``value``, on ``x``'s device
    without a copy from host memory (see :func:`full`)."""
    if keras.backend.backend() != "torch":
        return ops.full_like(x, value)
    import torch  # pylint: disable=import-outside-toplevel
    return torch.full_like(ops.convert_to_tensor(x), value)  # (x may be NumPy, as for ops)


def _like(y, x):
    """``y`` (a tensor or a Python number) in ``x``'s dtype."""
    dtype = keras.backend.standardize_dtype(x.dtype)
    return constant(y, dtype) if isinstance(y, (int, float)) else ops.cast(y, dtype)


def minimum(x, y):
    """Element-wise minimum in ``x``'s dtype (Keras 3.15's PyTorch ``ops.minimum`` makes
    float64 float32), TensorFlow's gradient at ties (all to ``x``; JAX would split it)."""
    y = _like(y, x)
    return ops.where(x <= y, x, y)


def maximum(x, y):
    """Element-wise maximum in ``x``'s dtype (see :func:`minimum`)."""
    y = _like(y, x)
    return ops.where(x >= y, x, y)
