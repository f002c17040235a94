"""Chunk parsers behind :func:`tfr_extensions.data.read_libsvm`.

Two parsers read a block of whole lines and return the same :class:`Chunk`:

* ``parse_fast`` rewrites the block so that a tokenizer reads it as a two-column
  table (one row per ``a:b`` token), then checks the row structure with NumPy. The
  tokenizer (:func:`read_pairs`) is pandas' C CSV reader (the space as line
  terminator, ``:`` as separator) where pandas is installed (the ``jobs`` extra
  brings it), else NumPy's string functions (:func:`read_pairs_numpy`), which accept
  the same tokens but take several times as long (``docs/stacks.md``): the core
  installs with NumPy alone. Every line
  becomes ``-2:<label> qid:<id> <index>:<value> ...``: the ``-2`` marks labels
  (no real feature index is negative), ``qid`` parses as NaN in column 0, so the
  structure "label, qid, features*" per line is checked by comparing positions.
  Lines of a file whose queries come from a group file (``qids=False``,
  LightGBM / XGBoost style) have no ``qid:`` token: the structure is then
  "label, features*" and a NaN in column 0 (a stray ``qid:``) is irregular.
  Any irregularity (a malformed token, a duplicate index, a value that is not a
  finite float32, an index above the limit, a NUL byte, odd whitespace) makes
  it return ``None``; it never guesses.
* ``parse_slow`` is a plain per-token Python parser, the reference. It raises a
  ``ValueError`` naming file, line and token at the first problem.

``parse_block`` tries the fast parser, and on ``None`` splits the block in
pieces and retries, so only a small piece around a problem goes through the
slow parser (which then raises the precise error, or parses the piece).

``parse_group_sizes`` reads a group file (one positive document count per
line), vectorized when regular, with a per-line pass only to name a bad line.

    >>> chunk = parse_fast(b"2 qid:7 1:0.5 2:1\\n0 qid:7 1:3 2:0\\n", b"0.0", None)
    >>> chunk.labels.tolist(), chunk.qids.tolist(), chunk.dense.tolist()
    ([2.0, 0.0], [7, 7], [[0.5, 1.0], [3.0, 0.0]])
    >>> parse_fast(b"1 3:2 1:1\\n", b"0.0", None, qids=False).index.tolist()
    [3, 1]
    >>> parse_group_sizes(b"2\\n1\\n", "rank.train.query").tolist()
    [2, 1]
"""
import csv
import io
import math
import re
from typing import List, NamedTuple, Optional

import numpy as np

try:  # the faster tokenizer; the core installs without pandas (read_pairs_numpy then)
    import pandas as pd
except ImportError:
    pd = None

#: Feature indices beyond this are surely typos (the output is dense); the
#: ceiling of :func:`~tfr_extensions.data.read_libsvm`'s ``max_features``.
MAX_INDEX = 2**31 - 1
#: A float64 x rounds to a finite float32 iff ``|x| < F32_LIMIT`` (the midpoint
#: between float32's largest value and 2**128, which rounds to even: inf).
F32_LIMIT = 2.0**128 - 2.0**103
#: The UTF-8 byte order mark, accepted at the start of a file (and only there).
BOM = b"\xef\xbb\xbf"

# Marks a label row for the fast parser; feature indices are >= 1, so a real
# token never parses to this index without failing the structure check.
_LABEL_MARK = -2.0
_MAX_EXACT_INT = 2.0**53  # query ids beyond this are not exact in float64
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
# A regular group file: one count per line (at most 15 digits: exact in int64 and float64).
_GROUP_FILE = re.compile(rb"(?:[ \t]*[0-9]{1,15}[ \t]*\r?\n)*(?:[ \t]*[0-9]{1,15}[ \t]*\r?)?")
_DIGITS = re.compile(rb"[0-9]+")


class Chunk(NamedTuple):
    """Parsed documents of one block, in file order (float64 until stored).

    Entries are sparse triplets ``(doc, index, value)``, or, for blocks whose
    every line lists features ``1..k`` in order (the usual dense LETOR file),
    ``dense`` ``[n, k]`` with empty triplets. ``qids`` are 0 for lines without
    ``qid:`` (``qids=False``: the group file gives the queries).
    """

    labels: np.ndarray  # float64 [n]
    qids: np.ndarray  # int64 [n]
    doc: np.ndarray  # int64 [nnz], block-local document of each entry
    index: np.ndarray  # int64 [nnz], 1-based feature index
    value: np.ndarray  # float64 [nnz]
    dense: Optional[np.ndarray] = None  # float64 [n, k]: features 1..k of each line


def _empty_chunk() -> Chunk:
    empty_f, empty_i = np.zeros(0, np.float64), np.zeros(0, np.int64)
    return Chunk(empty_f, empty_i, empty_i, empty_i, empty_f)


def _index_limit(num_features: Optional[int], max_features: Optional[int]) -> int:
    """The largest accepted feature index: num_features, else max_features."""
    if num_features is not None:
        return num_features
    return MAX_INDEX if max_features is None else max_features


# --------------------------------------------------------------------------- fast


def _normalize(text: bytes, null_token: bytes, lines: bool) -> Optional[bytes]:
    """Strips comments and NULLs, tabs and CRs; with ``lines``, also leading spaces
    and blank lines. None if a NULL is misplaced or a NUL byte is left (pandas
    would end the number there: ``1:0.\\x0012`` would read as 0).

    The checks use ``in`` on single bytes (memchr speed): multi-byte searches
    cost as much as parsing on large blocks, so line clean-up only runs after a
    first fast attempt failed.
    """
    if b"#" in text:
        text = _COMMENT.sub(b"", text)
    if b"\x00" in text:
        return None
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


def read_pairs_pandas(body: bytes):
    """pandas' C tokenizer over ``a:b`` tokens: ``(first, second)`` float64 ``[T]``
    (``qid`` reads as NaN); None when a token is not two numbers."""
    try:
        frame = pd.read_csv(
            io.BytesIO(body), sep=":", lineterminator=" ", header=None, names=[0, 1],
            dtype=np.float64, engine="c", quoting=csv.QUOTE_NONE,
            keep_default_na=False, na_values={0: ["qid"], 1: []},
        )
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None
    return frame[0].to_numpy(), frame[1].to_numpy()


# The bytes a token of a regular block may hold: digits, signs, '.', exponents, the ':'
# separator, ``qid`` and ``inf``/``infinity``/``nan`` in any case. NumPy's float parsing
# (Python's) also takes '_' between digits ('1_0'), which LibSVM does not.
_PAIR_BYTES = b"0123456789+-.eE: qidnaftyQIDNAFTY"


def read_pairs_numpy(body: bytes):
    """:func:`read_pairs_pandas` with NumPy alone (no pandas): the same pairs, or None
    for the same tokens.

    >>> first, second = read_pairs_numpy(b"-2:1 qid:7 1:0.5 2:-1e3")
    >>> first.tolist(), second.tolist()
    ([-2.0, nan, 1.0, 2.0], [1.0, 7.0, 0.5, -1000.0])
    >>> read_pairs_numpy(b"1:2:3"), read_pairs_numpy(b"1:1_0")
    (None, None)
    """
    if body.translate(None, _PAIR_BYTES):  # a byte no number holds ('_', NUL, quotes)
        return None
    tokens = np.array(body.split())  # bytes [T]
    if tokens.size == 0:
        return None
    parts = np.char.partition(tokens, b":")  # [T, 3]: before, ':', after
    after = parts[:, 2]
    if not ((parts[:, 1] == b":").all() and (np.char.find(after, b":") < 0).all()):
        return None  # a token without ':' or with two
    before = parts[:, 0]
    is_qid = before == b"qid"
    before[is_qid] = b"0"
    try:
        first, second = before.astype(np.float64), after.astype(np.float64)
    except ValueError:  # not a number: '', 'x', '1e', 'qidx'
        return None
    if not np.isfinite(first).all():  # only 'qid' reads as NaN ('nan:1' is no query id)
        return None
    first[is_qid] = np.nan
    return first, second


#: the tokenizer of :func:`parse_fast`: pandas' where installed, else NumPy's
read_pairs = read_pairs_pandas if pd is not None else read_pairs_numpy


def _finite_float32(values: np.ndarray) -> bool:
    """Every value rounds to a finite float32 (NaN, inf and 1e39 do not).

    Two reductions without temporaries (as fast as ``np.isfinite``); a NaN makes
    ``max`` NaN, which fails the comparison.
    """
    return not values.size or bool(values.max() < F32_LIMIT and values.min() > -F32_LIMIT)


def _valid_labels(labels: np.ndarray) -> bool:
    """Labels are >= 0 and finite in float32 (a NaN fails both comparisons)."""
    return not labels.size or bool(labels.min() >= 0 and labels.max() < F32_LIMIT)


def _valid_qids(qids: np.ndarray) -> Optional[np.ndarray]:
    """int64 qids if all are exact integers, else None."""
    if not (np.abs(qids) <= _MAX_EXACT_INT).all():
        return None
    qid_ints = qids.astype(np.int64)
    if not np.array_equal(qid_ints, qids):
        return None
    return qid_ints


def _valid_entries(index: np.ndarray, value: np.ndarray, counts: np.ndarray,
                   limit: int) -> bool:
    """Indices in [1, limit], unique within each line; values finite in float32."""
    if not index.size:
        return True
    if not _finite_float32(value) or index.min() < 1 or index.max() > limit:
        return False
    steps = np.diff(index)
    line_starts = np.cumsum(counts)[:-1]
    steps[line_starts[(line_starts > 0) & (line_starts < index.size)] - 1] = 1
    if (steps > 0).all():  # increasing within each line: no duplicates
        return True
    key = np.sort(np.repeat(np.arange(counts.size), counts) * (int(index.max()) + 1) + index)
    return not (key[1:] == key[:-1]).any()


def _regular_rows(first: np.ndarray, second: np.ndarray, num_lines: int,
                  lead: int) -> Optional[np.ndarray]:
    """``[n, k + lead]`` view of ``second`` when every line is ``label [qid] 1:.. k:..``
    (``lead`` is 2 with a qid row, 1 without)."""
    width = first.size // num_lines
    if width < lead or width * num_lines != first.size:
        return None
    rows = first.reshape(num_lines, width)
    if not ((rows[:, 0] == _LABEL_MARK).all() and (lead == 1 or np.isnan(rows[:, 1]).all())
            and (rows[:, lead:] == np.arange(1, width - lead + 1)).all()):
        return None
    return second.reshape(num_lines, width)


def parse_fast(text: bytes, null_token: bytes, num_features: Optional[int],
               lines: bool = False, *, qids: bool = True,
               max_features: Optional[int] = None) -> Optional[Chunk]:
    """Vectorized parse of whole lines (ending in newline); None if irregular.

    Without ``lines``, blank lines and leading spaces make it fail (cheaply);
    with it they are removed first. ``qids=False`` reads lines without
    ``qid:`` (``<label> <index>:<value> ...``; the chunk's qids are 0).
    Indices above ``num_features`` (or, when it is None, ``max_features``,
    default 2**31 - 1) are irregular.
    """
    text = _normalize(text, null_token, lines)
    if text is None:
        return None
    if not _NON_SPACE.search(text):  # without ``lines`` the caller needs a line count: fail
        return _empty_chunk() if lines else None
    body = b"-2:" + text[:-1].replace(b"\n", b" -2:")
    num_lines = (len(body) - len(text) + 1) // 3  # each newline grew by 3 bytes
    pairs = read_pairs(body)
    if pairs is None:
        return None
    first, second = pairs
    limit = _index_limit(num_features, max_features)
    lead = 2 if qids else 1  # rows before a line's features: label [, qid]
    regular = _regular_rows(first, second, num_lines, lead)
    if regular is not None:  # the common dense case: no masks, no triplets
        labels, values = regular[:, 0], regular[:, lead:]
        qid_ints = _valid_qids(regular[:, 1]) if qids else np.zeros(num_lines, np.int64)
        if (qid_ints is None or not _valid_labels(labels) or not _finite_float32(values)
                or values.shape[1] > limit):
            return None
        empty = np.zeros(0, np.int64)
        return Chunk(labels, qid_ints, empty, empty, np.zeros(0), dense=values)
    label_rows = np.flatnonzero(first == _LABEL_MARK)
    if label_rows.size != num_lines or label_rows[0] != 0:
        return None
    is_feature = np.ones(first.size, bool)
    is_feature[label_rows] = False
    if qids:
        qid_rows = np.flatnonzero(np.isnan(first))
        if qid_rows.size != num_lines or not np.array_equal(qid_rows, label_rows + 1):
            return None
        qid_ints = _valid_qids(second[qid_rows])
        if qid_ints is None:
            return None
        is_feature[qid_rows] = False
    else:
        if np.isnan(first).any():  # a 'qid:' token: the slow parser names it
            return None
        qid_ints = np.zeros(num_lines, np.int64)
    labels = second[label_rows]
    if not _valid_labels(labels):
        return None
    # Feature rows lie between a document's label (or qid) row and the next label row.
    counts = np.diff(np.append(label_rows, first.size)) - lead
    index_f, value = first[is_feature], second[is_feature]
    with np.errstate(invalid="ignore"):  # inf or 1e20 casts to garbage, caught below
        index = index_f.astype(np.int64)
    if not np.array_equal(index, index_f) or not _valid_entries(index, value, counts, limit):
        return None
    return Chunk(labels, qid_ints, np.repeat(np.arange(num_lines), counts), index, value)


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


def _parse_label(token: bytes) -> float:
    label = _number(token)
    if label is None:
        raise _LineError("invalid label", token)
    if not math.isfinite(label):
        raise _LineError("non-finite label", token)
    if label < 0:
        raise _LineError("negative label", token)
    if label >= F32_LIMIT:
        raise _LineError("label overflows float32", token)
    return label


def _parse_tokens(tokens: List[bytes], null_value: float, num_features: Optional[int],
                  max_features: Optional[int], qids: bool, hint: str):
    """(label, qid, indices, values) of one line's tokens, or raises _LineError."""
    label = _parse_label(tokens[0])
    if qids:
        if len(tokens) < 2 or not tokens[1].startswith(b"qid:"):
            raise _LineError("expected 'qid:<id>' after the label" + hint,
                             tokens[min(1, len(tokens) - 1)])
        qid = _number(tokens[1][4:])
        if (qid is None or not math.isfinite(qid) or qid != int(qid)
                or abs(qid) > _MAX_EXACT_INT):
            raise _LineError("query id must be an integer", tokens[1])
        qid, feature_tokens = int(qid), tokens[2:]
    else:
        qid, feature_tokens = 0, tokens[1:]
    indices, values = [], []
    seen = set()
    for token in feature_tokens:
        if not qids and token.startswith(b"qid:"):
            raise _LineError("unexpected 'qid:' token" + hint, token)
        index_text, colon, value_text = token.partition(b":")
        if not colon or b":" in value_text:
            raise _LineError("expected '<index>:<value>'", token)
        index = _number(index_text)
        if index is None or not math.isfinite(index) or index != int(index) or index < 1:
            raise _LineError("feature index must be a positive integer (indices are 1-based)",
                             token)
        index = int(index)
        if num_features is not None:
            if index > num_features:
                raise _LineError(f"feature index exceeds num_features={num_features}", token)
        elif max_features is not None:
            if index > max_features:
                raise _LineError(f"feature index exceeds max_features={max_features} (pass a "
                                 f"larger max_features if the index is real)", token)
        elif index > MAX_INDEX:
            raise _LineError(f"feature index exceeds {MAX_INDEX}", token)
        if index in seen:
            raise _LineError("duplicate feature index", token)
        seen.add(index)
        value = null_value if value_text == b"NULL" else _number(value_text)
        if value is None:
            raise _LineError("invalid feature value", token)
        if not math.isfinite(value):
            raise _LineError("non-finite feature value", token)
        if abs(value) >= F32_LIMIT:
            raise _LineError("feature value overflows float32", token)
        indices.append(index)
        values.append(value)
    return label, qid, indices, values


def parse_slow(text: bytes, first_line: int, path: str, null_value: float,
               num_features: Optional[int], *, qids: bool = True,
               max_features: Optional[int] = None, hint: str = "") -> Chunk:
    """Token-by-token parse; raises ValueError(``path:line: reason: 'token'``).

    ``hint`` is appended to the reasons about ``qid:`` (a missing one with
    ``qids=True``, a stray one with ``qids=False``): the caller says there which
    group file it used or looked for.
    """
    labels, qid_list, docs, indices, values = [], [], [], [], []
    for offset, line in enumerate(text.split(b"\n")):
        tokens = line.split(b"#", 1)[0].split()
        if not tokens:
            continue
        try:
            label, qid, line_indices, line_values = _parse_tokens(
                tokens, null_value, num_features, max_features, qids, hint)
        except _LineError as error:
            token = error.token.decode("utf-8", errors="replace")
            raise ValueError(
                f"{path}:{first_line + offset}: {error.reason}: {token!r}") from None
        docs.extend([len(labels)] * len(line_indices))
        labels.append(label)
        qid_list.append(qid)
        indices.extend(line_indices)
        values.extend(line_values)
    return Chunk(np.asarray(labels, np.float64), np.asarray(qid_list, np.int64),
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
                num_features: Optional[int], clean_lines: bool = False, *,
                qids: bool = True, max_features: Optional[int] = None, hint: str = ""):
    """``(chunks, line count, clean_lines)`` of a block of whole lines.

    Chunks come in file order, fast where possible. A block that fails is
    retried with line clean-up (blank lines, leading spaces), then split so that
    only small pieces around a problem go through parse_slow. The returned
    ``clean_lines`` tells the caller to clean up first in the next block (a file
    with blank lines has them everywhere), saving a failed attempt per block.
    ``qids``, ``max_features`` and ``hint`` are passed to both parsers.
    """
    null_token = repr(float(null_value)).encode()
    options = dict(qids=qids, max_features=max_features)
    if not clean_lines:
        chunk = parse_fast(text, null_token, num_features, **options)
        if chunk is not None:  # no blank lines were removed: one document per line
            return [chunk], chunk.labels.size, False
    num_lines = text.count(b"\n")
    chunk = parse_fast(text, null_token, num_features, lines=True, **options)
    if chunk is not None:
        return [chunk], num_lines, True
    if len(text) <= _SLOW_BLOCK_BYTES:
        return [parse_slow(text, first_line, path, null_value, num_features, hint=hint,
                           **options)], num_lines, False
    chunks = []
    for piece in _split_lines(text, _SPLIT_PIECES):
        piece_chunks, piece_lines, _ = parse_block(piece, first_line, path, null_value,
                                                   num_features, hint=hint, **options)
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


# --------------------------------------------------------------------------- group files


def parse_group_sizes(text: bytes, path: str) -> np.ndarray:
    """int64 ``[Q]``: the documents per query of a LightGBM ``.query`` / XGBoost
    ``.group`` file, in order.

    One positive integer per line; blank lines, spaces, tabs, CRLF and a UTF-8
    BOM are accepted. A regular file is checked with one regular expression and
    converted in C; otherwise a per-line pass raises
    ``ValueError("<path>:<line>: <reason>: '<text>'")`` for the first bad line
    (a zero, negative or non-integer count, or several numbers on one line).
    """
    if text.startswith(BOM):
        text = text[len(BOM):]
    if _GROUP_FILE.fullmatch(text):
        sizes = np.array(text.split()).astype(np.int64) if text.strip() else np.zeros(0, np.int64)
        zeros = np.flatnonzero(sizes == 0)
        if not zeros.size:
            return sizes
        # A regular file has one count per line: the first zero is on line zeros[0] + 1.
        raise ValueError(f"{path}:{zeros[0] + 1}: query size must be a positive integer: "
                         f"{text.split()[zeros[0]].decode()!r}")
    sizes = []
    for number, line in enumerate(text.split(b"\n"), 1):
        tokens = line.split()
        if not tokens:
            continue
        shown = line.strip().decode("utf-8", errors="replace")
        if len(tokens) > 1:
            raise ValueError(f"{path}:{number}: expected one query size per line: {shown!r}")
        if not _DIGITS.fullmatch(tokens[0]) or int(tokens[0]) == 0:
            raise ValueError(f"{path}:{number}: query size must be a positive integer: {shown!r}")
        if int(tokens[0]) > _MAX_EXACT_INT:
            raise ValueError(f"{path}:{number}: query size exceeds 2**53: {shown!r}")
        sizes.append(int(tokens[0]))
    return np.asarray(sizes, np.int64)
