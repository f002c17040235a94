"""The ``keras.ops`` filling of the array namespace (Keras 3 on JAX and PyTorch): every
public name of ``keras.ops``, then those that differ from it: ``constant``, ``full``,
``full_like``, ``maximum``, ``minimum`` of :mod:`tfr_extensions.keras_ops.numerics` (filled on
the device; float64 kept), ``safe_divide`` (:mod:`tfr_extensions.ops.numerics`), ``dtype_name``, and the ``keras.ops``
implementation's helper modules under the names of their TensorFlow counterparts.
"""
import contextlib
import importlib

import keras as _keras
from keras import ops as _ops

globals().update({name: getattr(_ops, name) for name in dir(_ops) if not name.startswith("_")})
# (``amax``, ``amin``: ``keras.ops.max`` breaks ``torch.compile``'s graph, an ``isinstance``)
max, min = _ops.amax, _ops.amin  # pylint: disable=redefined-builtin

# pylint: disable=wrong-import-position,unused-import
from tfr_extensions.keras_ops import lists, random, sorting  # noqa: E402
from tfr_extensions.keras_ops import rank_binomial, sinkhorn  # noqa: E402,F401
from tfr_extensions.ops import rank_metrics, screening  # noqa: E402,F401
from tfr_extensions.keras_ops.list_programs import run_over_lists, with_gradient  # noqa: E402,F401
from tfr_extensions.keras_ops.lists import dtype_name  # noqa: E402,F401
from tfr_extensions.keras_ops.numerics import (constant, full, full_like,  # noqa: E402,F401
                                               maximum, minimum)
from tfr_extensions.ops.numerics import safe_divide  # noqa: E402,F401
from tfr_extensions.keras_ops.pairs import row_sums  # noqa: E402,F401
# (a module whose package may export a function of the same name)
approx_ranks = importlib.import_module("tfr_extensions.ops.approx_ranks")
plackett_luce = importlib.import_module("tfr_extensions.ops.plackett_luce")
rank_distributions = importlib.import_module("tfr_extensions.ops.rank_distributions")


def _in_its_dtype(keras_op, torch_op: str, x, axis, dtype):
    """``keras_op(x, axis=axis, dtype=dtype)`` in ``x``'s dtype: Keras 3.15's PyTorch
    ``cumsum`` and ``cumprod`` make float64 float32; torch's own keep it."""
    if dtype is None and axis is not None and _keras.backend.backend() == "torch":
        import torch  # pylint: disable=import-outside-toplevel
        if torch.is_tensor(x) and x.is_floating_point():
            return getattr(torch, torch_op)(x, dim=axis)
    return keras_op(x, axis=axis, dtype=dtype)


def cumsum(x, axis=None, dtype=None, reverse=False):
    """``keras.ops.cumsum`` in ``x``'s dtype (float64 stays float64 on PyTorch);
    ``reverse``: the sums from the end (TensorFlow's ``tf.cumsum(reverse=True)``)."""
    if reverse:
        return _ops.flip(cumsum(_ops.flip(x, axis=axis), axis=axis, dtype=dtype), axis=axis)
    return _in_its_dtype(_ops.cumsum, "cumsum", x, axis, dtype)


def cumprod(x, axis=None, dtype=None, exclusive=False):
    """``keras.ops.cumprod`` in ``x``'s dtype; ``exclusive`` (last axis): the products of
    the preceding entries, 1 first (``tf.math.cumprod(exclusive=True)``)."""
    if exclusive:
        if axis not in (-1, len(x.shape) - 1):
            raise ValueError(f"An exclusive cumprod runs along the last axis; got axis={axis}.")
        x = _ops.concatenate([_ops.ones_like(x[..., :1]), x[..., :-1]], axis=-1)
    return _in_its_dtype(_ops.cumprod, "cumprod", x, axis, dtype)


def uniform_noise(shape, seed, dtype="float32"):
    """Uniform noise in (0, 1), the Plackett-Luce sampler's: ``u = (b + 1/2) / 2^n`` of
    :func:`tfr_extensions.keras_ops.random.random_bits` ``b``, n = 30 for float64, else 24."""
    bits = 30 if dtype == "float64" else 24
    draws = random.random_bits(shape, seed, bits)
    return (_ops.cast(draws, dtype) + 0.5) * (2.0 ** -bits)


def cumulative_logsumexp(x, axis=-1, reverse=False):
    r""":math:`\log\sum_{i \le j} e^{x_i}` along ``axis`` (``reverse``: :math:`i \ge j`): an
    ``associative_scan`` of ``logaddexp``."""
    axis = axis % len(x.shape)  # (JAX's associative_scan takes no negative axis)
    return _ops.associative_scan(_ops.logaddexp, x, reverse=reverse, axis=axis)


def ensure_shape(x, shape):  # pylint: disable=unused-argument,redefined-outer-name
    """``x``: ``keras.ops`` shapes are static."""
    return x


#: ragged tensors exist on TensorFlow only (its filling pads them, tfr_extensions.ops.ragged)
ragged = None


def name_scope(name: str):  # pylint: disable=unused-argument
    """No name scope: JAX and PyTorch programs have none to give."""
    return contextlib.nullcontext()
