"""The TensorFlow filling of the array namespace: ``keras.ops``'s names and meaning in
TensorFlow's own ops (Keras 2, TF-Ranking, Keras 3's TensorFlow backend).

Each function takes what its ``keras.ops`` namesake takes (Python numbers take the dtype
of the tensor beside them) and builds the ops a hand-written TensorFlow body would: graphs,
XLA programs and ``tf.custom_gradient`` see TensorFlow alone. Only the names the bodies use
are here; the TensorFlow implementation's helper modules stand under the names of their
``keras.ops`` counterparts (:mod:`tfr_extensions.arrays.keras_namespace`).

>>> where(tf.constant([True, False]), tf.constant([1.0, 2.0], tf.float64), 0.0).numpy().tolist()
[1.0, 0.0]
"""
import contextlib
import importlib

import numpy as np
import tensorflow as tf

# pylint: disable=redefined-builtin,unused-import
from tfr_extensions.ops import lists, plackett_luce, rank_metrics  # noqa: F401
from tfr_extensions.ops import screening, sinkhorn, sorting  # noqa: F401
from tfr_extensions.ops.numerics import safe_divide  # noqa: F401
# (modules whose package exports a function of the same name, or none of tfr_extensions.ops)
approx_ranks = importlib.import_module("tfr_extensions.ops.approx_ranks")
rank_distributions = importlib.import_module("tfr_extensions.ops.rank_distributions")
#: the exact Rank-Binomial recursion and the pairwise win probabilities
rank_binomial = importlib.import_module("tfr_extensions.ops.rank_binomial")
#: ragged inputs, padded as TF-Ranking pads them (the ``keras.ops`` filling has none: None)
ragged = importlib.import_module("tfr_extensions.ops.ragged")
#: a function of lists compiled by XLA per bucket of list lengths
run_over_lists = importlib.import_module("tfr_extensions.ops.list_programs").run_over_lists

# the keras.ops names whose TensorFlow op takes the same arguments
abs, exp, log, log1p, sqrt, square = tf.abs, tf.exp, tf.math.log, tf.math.log1p, tf.sqrt, tf.square
sign, tanh, sigmoid, relu, softplus = tf.sign, tf.tanh, tf.sigmoid, tf.nn.relu, tf.math.softplus
zeros_like, ones_like, equal, isfinite = tf.zeros_like, tf.ones_like, tf.equal, tf.math.is_finite
transpose, convert_to_tensor, erfc = tf.transpose, tf.convert_to_tensor, tf.math.erfc
logical_and, logical_not, stop_gradient = tf.logical_and, tf.logical_not, tf.stop_gradient
stack, reshape, broadcast_to, einsum = tf.stack, tf.reshape, tf.broadcast_to, tf.einsum
cond, cast, top_k, expm1 = tf.cond, tf.cast, tf.math.top_k, tf.math.expm1
#: ``x`` with the static ``shape`` (None: unknown) TensorFlow cannot infer (``keras.ops``: ``x``)
ensure_shape = tf.ensure_shape


def dtype_name(x) -> str:
    """The dtype's name, ``"float32"``, ``"bool"``, ..."""
    return tf.as_dtype(x.dtype).name


def _pair(x, y):
    """``x`` and ``y`` as tensors, a Python number taking the other's dtype."""
    if isinstance(x, (int, float, bool)) and tf.is_tensor(y):
        return tf.constant(x, y.dtype), y
    x = tf.convert_to_tensor(x)
    if isinstance(y, (int, float, bool)):
        return x, tf.constant(y, x.dtype)
    return x, tf.convert_to_tensor(y)


def _binary(op):
    """``op(x, y)`` with a Python number taking the other's dtype (:func:`_pair`)."""
    def binary(x, y):
        return op(*_pair(x, y))
    return binary


maximum, minimum, subtract, greater, power = map(
    _binary, (tf.maximum, tf.minimum, tf.subtract, tf.greater, tf.pow))


def _reduction(reduce, of_bools=False):
    """``keras.ops``'s ``(x, axis=None, keepdims=False)`` over ``reduce`` (of bools)."""
    def reduction(x, axis=None, keepdims=False):
        x = tf.cast(x, tf.bool) if of_bools else x
        return reduce(x, axis=list(axis) if isinstance(axis, tuple) else axis, keepdims=keepdims)
    return reduction


sum, max, min, mean, logsumexp = map(_reduction, (
    tf.reduce_sum, tf.reduce_max, tf.reduce_min, tf.reduce_mean, tf.reduce_logsumexp))
all, any, amax = _reduction(tf.reduce_all, True), _reduction(tf.reduce_any, True), max


def _shift(op):
    """A bit shift by ``y`` in ``x``'s dtype (right: arithmetic, as ``keras.ops.right_shift``)."""
    def shift(x, y):
        x = tf.convert_to_tensor(x)
        return op(x, tf.cast(y, x.dtype))
    return shift


left_shift, right_shift = _shift(tf.bitwise.left_shift), _shift(tf.bitwise.right_shift)


def constant(value, dtype):
    """A Python number as a 0-d tensor of ``dtype``."""
    return tf.constant(value, tf.as_dtype(dtype))


def full(shape, value, dtype=None):
    return tf.fill(shape, tf.constant(value, tf.as_dtype(dtype or "float32")))


def full_like(x, value, dtype=None):
    x = tf.convert_to_tensor(x)
    return tf.fill(tf.shape(x), tf.constant(value, tf.as_dtype(dtype or x.dtype)))


def where(condition, x, y):
    return tf.where(condition, *_pair(x, y))


def cumsum(x, axis=None, reverse=False):
    """``keras.ops.cumsum``; ``reverse``: the sums from the end (``tf.cumsum``'s)."""
    return tf.cumsum(x, axis=0 if axis is None else axis, reverse=reverse)


def cumprod(x, axis=None, exclusive=False):
    """``keras.ops.cumprod``; ``exclusive``: the products of the preceding entries, 1 first."""
    return tf.math.cumprod(x, axis=0 if axis is None else axis, exclusive=exclusive)


def arange(start, stop=None, step=1, dtype=None):
    if stop is None:
        start, stop = 0, start
    return tf.range(start, stop, step, dtype=tf.as_dtype(dtype or "int32"))


def zeros(shape, dtype=None):
    return tf.zeros(shape, tf.as_dtype(dtype or "float32"))


def eye(N, M=None, k=0, dtype=None):  # pylint: disable=invalid-name
    if k:
        raise ValueError(f"eye takes the main diagonal here; got k={k}.")
    return tf.eye(N, M, dtype=tf.as_dtype(dtype or "float32"))


def shape(x):
    """The static dimensions, each unknown one a scalar tensor (as ``keras.ops.shape``)."""
    static = list(x.shape.as_list() if hasattr(x.shape, "as_list") else x.shape)
    if None not in static:
        return tuple(static)
    dynamic = tf.shape(x)
    return tuple(dynamic[i] if d is None else d for i, d in enumerate(static))


def flip(x, axis=None):
    axes = list(range(len(x.shape))) if axis is None else [axis] if isinstance(axis, int) else axis
    return tf.reverse(x, axes)


def clip(x, x_min, x_max):
    x = tf.convert_to_tensor(x)
    return tf.clip_by_value(x, tf.cast(x_min, x.dtype), tf.cast(x_max, x.dtype))


def fori_loop(lower, upper, body_fun, init_val):
    """``body_fun(i, value)`` for i in ``[lower, upper)`` (``tf.while_loop``)."""
    # (XLA differentiates the loop only with its maximum trip count known)
    static = isinstance(lower, int) and isinstance(upper, int)
    _, value = tf.while_loop(lambda i, _: i < upper, lambda i, v: (i + 1, body_fun(i, v)),
                             (tf.constant(lower, tf.int32), init_val),
                             maximum_iterations=(upper - lower if upper > lower else 0) if static
                             else None)
    return value


def scatter_update(inputs, indices, updates, reduction=None):
    """``keras.ops.scatter_update``; ``reduction="add"`` sums the updates into ``inputs``."""
    if reduction == "add":
        return tf.tensor_scatter_nd_add(inputs, indices, updates)
    if reduction is not None:
        raise ValueError(f"Unsupported reduction {reduction!r}.")
    return tf.tensor_scatter_nd_update(inputs, indices, updates)


def concatenate(xs, axis=0):
    return tf.concat(xs, axis=axis)


def take_along_axis(x, indices, axis=None):
    if axis not in (-1, len(x.shape) - 1):
        raise ValueError(f"take_along_axis takes the last axis here; got axis={axis}.")
    return tf.gather(x, indices, batch_dims=len(x.shape) - 1)


def argsort(x, axis=-1):
    """Indices sorting ``x`` ascending along ``axis``, ties in index order (stable)."""
    return tf.argsort(x, axis=axis, direction="ASCENDING", stable=True)


def one_hot(x, num_classes, axis=-1, dtype=None):
    dtype = tf.as_dtype(dtype or "float32")
    on, off = (True, False) if dtype == tf.bool else (None, None)  # (None: 1 and 0)
    return tf.one_hot(x, num_classes, on_value=on, off_value=off, axis=axis, dtype=dtype)


def convert_to_numpy(x):
    """A tensor's values as NumPy."""
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def row_sums(terms, columns, fills, rows=()):
    r""":func:`tfr_extensions.keras_ops.pairs.row_sums` (its arguments): without ``rows``
    the pairs formed at once; with them, the columns in blocks of ``lists.PAIR_BLOCK``
    (``[B, 1, C, 32]`` against ``[B, L, 1, 1]``, the last padded with ``fills``), which XLA
    fuses with the chain building the pairs, never stored (``docs/notes/twin_sigmoid_speed.md``)."""
    if not rows:
        return tf.reduce_sum(terms(*(c[:, None, :] for c in columns)), axis=-1)
    pairs = terms(*(r[:, :, None, None] for r in rows),
                  *(lists.column_blocks(c, fill) for c, fill in zip(columns, fills)))
    return tf.reduce_sum(tf.reduce_sum(pairs, axis=-1), axis=-1)


def with_gradient(value, x, backward, *residuals):
    """:func:`tfr_extensions.keras_ops.list_programs.with_gradient` by ``tf.custom_gradient``."""
    @tf.custom_gradient
    def _value(v):
        return tf.identity(value), lambda upstream: backward(upstream, v, *residuals)

    return _value(x)


def cumulative_logsumexp(x, axis=-1, reverse=False):
    r""":math:`\log\sum_{i \le j} e^{x_i}` along ``axis`` (``reverse``: :math:`i \ge j`), one
    op: the long Plackett-Luce rankings' denominators."""
    return tf.math.cumulative_logsumexp(x, axis=axis, reverse=reverse)


def uniform_noise(shape, seed, dtype="float32"):
    """Uniform noise in (0, 1) (:func:`tfr_extensions.ops.plackett_luce.uniform_noise`):
    uint32 bits ``b`` of a stateless op seeded by ``seed`` (None: fresh; an int, a pair or an
    int32 ``[2]`` tensor), the same in graph mode and XLA (TF's float conversion is not);
    float32 ``u = (b' + 1/2) / 2^24`` from the top 24 bits ``b'``, float64 ``(b + 1/2) / 2^32``."""
    seed = lists.fresh_seed() if seed is None else lists.seed_tensor(seed)
    bits = tf.random.stateless_uniform(shape, seed=seed, minval=None, maxval=None,
                                       dtype=tf.uint32, alg=lists.RNG_ALG)
    if tf.as_dtype(dtype) == tf.float64:
        return (tf.cast(bits, tf.float64) + 0.5) * (2.0 ** -32)
    top = tf.bitwise.right_shift(bits, tf.constant(8, tf.uint32))
    return tf.cast((tf.cast(top, tf.float32) + 0.5) * (2.0 ** -24), tf.as_dtype(dtype))


def name_scope(name: str):
    """``tf.name_scope(name)`` (TensorFlow's graphs and profiles show it); none for ``""``."""
    return tf.name_scope(name) if name else contextlib.nullcontext()
