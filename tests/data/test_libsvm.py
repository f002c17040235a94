"""read_libsvm: parsing features, exact error messages, cache, and scikit-learn parity."""
import os
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from tfr_extensions.data import LibSVMData, read_libsvm, synthetic, write_libsvm
from tfr_extensions.data import _parse


def _write(tmp_path, text, name="data.txt"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def _read(path, **kwargs):
    kwargs.setdefault("cache", False)
    return read_libsvm(path, **kwargs)


# --------------------------------------------------------------------------- features


def test_dense_lines_with_comments_blank_lines_and_null(tmp_path):
    path = _write(tmp_path, (
        "# a header comment\n"
        "2 qid:10 1:0.5 2:-1.25 3:NULL #docid = A inc = 1\n"
        "\n"
        "0 qid:10 1:1e-3 2:4 3:7   # trailing comment\n"
        "   \n"
        "1 qid:11 1:3 2:NULL 3:0.125\n"))
    data = _read(path, docids=True)
    np.testing.assert_array_equal(data.features, np.array(
        [[0.5, -1.25, 0.0], [1e-3, 4, 7], [3, 0, 0.125]], np.float32))
    np.testing.assert_array_equal(data.labels, [2, 0, 1])
    assert data.labels.dtype == np.float32 and data.features.dtype == np.float32
    np.testing.assert_array_equal(data.qids, [10, 10, 11])
    assert data.qids.dtype == np.int64
    np.testing.assert_array_equal(data.query_offsets, [0, 2, 3])
    assert data.docids.tolist() == ["A", "", ""]
    assert data.num_queries == 2 and data.list_sizes.tolist() == [2, 1]
    assert data.query_ids.tolist() == [10, 11]


def test_null_value_is_configurable(tmp_path):
    path = _write(tmp_path, "1 qid:1 1:NULL 2:3\n")
    np.testing.assert_array_equal(_read(path, null_value=-7.0).features, [[-7.0, 3.0]])


def test_sparse_unsorted_tabs_crlf_and_missing_final_newline(tmp_path):
    path = _write(tmp_path, "3 qid:1 5:2.5 2:1\r\n0\tqid:1  4:-1\r\n1 qid:2\r\n4 qid:2 1:9")
    data = _read(path)
    expected = np.zeros((4, 5), np.float32)
    expected[0, [4, 1]] = [2.5, 1]
    expected[1, 3] = -1
    expected[3, 0] = 9
    np.testing.assert_array_equal(data.features, expected)
    np.testing.assert_array_equal(data.labels, [3, 0, 1, 4])
    np.testing.assert_array_equal(data.query_offsets, [0, 2, 4])


def test_num_features_pads_with_zero_columns(tmp_path):
    path = _write(tmp_path, "1 qid:1 2:3\n")
    np.testing.assert_array_equal(_read(path, num_features=4).features, [[0, 3, 0, 0]])


def test_empty_file(tmp_path):
    data = _read(_write(tmp_path, "# nothing\n\n"))
    assert data.features.shape == (0, 0) and data.query_offsets.tolist() == [0]


def test_non_contiguous_queries_are_grouped_by_first_appearance(tmp_path):
    path = _write(tmp_path, "1 qid:7 1:1\n0 qid:3 1:2\n2 qid:7 1:3\n0 qid:3 1:4\n1 qid:5 1:5\n")
    with pytest.warns(UserWarning, match="not contiguous"):
        data = _read(path)
    np.testing.assert_array_equal(data.qids, [7, 7, 3, 3, 5])
    np.testing.assert_array_equal(data.features[:, 0], [1, 3, 2, 4, 5])
    np.testing.assert_array_equal(data.labels, [1, 2, 0, 0, 1])
    np.testing.assert_array_equal(data.query_offsets, [0, 2, 4, 5])


def test_contiguous_queries_do_not_warn(tmp_path):
    path = _write(tmp_path, "1 qid:7 1:1\n0 qid:7 1:2\n2 qid:3 1:3\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _read(path)


@pytest.mark.parametrize("sparse", [False, True])
def test_round_trip_synthetic_write_read_is_exact(tmp_path, sparse):
    data = synthetic(num_queries=40, num_features=7, seed=3)
    path = tmp_path / "synthetic.txt"
    write_libsvm(data, path, sparse=sparse)
    back = _read(path, num_features=7)
    for name in ("features", "labels", "qids", "query_offsets"):
        np.testing.assert_array_equal(getattr(back, name), getattr(data, name), err_msg=name)


def test_small_blocks_give_the_same_arrays(tmp_path):
    data = synthetic(num_queries=30, num_features=5, seed=4)
    path = tmp_path / "blocks.txt"
    write_libsvm(data, path)
    text = path.read_text().replace("\n", "\n\n", 5)  # blank lines shift line numbers
    path.write_text("# header\n" + text)
    reference = _read(path)
    for chunk_bytes in (1, 97, 4096):
        other = _read(path, chunk_bytes=chunk_bytes)
        np.testing.assert_array_equal(other.features, reference.features)
        np.testing.assert_array_equal(other.qids, reference.qids)
    np.testing.assert_array_equal(reference.features, data.features)


def _no_slow_path(monkeypatch):
    """Makes the per-token fallback raise: the vectorized path must do all the work."""
    def fail(*args):
        raise AssertionError("parse_slow was called on valid data")
    monkeypatch.setattr(_parse, "parse_slow", fail)


def test_blank_lines_everywhere_and_errors_after_them(tmp_path, monkeypatch):
    data = synthetic(num_queries=30, num_features=5, seed=4)
    path = tmp_path / "blank.txt"
    write_libsvm(data, path)
    lines = path.read_text().splitlines()
    path.write_text("".join(f"{line}\n\n  \n" for line in lines))
    with monkeypatch.context() as patch:
        _no_slow_path(patch)
        for chunk_bytes in (300, 1 << 20):
            np.testing.assert_array_equal(_read(path, chunk_bytes=chunk_bytes).features,
                                          data.features)
    lines[-2] = "1 qid:2 1:bad"
    path.write_text("".join(f"{line}\n\n  \n" for line in lines))
    with pytest.raises(ValueError) as error:
        _read(path, chunk_bytes=300)
    assert str(error.value) == f"{path}:{3 * len(lines) - 5}: invalid feature value: '1:bad'"


def test_unwritable_cache_warns_and_still_reads(tmp_path):
    path = _write(tmp_path, "1 qid:1 1:1\n")
    not_a_dir = _write(tmp_path, "x", name="cache_file")
    with pytest.warns(UserWarning, match="could not write the cache entry"):
        assert read_libsvm(path, cache=not_a_dir).features.tolist() == [[1.0]]


def test_subset_takes_queries_in_the_given_order():
    data = synthetic(num_queries=5, num_features=2, seed=0)
    sub = data.subset([3, 1])
    offsets = data.query_offsets
    rows = np.r_[offsets[3]:offsets[4], offsets[1]:offsets[2]]
    np.testing.assert_array_equal(sub.features, data.features[rows])
    np.testing.assert_array_equal(sub.query_ids, [4, 2])
    np.testing.assert_array_equal(sub.list_sizes, data.list_sizes[[3, 1]])
    with pytest.raises(ValueError, match=r"`query_indices` must lie in \[0, 5\); got -1..1"):
        data.subset([-1, 1])


def test_dataclass_validates_shapes():
    with pytest.raises(ValueError, match="`labels` must have shape"):
        LibSVMData(np.zeros((2, 1), np.float32), np.zeros(3), np.zeros(2), np.array([0, 2]))
    with pytest.raises(ValueError, match="`query_offsets` must rise from 0 to 2"):
        LibSVMData(np.zeros((2, 1), np.float32), np.zeros(2), np.zeros(2), np.array([0, 1]))


# --------------------------------------------------------------------------- errors

_ERRORS = [
    ("abc qid:1 1:2", 2, "invalid label: 'abc'"),
    ("-1 qid:1 1:2", 2, "negative label: '-1'"),
    ("nan qid:1 1:2", 2, "non-finite label: 'nan'"),
    ("NULL qid:1 1:2", 2, "invalid label: 'NULL'"),
    ("1 1:2 2:3", 2, "expected 'qid:<id>' after the label: '1:2'"),
    ("1", 2, "expected 'qid:<id>' after the label: '1'"),
    ("1 qid:x 1:2", 2, "query id must be an integer: 'qid:x'"),
    ("1 qid:1.5 1:2", 2, "query id must be an integer: 'qid:1.5'"),
    ("1 qid:NULL 1:2", 2, "query id must be an integer: 'qid:NULL'"),
    ("1 qid:1 0:2", 2, "feature index must be a positive integer (indices are 1-based): '0:2'"),
    ("1 qid:1 -3:2", 2, "feature index must be a positive integer (indices are 1-based): '-3:2'"),
    ("1 qid:1 1.5:2", 2, "feature index must be a positive integer (indices are 1-based): '1.5:2'"),
    ("1 qid:1 1:2 7", 2, "expected '<index>:<value>': '7'"),
    ("1 qid:1 1:2:3", 2, "expected '<index>:<value>': '1:2:3'"),
    ("1 qid:1 2:1 1:2 2:5", 2, "duplicate feature index: '2:5'"),
    ("1 qid:1 1:x", 2, "invalid feature value: '1:x'"),
    ("1 qid:1 1:1_0", 2, "invalid feature value: '1:1_0'"),
    ("1 qid:1 1:", 2, "invalid feature value: '1:'"),
    ("1 qid:1 1:nan", 2, "non-finite feature value: '1:nan'"),
    ("1 qid:1 1:-inf", 2, "non-finite feature value: '1:-inf'"),
    ("1 qid:1 1:1e400", 2, "non-finite feature value: '1:1e400'"),
    ("1 qid:1 9:1", 2, "feature index exceeds num_features=4: '9:1'"),
    ("1 qid:1 1e20:1", 2, "feature index exceeds 2147483647: '1e20:1'"),
]


@pytest.mark.parametrize("line, lineno, message", _ERRORS)
def test_malformed_line_names_file_line_and_token(tmp_path, line, lineno, message):
    path = _write(tmp_path, f"0 qid:1 1:0.5\n{line}\n2 qid:3 1:1\n")
    with pytest.raises(ValueError) as error:
        _read(path, num_features=4)
    assert str(error.value) == f"{path}:{lineno}: {message}"


def test_error_deep_in_a_large_file_has_the_right_line(tmp_path):
    good = "1 qid:{} " + " ".join(f"{j}:0.{j}" for j in range(1, 41)) + "\n"
    lines = ["# comment line\n", "\n"] + [good.format(i // 10) for i in range(3000)]
    lines[2500] = "1 qid:7 1:0.1 3:oops\n"
    path = _write(tmp_path, "".join(lines))
    with pytest.raises(ValueError) as error:
        _read(path, chunk_bytes=100_000)
    assert str(error.value) == f"{path}:2501: invalid feature value: '3:oops'"


def test_argument_validation(tmp_path):
    path = _write(tmp_path, "1 qid:1 1:1\n")
    with pytest.raises(ValueError, match="`num_features` must be None or a positive int; got 0"):
        _read(path, num_features=0)
    with pytest.raises(ValueError, match="`null_value` must be finite; got nan"):
        _read(path, null_value=float("nan"))
    with pytest.raises(FileNotFoundError):
        _read(tmp_path / "missing.txt")


def test_fast_parser_agrees_with_slow_parser_on_mutated_lines():
    """The vectorized parser accepts exactly the lines the reference parser accepts,
    with identical output (so the fast path never changes what a file means)."""
    rng = np.random.default_rng(0)
    base = b"2 qid:5 1:0.25 3:-1.5e2 4:7"
    junk = [b":", b" ", b"x", b"-", b".", b"e", b"qid:", b"NULL", b"#", b"\t", b"0", b"9", b"+"]
    for _ in range(400):
        line = bytearray(base)
        for _ in range(int(rng.integers(1, 3))):
            pos = int(rng.integers(0, len(line) + 1))
            piece = junk[int(rng.integers(len(junk)))]
            if rng.random() < 0.5 and pos < len(line):
                line[pos:pos + 1] = piece
            else:
                line[pos:pos] = piece
        text = b"1 qid:4 2:1\n" + bytes(line) + b"\n"
        fast = _parse.parse_fast(text, b"0.0", None, lines=True)
        try:
            slow = _parse.parse_slow(text, 1, "f", 0.0, None)
        except ValueError:
            assert fast is None, text
            continue
        assert fast is not None, text
        for a, b in zip(fast[:2] + fast.triplets(), slow[:2] + slow.triplets()):
            np.testing.assert_array_equal(a, b, err_msg=repr(text))


def test_fast_parser_handles_regular_letor_blocks():
    """The vectorized path (not the per-token fallback) reads LETOR's usual forms."""
    text = (b"2 qid:10 1:0.5 2:NULL 3:1e-3 #docid = GX008 inc = 1\n"
            b"0\tqid:10 1:1 2:2 3:3 \r\n1 qid:11 3:1 1:2\n")
    chunk = _parse.parse_fast(text, b"0.0", None)
    assert chunk is not None
    np.testing.assert_array_equal(chunk.labels, [2, 0, 1])
    np.testing.assert_array_equal(chunk.index, [1, 2, 3, 1, 2, 3, 3, 1])
    np.testing.assert_array_equal(chunk.value, [0.5, 0.0, 1e-3, 1, 2, 3, 1, 2])
    np.testing.assert_array_equal(chunk.doc, [0, 0, 0, 1, 1, 1, 2, 2])
    dense = _parse.parse_fast(text.replace(b"3:1 1:2", b"1:2 2:0 3:1"), b"0.0", None)
    np.testing.assert_array_equal(dense.dense, [[0.5, 0, 1e-3], [1, 2, 3], [2, 0, 1]])
    np.testing.assert_array_equal(dense.qids, [10, 10, 11])


# --------------------------------------------------------------------------- cache


def test_cache_hit_is_identical_and_memory_mapped(tmp_path):
    data = synthetic(num_queries=20, num_features=4, seed=1)
    path = tmp_path / "cached.txt"
    write_libsvm(data, path)
    cache = tmp_path / "cache"
    first = read_libsvm(path, cache=cache)
    assert not isinstance(first.features, np.memmap)
    second = read_libsvm(path, cache=cache)
    assert isinstance(second.features, np.memmap)  # proves the hit
    for name in ("features", "labels", "qids", "query_offsets"):
        np.testing.assert_array_equal(getattr(second, name), getattr(first, name))
        assert getattr(second, name).dtype == getattr(first, name).dtype
    assert len(list(cache.iterdir())) == 1


def test_cache_is_invalidated_when_the_file_changes(tmp_path):
    path = _write(tmp_path, "1 qid:1 1:1\n")
    cache = tmp_path / "cache"
    assert read_libsvm(path, cache=cache).features.tolist() == [[1.0]]
    stat = os.stat(path)
    path.write_text("1 qid:1 1:2\n")  # same size: only the mtime tells
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert read_libsvm(path, cache=cache).features.tolist() == [[2.0]]
    assert len(list(cache.iterdir())) == 1  # the stale entry is gone


def test_cache_keys_include_options(tmp_path):
    path = _write(tmp_path, "1 qid:1 1:NULL #docid = d1\n")
    cache = tmp_path / "cache"
    assert read_libsvm(path, cache=cache).features.tolist() == [[0.0]]
    assert read_libsvm(path, cache=cache, null_value=5.0).features.tolist() == [[5.0]]
    assert read_libsvm(path, cache=cache, num_features=2).features.shape == (1, 2)
    assert read_libsvm(path, cache=cache, docids=True).docids.tolist() == ["d1"]
    assert read_libsvm(path, cache=cache, docids=True).docids.tolist() == ["d1"]


# --------------------------------------------------------------------------- scikit-learn


def test_mq2008_matches_scikit_learn_on_every_file(mq2008_dir, monkeypatch):
    _no_slow_path(monkeypatch)
    paths = sorted(mq2008_dir.glob("Fold*/*.txt"))
    assert len(paths) == 15, paths
    for path in paths:
        data = read_libsvm(path, cache=False)
        features, labels, qids = load_svmlight_file(str(path), query_id=True, dtype=np.float32)
        np.testing.assert_array_equal(data.features, features.toarray(), err_msg=str(path))
        np.testing.assert_array_equal(data.labels, labels, err_msg=str(path))
        np.testing.assert_array_equal(data.qids, qids, err_msg=str(path))
        assert data.features.shape[1] == 46
