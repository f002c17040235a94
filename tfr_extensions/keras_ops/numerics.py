r"""Numerical tricks that keep values and gradients finite: the ``keras.ops`` counterpart
of :mod:`tfr_extensions.ops.numerics` (the same functions, the same contracts).

>>> ops.convert_to_numpy(safe_divide(ops.array([1.0, 2.0]), ops.array([4.0, 0.0]))).tolist()
[0.25, 0.0]
"""
import math

import keras
from keras import ops


def safe_divide(numerator, denominator):
    """``numerator / denominator`` where ``denominator > 0``, else 0 (broadcasting);
    the divisor is masked, so the gradient is finite everywhere."""
    numerator = ops.convert_to_tensor(numerator)
    denominator = ops.cast(denominator, numerator.dtype)
    positive = denominator > 0
    ratio = numerator / ops.where(positive, denominator, ops.ones_like(denominator))
    return ops.where(positive, ratio, ops.zeros_like(ratio))


def log1mexp(x):
    r""":math:`\log(1 - e^x)` for ``x < 0``, accurate over the whole range
    (``log(-expm1(x))`` above :math:`-\log 2`, ``log1p(-exp(x))`` below; each
    branch's argument is masked)."""
    x = ops.convert_to_tensor(x)
    near_zero = x > -math.log(2.0)
    safe_near = ops.where(near_zero, x, -ops.ones_like(x))
    safe_far = ops.where(near_zero, -ops.ones_like(x), x)
    return ops.where(near_zero, ops.log(-ops.expm1(safe_near)), ops.log1p(-ops.exp(safe_far)))


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
