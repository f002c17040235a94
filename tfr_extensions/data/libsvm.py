"""Reading and writing LETOR / LibSVM ranking files: :func:`read_libsvm`, :func:`write_libsvm`.

One document per line, in one of two layouts::

    <label> qid:<query id> <index>:<value> <index>:<value> ... [# comment]   (LETOR)
    <label> <index>:<value> <index>:<value> ... [# comment]                  (+ a group file)

The second is LightGBM's and XGBoost's: a *group file* holds the number of
documents of each query, one count per line, in file order (``<file>.query``
for LightGBM, ``<file>.group`` for XGBoost; LightGBM's ``examples/lambdarank``
ships ``rank.train`` + ``rank.train.query``). :func:`read_libsvm` uses a group
file found beside the data file (``<path>.query``, else ``<path>.group``) or
given as ``group_path``, and then numbers the queries ``0..Q-1`` in file order.

Policy (what :func:`read_libsvm` accepts):

* the label is a number >= 0 (graded relevance) that is finite in float32;
  with ``qid:``, it is followed by ``qid:<integer>`` (returned as int64);
* feature indices are 1-based positive integers, in any order, each at most once
  per line, at most ``max_features`` (default 100,000) unless ``num_features``
  is given; missing indices (sparse lines) are 0 in the dense ``features``;
* values are decimal numbers that are finite in float32 (``nan``, ``inf`` and
  ``1e39`` are errors, not inf). The literal ``NULL`` that LETOR 3.0 files
  contain for undefined features is read as ``null_value`` (default 0.0, the
  value a missing sparse entry gets);
* ``#`` starts a comment up to the end of the line (``docid = X`` in it is kept
  when ``docids=True``); blank and comment-only lines are skipped; tabs, CRLF
  line ends, repeated spaces and a UTF-8 byte order mark at the start of the
  file (Windows tools write both) are accepted; a NUL byte is an error;
* with a group file, no line may have a ``qid:`` token (an error names both
  files; ``group_path=False`` ignores the group file), and the counts must be
  positive integers adding up to the number of documents;
* a file must hold at least one document.

Anything else raises ``ValueError("<path>:<line>: <reason>: '<token>'")``.

Documents of a query are usually contiguous. When they are not (``qid:``
files), they are grouped by the query's first appearance (stable within a
query) with a warning.

The pieces :func:`read_libsvm` puts together, one module each:
:mod:`~tfr_extensions.data._parse` (blocks of lines to chunks),
:mod:`~tfr_extensions.data.feature_matrix` (chunks to the dense ``[N, F]``
matrix), :mod:`~tfr_extensions.data.libsvm_data` (the :class:`LibSVMData` it
returns), :mod:`~tfr_extensions.data.checksum` and
:mod:`~tfr_extensions.data.cache` (the memory-mappable binary cache). This
module also re-exports ``LibSVMData``, ``group_by_query`` and
``default_cache_dir``, importable from here as before.
"""
import os
import pathlib
import warnings
from typing import Optional, Tuple, Union

import numpy as np

from tfr_extensions.data import _parse
from tfr_extensions.data.cache import (default_cache_dir, entry_path, load_entry, read_options,
                                       save_entry)
from tfr_extensions.data.checksum import Checksum, file_checksum
from tfr_extensions.data.feature_matrix import FeatureMatrixBuilder
from tfr_extensions.data.libsvm_data import LibSVMData, group_by_query
from tfr_extensions.ops.validation import validate_int

PathLike = Union[str, os.PathLike]

# Blocks of this many bytes: the parser's memory grows with the block, its speed
# stops growing well below this size (figures: docs/notes/libsvm_reader.md).
_CHUNK_BYTES = 8 << 20
#: Group files :func:`read_libsvm` looks for beside ``<path>``: LightGBM's, then XGBoost's.
GROUP_SUFFIXES = (".query", ".group")
#: Default ``max_features`` of :func:`read_libsvm` (see its docstring).
DEFAULT_MAX_FEATURES = 100_000


def _blocks(path: PathLike, chunk_bytes: int, checksum: Optional[Checksum] = None):
    """Blocks of whole lines, each ending in a newline, without a leading UTF-8 BOM.

    ``checksum`` sees every raw byte read, so a new cache entry is keyed on
    exactly the bytes parsed, even if the file changed since the lookup (a small
    share of the parse time, spent only when an entry will be written; figures in
    ``docs/notes/libsvm_reader.md``).
    """
    rest, first = b"", True
    with open(path, "rb") as handle:
        while True:
            block = handle.read(chunk_bytes)
            if not block:
                break
            if checksum is not None:
                checksum.update(block)
            block = rest + block
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                rest = block
                continue
            text, rest = block[:cut], block[cut:]
            if first:
                text, first = text.removeprefix(_parse.BOM), False
            yield text
    if rest:
        yield (rest.removeprefix(_parse.BOM) if first else rest) + b"\n"


def _parse_file(path: pathlib.Path, num_features, max_features, null_value, docids,
                chunk_bytes, group: Optional[pathlib.Path], group_sizes: Optional[np.ndarray],
                hint: str, checksum: Optional[Checksum]) -> LibSVMData:
    builder = FeatureMatrixBuilder(os.path.getsize(path), num_features)
    docid_list = [] if docids else None
    line, clean_lines, any_text = 1, False, False
    for text in _blocks(path, chunk_bytes, checksum):
        any_text = True
        chunks, num_lines, clean_lines = _parse.parse_block(
            text, line, str(path), null_value, num_features, clean_lines,
            qids=group is None, max_features=max_features, hint=hint)
        for chunk in chunks:
            builder.add(chunk, len(text))
        line += num_lines
        if docids:
            docid_list.extend(_parse.docids_of_block(text))
    features, labels, qids = builder.finish()
    del builder
    if not labels.size:
        raise ValueError(f"{path}: the file has no documents (" + (
            "only blank lines and comments)" if any_text else "it is empty)"))
    docid_array = np.asarray(docid_list, dtype=str) if docids else None
    if group is not None:
        total = sum(group_sizes.tolist())  # exact: Python ints
        if total != labels.size:
            raise ValueError(f"{group}: the query sizes add up to {total} documents, but "
                             f"{path} has {labels.size} documents")
        qids = np.repeat(np.arange(group_sizes.size, dtype=np.int64), group_sizes)
        offsets = np.concatenate([[0], np.cumsum(group_sizes)]).astype(np.int64)
        return LibSVMData(features, labels, qids, offsets, docid_array)
    order, offsets = group_by_query(qids, where=str(path))
    if order is not None:
        features, labels, qids = features[order], labels[order], qids[order]
        docid_array = None if docid_array is None else docid_array[order]
    return LibSVMData(features, labels, qids, offsets, docid_array)


def _group_file(path: pathlib.Path, group_path) -> Tuple[Optional[pathlib.Path], str]:
    """``(group file or None, hint)``: the hint ends the parser's ``qid:`` errors."""
    if group_path is False:
        return None, ""
    if group_path is None:
        candidates = [path.with_name(path.name + suffix) for suffix in GROUP_SUFFIXES]
        found = [candidate for candidate in candidates if candidate.is_file()]
        if not found:
            return None, f" (or a group file: found neither {candidates[0]} nor {candidates[1]})"
        group = found[0]
    else:
        if isinstance(group_path, bool) or not isinstance(group_path, (str, os.PathLike)):
            raise ValueError(f"`group_path` must be None, False or a path; got {group_path!r}.")
        group = pathlib.Path(group_path).resolve()
        if group.is_dir():
            raise IsADirectoryError(f"{group}: is a directory, not a group file")
        if not group.is_file():
            raise FileNotFoundError(f"{group}: no such group file")
    return group, (f" ({group} gives the queries; pass group_path=False to read the "
                   f"qid: tokens instead)")



def read_libsvm(
    path: PathLike,
    num_features: Optional[int] = None,
    cache: Union[bool, PathLike] = True,
    *,
    group_path: Union[None, bool, PathLike] = None,
    null_value: float = 0.0,
    docids: bool = False,
    mmap: bool = True,
    max_features: int = DEFAULT_MAX_FEATURES,
    chunk_bytes: int = _CHUNK_BYTES,
) -> LibSVMData:
    """Reads a LETOR / LibSVM ranking file (see the module docstring's policy).

    The file is parsed in blocks of ``chunk_bytes`` straight into one float32
    array, so memory stays near the size of ``features``. A binary cache keyed
    on the file's content (its size and CRC-32s, computed on every call, far
    faster than parsing: ``benchmarks/libsvm_read.py``), its absolute path, the group
    file's path and content, and the options below makes the next read of an
    unchanged file a memory map. Rewrites that restore the old size and mtime
    (``cp -p``, ``rsync -t``, ``tar``) are noticed.

    Args:
      path: the file.
      num_features: F; None means the largest index in the file. An index above
        a given ``num_features`` is an error.
      cache: True for :func:`default_cache_dir`, a directory, or False for none.
      group_path: the group file of a file without ``qid:`` tokens (one count of
        documents per query and line, LightGBM / XGBoost style). None looks for
        ``<path>.query``, then ``<path>.group``; False never uses one. With a
        group file, queries get the ids ``0..Q-1`` in file order, and a
        ``qid:`` token in the data is an error naming both files.
      null_value: the value of a ``NULL`` feature (LETOR 3.0); finite in float32.
      docids: also return the ``docid = X`` of each line's comment.
      mmap: cache hits return ``features`` as a read-only ``np.memmap``.
      max_features: when ``num_features`` is None, a feature index above this is
        an error (naming line and index) instead of a dense ``[N, index]``
        array: ``1 qid:1 100000000:1`` alone would allocate 400 MB. The
        default, 100,000, is over 100x the widest LETOR sets (MSLR-WEB 136,
        Istella 220, Yahoo LTR 700, LightGBM's example 300) and costs 400 KB per
        document at most. It is a count of columns rather than a byte budget
        because a typo'd index is wrong whatever the file's length, and a count
        gives the same verdict to a line in a small and in a large file (the
        parser checks it per block, before anything is allocated).
      chunk_bytes: block size of the parser.

    Returns:
      A :class:`LibSVMData`; documents grouped by query (file order otherwise).

    Raises:
      ValueError: ``"<path>:<line>: <reason>: '<token>'"`` for a malformed line,
        ``"<path>: the file has no documents (...)"`` for an empty file,
        ``"<group file>:<line>: ..."`` for a bad count and ``"<group file>: the
        query sizes add up to X documents, but <path> has Y documents"``.
      FileNotFoundError, IsADirectoryError: for ``path`` or ``group_path``.

    >>> import pathlib, shutil, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "rank.train").write_text("2 1:0.5 3:1\\n0 2:4\\n1 1:1 2:2 3:3\\n")
    >>> _ = (folder / "rank.train.query").write_text("2\\n1\\n")  # LightGBM's group file
    >>> data = read_libsvm(folder / "rank.train", cache=False)
    >>> data.features.tolist()
    [[0.5, 0.0, 1.0], [0.0, 4.0, 0.0], [1.0, 2.0, 3.0]]
    >>> data.labels.tolist(), data.qids.tolist(), data.query_offsets.tolist()
    ([2.0, 0.0, 1.0], [0, 0, 1], [0, 2, 3])
    >>> shutil.rmtree(folder)
    """
    path = pathlib.Path(path).resolve()
    validate_int(num_features, "num_features", minimum=1, allow_none=True)
    validate_int(max_features, "max_features", minimum=1, maximum=_parse.MAX_INDEX)
    if not abs(null_value) < _parse.F32_LIMIT:
        raise ValueError(f"`null_value` must be finite in float32; got {null_value!r}.")
    if chunk_bytes < 1:
        raise ValueError(f"`chunk_bytes` must be positive; got {chunk_bytes!r}.")
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a directory, not a LibSVM file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    num_features = None if num_features is None else int(num_features)
    group, hint = _group_file(path, group_path)
    group_bytes = None if group is None else group.read_bytes()
    entry = None
    if cache is not False and cache is not None:
        cache_dir = default_cache_dir() if cache is True else pathlib.Path(cache)
        options = read_options(num_features, null_value, docids, group, group_bytes)
        entry = entry_path(cache_dir, path, file_checksum(path), options)
        cached = load_entry(entry, mmap, docids)
        if cached is not None:
            return cached
    group_sizes = None if group is None else _parse.parse_group_sizes(group_bytes, str(group))
    checksum = None if entry is None else Checksum()
    data = _parse_file(path, num_features, int(max_features), float(null_value), docids,
                       chunk_bytes, group, group_sizes, hint, checksum)
    if entry is not None:
        entry = entry_path(cache_dir, path, checksum.key(), options)  # the bytes parsed
        try:
            save_entry(entry, data)
        except OSError as error:  # a read-only or full cache never fails a read
            warnings.warn(f"{path}: could not write the cache entry {entry}: {error}",
                          UserWarning, stacklevel=2)
    return data


# --------------------------------------------------------------------------- writing


def write_libsvm(data: LibSVMData, path: PathLike, *, sparse: bool = False,
                 group_file: Optional[PathLike] = None,
                 rows_per_write: int = 4096) -> Optional[pathlib.Path]:
    """Writes ``data`` as a LETOR file that :func:`read_libsvm` reads back exactly.

    Lines are ``<label> qid:<id> 1:<v> ... [#docid = X]`` (float32 values with 9
    significant digits), or, with ``group_file``, ``<label> 1:<v> ...`` plus a
    group file holding each query's number of documents, one per line
    (LightGBM's / XGBoost's layout; the qids themselves are not stored, a read
    numbers the queries ``0..Q-1``).

    Args:
      data: the documents (written in their order, one query per
        ``query_offsets`` range).
      path: the output file (overwritten).
      sparse: omit zero features (LibSVM's sparse form).
      group_file: None for ``qid:`` lines. A suffix (a str starting with ``.``
        and without a path separator, e.g. ``".query"`` for LightGBM or
        ``".group"`` for XGBoost) writes ``<path><suffix>``, which
        :func:`read_libsvm` finds by itself for ``.query`` and ``.group``; any
        other value is the group file's own path.
      rows_per_write: lines formatted per write call.

    Returns:
      The group file's path, or None without one.

    Raises:
      ValueError: with ``group_file``, when a query has no documents (a group
        file cannot express an empty query).

    >>> import pathlib, shutil, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> data = LibSVMData(np.array([[1, 0], [0, 2.5], [3, 0]], np.float32),
    ...                   np.array([1, 0, 2], np.float32), np.array([7, 7, 9]), np.array([0, 2, 3]))
    >>> write_libsvm(data, folder / "rank.train", group_file=".query").name
    'rank.train.query'
    >>> (folder / "rank.train").read_text().splitlines()
    ['1 1:1 2:0', '0 1:0 2:2.5', '2 1:3 2:0']
    >>> (folder / "rank.train.query").read_text().split()
    ['2', '1']
    >>> write_libsvm(data, folder / "letor.txt", sparse=True)
    >>> (folder / "letor.txt").read_text().splitlines()
    ['1 qid:7 1:1', '0 qid:7 2:2.5', '2 qid:9 1:3']
    >>> shutil.rmtree(folder)
    """
    features = np.asarray(data.features, np.float32)
    num_features = features.shape[1]
    group = None
    if group_file is not None:
        is_suffix = (isinstance(group_file, str) and group_file.startswith(".")
                     and os.sep not in group_file and "/" not in group_file
                     and group_file not in (".", ".."))
        group = (pathlib.Path(os.fspath(path) + group_file) if is_suffix
                 else pathlib.Path(group_file))
        sizes = data.list_sizes
        if (sizes == 0).any():
            raise ValueError(f"query {int(np.argmax(sizes == 0))} has no documents: a group "
                             f"file cannot express an empty query.")
    prefix = "%.9g" if group is not None else "%.9g qid:%d"
    row_format = prefix + "".join(f" {j}:%.9g" for j in range(1, num_features + 1))
    docids = data.docids
    with open(path, "w", encoding="utf-8") as handle:
        for start in range(0, features.shape[0], rows_per_write):
            lines = []
            for row in range(start, min(start + rows_per_write, features.shape[0])):
                head = (float(data.labels[row]),) if group is not None else (
                    float(data.labels[row]), int(data.qids[row]))
                values = features[row].tolist()
                if sparse:
                    line = (prefix % head) + "".join(
                        f" {j + 1}:{v:.9g}" for j, v in enumerate(values) if v != 0)
                else:
                    line = row_format % (*head, *values)
                if docids is not None:
                    line += f" #docid = {docids[row]}"
                lines.append(line + "\n")
            handle.write("".join(lines))
    if group is not None:
        group.write_text("".join(f"{size}\n" for size in data.list_sizes.tolist()),
                         encoding="utf-8")
    return group
