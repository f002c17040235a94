"""Lists and seeds: the list helpers of every op and loss (gathers, gains and discounts,
seeds, the XLA pairwise blocks). Conventions (TF-Ranking's):

* ``labels`` and ``scores`` are ``[batch, list_size]``; a label ``< 0`` (or NaN) marks a
  padded document; ``mask`` (bool, True = valid) may narrow validity further. Labels are
  graded relevance in ``[0, MAX_LABEL]``, fractional ones too (gain ``2^2.5 - 1``).
* Gains are ``2^y - 1``, the rank discount ``1 / log2(1 + rank)`` with 1-based ranks.
* Computation runs in float64 for float64 scores, else in float32 (``mixed_float16`` too).
* Seeds are ``None`` (fresh randomness), an int, or a pair of ints (TF's stateless ops).

Inputs are prepared by :mod:`tfr_extensions.ops.screening` (re-exported here) and checked by
:mod:`tfr_extensions.ops.validation`; numerical tricks: :mod:`tfr_extensions.ops.numerics`.
"""
from typing import Optional, Sequence, Union

import tensorflow as tf

from tfr_extensions.ops.conventions import (  # noqa: F401
    MAX_LABEL, PADDING_LABEL, gains, log2_discount)
from tfr_extensions.ops.screening import (  # noqa: F401
    PADDING_PREDICTION, PADDING_WEIGHT, check_list_shapes, compute_dtype, has_relevant,
    labels_with_mask, prepare_lists, prepare_scores)
from tfr_extensions.ops.ragged import ragged_to_dense  # noqa: F401

try:  # TF's own test for "this graph is being compiled by XLA"
    from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext
except ImportError:  # pragma: no cover - callers fall back to their general path
    GraphOrParentsInXlaContext = None

Seed = Union[None, int, Sequence[int], tf.Tensor]

#: The algorithm of every stateless random op (``alg=``): Philox, the TF kernels' on CPU and
#: GPU, so a seed gives one stream in graph mode and under XLA (where ``"auto_select"`` differs).
RNG_ALG = "philox"

#: Columns per block of every pairwise pass that XLA compiles: a reduction of 32 fuses with
#: the chain that builds the pairs, never stored (``docs/notes/twin_sigmoid_speed.md``).
PAIR_BLOCK = 32


def column_blocks(values: tf.Tensor, fill) -> tf.Tensor:
    """``[B, L]`` -> ``[B, 1, C, PAIR_BLOCK]``: the columns in blocks (``C = ceil(L /
    PAIR_BLOCK)``), the last filled with ``fill``; against the rows
    ``values[:, :, None, None]``, the pairs ``[B, L, C, PAIR_BLOCK]``.

    >>> column_blocks(tf.reshape(tf.range(40), [1, 40]), -1).shape
    TensorShape([1, 1, 2, 32])
    """
    batch, size = (tf.shape(values)[axis] if n is None else n  # static sizes for XLA
                   for axis, n in enumerate(values.shape))
    padded = tf.pad(values, [[0, 0], [0, -size % PAIR_BLOCK]], constant_values=fill)
    return tf.reshape(padded, [batch, 1, -1, PAIR_BLOCK])


def compiling_with_xla() -> bool:
    """True while tracing a function that XLA compiles (``jit_compile=True``),
    where every shape must be static; ops then pick their XLA-friendly path."""
    return (GraphOrParentsInXlaContext is not None
            and GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def batch_gather(params: tf.Tensor, indices: tf.Tensor) -> tf.Tensor:
    """``tf.gather(params, indices, batch_dims=1)`` for ``[B, L]`` params and int ``[B, ...]``
    indices, with a gradient of the right shape for an empty batch too (flat, offsets ``b L``).

    >>> batch_gather(tf.constant([[1., 2.], [3., 4.]]), tf.constant([[1], [0]])).numpy().tolist()
    [[2.0], [3.0]]
    """
    shape = tf.shape(params)
    indices = tf.cast(indices, tf.int32)
    offsets = (tf.range(shape[0]) * shape[1])[(slice(None),) + (None,) * (indices.shape.rank - 1)]
    return tf.gather(tf.reshape(params, [-1]), indices + offsets)


def seed_tensor(seed: Seed, salt: int = 0) -> Optional[tf.Tensor]:
    """A stateless-op seed ``int32 [2]`` from an int or a pair of ints (None for None), never
    negative (XLA and TF may disagree there); ``salt`` separates streams of one seed."""
    if seed is None:
        return None
    seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
    if seed.shape.rank == 0:
        seed = tf.stack([seed, tf.constant(0, tf.int64)])
    seed = seed + tf.constant([0, salt], tf.int64)
    return tf.cast(tf.math.floormod(seed, 2**31 - 1), tf.int32)


def fresh_seed() -> tf.Tensor:
    """A random stateless seed, for ``seed=None`` (non-reproducible on purpose)."""
    return tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int32)


def fold_in(seed: tf.Tensor, step) -> tf.Tensor:
    """Derives a new stateless seed from ``seed`` and a step counter."""
    return tf.random.experimental.stateless_fold_in(seed, tf.cast(step, tf.int32), alg=RNG_ALG)
