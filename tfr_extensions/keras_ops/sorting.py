"""Exact ranks by sorting or counting: the ``keras.ops`` form of
:mod:`tfr_extensions.ops.sorting` (the same functions, the same orders).

Every order is descending score, then descending tie key (when given; distinct within a
list, :func:`random_tie_keys`), else ascending index, padded documents last: stable sorts
of the negated keys (on JAX one ``lax.sort`` on both). On JAX's CPU, lists of a static length
up to :data:`COUNTING_MAX_LIST_SIZE` get their positions by counting (``1 + #{documents
before it}``, one fused pass of :func:`tfr_extensions.keras_ops.pairs.row_sums`) and a
permutation is inverted by one scatter: XLA:CPU's sort costs 0.1-0.3 us per element. PyTorch
(eager kernels store every ``[B, L, L]`` intermediate) and JAX on a GPU (counting failed at
256 lists of 512, ``CUDA_ERROR_ILLEGAL_ADDRESS``) sort (``docs/notes/keras_ops_backends.md``).
Kept by ``python -m benchmarks.backend_throughput --backends jax``: the twin-sigmoid loss at
4.9-5.3x Rax's ApproxNDCG (256 lists of 128, 2-vCPU EPYC, 2026-11-30, commit 07709b6).
"""
from typing import Optional

import keras
from keras import ops

from tfr_extensions import arrays
from tfr_extensions.arrays import tie_keys
from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import pairs
from tfr_extensions.keras_ops import random as keras_random

_NEG_INF = float("-inf")

#: Longest static list length for which positions are counted on JAX's CPU.
COUNTING_MAX_LIST_SIZE = 1024


def _column_index(x):
    """The int32 index ``[B, L]`` of every document of ``x``'s lists."""
    return ops.broadcast_to(ops.arange(ops.shape(x)[1], dtype="int32")[None], ops.shape(x))


def _counting_is_faster(values) -> bool:
    size = values.shape[-1]
    return (keras.backend.backend() == "jax" and size is not None
            and size <= COUNTING_MAX_LIST_SIZE and pairs.on_xla_cpu())


def _count_positions(scores, mask, tie_keys=None):
    """Positions by counting who comes first (the module's order; padded documents' key,
    -inf, ties a valid -inf by index, as in :func:`sort_order`)."""
    keys = ops.where(mask, scores, numerics.full_like(scores, _NEG_INF))
    index = _column_index(scores)
    this_key, this_index = keys[:, :, None], index[:, :, None]
    columns, fills = [keys, index], [_NEG_INF, 2**30]  # block padding: never before
    if tie_keys is not None:
        tie_keys = ops.cast(tie_keys, "int32")
        this_tie_key = tie_keys[:, :, None]
        columns.append(tie_keys)
        fills.append(-1)

    def before(other_key, other_index, other_tie_key=None):
        # tie keys are distinct within a list (random_tie_keys): no index needed
        before_in_tie = (other_index < this_index if other_tie_key is None
                         else other_tie_key > this_tie_key)
        return ops.cast(ops.logical_or(
            other_key > this_key,
            ops.logical_and(ops.equal(other_key, this_key), before_in_tie)), "int32")

    return 1 + pairs.row_sums(before, columns, fills)


def sort_order(scores, mask, tie_keys=None):
    """Indices ``[B, L]`` sorting each list in the module's order (the contract of
    :func:`tfr_extensions.ops.sorting.sort_order`)."""
    # ascending keys, padded documents last (``+ 0.0`` makes -0.0 a tie of +0.0)
    keys = -ops.where(mask, scores + 0.0, numerics.full_like(scores, _NEG_INF))
    if tie_keys is None:
        return ops.cast(ops.argsort(keys, axis=-1), "int32")
    if keras.backend.backend() == "jax":  # one sort on both keys (1.4x two sorts' speed)
        import jax  # pylint: disable=import-outside-toplevel
        return jax.lax.sort((keys, -ops.cast(tie_keys, "int32"), _column_index(keys)), dimension=1,
                            num_keys=2, is_stable=True)[2]
    # Two stable sorts: by the tie keys first (descending), then by score.
    by_tie_key = ops.cast(ops.argsort(-ops.cast(tie_keys, "int32"), axis=-1), "int32")
    by_score = ops.cast(ops.argsort(lists.batch_gather(keys, by_tie_key), axis=-1), "int32")
    return lists.batch_gather(by_tie_key, by_score)


def _invert_rows(permutations):
    """The inverse of each row's permutation of 0..L-1, ``out[b, perm[b, k]] = k``: on JAX
    one scatter (14-25x an argsort's speed on XLA:CPU at L = 512-1024), elsewhere a sort
    (Keras's PyTorch scatter is far slower)."""
    permutations = ops.cast(permutations, "int32")
    if keras.backend.backend() != "jax":
        return ops.cast(ops.argsort(permutations, axis=-1), "int32")
    batch, size = ops.shape(permutations)[0], ops.shape(permutations)[1]
    rows = ops.broadcast_to(ops.arange(batch, dtype="int32")[:, None], (batch, size))
    return ops.scatter(ops.stack([rows, permutations], axis=-1), _column_index(permutations),
                       (batch, size))


def inverse_order(order):
    """1-based positions from a sort order: ``positions[b, order[b, k]] = k + 1``."""
    return _invert_rows(order) + 1


def order_from_positions(positions):
    """The sort order from 1-based positions: ``order[b, positions[b, i] - 1] = i``."""
    return _invert_rows(positions - 1)


def exact_ranks(scores, mask, tie_keys=None):
    """1-based int32 ranks ``[B, L]`` in the module's order (ties to the larger tie key,
    else the lower index; padded documents last).

    >>> scores = ops.array([[0.5, 2.0, 0.5, 1.0]])
    >>> ops.convert_to_numpy(exact_ranks(scores, scores >= 0)).tolist()
    [[3, 1, 4, 2]]
    >>> keys = ops.array([[1, 0, 9, 0]], "int32")
    >>> ops.convert_to_numpy(exact_ranks(scores, scores >= 0, keys)).tolist()
    [[4, 1, 3, 2]]
    """
    if _counting_is_faster(scores):
        return _count_positions(scores, mask, tie_keys)
    return inverse_order(sort_order(scores, mask, tie_keys))


def counting_positions(values, mask):
    """1-based positions of ``values`` sorted descending where counting is faster than
    sorting, else None (a caller summing over positions then needs no inverse, no gather)."""
    return _count_positions(values, mask) if _counting_is_faster(values) else None


def sort_descending(values, mask, topn: Optional[int] = None):
    """Each list's valid (non-negative) values in descending order, padded
    entries as 0 at the end; the first ``topn`` only when given. ``[B, K]``."""
    values = ops.where(mask, values, ops.zeros_like(values))
    if _counting_is_faster(values):
        order = order_from_positions(_count_positions(values, ops.ones_like(mask)))
        sorted_values = lists.batch_gather(values, order)
    else:
        sorted_values = ops.flip(ops.sort(values, axis=-1), axis=-1)
    return sorted_values if topn is None else sorted_values[:, :topn]


def random_tie_keys(shape, seed):
    """The int32 keys ``[B, L]`` of :mod:`tfr_extensions.arrays.tie_keys` for ``seed`` (an
    int, a pair, a seed tensor ``[2]``; None: a fresh pair from Keras's stream)."""
    if seed is None:
        seed = keras_random.random_bits((2,), None, 31)
    return tie_keys.tie_keys(tuple(int(n) for n in shape), seed,
                             xp=arrays.load(arrays.backend.KERAS_OPS))


def tie_keys_for(scores, seed):
    """The tie-breaking keys of ``scores``' lists, drawn from ``seed`` (None: fresh)."""
    return random_tie_keys(ops.shape(scores), seed)


def midranks(scores, mask):
    """Ranks with ties sharing the mean of their positions (Eq. 12 without tie breaking):
    ``1 + #{j: s_j > s_i} + #{j != i: s_j = s_i} / 2``, valid j only; 0 at padding.

    O(L log L): one sort, valid documents first, tied runs numbered along it and each run's
    ends found by one binary search for the batch (run numbers offset per list). Where
    counting is faster, ``1/2 + sum_j ([s_j > s_i] + [s_j = s_i] / 2)``: exact in halves.
    """
    if _counting_is_faster(scores):
        this = scores[:, :, None]

        def above_and_half_tied(other, valid):
            def count(condition):
                return ops.cast(ops.logical_and(valid, condition), scores.dtype)
            return count(other > this) + 0.5 * count(ops.equal(other, this))

        counts = pairs.row_sums(above_and_half_tied, [scores, mask], [0.0, False])
        return ops.where(mask, 0.5 + counts, ops.zeros_like(scores))
    batch, size = ops.shape(scores)[0], ops.shape(scores)[1]
    order = sort_order(scores, mask)
    # Valid documents strictly first (a valid -inf ties the padding's key).
    padded_by_position = ops.cast(ops.logical_not(lists.batch_gather(mask, order)), "int32")
    valid_first = ops.cast(ops.argsort(padded_by_position, axis=-1), "int32")
    order = lists.batch_gather(order, valid_first)
    sorted_scores, sorted_mask = lists.batch_gather(scores, order), lists.batch_gather(mask, order)
    new_run = ops.logical_or(
        ops.not_equal(sorted_scores[:, 1:], sorted_scores[:, :-1]),
        ops.not_equal(sorted_mask[:, 1:], sorted_mask[:, :-1]))
    new_run = ops.concatenate([ops.ones((batch, 1), dtype="bool"), new_run], axis=-1)
    offsets = ops.arange(batch, dtype="int32")[:, None] * size
    run = ops.cumsum(ops.cast(new_run, "int32"), axis=-1) + offsets  # increasing over the batch
    flat = ops.reshape(run, (-1,))
    first, end = (ops.reshape(ops.cast(ops.searchsorted(flat, flat, side=side), "int32"),
                              (batch, size)) - offsets for side in ("left", "right"))
    sorted_midranks = 1.0 + 0.5 * ops.cast(first + end - 1, scores.dtype)
    ranks = lists.batch_gather(sorted_midranks, _invert_rows(order))
    return ops.where(mask, ranks, ops.zeros_like(ranks))
