"""The LETOR data model: documents grouped by query as contiguous arrays (:class:`LibSVMData`).

What :func:`~tfr_extensions.data.read_libsvm` returns and every consumer
(``to_dense``, ``ranking_dataset``, ``to_elwc``, the pipelines) takes: dense
features ``[N, F]``, labels and qids ``[N]``, and ``query_offsets`` ``[Q + 1]``
delimiting each query's rows. :func:`group_by_query` turns per-document qids into
those offsets.
"""
import dataclasses
import warnings
from typing import Optional, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True, eq=False)
class LibSVMData:
    """Documents grouped by query, as contiguous arrays.

    Attributes:
      features: float32 ``[N, F]``, dense (missing sparse entries are 0).
      labels: float32 ``[N]``, graded relevance (>= 0).
      qids: int64 ``[N]``, the query id of every document.
      query_offsets: int64 ``[Q + 1]``; the documents of query ``q`` are rows
        ``query_offsets[q]:query_offsets[q + 1]``.
      docids: optional str ``[N]`` (the ``docid = X`` of LETOR comments).

    >>> data = LibSVMData(np.zeros((3, 2), np.float32), np.array([1, 0, 2], np.float32),
    ...                   np.array([7, 7, 9]), np.array([0, 2, 3]))
    >>> data.num_queries, data.list_sizes.tolist(), data.query_ids.tolist()
    (2, [2, 1], [7, 9])
    """

    features: np.ndarray
    labels: np.ndarray
    qids: np.ndarray
    query_offsets: np.ndarray
    docids: Optional[np.ndarray] = None

    def __post_init__(self):
        features = self.features
        if features.ndim != 2:
            raise ValueError(f"`features` must be [N, F]; got shape {features.shape}.")
        num_docs = features.shape[0]
        for name in ("labels", "qids") + (("docids",) if self.docids is not None else ()):
            shape = getattr(self, name).shape
            if shape != (num_docs,):
                raise ValueError(f"`{name}` must have shape ({num_docs},); got {shape}.")
        offsets = self.query_offsets
        if (offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0
                or offsets[-1] != num_docs or (np.diff(offsets) < 0).any()):
            raise ValueError(
                f"`query_offsets` must rise from 0 to {num_docs}; got {offsets!r}.")

    @property
    def num_documents(self) -> int:
        return int(self.features.shape[0])

    @property
    def num_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def num_queries(self) -> int:
        return int(self.query_offsets.size - 1)

    @property
    def list_sizes(self) -> np.ndarray:
        """int64 ``[Q]``: documents per query."""
        return np.diff(self.query_offsets)

    @property
    def query_ids(self) -> np.ndarray:
        """int64 ``[Q]``: the qid of each query."""
        return np.asarray(self.qids)[self.query_offsets[:-1]]

    def subset(self, query_indices: Sequence[int]) -> "LibSVMData":
        """The queries at ``query_indices`` (positions, not qids), in that order."""
        query_indices = np.asarray(query_indices, np.int64).reshape(-1)
        if query_indices.size and (query_indices.min() < 0
                                   or query_indices.max() >= self.num_queries):
            raise ValueError(f"`query_indices` must lie in [0, {self.num_queries}); "
                             f"got {query_indices.min()}..{query_indices.max()}.")
        sizes = self.list_sizes[query_indices]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        rows = (np.repeat(self.query_offsets[query_indices] - offsets[:-1], sizes)
                + np.arange(offsets[-1]))
        return LibSVMData(
            np.asarray(self.features[rows]), np.asarray(self.labels[rows]),
            np.asarray(self.qids[rows]), offsets,
            None if self.docids is None else np.asarray(self.docids[rows]))


def group_by_query(qids: np.ndarray, where: str = "data"):
    """``(order, query_offsets)``: ``order`` is None when queries are contiguous.

    Otherwise ``order`` is the stable permutation that groups documents by the
    first appearance of their query, and a UserWarning says so.

    >>> order, offsets = group_by_query(np.array([7, 7, 9]))
    >>> order, offsets.tolist()
    (None, [0, 2, 3])
    """
    qids = np.asarray(qids)
    if qids.size == 0:
        return None, np.zeros(1, np.int64)
    starts = np.concatenate([[0], np.flatnonzero(qids[1:] != qids[:-1]) + 1])
    if np.unique(qids[starts]).size == starts.size:
        return None, np.append(starts, qids.size).astype(np.int64)
    _, first_seen, inverse = np.unique(qids, return_index=True, return_inverse=True)
    rank = np.empty_like(first_seen)
    rank[np.argsort(first_seen, kind="stable")] = np.arange(first_seen.size)
    order = np.argsort(rank[inverse], kind="stable")
    sizes = np.bincount(rank[inverse], minlength=first_seen.size)
    warnings.warn(
        f"{where}: documents of a query are not contiguous ({starts.size} runs for "
        f"{first_seen.size} queries); grouped by each query's first appearance.",
        UserWarning, stacklevel=3)
    return order, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
