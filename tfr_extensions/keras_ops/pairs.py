r"""Row sums over all pairs of a list, :math:`\sum_j f(i, j)`, without storing
the ``[B, L, L]`` pairs where the compiler would.

XLA:CPU (JAX 0.10) stores any pair tensor that feeds a reduction, so on JAX on a CPU
:func:`row_sums` adds the columns element-wise in blocks of :data:`BLOCK` (``keras.ops.map``),
fused with the terms into one loop over ``[B, L]``; eagerly, up to :data:`EAGER_MAX_PAIRS`
pairs, a Python loop of broadcast sums (``ops.map`` would compile at every call). PyTorch,
TensorFlow and JAX on a GPU (blocks 6-12x slower) form the pairs at once. Kept by the
twin-sigmoid backward, 2 EPYC cores, L = 512-1024: 0.2-0.3 ns a pair against 1.0-4.9
stored (``docs/notes/keras_ops_backends.md``).
"""
import functools
from typing import Callable, Sequence

import keras
from keras import ops

from tfr_extensions.keras_ops import random as keras_random

#: Columns per block on JAX on a CPU.
BLOCK = 32
#: Most pairs (``B L^2``) summed by the eager loop (JAX outside ``jax.jit``); counting positions,
#: loop against compiled: 5 against 210 ms at 64 lists of 128, 1,650 against 270 at 512 of 1,000.
EAGER_MAX_PAIRS = 1 << 25


def on_xla_cpu() -> bool:
    """Whether the computation is JAX's on a CPU (its default device's platform)."""
    if keras.backend.backend() != "jax":
        return False
    import jax  # pylint: disable=import-outside-toplevel
    return jax.default_backend() == "cpu"


def row_sums(terms: Callable, columns: Sequence, fills: Sequence, rows: Sequence = ()):
    r""":math:`\sum_j` ``terms(*rows, *columns)[b, i, j]``: ``[B, L]``.

    Args:
      terms: maps the row values, each ``[B, L, 1]``, and the column values, each
        ``[B, 1, n]``, to the terms of every pair ``[B, L, n]`` (or closes over rows).
      columns: ``[B, L]`` tensors, one per column argument of ``terms``.
      fills: each column's value in the last block's padding, where its terms must be 0.
      rows: ``[B, L]`` tensors, one per row argument of ``terms``.

    >>> s = ops.array([[0.0, 1.0, 3.0]])
    >>> above = row_sums(lambda c: ops.cast(c > s[:, :, None], "float32"), [s], [-1.0])
    >>> ops.convert_to_numpy(above).tolist()  # documents scoring higher
    [[2.0, 1.0, 0.0]]
    """
    if rows:
        terms = functools.partial(terms, *(r[:, :, None] for r in rows))
    if not on_xla_cpu():
        return ops.sum(terms(*(c[:, None, :] for c in columns)), axis=-1)
    batch, size = ops.shape(columns[0])[0], ops.shape(columns[0])[1]
    if not keras_random.jax_tracing() and batch * size * size <= EAGER_MAX_PAIRS:
        def block_of(start):  # eager: operations compiled once per shape, not a loop per call
            return ops.sum(terms(*(c[:, None, start:start + BLOCK] for c in columns)), axis=-1)
        return sum((block_of(start) for start in range(BLOCK, size, BLOCK)), block_of(0))
    blocks = tuple(ops.transpose(ops.reshape(  # [C, B, 1, BLOCK], the last block filled
        ops.pad(c, [[0, 0], [0, -size % BLOCK]], constant_values=fill),
        (batch, 1, -(-size // BLOCK), BLOCK)), (2, 0, 1, 3)) for c, fill in zip(columns, fills))

    def block_sum(block):  # BLOCK element-wise additions, fused by XLA
        def column(k):
            return terms(*(c[..., k:k + 1] for c in block))[..., 0]
        return sum((column(k) for k in range(1, BLOCK)), column(0))

    return ops.sum(ops.map(block_sum, blocks), axis=0)
