"""Lists and seeds: the list helpers of every op and loss (gathers, gains and
discounts, seeds, the XLA pairwise blocks).

Conventions (TF-Ranking's, see DESIGN.md):

* ``labels`` and ``scores`` are ``[batch, list_size]``; a label ``< 0`` marks a
  padded document. ``mask`` (bool, True = valid) may narrow validity further.
* Gains are ``2^y - 1`` and the rank discount is ``1 / log2(1 + rank)`` with
  1-based ranks.
* Computation runs in float64 when the scores are float64 (gradient checks) and
  in float32 otherwise, so ``mixed_float16`` models get float32 losses.
* Seeds are ``None`` (fresh randomness), an int, or a pair of ints, and feed TF's
  stateless random ops.
* Labels are graded relevance in ``[0, MAX_LABEL]``, fractional ones too
  (gain ``2^2.5 - 1`` for 2.5); NaN and negative labels are padding.

The inputs (shapes, compute dtype, padding and validity, ragged inputs and
keras-rs dicts, lists without a relevant document) are prepared by
:mod:`tfr_extensions.ops.screening`, which writes the bad-input policy once
(:func:`~tfr_extensions.ops.screening.prepare_lists`,
:func:`~tfr_extensions.ops.screening.has_relevant`, ...; their old names here are
the same functions). Argument checks live in :mod:`tfr_extensions.ops.validation`,
numerical tricks (``safe_divide``, ``log1mexp``) in :mod:`tfr_extensions.ops.numerics`.
"""
from typing import Optional, Sequence, Tuple, Union

import tensorflow as tf

from tfr_extensions.ops.conventions import MAX_LABEL, PADDING_LABEL  # noqa: F401
# the input conventions moved to screening; these names stay for their callers
from tfr_extensions.ops.screening import (  # noqa: F401
    PADDING_PREDICTION, PADDING_WEIGHT, check_list_shapes, compute_dtype, has_relevant,
    labels_with_mask, prepare_lists, prepare_scores, ragged_to_dense)

try:  # TF's own test for "this graph is being compiled by XLA"
    from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext
except ImportError:  # pragma: no cover - callers fall back to their general path
    GraphOrParentsInXlaContext = None

Seed = Union[None, int, Sequence[int], tf.Tensor]

#: The algorithm of every stateless random op of the package (``alg=``). TF's
#: default, ``"auto_select"``, lets XLA choose its own generator, which on TF
#: 2.21's XLA:CPU is several times slower than Philox for small draws (and a
#: different stream from the graph kernel's); Philox is what the TF kernels
#: use on CPU and GPU, so a seed gives one stream in graph mode and under XLA.
RNG_ALG = "philox"

#: Columns per block of every pairwise pass that XLA compiles (the twin-sigmoid
#: backward pass, the counted ranks): each row's sum over the pairs runs over
#: blocks of this many columns, then over the blocks. XLA's CPU compiler splits a
#: reduction over more than 32 elements into a ``reduce-window`` that it does not
#: fuse with the ops before it, so the ``[B, L, L]`` pair values would be stored
#: and read back (on TF 2.21 a count of 128 columns took 44 µs per list that
#: way, 7 in blocks: ``docs/notes/twin_sigmoid_speed.md``); a reduction of 32
#: fuses with the chain that builds the pairs, which are then never stored.
PAIR_BLOCK = 32


def column_blocks(values: tf.Tensor, fill) -> tf.Tensor:
    """``[B, L]`` -> ``[B, 1, C, PAIR_BLOCK]``: the columns in blocks of
    :data:`PAIR_BLOCK` (``C = ceil(L / PAIR_BLOCK)``), the last block filled
    with ``fill``. Against ``values[:, :, None, None]`` (the rows) it forms
    the pairs ``[B, L, C, PAIR_BLOCK]``, summed over both trailing axes.

    >>> column_blocks(tf.reshape(tf.range(40), [1, 40]), -1).shape
    TensorShape([1, 1, 2, 32])
    """
    batch, size = (tf.shape(values)[axis] if n is None else n  # static sizes for XLA
                   for axis, n in enumerate(values.shape))
    padded = tf.pad(values, [[0, 0], [0, -size % PAIR_BLOCK]], constant_values=fill)
    return tf.reshape(padded, [batch, 1, -1, PAIR_BLOCK])


def tensorflow_version() -> Tuple[int, ...]:
    """TensorFlow's (major, minor) version, for the XLA:CPU choices that differ
    between its classic runtime (TF < 2.16) and its thunk runtime.

    >>> tensorflow_version() >= (2, 15)
    True
    """
    return tuple(int(part) for part in tf.__version__.split(".")[:2] if part.isdigit())


def compiling_with_xla() -> bool:
    """True while tracing a function that XLA compiles (``jit_compile=True``),
    where every shape must be static; ops then pick their XLA-friendly path."""
    return (GraphOrParentsInXlaContext is not None
            and GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def batch_gather(params: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
    """``tf.gather(params, indices, batch_dims=1)`` for ``[B, L]`` params and
    int ``[B, ...]`` indices, whose gradient also works for an empty batch.

    TF's gradient of a ``batch_dims=1`` gather has the wrong shape when B = 0
    (``[0, K]`` for ``[0, L]`` params), which makes the tape's ``AddN`` fail;
    this gathers from the flattened params (the same ``Gather`` kernel) with
    offsets ``b * L``, whose gradient is an ordinary scatter of the right
    shape.

    >>> batch_gather(tf.constant([[1., 2.], [3., 4.]]), tf.constant([[1], [0]])).numpy().tolist()
    [[2.0], [3.0]]
    """
    shape = tf.shape(params)
    indices = tf.cast(indices, tf.int32)
    offsets = (tf.range(shape[0]) * shape[1])[(slice(None),) + (None,) * (indices.shape.rank - 1)]
    return tf.gather(tf.reshape(params, [-1]), indices + offsets)


def gains(labels: tf.Tensor) -> tf.Tensor:
    """The exponential gain 2^y - 1 (labels of padded documents must be 0)."""
    return tf.pow(tf.constant(2.0, labels.dtype), labels) - 1.0


def log2_discount(ranks: tf.Tensor) -> tf.Tensor:
    """1 / log2(1 + rank) for 1-based ranks (ranks >= 1, so no division by 0)."""
    return tf.math.log(tf.constant(2.0, ranks.dtype)) / tf.math.log1p(ranks)


def seed_tensor(seed: Seed, salt: int = 0) -> Optional[tf.Tensor]:
    """A stateless-op seed ``int32 [2]`` from an int or a pair of ints.

    ``salt`` separates independent streams drawn from one user seed. Returns
    None for ``seed=None``; the caller then draws a fresh seed each call. The
    result is always non-negative: XLA and TF kernels can disagree on the
    random streams of negative seeds (``fold_in`` may return one).
    """
    if seed is None:
        return None
    seed = tf.convert_to_tensor(seed)
    seed = tf.cast(seed, tf.int64)
    if seed.shape.rank == 0:
        seed = tf.stack([seed, tf.constant(0, tf.int64)])
    seed = seed + tf.constant([0, salt], tf.int64)
    return tf.cast(tf.math.floormod(seed, 2**31 - 1), tf.int32)


def fresh_seed() -> tf.Tensor:
    """A random stateless seed, for ``seed=None`` (non-reproducible on purpose)."""
    return tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int32)


def fold_in(seed: tf.Tensor, step) -> tf.Tensor:
    """Derives a new stateless seed from ``seed`` and a step counter."""
    step = tf.cast(step, tf.int32)
    return tf.random.experimental.stateless_fold_in(seed, step, alg=RNG_ALG)
