r"""The padded-block layout of LightGBM's flat per-document arrays into query blocks.

LightGBM hands the objective flat ``[N]`` arrays, the documents of each query
contiguous, and the group sizes ``[Q]``. Lists without a relevant document or
with one document get gradient and Hessian 0 and are not computed. The others
are sorted by length (and number of relevant documents) into padded blocks
``[B, L]`` (built once per dataset and cached); no Python loop runs per list.

Only relevant documents can have :math:`\delta \ne 0`, and type2/3 pairs with
equal labels have :math:`g = h = 0` (:mod:`tfr_extensions.gbdt.terms`), so a
block's pair terms ``[B, R, C]`` are laid out for: type1, the relevant
documents (rows) against every document (columns); type2/3, per relevant label
level l, the documents labelled l against those labelled below l, each pair
with different labels once (with :math:`u = 1`; the pair's other order follows
from :math:`g` being antisymmetric in the pair and :math:`h`, :math:`q(1-q)`
symmetric). Lists longer than ``block_pairs`` pair terms allow are split into
row chunks, which bounds the memory of the pair buffer.

>>> layout = Layout([0, 1, 2, 1, 0, 0, 0, 2], [3, 2, 2, 1], "ndcg", None, "type3", 1 << 19)
>>> [block.docs.tolist() for block in layout.blocks]  # lists 3 (no relevant), 4 (one doc) left out
[[[3, 4, 0], [0, 1, 2]]]
"""
import dataclasses
from typing import List, Optional, Tuple

import numpy as np

from tfr_extensions.gbdt import metric_form

#: Pair terms that cost about as much as one more block (its ~40 NumPy calls):
#: a list joins the current block unless that pads the block by more.
_BLOCK_OVERHEAD_PAIRS = 1 << 15


@dataclasses.dataclass
class PairGroup:
    """Pairs (row document i, column document c) of a block's lists ``[B, R, C]``:
    per row and column, its index into the block's flattened ``[B, L]`` arrays
    (``row_gather``, ``col_gather``; 0 at padding), into the flattened ``[B, L + 1]``
    sums (``row_target``, ``col_target``; padding: the spare column L) and
    ``row_valid`` / ``col_valid``. ``chunks``: row ranges computed at once."""

    row_gather: np.ndarray
    row_target: np.ndarray
    row_valid: np.ndarray
    col_gather: np.ndarray
    col_target: np.ndarray
    col_valid: np.ndarray
    chunks: List[Tuple[int, int]]

    @property
    def pairs(self) -> int:
        return self.row_valid.size * self.col_valid.shape[1]


@dataclasses.dataclass
class Block:
    """Lists of similar shape, padded to ``[B, L]`` documents.

    ``docs``: flat document index of each cell (0 at padding); ``valid``;
    ``labels`` (0 at padding); metric constants (``gains``, ``relevant``,
    ``stop`` and the per-list ``norm`` Z); ``groups``: the pairs computed. For
    type1, one group: the relevant documents against every document. For
    type2/3, one group per relevant label level l: the documents labelled l
    against those labelled below l (each pair with different labels once).
    """

    docs: np.ndarray
    valid: np.ndarray
    labels: np.ndarray
    gains: np.ndarray
    relevant: np.ndarray
    stop: Optional[np.ndarray]
    norm: np.ndarray
    groups: List[PairGroup]

    @property
    def pairs(self) -> int:
        """Pair terms computed per round, padding included."""
        return sum(group.pairs for group in self.groups)


def _padded_columns(mask):
    """The documents where ``mask`` ``[B, L]`` holds, left-aligned: their index
    into the flattened ``[B, L]`` arrays (0 at padding), into the flattened
    ``[B, L + 1]`` sums (padding: column L), and the validity ``[B, K]``."""
    size = mask.shape[1]
    counts = mask.sum(1)
    valid = np.arange(max(int(counts.max()), 1))[None, :] < counts[:, None]
    lists, cols = np.nonzero(mask)
    gather = np.zeros(valid.shape, np.int64)
    gather[valid] = lists * size + cols
    target = np.arange(len(mask))[:, None] * (size + 1) + size + np.zeros(valid.shape, np.int64)
    target[valid] = lists * (size + 1) + cols
    return gather, target, valid


def _pair_group(row_mask, col_mask, block_pairs) -> Optional[PairGroup]:
    if not col_mask.any():
        return None
    rows, cols = _padded_columns(row_mask), _padded_columns(col_mask)
    chunk = max(1, block_pairs // cols[2].size)
    chunks = [(a, min(a + chunk, rows[2].shape[1])) for a in range(0, rows[2].shape[1], chunk)]
    return PairGroup(*rows, *cols, chunks)


def _block_bounds(sizes: np.ndarray, rows: np.ndarray, block_pairs: int) -> List[Tuple[int, int]]:
    """Cuts lists (sorted by length bucket, then rows) into blocks: a list
    starts a new block when joining would pad the block by more than
    ``_BLOCK_OVERHEAD_PAIRS`` pair terms or pass ``block_pairs``.

    >>> _block_bounds(np.array([10, 10, 11, 300]), np.array([2, 3, 3, 150]), 1 << 18)
    [(0, 3), (3, 4)]
    """
    bounds, start = [], 0
    count, max_rows, max_size, real = 0, 0, 0, 0
    for i, (size, num_rows) in enumerate(zip(sizes.tolist(), rows.tolist())):
        grown = (count + 1) * max(max_rows, num_rows) * max(max_size, size)
        padding = grown - (real + num_rows * size) - (count * max_rows * max_size - real)
        if count and (padding > _BLOCK_OVERHEAD_PAIRS or grown > block_pairs):
            bounds.append((start, i))
            start, count, max_rows, max_size, real = i, 0, 0, 0, 0
        count, real = count + 1, real + num_rows * size
        max_rows, max_size = max(max_rows, num_rows), max(max_size, size)
    bounds.append((start, len(sizes)))
    return bounds


class Layout:
    """The padded blocks of one dataset (labels and group sizes), built once."""

    def __init__(self, labels, group, metric, topn, gradient, block_pairs):
        self.labels = np.array(labels, np.float64)
        self.group = np.array(group, np.int64)
        offsets = np.concatenate([[0], np.cumsum(self.group)])
        self.num_docs = int(offsets[-1])
        relevant = np.concatenate([[0], np.cumsum(self.labels > 0)])[offsets]
        relevant = np.diff(relevant)
        keep = np.flatnonzero((relevant > 0) & (self.group > 1))
        # by length bucket (4 per doubling), then rows, then length
        bucket = np.floor(4.0 * np.log2(self.group[keep])).astype(np.int64)
        keep = keep[np.lexsort((self.group[keep], relevant[keep], bucket))]
        self.blocks = [
            self._block(offsets[keep[a:b]], self.group[keep[a:b]], metric, topn, gradient,
                        block_pairs)
            for a, b in _block_bounds(self.group[keep], relevant[keep], block_pairs)
        ] if len(keep) else []
        #: blocks by decreasing pair terms: the order threads take them in
        self.by_cost = sorted(range(len(self.blocks)), key=lambda i: -self.blocks[i].pairs)
        self.pairs = sum(block.pairs for block in self.blocks)

    def matches(self, labels, group) -> bool:
        return (len(labels) == self.num_docs and np.array_equal(self.group, group)
                and np.array_equal(self.labels, labels))

    def _block(self, starts, sizes, metric, topn, gradient, block_pairs) -> Block:
        size = int(sizes.max())
        cols = np.arange(size)
        valid = cols[None, :] < sizes[:, None]
        docs = np.where(valid, starts[:, None] + cols[None, :], 0)
        labels = np.where(valid, self.labels[docs], 0.0)
        gains = np.where(valid, np.power(2.0, labels) - 1.0, 0.0)
        relevant = valid & (labels > 0)
        stop = metric_form.stop_probabilities(gains, labels, valid) if metric == "nerr" else None
        norm = metric_form.ideal_norm(metric, gains, labels, valid, topn)
        if gradient == "type1":
            groups = [_pair_group(relevant, valid, block_pairs)]
        else:
            groups = [_pair_group(valid & (labels == level), valid & (labels < level), block_pairs)
                      for level in np.unique(labels[relevant])]
        return Block(docs, valid, labels, gains, relevant, stop, norm,
                     [g for g in groups if g is not None])
