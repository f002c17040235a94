"""Padded NumPy ranking arrays and a Keras ``PyDataset``: the data path without TensorFlow.

For Keras 3 on JAX or PyTorch (or any NumPy consumer). The same layout as
:func:`tfr_extensions.data.ranking_dataset`'s batches: features ``[Q, L, F]``
(0 on padding), labels ``[Q, L]`` with ``-1`` (:data:`PADDING_LABEL`) on
padding, features z-scored per query over all its documents by default (the
papers' "z-score at a query level", :func:`query_zscore_rows`).

* :func:`to_dense`: every query at once, for data that fits in memory
  (``Q * L * F * 4`` bytes: MQ2008's folds are a few MiB, MSLR-WEB30K padded
  to its longest list is over 10 GiB; use :class:`RankingPyDataset` there).
* :class:`RankingPyDataset`: batches of queries built on demand from one
  feature table (``[N + 1, F]``, the last row all zeros for padding), each
  padded to its longest list or to ``list_size``: the memory of the data
  itself, whatever the list sizes.

    train = tfrx.data.read_libsvm("MQ2008/Fold1/train.txt")
    features, labels = tfrx.data.to_dense(train)           # [Q, L, 46], [Q, L]
    batches = tfrx.data.RankingPyDataset(train, batch_size=32, shuffle=True)
    model.fit(batches, epochs=10)                           # any Keras 3 backend

This module imports no TensorFlow.
"""
import math
from typing import Optional, Tuple

import numpy as np

from tfr_extensions.backend import keras
from tfr_extensions.data.libsvm_data import LibSVMData
from tfr_extensions.ops.conventions import PADDING_LABEL
from tfr_extensions.ops.validation import validate_bool, validate_choice, validate_int

#: the feature normalizations of the data path and the models
NORMALIZATIONS = ("query_zscore", "none")


def check_options(list_size: Optional[int], batch_size: int, seed: int,
                  normalization: str) -> Tuple[Optional[int], int, int]:
    """Validated ``(list_size, batch_size, seed)`` of :func:`ranking_dataset`
    (no TensorFlow work, so builders can check before a strategy exists).

    Raises:
      ValueError: naming the option and what it must be.
    """
    validate_choice(normalization, NORMALIZATIONS, "normalization")
    return (validate_int(list_size, "list_size", minimum=1, allow_none=True),
            validate_int(batch_size, "batch_size", minimum=1),
            validate_int(seed, "seed", minimum=0))


def select_queries(data: LibSVMData, drop_no_relevant: bool = False,
                   min_list_size: int = 1) -> np.ndarray:
    """int64 indices of the queries kept by the dropping options.

    >>> data = LibSVMData(np.zeros((5, 1), np.float32), np.array([0, 0, 1, 0, 2], np.float32),
    ...                   np.array([1, 1, 2, 2, 3]), np.array([0, 2, 4, 5]))
    >>> select_queries(data, drop_no_relevant=True).tolist()
    [1, 2]
    >>> select_queries(data, min_list_size=2).tolist()
    [0, 1]
    """
    min_list_size = validate_int(min_list_size, "min_list_size", minimum=1)
    offsets = np.asarray(data.query_offsets)
    keep = np.diff(offsets) >= min_list_size
    if drop_no_relevant:
        relevant = np.asarray(data.labels) > 0
        # Count of relevant documents per query from the cumulative sum at the offsets.
        cumulative = np.concatenate([[0], np.cumsum(relevant)])
        keep &= cumulative[offsets[1:]] > cumulative[offsets[:-1]]
    return np.flatnonzero(keep).astype(np.int64)


def check_finite(data: LibSVMData, block_rows: int = 1 << 18) -> None:
    """Raises ``ValueError`` at the first document whose features or label are
    NaN or infinite (in blocks of rows: no full-size temporary).

    >>> bad = LibSVMData(np.array([[1.0], [np.inf]], np.float32), np.zeros(2, np.float32),
    ...                  np.array([4, 4]), np.array([0, 2]))
    >>> check_finite(bad)
    Traceback (most recent call last):
    ...
    ValueError: The features of document 1 (query id 4) are not finite: [inf]; fix or drop it before batching.
    """
    for what, values in (("label", np.asarray(data.labels)[:, None]), ("features", data.features)):
        for first in range(0, data.num_documents, block_rows):
            finite = np.isfinite(values[first:first + block_rows]).all(axis=1)
            if not finite.all():
                row = first + int(np.argmin(finite))
                shown = values[row] if what == "features" else values[row, 0]
                raise ValueError(
                    f"The {what} of document {row} (query id {data.qids[row]}) "
                    f"{'are' if what == 'features' else 'is'} not finite: {shown}; fix or drop "
                    "it before batching.")


def feature_table(data: LibSVMData, normalization: str = "query_zscore",
                  block_rows: int = 1 << 18) -> np.ndarray:
    """float32 ``[N + 1, F]``: each row's features (z-scored per query, or raw),
    then one all-zero row for padded positions.

    >>> data = LibSVMData(np.array([[1., 5.], [3., 5.], [9., 9.]], np.float32),
    ...                   np.zeros(3, np.float32), np.array([1, 1, 2]), np.array([0, 2, 3]))
    >>> feature_table(data).tolist()
    [[-1.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
    """
    validate_choice(normalization, NORMALIZATIONS, "normalization")
    features = data.features
    table = np.empty((data.num_documents + 1, data.num_features), np.float32)
    table[-1] = 0.0
    if normalization == "none":
        table[:-1] = features
        return table
    offsets = np.asarray(data.query_offsets, np.int64)
    first = 0
    while first < data.num_queries:  # blocks of whole queries, about block_rows rows
        last = int(np.searchsorted(offsets, offsets[first] + block_rows, side="right")) - 1
        last = min(max(last, first + 1), data.num_queries)
        rows = slice(offsets[first], offsets[last])
        table[rows] = query_zscore_rows(features[rows], offsets[first:last + 1] - offsets[first])
        first = last
    return table


def query_zscore_rows(features: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """:func:`query_zscore` of contiguous lists in NumPy: ``[n, F]`` rows grouped by
    ``offsets`` (``[q + 1]``, from 0 to n) -> float32 ``[n, F]``.

    The same formula (population standard deviation; a feature constant within
    its list, decided exactly from its minimum and maximum, becomes 0),
    computed in float64 with one ``reduceat`` per statistic.

    >>> query_zscore_rows(np.array([[1., 5.], [3., 5.], [9., 9.]]), np.array([0, 2, 3])).tolist()
    [[-1.0, 0.0], [1.0, 0.0], [0.0, 0.0]]
    """
    features = np.asarray(features, np.float64)
    sizes = np.diff(offsets)
    starts = offsets[:-1][sizes > 0]  # reduceat needs non-empty segments
    sizes = sizes[sizes > 0]
    if features.shape[0] == 0:
        return features.astype(np.float32)
    mean = np.add.reduceat(features, starts, axis=0) / sizes[:, None]
    centred = features - np.repeat(mean, sizes, axis=0)
    std = np.sqrt(np.add.reduceat(np.square(centred), starts, axis=0) / sizes[:, None])
    varies = ((np.maximum.reduceat(features, starts, axis=0)
               > np.minimum.reduceat(features, starts, axis=0)) & (std > 0))
    scale = np.repeat(np.where(varies, std, 1.0), sizes, axis=0)
    return np.where(np.repeat(varies, sizes, axis=0), centred / scale, 0.0).astype(np.float32)


def bucket_width(width: int) -> int:
    """The padded width of a batch whose longest list has ``width`` documents, with
    ``bucket_list_sizes``: the next of 8, 12, 16, 24, 32, 48, ... (two sizes per
    doubling, each a multiple of 4), so that a compiled training step (JAX, XLA,
    ``torch.compile``) sees a few shapes, at most 1.5x the longest list.

    >>> [bucket_width(w) for w in (1, 9, 13, 17, 100, 1251)]
    [8, 12, 16, 24, 128, 1536]
    """
    size = 8
    while size < width:
        size = size * 3 // 2 if size & (size - 1) == 0 else size * 4 // 3
    return size


def _rows(data: LibSVMData, queries: np.ndarray, list_size: Optional[int],
          rng: Optional[np.random.Generator], bucket: bool = False) -> np.ndarray:
    """Row indices ``[B, L]`` of ``queries`` into the feature table (padding -> the
    last, all-zero row); lists longer than ``list_size`` keep a
    random subset of ``list_size`` documents, in file order (``rng``); with ``bucket``
    (and no ``list_size``) the width is :func:`bucket_width` of the longest list."""
    offsets = np.asarray(data.query_offsets, np.int64)
    starts, lengths = offsets[queries], offsets[queries + 1] - offsets[queries]
    width = int(lengths.max(initial=0)) if list_size is None else list_size
    if bucket and list_size is None:
        width = bucket_width(width)
    column = np.arange(width)[None, :]
    valid = column < lengths[:, None]
    offset = np.broadcast_to(column, valid.shape).copy()
    for i in np.flatnonzero(lengths > width):  # truncation: a random subset per list
        offset[i] = np.sort(rng.choice(lengths[i], size=width, replace=False))
    return np.where(valid, starts[:, None] + offset, data.num_documents)


def to_dense(data: LibSVMData, list_size: Optional[int] = None, *,
             normalization: str = "query_zscore", drop_no_relevant: bool = False,
             seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Every query of ``data`` as padded NumPy arrays.

    Args:
      data: a :class:`LibSVMData` (``read_libsvm``, ``synthetic``).
      list_size: None pads to the longest list; an int pads or truncates every
        list to exactly this many documents (a longer list keeps a random subset,
        seeded by ``seed``, in file order).
      normalization: ``"query_zscore"`` (over all documents of each query, also
        when ``list_size`` keeps only some) or ``"none"``.
      drop_no_relevant: drop the queries without a document of label > 0
        (training only).
      seed: the seed of the subsets of truncated lists.

    Returns:
      ``(features, labels)``: float32 ``[Q, L, F]`` (0 on padding) and float32
      ``[Q, L]`` (-1 on padding), queries in file order.

    Raises:
      ValueError: a bad option, no query left, or a NaN or infinite feature or
        label (naming the first such document).

    >>> data = LibSVMData(np.array([[1.], [3.], [5.]], np.float32),
    ...                   np.array([0., 2., 1.], np.float32), np.array([7, 7, 8]),
    ...                   np.array([0, 2, 3]))
    >>> features, labels = to_dense(data)
    >>> features[..., 0].tolist(), labels.tolist()
    ([[-1.0, 1.0], [0.0, 0.0]], [[0.0, 2.0], [1.0, -1.0]])
    """
    list_size, _, seed = check_options(list_size, 1, seed, normalization)
    queries = _served_queries(data, drop_no_relevant)
    check_finite(data)
    table = feature_table(data, normalization)
    labels = np.append(np.asarray(data.labels, np.float32), np.float32(PADDING_LABEL))
    rows = _rows(data, queries, list_size, np.random.default_rng(seed))
    return table[rows], labels[rows]


def _served_queries(data: LibSVMData, drop_no_relevant: bool) -> np.ndarray:
    queries = select_queries(data, validate_bool(drop_no_relevant, "drop_no_relevant"))
    if queries.size == 0:
        raise ValueError(f"No query to serve: {data.num_queries} queries, none left after "
                         f"`drop_no_relevant={drop_no_relevant}`.")
    return queries


#: Keras 3's ``PyDataset``; Keras 2's ``Sequence`` (the same protocol) on Keras 2 stacks
_BATCHES_BASE = getattr(keras.utils, "PyDataset", None) or keras.utils.Sequence


class RankingPyDataset(_BATCHES_BASE):
    """Batches of queries as a ``keras.utils.PyDataset``: ``(features [B, L, F],
    labels [B, L])`` NumPy arrays, for ``model.fit`` on any Keras 3 backend.

    Each batch is padded to its longest list (or to ``list_size``) and gathered
    from one z-scored feature table, so memory is that of the data whatever the
    list sizes (MSLR-WEB30K's lists of 1,000+ documents included). With
    ``shuffle``, every epoch serves the queries in a new order drawn from
    ``seed`` (reproducible run to run): batch ``i`` of epoch ``e`` is a function
    of ``(seed, e, i)`` alone (:meth:`batch`), so workers may build batches in any
    order and a resumed run can start at any epoch (:attr:`epoch`).

    Args:
      data, list_size, normalization, drop_no_relevant, seed: as :func:`to_dense`.
      batch_size: queries per batch (the last batch may be smaller).
      shuffle: a new query order every epoch (training); False keeps file order.
      with_mask: inputs ``{"features": [B, L, F], "mask": bool [B, L]}`` instead of
        the features. The scorers of :mod:`tfr_extensions.models` take either: the
        features alone mean every document is valid (the labels' -1 still keeps
        padding out of the loss), the mask also keeps padding out of the scorers'
        per-query z-score and batch-normalization moments.
      bucket_list_sizes: pad each batch to :func:`bucket_width` of its longest
        list rather than to that list, so that a compiled step sees few shapes.
      **kwargs: ``PyDataset``'s (``workers``, ``use_multiprocessing``,
        ``max_queue_size``).

    >>> from tfr_extensions.data.synthetic import synthetic
    >>> batches = RankingPyDataset(synthetic(num_queries=10, num_features=3), batch_size=4)
    >>> len(batches), batches[0][0].shape[0], batches[2][1].shape[0]
    (3, 4, 2)
    """

    def __init__(self, data: LibSVMData, batch_size: int = 32, list_size: Optional[int] = None,
                 *, shuffle: bool = False, normalization: str = "query_zscore",
                 drop_no_relevant: bool = False, seed: int = 0, with_mask: bool = False,
                 bucket_list_sizes: bool = False, **kwargs):
        super().__init__(**kwargs)
        self._list_size, self._batch_size, self._seed = check_options(
            list_size, batch_size, seed, normalization)
        self._shuffle = validate_bool(shuffle, "shuffle")
        self._with_mask = validate_bool(with_mask, "with_mask")
        self._bucket = validate_bool(bucket_list_sizes, "bucket_list_sizes")
        self._data = data
        self._queries = _served_queries(data, drop_no_relevant)
        check_finite(data)
        self._table = feature_table(data, normalization)
        self._labels = np.append(np.asarray(data.labels, np.float32), np.float32(PADDING_LABEL))
        self._orders = {}  # epoch -> its query order (the last two epochs)
        self.epoch = 0

    @property
    def num_batches(self) -> int:
        return math.ceil(self._queries.size / self._batch_size)

    @property
    def num_queries(self) -> int:
        """The queries served in an epoch."""
        return int(self._queries.size)

    @property
    def batch_size(self) -> int:
        """Queries per batch (the last batch of an epoch may have fewer)."""
        return self._batch_size

    def __len__(self) -> int:
        return self.num_batches

    def __getitem__(self, index: int):
        return self.batch(self.epoch, index)

    def batch(self, epoch: int, index: int):
        """Batch ``index`` of epoch ``epoch`` (0-based): ``(x, labels)``."""
        if not 0 <= index < self.num_batches:
            raise IndexError(f"batch {index} of {self.num_batches}")
        order = self._epoch_order(epoch)
        queries = order[index * self._batch_size:(index + 1) * self._batch_size]
        rng = np.random.default_rng((self._seed, epoch, index))
        rows = _rows(self._data, queries, self._list_size, rng, self._bucket)
        features, labels = self._table[rows], self._labels[rows]
        if self._with_mask:
            return {"features": features, "mask": rows < self._data.num_documents}, labels
        return features, labels

    def _epoch_order(self, epoch: int) -> np.ndarray:
        """Epoch ``epoch``'s query order: drawn from ``(seed, epoch)`` with ``shuffle``."""
        if not self._shuffle:
            return self._queries
        if epoch not in self._orders:
            if len(self._orders) > 1:
                self._orders.pop(min(self._orders))
            self._orders[epoch] = np.random.default_rng((self._seed, epoch)).permutation(
                self._queries)
        return self._orders[epoch]

    def on_epoch_end(self) -> None:  # Keras 3's PyDataset and Keras 2's Sequence both call it
        self.epoch += 1
