"""Chunk parsers behind :func:`tfr_extensions.data.read_libsvm`.

Two parsers read a block of whole lines and return the same :class:`Chunk`:

* ``parse_fast`` rewrites the block so that pandas' C CSV tokenizer reads it as
  a two-column table (one row per ``a:b`` token, the space as line terminator,
  ``:`` as separator), then checks the row structure with NumPy. Every line
  becomes ``-2:<label> qid:<id> <index>:<value> ...``: the ``-2`` marks labels
  (no real feature index is negative), ``qid`` parses as NaN in column 0, so the
  structure "label, qid, features*" per line is checked by comparing positions.
  Any irregularity (a malformed token, a duplicate index, a non-finite value,
  odd whitespace) makes it return ``None``; it never guesses.
* ``parse_slow`` is a plain per-token Python parser, the reference. It raises a
  ``ValueError`` naming file, line and token at the first problem.

``parse_block`` tries the fast parser, and on ``None`` splits the block in
pieces and retries, so only a small piece around a problem goes through the
slow parser (which then raises the precise error, or parses the piece).
"""
import csv
import io
import math
import re
from typing import List, NamedTuple, Optional

import numpy as np
import pandas as pd

# Marks a label row for the fast parser; feature indices are >= 1, so a real
# token never parses to this index without failing the structure check.
_LABEL_MARK = -2.0
_MAX_EXACT_INT = 2.0**53  # query ids beyond this are not exact in float64
_MAX_INDEX = 2**31 - 1  # feature indices beyond this are surely typos (dense output)
_SLOW_BLOCK_BYTES = 1 << 16  # below this size a failing block goes to parse_slow
_SPLIT_PIECES = 16

_COMMENT = re.compile(rb"[ \t]*#[^\n]*")
_NULL = re.compile(rb"(?<=:)NULL(?=[ \t\r\n])")
_LEADING_SPACE = re.compile(rb"(?m)^ +")
_BLANK_LINES = re.compile(rb"\n\n+")
_WHITESPACE = bytes.maketrans(b"\t\r", b"  ")
_FLOAT = re.compile(rb"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_NON_FINITE = re.compile(rb"[+-]?(?:inf|infinity|nan)\Z", re.IGNORECASE)
_DOCID = re.compile(rb"docid\s*=\s*(\S+)")
_NON_SPACE = re.compile(rb"[^ \t\r\n]")


class Chunk(NamedTuple):
    """Parsed documents of one block, in file order (float64 until stored).

    Entries are sparse triplets ``(doc, index, value)``, or, for blocks whose
    every line lists features ``1..k`` in order (the usual dense LETOR file),
    ``dense`` ``[n, k]`` with empty triplets.
    """

    labels: np.ndarray  # float64 [n]
    qids: np.ndarray  # int64 [n]
    doc: np.ndarray  # int64 [nnz], block-local document of each entry
    index: np.ndarray  # int64 [nnz], 1-based feature index
    value: np.ndarray  # float64 [nnz]
    dense: Optional[np.ndarray] = None  # float64 [n, k]: features 1..k of each line

    def triplets(self):
        """``(doc, index, value)`` of every entry, whichever the representation."""
        if self.dense is None:
            return self.doc, self.index, self.value
        num_docs, width = self.dense.shape
        return (np.repeat(np.arange(num_docs), width), np.tile(np.arange(1, width + 1), num_docs),
                self.dense.reshape(-1))


def _empty_chunk() -> Chunk:
    empty_f, empty_i = np.zeros(0, np.float64), np.zeros(0, np.int64)
    return Chunk(empty_f, empty_i, empty_i, empty_i, empty_f)


# --------------------------------------------------------------------------- fast


def _normalize(text: bytes, null_token: bytes, lines: bool) -> Optional[bytes]:
    """Strips comments and NULLs, tabs and CRs; with ``lines``, also leading spaces
    and blank lines. None if a NULL is misplaced.

    The checks use ``in`` on single bytes (memchr speed): multi-byte searches
    cost as much as parsing on large blocks, so line clean-up only runs after a
    first fast attempt failed.
    """
    if b"#" in text:
        text = _COMMENT.sub(b"", text)
    if b"N" in text and b"NULL" in text:
        if b"qid:NULL" in text:
            return None
        text = _NULL.sub(null_token, text)
        if b"NULL" in text:
            return None
    if b"\t" in text or b"\r" in text:
        text = text.translate(_WHITESPACE)
    if lines:
        text = _LEADING_SPACE.sub(b"", text)
        text = _BLANK_LINES.sub(b"\n", text).lstrip(b"\n")
    return text


def _read_pairs(body: bytes):
    """pandas' C tokenizer over ``a:b`` tokens; None when a token is not numeric."""
    try:
        frame = pd.read_csv(
            io.BytesIO(body), sep=":", lineterminator=" ", header=None, names=[0, 1],
            dtype=np.float64, engine="c", quoting=csv.QUOTE_NONE,
            keep_default_na=False, na_values={0: ["qid"], 1: []},
        )
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None
    return frame[0].to_numpy(), frame[1].to_numpy()


def _valid_labels_and_qids(labels: np.ndarray, qids: np.ndarray) -> Optional[np.ndarray]:
    """int64 qids if labels are finite and >= 0 and qids exact integers, else None."""
    if not (np.isfinite(labels).all() and (labels >= 0).all()):
        return None
    if not (np.abs(qids) <= _MAX_EXACT_INT).all():
        return None
    qid_ints = qids.astype(np.int64)
    if not np.array_equal(qid_ints, qids):
        return None
    return qid_ints


def _valid_entries(index: np.ndarray, value: np.ndarray, counts: np.ndarray,
                   num_features: Optional[int]) -> bool:
    """Indices in [1, num_features], unique within each line; values finite."""
    if not index.size:
        return True
    if not np.isfinite(value).all() or index.min() < 1:
        return False
    if index.max() > (_MAX_INDEX if num_features is None else num_features):
        return False
    steps = np.diff(index)
    line_starts = np.cumsum(counts)[:-1]
    steps[line_starts[(line_starts > 0) & (line_starts < index.size)] - 1] = 1
    if (steps > 0).all():  # increasing within each line: no duplicates
        return True
    key = np.sort(np.repeat(np.arange(counts.size), counts) * (int(index.max()) + 1) + index)
    return not (key[1:] == key[:-1]).any()


def _regular_rows(first: np.ndarray, second: np.ndarray, num_lines: int) -> Optional[np.ndarray]:
    """``[n, k + 2]`` view of ``second`` when every line is ``label qid 1:.. k:..``."""
    width = first.size // num_lines
    if width < 2 or width * num_lines != first.size:
        return None
    rows = first.reshape(num_lines, width)
    if not ((rows[:, 0] == _LABEL_MARK).all() and np.isnan(rows[:, 1]).all()
            and (rows[:, 2:] == np.arange(1, width - 1)).all()):
        return None
    return second.reshape(num_lines, width)


def parse_fast(text: bytes, null_token: bytes, num_features: Optional[int],
               lines: bool = False) -> Optional[Chunk]:
    """Vectorized parse of whole lines (ending in newline); None if irregular.

    Without ``lines``, blank lines and leading spaces make it fail (cheaply);
    with it they are removed first.
    """
    text = _normalize(text, null_token, lines)
    if text is None:
        return None
    if not _NON_SPACE.search(text):  # without ``lines`` the caller needs a line count: fail
        return _empty_chunk() if lines else None
    body = b"-2:" + text[:-1].replace(b"\n", b" -2:")
    num_lines = (len(body) - len(text) + 1) // 3  # each newline grew by 3 bytes
    pairs = _read_pairs(body)
    if pairs is None:
        return None
    first, second = pairs
    regular = _regular_rows(first, second, num_lines)
    if regular is not None:  # the common dense case: no masks, no triplets
        qids = _valid_labels_and_qids(regular[:, 0], regular[:, 1])
        values = regular[:, 2:]
        if (qids is None or not np.isfinite(values).all()
                or (num_features is not None and values.shape[1] > num_features)):
            return None
        empty = np.zeros(0, np.int64)
        return Chunk(regular[:, 0], qids, empty, empty, np.zeros(0), dense=values)
    label_rows = np.flatnonzero(first == _LABEL_MARK)
    qid_rows = np.flatnonzero(np.isnan(first))
    if (label_rows.size != num_lines or qid_rows.size != num_lines or label_rows[0] != 0
            or not np.array_equal(qid_rows, label_rows + 1)):
        return None
    qids = _valid_labels_and_qids(second[label_rows], second[qid_rows])
    if qids is None:
        return None
    # Feature rows lie between a document's qid row and the next label row.
    counts = np.diff(np.append(label_rows, first.size)) - 2
    is_feature = np.ones(first.size, bool)
    is_feature[label_rows] = False
    is_feature[qid_rows] = False
    index_f, value = first[is_feature], second[is_feature]
    with np.errstate(invalid="ignore"):  # inf or 1e20 casts to garbage, caught below
        index = index_f.astype(np.int64)
    if not np.array_equal(index, index_f) or not _valid_entries(index, value, counts,
                                                                 num_features):
        return None
    return Chunk(second[label_rows], qids, np.repeat(np.arange(num_lines), counts), index, value)


# --------------------------------------------------------------------------- slow


def _number(token: bytes) -> Optional[float]:
    """float(token) for a decimal literal or inf/nan; None for anything else."""
    if _FLOAT.match(token) or _NON_FINITE.match(token):
        return float(token)
    return None


class _LineError(Exception):
    def __init__(self, reason: str, token: bytes):
        super().__init__(reason)
        self.reason, self.token = reason, token


def _parse_tokens(tokens: List[bytes], null_value: float, num_features: Optional[int]):
    """(label, qid, indices, values) of one line's tokens, or raises _LineError."""
    label = _number(tokens[0])
    if label is None:
        raise _LineError("invalid label", tokens[0])
    if not math.isfinite(label):
        raise _LineError("non-finite label", tokens[0])
    if label < 0:
        raise _LineError("negative label", tokens[0])
    if len(tokens) < 2 or not tokens[1].startswith(b"qid:"):
        raise _LineError("expected 'qid:<id>' after the label", tokens[min(1, len(tokens) - 1)])
    qid = _number(tokens[1][4:])
    if qid is None or not math.isfinite(qid) or qid != int(qid) or abs(qid) > _MAX_EXACT_INT:
        raise _LineError("query id must be an integer", tokens[1])
    indices, values = [], []
    seen = set()
    for token in tokens[2:]:
        index_text, colon, value_text = token.partition(b":")
        if not colon or b":" in value_text:
            raise _LineError("expected '<index>:<value>'", token)
        index = _number(index_text)
        if index is None or not math.isfinite(index) or index != int(index) or index < 1:
            raise _LineError("feature index must be a positive integer (indices are 1-based)",
                             token)
        index = int(index)
        if index > _MAX_INDEX:
            raise _LineError(f"feature index exceeds {_MAX_INDEX}", token)
        if num_features is not None and index > num_features:
            raise _LineError(f"feature index exceeds num_features={num_features}", token)
        if index in seen:
            raise _LineError("duplicate feature index", token)
        seen.add(index)
        value = null_value if value_text == b"NULL" else _number(value_text)
        if value is None:
            raise _LineError("invalid feature value", token)
        if not math.isfinite(value):
            raise _LineError("non-finite feature value", token)
        indices.append(index)
        values.append(value)
    return label, int(qid), indices, values


def parse_slow(text: bytes, first_line: int, path: str, null_value: float,
               num_features: Optional[int]) -> Chunk:
    """Token-by-token parse; raises ValueError(``path:line: reason: 'token'``)."""
    labels, qids, docs, indices, values = [], [], [], [], []
    for offset, line in enumerate(text.split(b"\n")):
        tokens = line.split(b"#", 1)[0].split()
        if not tokens:
            continue
        try:
            label, qid, line_indices, line_values = _parse_tokens(tokens, null_value, num_features)
        except _LineError as error:
            token = error.token.decode("utf-8", errors="replace")
            raise ValueError(
                f"{path}:{first_line + offset}: {error.reason}: {token!r}") from None
        docs.extend([len(labels)] * len(line_indices))
        labels.append(label)
        qids.append(qid)
        indices.extend(line_indices)
        values.extend(line_values)
    return Chunk(np.asarray(labels, np.float64), np.asarray(qids, np.int64),
                 np.asarray(docs, np.int64), np.asarray(indices, np.int64),
                 np.asarray(values, np.float64))


# --------------------------------------------------------------------------- blocks


def _split_lines(text: bytes, pieces: int) -> List[bytes]:
    """Cuts ``text`` (whole lines) into about ``pieces`` blocks of whole lines."""
    step = max(1, len(text) // pieces)
    blocks, start = [], 0
    while start < len(text):
        end = text.find(b"\n", start + step - 1)
        end = len(text) if end < 0 else end + 1
        blocks.append(text[start:end])
        start = end
    return blocks


def parse_block(text: bytes, first_line: int, path: str, null_value: float,
                num_features: Optional[int], clean_lines: bool = False):
    """``(chunks, line count, clean_lines)`` of a block of whole lines.

    Chunks come in file order, fast where possible. A block that fails is
    retried with line clean-up (blank lines, leading spaces), then split so that
    only small pieces around a problem go through parse_slow. The returned
    ``clean_lines`` tells the caller to clean up first in the next block (a file
    with blank lines has them everywhere), saving a failed attempt per block.
    """
    null_token = repr(float(null_value)).encode()
    if not clean_lines:
        chunk = parse_fast(text, null_token, num_features)
        if chunk is not None:  # no blank lines were removed: one document per line
            return [chunk], chunk.labels.size, False
    num_lines = text.count(b"\n")
    chunk = parse_fast(text, null_token, num_features, lines=True)
    if chunk is not None:
        return [chunk], num_lines, True
    if len(text) <= _SLOW_BLOCK_BYTES:
        return [parse_slow(text, first_line, path, null_value, num_features)], num_lines, False
    chunks = []
    for piece in _split_lines(text, _SPLIT_PIECES):
        piece_chunks, piece_lines, _ = parse_block(piece, first_line, path, null_value,
                                                   num_features)
        chunks.extend(piece_chunks)
        first_line += piece_lines
    return chunks, num_lines, False


def docids_of_block(text: bytes) -> List[str]:
    """The ``docid = X`` of each non-blank line's comment ('' when absent)."""
    docids = []
    for line in text.split(b"\n"):
        content, _, comment = line.partition(b"#")
        if content.split():
            match = _DOCID.search(comment)
            docids.append(match.group(1).decode("utf-8", errors="replace") if match else "")
    return docids
