"""Exact ranks, the forward pass of every rank-based op: by descending score, then tie key,
then index (stable ``tf.argsort``), float32 scores with tie keys in one sort of a 64-bit key
(score bits, key), float64 ones in two. Under XLA (slow CPU sort on short rows), lists of up to
:data:`COUNTING_MAX_LIST_SIZE` documents are counted instead: ``1 + #{documents before it}``.

A primitive per framework (:mod:`tfr_extensions.keras_ops.sorting`), kept by ``python -m
benchmarks.loss_throughput --cases twin_ndcg_type3``: the twin-sigmoid loss at 1.2-8.7x
the broadcast ApproxNDCG on Keras 3's TensorFlow (graph and XLA, L = 32-512, 2-vCPU EPYC).
"""
from typing import Callable, Optional, Union

import numpy as np
import tensorflow as tf

from tfr_extensions import arrays
from tfr_extensions.arrays import tie_keys
from tfr_extensions.ops import lists


#: Longest static list length counted under XLA (``docs/notes/twin_sigmoid_speed.md``).
COUNTING_MAX_LIST_SIZE = 512

#: Tie-breaking keys: int32 ``[B, L]``, distinct per list, in ``[0, 2^31)`` (padding's may be
#: negative), or a function that draws them (a count calls it only if some list has ties).
TieKeys = Union[tf.Tensor, Callable[[], tf.Tensor]]

# One int32 sum carries two counts: #{higher} * 2^16 + #{tied} (lists < 2^15 long).
_HIGHER_BIT = 16


def sort_order(scores: tf.Tensor, mask: tf.Tensor,
               tie_keys: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Indices that sort each list by descending float ``scores`` ``[batch, list_size]``,
    padded documents (``mask`` False) last, ties to the larger of the optional :data:`TieKeys`
    tensor, else the lower index: int32 ``[batch, list_size]``, ``order[b, k]`` the document at
    0-based position ``k`` of list ``b``."""
    if tie_keys is not None and scores.dtype != tf.float64:  # one sort: (score bits, key)
        bits = tf.bitcast(tf.cast(scores, tf.float32) + 0.0, tf.int32)  # (-0.0 == +0.0)
        # Negative floats order backwards as integers: flip their magnitude bits.
        bits = tf.where(bits < 0, tf.bitwise.bitwise_xor(bits, 0x7FFFFFFF), bits)
        composite = tf.cast(bits, tf.int64) * (2**32) + tf.cast(tie_keys, tf.int64)
        composite = tf.where(mask, composite, tf.constant(-(2**63), tf.int64))
        return tf.argsort(composite, axis=-1, direction="DESCENDING", stable=True)
    # -inf is only a sort key here (never used in arithmetic): padded last.
    keys = tf.where(mask, scores, tf.constant(-float("inf"), scores.dtype))
    if tie_keys is None:
        return tf.argsort(keys, axis=-1, direction="DESCENDING", stable=True)
    by_tie_key = tf.argsort(tie_keys, axis=-1, direction="DESCENDING", stable=True)
    permuted = tf.gather(keys, by_tie_key, batch_dims=1)
    by_score = tf.argsort(permuted, axis=-1, direction="DESCENDING", stable=True)
    return tf.gather(by_tie_key, by_score, batch_dims=1)


def _accelerator_visible() -> bool:
    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def _invert_rows(permutations: tf.Tensor, scatter: bool = False) -> tf.Tensor:
    """Each row's inverse permutation, ``out[b, perm[b, k]] = k``: one ``invert_permutation`` of
    the rows end to end, or a ``scatter_nd`` (``scatter``, or a GPU/TPU: that op runs on host)."""
    shape = tf.shape(permutations)
    offsets = tf.range(shape[0])[:, None] * shape[1]
    flat = tf.reshape(permutations + offsets, [-1])
    if scatter or _accelerator_visible():
        inverse = tf.scatter_nd(flat[:, None], tf.range(tf.size(flat)), tf.shape(flat))
    else:
        inverse = tf.math.invert_permutation(flat)
    return tf.reshape(inverse, shape) - offsets


def inverse_order(order: tf.Tensor, scatter: bool = False) -> tf.Tensor:
    """1-based positions from a sort order: ``positions[b, order[b, k]] = k + 1``. O(L) per list."""
    return _invert_rows(order, scatter) + 1


def order_from_positions(positions: tf.Tensor) -> tf.Tensor:
    """The sort order from 1-based positions: ``order[b, positions[b, i] - 1] = i``."""
    return _invert_rows(positions - 1)


def _rows_and_columns(values: tf.Tensor, fill):
    """``values`` as the rows ``[B, L, 1(, 1)]`` and columns ``[B, 1, L]`` of pairs; past
    :data:`lists.PAIR_BLOCK` documents, columns in blocks (:func:`lists.column_blocks`)."""
    if values.shape[1] is not None and values.shape[1] <= lists.PAIR_BLOCK:
        return values[:, :, None], values[:, None, :]
    return values[:, :, None, None], lists.column_blocks(values, fill)


def _sum_over_columns(pairs: tf.Tensor) -> tf.Tensor:
    """Each row's sum over the columns of :func:`_rows_and_columns`: ``[B, L]``."""
    return tf.reduce_sum(pairs, axis=list(range(2, pairs.shape.rank)))


def _count_positions(scores, mask, tie_keys):
    """Positions by counting who comes first (fused ``[B, L, L]`` compares under XLA)."""
    keys = tf.where(mask, scores, tf.constant(-float("inf"), scores.dtype))
    this, other = _rows_and_columns(keys, -float("inf"))
    # Without tie keys, minus the index; filled columns last (smallest int32 key, resp. -L).
    if tie_keys is not None:
        this_key, other_key = _rows_and_columns(tie_keys, np.iinfo(np.int32).min)
    else:
        size = scores.shape[1] if scores.shape[1] is not None else tf.shape(scores)[1]
        this_key, other_key = _rows_and_columns(-tf.range(size)[None, :], -size)
    before = tf.logical_or(other > this, tf.logical_and(tf.equal(other, this),
                                                        other_key > this_key))
    return 1 + _sum_over_columns(tf.cast(before, tf.int32))


def _count_positions_breaking_ties(scores, mask, tie_keys: TieKeys):
    r""":func:`_count_positions` with tie keys, drawn only if some list has a tie: one pass sums
    :math:`2^{16} h_j + t_j`, :math:`h_j = \#\{i: s_i > s_j\}`, :math:`t_j = \#\{i: s_i = s_j\}`;
    if every valid :math:`t_j = 1` the positions are :math:`1 + h_j`, else the keyed count."""
    keys = tf.where(mask, scores, tf.constant(-float("inf"), scores.dtype))
    this, other = _rows_and_columns(keys, -float("inf"))
    counts = _sum_over_columns(tf.where(other > this, 1 << _HIGHER_BIT,
                                        tf.cast(tf.equal(other, this), tf.int32)))
    higher = tf.bitwise.right_shift(counts, _HIGHER_BIT)
    tied = tf.bitwise.bitwise_and(counts, (1 << _HIGHER_BIT) - 1)
    no_ties = tf.reduce_all(tf.logical_or(tf.equal(tied, 1), tf.logical_not(mask)))
    valid = tf.cast(mask, tf.int32)
    padded_before = tf.cumsum(1 - valid, axis=-1, exclusive=True)
    num_valid = tf.reduce_sum(valid, axis=-1, keepdims=True)
    untied = tf.where(mask, 1 + higher, 1 + num_valid + padded_before)
    draw = tie_keys if callable(tie_keys) else lambda: tie_keys
    return tf.cond(no_ties, lambda: untied, lambda: _count_positions(scores, mask, draw()))


def _counting_is_faster(scores: tf.Tensor) -> bool:
    size = scores.shape[-1]
    return size is not None and size <= COUNTING_MAX_LIST_SIZE and lists.compiling_with_xla()


def exact_ranks(scores: tf.Tensor, mask: tf.Tensor,
                tie_keys: Optional[TieKeys] = None) -> tf.Tensor:
    """1-based int32 ranks by descending score (module docstring; :data:`TieKeys`)."""
    def count():
        if tie_keys is None:
            return _count_positions(scores, mask, None)
        return _count_positions_breaking_ties(scores, mask, tie_keys)

    def sort():
        keys = tie_keys() if callable(tie_keys) else tie_keys
        # (XLA's InvertPermutation fails on the float64 two-sort order: a scatter)
        scatter = scores.dtype == tf.float64 and lists.compiling_with_xla()
        return inverse_order(sort_order(scores, mask, keys), scatter)

    if _counting_is_faster(scores):
        return count()
    if scores.shape[-1] is None and lists.compiling_with_xla():
        # (a constant in XLA's program of each length: the other branch is dropped)
        return tf.cond(tf.shape(scores)[-1] <= COUNTING_MAX_LIST_SIZE, count, sort)
    return sort()


def counting_positions(values: tf.Tensor, mask: tf.Tensor) -> Optional[tf.Tensor]:
    """1-based positions of ``values`` sorted descending (ties by index, padded last) where
    counting beats sorting (XLA), else None."""
    return _count_positions(values, mask, None) if _counting_is_faster(values) else None


def sums_by_position(values: tf.Tensor, positions: tf.Tensor, later: bool) -> Optional[tf.Tensor]:
    r"""``[B, L]``: :math:`\sum_{e:\, p_e \ge p_d} v_e` (``later``) or
    :math:`\sum_{e:\, p_e < p_d} v_e` (1-based distinct int ``positions``), fused under XLA for
    lists of at most ``lists.PAIR_BLOCK`` documents; else None."""
    size = values.shape[-1]
    if not (lists.compiling_with_xla() and size is not None and size <= lists.PAIR_BLOCK):
        return None
    this, other = _rows_and_columns(positions, tf.constant(0, positions.dtype))
    _, other_values = _rows_and_columns(values, tf.constant(0, values.dtype))  # (fill: adds 0)
    counted = other >= this if later else other < this
    return _sum_over_columns(tf.where(counted, other_values, tf.zeros_like(other_values)))


def sort_descending(values: tf.Tensor, mask: tf.Tensor,
                    topn: Optional[int] = None) -> tf.Tensor:
    """``[B, K]``: each list's valid (non-negative) values descending, padding 0 last, ``topn``."""
    values = tf.where(mask, values, tf.constant(0, values.dtype))
    if _counting_is_faster(values):
        sorted_values = tf.gather(values, order_from_positions(
            _count_positions(values, mask, None)), batch_dims=1)
        return sorted_values if topn is None else sorted_values[:, :topn]
    if topn is None:
        return tf.sort(values, axis=-1, direction="DESCENDING")
    return tf.math.top_k(values, k=tf.minimum(topn, tf.shape(values)[1]), sorted=True).values


def tie_seed(seed: lists.Seed) -> tf.Tensor:
    """The tie keys' stateless seed: ``seed``'s, or for None a fresh one, drawn here."""
    return lists.seed_tensor(seed) if seed is not None else lists.fresh_seed()


def tie_key_draw(scores: tf.Tensor, seed_t: tf.Tensor, size=None) -> TieKeys:
    """A :data:`TieKeys` draw for ``scores``' lists from ``seed_t``; with ``size``, the first
    ``size`` documents get the unpadded lists' keys and a bucket's padding -2, -3, ..."""
    if size is None:
        return lambda: random_tie_keys(tf.shape(scores), seed_t)

    def draw():
        keys = random_tie_keys([tf.shape(scores)[0], size], seed_t)
        added = -2 - tf.range(tf.shape(scores)[1] - size)
        return tf.concat([keys, tf.tile(added[None, :], [tf.shape(scores)[0], 1])], axis=1)

    return draw


def tie_keys_for(scores: tf.Tensor, seed: lists.Seed) -> TieKeys:
    """The lazily drawn :data:`TieKeys` of ``scores``' lists for ``seed`` (None: fresh)."""
    return tie_key_draw(scores, tie_seed(seed))


def random_tie_keys(shape, seed: tf.Tensor) -> tf.Tensor:
    """Int32 keys in ``[0, 2^31)``, distinct per list: the twin-sigmoid paper's random secondary
    sort key (Section 4.2; :mod:`tfr_extensions.arrays.tie_keys`, the same on every framework).

    >>> keys = random_tie_keys([2, 5], tf.constant([1, 2])).numpy()
    >>> [len(set(row)) for row in keys.tolist()], int(keys.min()) >= 0
    ([5, 5], True)
    """
    static = tf.get_static_value(shape) if tf.is_tensor(shape) else shape
    if static is not None and all(isinstance(n, (int, np.integer)) for n in static):
        shape = [int(n) for n in static]  # known sizes: the index bits need no graph ops
    else:
        shape = [shape[0], shape[1]]
    return tie_keys.tie_keys(shape, seed, xp=arrays.load(arrays.backend.TENSORFLOW))


def midranks(scores: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Ranks with ties sharing their mean position (Eq. 12 without tie breaking), 0 if padded:
    ``1 + #{j: s_j > s_i} + #{j != i: s_j = s_i} / 2`` (a sort and two searches, or a count)."""
    if _counting_is_faster(scores):  # one fused compare-and-sum under XLA
        this, other = _rows_and_columns(scores, tf.constant(0, scores.dtype))
        _, counted = _rows_and_columns(mask, False)
        greater = _sum_over_columns(tf.cast(tf.logical_and(counted, other > this), scores.dtype))
        equal = _sum_over_columns(tf.cast(tf.logical_and(counted, tf.equal(other, this)),
                                          scores.dtype))  # j = i included
        return tf.where(mask, 1.0 + greater + 0.5 * (equal - 1.0), tf.constant(0, scores.dtype))
    inf = tf.constant(float("inf"), scores.dtype)
    ascending = tf.sort(tf.where(mask, scores, inf), axis=-1)
    num_valid = tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1, keepdims=True)
    queries = tf.where(mask, scores, tf.constant(0, scores.dtype))
    left = tf.searchsorted(ascending, queries, side="left")
    right = tf.minimum(tf.searchsorted(ascending, queries, side="right"), num_valid)
    greater = tf.cast(num_valid - right, scores.dtype)
    ties = tf.cast(right - left - 1, scores.dtype)
    return tf.where(mask, 1.0 + greater + 0.5 * ties, tf.constant(0, scores.dtype))
