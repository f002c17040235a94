"""Assembles parsed LibSVM chunks into the dense float32 ``[N, F]`` feature matrix of a file.

The reader's accumulator (one row per document, before any grouping or
padding; :mod:`tfr_extensions.data.dense` pads :class:`LibSVMData` into
``[Q, L, F]`` afterwards): each :class:`~tfr_extensions.data._parse.Chunk` is
written in place, the matrix widening when a chunk has a larger feature index.
"""
from typing import Optional

import numpy as np

from tfr_extensions.data._parse import Chunk


class FeatureMatrixBuilder:
    """Writes parsed chunks into one float32 array, grown in place as needed.

    The row capacity is estimated from the file size and the first block's
    bytes per line; ``ndarray.resize`` grows it (glibc's realloc moves large
    blocks with mremap, so growing does not double the memory).

    >>> from tfr_extensions.data._parse import parse_fast
    >>> text = b"2 qid:7 1:0.5 2:1\\n0 qid:7 3:3\\n"
    >>> builder = FeatureMatrixBuilder(file_bytes=len(text), num_features=None)
    >>> builder.add(parse_fast(text, b"0.0", None), block_bytes=len(text))
    >>> features, labels, qids = builder.finish()
    >>> features.tolist(), labels.tolist(), qids.tolist()
    ([[0.5, 1.0, 0.0], [0.0, 0.0, 3.0]], [2.0, 0.0], [7, 7])
    """

    def __init__(self, file_bytes: int, num_features: Optional[int]):
        self.file_bytes = file_bytes
        self.features = np.zeros((0, num_features or 0), np.float32)
        self.labels = np.zeros(0, np.float32)
        self.qids = np.zeros(0, np.int64)
        self.size = 0

    def _reserve(self, rows: int, block_bytes: int, block_docs: int):
        capacity = self.labels.size
        if rows <= capacity:
            return
        if capacity == 0:  # first block: estimate the whole file's documents
            per_doc = block_bytes / max(block_docs, 1)
            capacity = int(self.file_bytes / max(per_doc, 1.0) * 1.05) + 16
        capacity = max(rows, capacity, int(self.labels.size * 1.25))
        for name in ("labels", "qids"):
            getattr(self, name).resize(capacity, refcheck=False)
        self.features.resize((capacity, self.features.shape[1]), refcheck=False)

    def _widen(self, width: int):
        wider = np.zeros((self.features.shape[0], width), np.float32)
        wider[: self.size, : self.features.shape[1]] = self.features[: self.size]
        self.features = wider

    def add(self, chunk: Chunk, block_bytes: int):
        """Appends ``chunk``'s documents; ``block_bytes``, the size of the block it
        came from, sizes the first allocation."""
        count = chunk.labels.size
        start = self.size
        self._reserve(start + count, block_bytes, count)
        self.labels[start: start + count] = chunk.labels
        self.qids[start: start + count] = chunk.qids
        width = self.features.shape[1]
        if chunk.dense is not None:
            needed = chunk.dense.shape[1]
            if needed > width:
                self._widen(needed)
            self.features[start: start + count, :needed] = chunk.dense
        elif chunk.index.size:
            needed = int(chunk.index.max())
            if needed > width:
                self._widen(needed)
            self.features[chunk.doc + start, chunk.index - 1] = chunk.value
        self.size += count

    def finish(self):
        """(features, labels, qids) trimmed to the documents read."""
        for name in ("labels", "qids"):
            getattr(self, name).resize(self.size, refcheck=False)
        self.features.resize((self.size, self.features.shape[1]), refcheck=False)
        return self.features, self.labels, self.qids
