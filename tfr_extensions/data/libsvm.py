"""LETOR / LibSVM ranking files: a fast reader with a memory-mappable cache.

One document per line::

    <label> qid:<query id> <index>:<value> <index>:<value> ... [# comment]

Policy (what :func:`read_libsvm` accepts):

* the label is a finite number >= 0 (graded relevance); ``qid:`` follows it and
  holds an integer (returned as int64);
* feature indices are 1-based positive integers, in any order, each at most once
  per line; missing indices (sparse lines) are 0 in the dense ``features``;
* values are finite decimal numbers. The literal ``NULL`` that LETOR 3.0 files
  contain for undefined features is read as ``null_value`` (default 0.0, the
  value a missing sparse entry gets);
* ``#`` starts a comment up to the end of the line (``docid = X`` in it is kept
  when ``docids=True``); blank and comment-only lines are skipped; tabs, CRLF
  line ends and repeated spaces are accepted.

Anything else raises ``ValueError("<path>:<line>: <reason>: '<token>'")``.

Documents of a query are usually contiguous. When they are not, they are
grouped by the query's first appearance (stable within a query) with a warning.
"""
import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import warnings
from typing import Optional, Sequence, Union

import numpy as np

from tfr_extensions.data import _parse

PathLike = Union[str, os.PathLike]

_CHUNK_BYTES = 8 << 20  # blocks of this many bytes: ~40 MiB of parser memory, same speed as larger
_CACHE_FORMAT = 1  # bump when the parser's output or the cache layout changes
_ARRAYS = ("features", "labels", "qids", "query_offsets")


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


# --------------------------------------------------------------------------- parsing


class _DenseBuilder:
    """Writes parsed chunks into one float32 array, grown in place as needed.

    The row capacity is estimated from the file size and the first block's
    bytes per line; ``ndarray.resize`` grows it (glibc's realloc moves large
    blocks with mremap, so growing does not double the memory).
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

    def add(self, chunk: _parse.Chunk, block_bytes: int):
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


def _blocks(path: PathLike, chunk_bytes: int):
    """Blocks of whole lines, each ending in a newline."""
    rest = b""
    with open(path, "rb") as handle:
        while True:
            block = handle.read(chunk_bytes)
            if not block:
                break
            block = rest + block
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                rest = block
                continue
            text, rest = block[:cut], block[cut:]
            yield text
    if rest:
        yield rest + b"\n"


def _parse_file(path, num_features, null_value, docids, chunk_bytes) -> LibSVMData:
    builder = _DenseBuilder(os.path.getsize(path), num_features)
    docid_list = [] if docids else None
    line, clean_lines = 1, False
    for text in _blocks(path, chunk_bytes):
        chunks, num_lines, clean_lines = _parse.parse_block(
            text, line, str(path), null_value, num_features, clean_lines)
        for chunk in chunks:
            builder.add(chunk, len(text))
        line += num_lines
        if docids:
            docid_list.extend(_parse.docids_of_block(text))
    features, labels, qids = builder.finish()
    del builder
    docid_array = np.asarray(docid_list, dtype=str) if docids else None
    if docids and docid_array.size == 0:
        docid_array = np.zeros(0, "<U1")
    order, offsets = group_by_query(qids, where=str(path))
    if order is not None:
        features, labels, qids = features[order], labels[order], qids[order]
        docid_array = None if docid_array is None else docid_array[order]
    return LibSVMData(features, labels, qids, offsets, docid_array)


# --------------------------------------------------------------------------- cache


def default_cache_dir() -> pathlib.Path:
    """``$TFRX_CACHE_DIR``, else ``~/.cache/tfr_extensions/libsvm``."""
    env = os.environ.get("TFRX_CACHE_DIR")
    return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "tfr_extensions" / "libsvm"


def _cache_entry(cache_dir: pathlib.Path, path: pathlib.Path, options: dict) -> pathlib.Path:
    stat = path.stat()
    path_key = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    content_key = hashlib.sha256(json.dumps(
        [str(path), stat.st_size, stat.st_mtime_ns, _CACHE_FORMAT, options],
        sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir / f"{path.name}.{path_key}.{content_key}"


def _load_cache(entry: pathlib.Path, mmap: bool, docids: bool) -> Optional[LibSVMData]:
    names = _ARRAYS + (("docids",) if docids else ())
    if not all((entry / f"{name}.npy").is_file() for name in names):
        return None
    arrays = {name: np.load(entry / f"{name}.npy", mmap_mode="r" if mmap and name == "features"
                            else None, allow_pickle=False) for name in names}
    return LibSVMData(**arrays)


def _save_cache(entry: pathlib.Path, data: LibSVMData) -> None:
    """Writes a fresh entry atomically (temp dir + rename) and drops stale ones."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    stem = entry.name.rsplit(".", 1)[0]
    for stale in entry.parent.glob(f"{stem}.*"):
        if stale != entry and not stale.name.endswith(".tmp"):
            shutil.rmtree(stale, ignore_errors=True)
    temp = entry.parent / f"{entry.name}.{os.getpid()}.tmp"
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir()
    for name in _ARRAYS + (("docids",) if data.docids is not None else ()):
        np.save(temp / f"{name}.npy", np.asarray(getattr(data, name)), allow_pickle=False)
    try:
        os.replace(temp, entry)
    except OSError:  # another process wrote the same entry first
        shutil.rmtree(temp, ignore_errors=True)


def read_libsvm(
    path: PathLike,
    num_features: Optional[int] = None,
    cache: Union[bool, PathLike] = True,
    *,
    null_value: float = 0.0,
    docids: bool = False,
    mmap: bool = True,
    chunk_bytes: int = _CHUNK_BYTES,
) -> LibSVMData:
    """Reads a LETOR / LibSVM ranking file (see the module docstring's policy).

    The file is parsed in blocks of ``chunk_bytes`` straight into one float32
    array, so memory stays near the size of ``features``. A binary cache keyed
    on the file's absolute path, size and modification time (and the options
    below) makes the next read of an unchanged file a memory map.

    Args:
      path: the file.
      num_features: F; None means the largest index in the file. An index above
        a given ``num_features`` is an error.
      cache: True for :func:`default_cache_dir`, a directory, or False for none.
      null_value: the value of a ``NULL`` feature (LETOR 3.0); finite.
      docids: also return the ``docid = X`` of each line's comment.
      mmap: cache hits return ``features`` as a read-only ``np.memmap``.
      chunk_bytes: block size of the parser.

    Returns:
      A :class:`LibSVMData`; documents grouped by query (file order otherwise).

    Raises:
      ValueError: ``"<path>:<line>: <reason>: '<token>'"`` for a malformed line.
    """
    path = pathlib.Path(path).resolve()
    if num_features is not None and (isinstance(num_features, bool) or not isinstance(
            num_features, (int, np.integer)) or num_features < 1):
        raise ValueError(f"`num_features` must be None or a positive int; got {num_features!r}.")
    if not np.isfinite(null_value):
        raise ValueError(f"`null_value` must be finite; got {null_value!r}.")
    if chunk_bytes < 1:
        raise ValueError(f"`chunk_bytes` must be positive; got {chunk_bytes!r}.")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    num_features = None if num_features is None else int(num_features)
    entry = None
    if cache is not False and cache is not None:
        cache_dir = default_cache_dir() if cache is True else pathlib.Path(cache)
        options = {"num_features": num_features, "null_value": float(null_value),
                   "docids": bool(docids)}
        entry = _cache_entry(cache_dir, path, options)
        cached = _load_cache(entry, mmap, docids)
        if cached is not None:
            return cached
    data = _parse_file(path, num_features, float(null_value), docids, chunk_bytes)
    if entry is not None:
        try:
            _save_cache(entry, data)
        except OSError as error:  # a read-only or full cache never fails a read
            warnings.warn(f"{path}: could not write the cache entry {entry}: {error}",
                          UserWarning, stacklevel=2)
    return data
