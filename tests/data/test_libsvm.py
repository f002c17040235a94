"""read_libsvm / write_libsvm: parsing features, exact error messages, and scikit-learn
parity (group files: test_libsvm_group_files.py; the cache: test_cache.py, its key:
test_checksum.py)."""
import re
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from support.libsvm_files import no_slow_path, read_uncached, write_file
from tfr_extensions.data import LibSVMData, read_libsvm, synthetic, write_libsvm
from tfr_extensions.data import _parse


def _triplets(chunk):
    """``(doc, index, value)`` of every entry of a parsed ``Chunk``, whichever
    its representation (sparse triplets, or ``dense`` features 1..k)."""
    if chunk.dense is None:
        return chunk.doc, chunk.index, chunk.value
    num_docs, width = chunk.dense.shape
    return (np.repeat(np.arange(num_docs), width), np.tile(np.arange(1, width + 1), num_docs),
            chunk.dense.reshape(-1))


# --------------------------------------------------------------------------- features


def test_dense_lines_with_comments_blank_lines_and_null(tmp_path):
    path = write_file(tmp_path, (
        "# a header comment\n"
        "2 qid:10 1:0.5 2:-1.25 3:NULL #docid = A inc = 1\n"
        "\n"
        "0 qid:10 1:1e-3 2:4 3:7   # trailing comment\n"
        "   \n"
        "1 qid:11 1:3 2:NULL 3:0.125\n"))
    data = read_uncached(path, docids=True)
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
    path = write_file(tmp_path, "1 qid:1 1:NULL 2:3\n")
    np.testing.assert_array_equal(read_uncached(path, null_value=-7.0).features, [[-7.0, 3.0]])


def test_sparse_unsorted_tabs_crlf_and_missing_final_newline(tmp_path):
    path = write_file(tmp_path, "3 qid:1 5:2.5 2:1\r\n0\tqid:1  4:-1\r\n1 qid:2\r\n4 qid:2 1:9")
    data = read_uncached(path)
    expected = np.zeros((4, 5), np.float32)
    expected[0, [4, 1]] = [2.5, 1]
    expected[1, 3] = -1
    expected[3, 0] = 9
    np.testing.assert_array_equal(data.features, expected)
    np.testing.assert_array_equal(data.labels, [3, 0, 1, 4])
    np.testing.assert_array_equal(data.query_offsets, [0, 2, 4])


def test_num_features_pads_with_zero_columns(tmp_path):
    path = write_file(tmp_path, "1 qid:1 2:3\n")
    np.testing.assert_array_equal(read_uncached(path, num_features=4).features, [[0, 3, 0, 0]])


@pytest.mark.parametrize("text, why", [
    (b"", "it is empty"),
    (b"# nothing\n\n   \n\t# more\n", "only blank lines and comments"),
    (b"\xef\xbb\xbf\r\n", "only blank lines and comments"),
])
def test_file_without_documents_is_an_error_naming_it(tmp_path, text, why):
    path = write_file(tmp_path, text, name="train.txt")
    with pytest.raises(ValueError) as error:
        read_uncached(path)
    assert str(error.value) == f"{path}: the file has no documents ({why})"


def test_utf8_bom_at_the_start_is_accepted_like_crlf(tmp_path, monkeypatch):
    path = write_file(tmp_path, b"\xef\xbb\xbf2 qid:1 1:0.5 2:3\r\n0 qid:1 1:1 2:2\r\n")
    with monkeypatch.context() as patch:
        no_slow_path(patch)
        for chunk_bytes in (1, 1 << 20):
            data = read_uncached(path, chunk_bytes=chunk_bytes)
            np.testing.assert_array_equal(data.features, [[0.5, 3], [1, 2]])
            np.testing.assert_array_equal(data.labels, [2, 0])
    # Only at the start: elsewhere it is garbage in a label.
    path = write_file(tmp_path, b"2 qid:1 1:0.5\n\xef\xbb\xbf0 qid:1 1:1\n")
    with pytest.raises(ValueError) as error:
        read_uncached(path)
    assert str(error.value) == f"{path}:2: invalid label: '\\ufeff0'"  # repr escapes it


def test_non_contiguous_queries_are_grouped_by_first_appearance(tmp_path):
    path = write_file(tmp_path, "1 qid:7 1:1\n0 qid:3 1:2\n2 qid:7 1:3\n0 qid:3 1:4\n1 qid:5 1:5\n")
    with pytest.warns(UserWarning, match="not contiguous"):
        data = read_uncached(path)
    np.testing.assert_array_equal(data.qids, [7, 7, 3, 3, 5])
    np.testing.assert_array_equal(data.features[:, 0], [1, 3, 2, 4, 5])
    np.testing.assert_array_equal(data.labels, [1, 2, 0, 0, 1])
    np.testing.assert_array_equal(data.query_offsets, [0, 2, 4, 5])


def test_contiguous_queries_do_not_warn(tmp_path):
    path = write_file(tmp_path, "1 qid:7 1:1\n0 qid:7 1:2\n2 qid:3 1:3\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_uncached(path)


@pytest.mark.parametrize("sparse", [False, True])
def test_round_trip_synthetic_write_read_is_exact(tmp_path, sparse):
    data = synthetic(num_queries=40, num_features=7, seed=3)
    path = tmp_path / "synthetic.txt"
    write_libsvm(data, path, sparse=sparse)
    back = read_uncached(path, num_features=7)
    for name in ("features", "labels", "qids", "query_offsets"):
        np.testing.assert_array_equal(getattr(back, name), getattr(data, name), err_msg=name)


def test_small_blocks_give_the_same_arrays(tmp_path):
    data = synthetic(num_queries=30, num_features=5, seed=4)
    path = tmp_path / "blocks.txt"
    write_libsvm(data, path)
    text = path.read_text().replace("\n", "\n\n", 5)  # blank lines shift line numbers
    path.write_text("# header\n" + text)
    reference = read_uncached(path)
    for chunk_bytes in (1, 97, 4096):
        other = read_uncached(path, chunk_bytes=chunk_bytes)
        np.testing.assert_array_equal(other.features, reference.features)
        np.testing.assert_array_equal(other.qids, reference.qids)
    np.testing.assert_array_equal(reference.features, data.features)


def test_blank_lines_everywhere_and_errors_after_them(tmp_path, monkeypatch):
    data = synthetic(num_queries=30, num_features=5, seed=4)
    path = tmp_path / "blank.txt"
    write_libsvm(data, path)
    lines = path.read_text().splitlines()
    path.write_text("".join(f"{line}\n\n  \n" for line in lines))
    with monkeypatch.context() as patch:
        no_slow_path(patch)
        for chunk_bytes in (300, 1 << 20):
            np.testing.assert_array_equal(read_uncached(path, chunk_bytes=chunk_bytes).features,
                                          data.features)
    lines[-2] = "1 qid:2 1:bad"
    path.write_text("".join(f"{line}\n\n  \n" for line in lines))
    with pytest.raises(ValueError) as error:
        read_uncached(path, chunk_bytes=300)
    assert str(error.value) == f"{path}:{3 * len(lines) - 5}: invalid feature value: '1:bad'"


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

# Appended to a missing qid: error when no group file was found beside the file.
_NO_GROUP = " (or a group file: found neither {path}.query nor {path}.group)"

_ERRORS = [
    ("abc qid:1 1:2", 2, "invalid label: 'abc'"),
    ("-1 qid:1 1:2", 2, "negative label: '-1'"),
    ("nan qid:1 1:2", 2, "non-finite label: 'nan'"),
    ("NULL qid:1 1:2", 2, "invalid label: 'NULL'"),
    ("1 1:2 2:3", 2, "expected 'qid:<id>' after the label" + _NO_GROUP + ": '1:2'"),
    ("1", 2, "expected 'qid:<id>' after the label" + _NO_GROUP + ": '1'"),
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
    ("1 qid:1 1:1e39", 2, "feature value overflows float32: '1:1e39'"),
    ("1 qid:1 1:-1e300", 2, "feature value overflows float32: '1:-1e300'"),
    ("1 qid:1 1:3.5e38", 2, "feature value overflows float32: '1:3.5e38'"),
    ("1e39 qid:1 1:2", 2, "label overflows float32: '1e39'"),
    ("1e300 qid:1 1:2", 2, "label overflows float32: '1e300'"),
    ("1 qid:1 1:0.\x0012", 2, "invalid feature value: '1:0.\\x0012'"),
    ("1 qid:1 1:\x00", 2, "invalid feature value: '1:\\x00'"),
    ("1\x00 qid:1 1:2", 2, "invalid label: '1\\x00'"),
    ("1 qid:1 9:1", 2, "feature index exceeds num_features=4: '9:1'"),
]


@pytest.mark.parametrize("line, lineno, message", _ERRORS)
def test_malformed_line_names_file_line_and_token(tmp_path, line, lineno, message):
    path = write_file(tmp_path, f"0 qid:1 1:0.5\n{line}\n2 qid:3 1:1\n")
    with pytest.raises(ValueError) as error:
        read_uncached(path, num_features=4)
    assert str(error.value) == f"{path}:{lineno}: {message.format(path=path)}"


def test_largest_float32_is_accepted_and_values_round_to_float32(tmp_path):
    path = write_file(tmp_path, "3.4028235e38 qid:1 1:3.4028235e38 2:-3.4028235e38 3:1e-50\n")
    data = read_uncached(path)
    f32_max = np.finfo(np.float32).max
    np.testing.assert_array_equal(data.features, [[f32_max, -f32_max, 0.0]])
    np.testing.assert_array_equal(data.labels, [f32_max])


@pytest.mark.parametrize("line, token", [
    ("1 qid:1 100000000:1", "100000000:1"),
    ("1 qid:1 2:1 100001:1", "100001:1"),
    ("1 qid:1 1e20:1", "1e20:1"),
])
def test_huge_feature_index_is_an_error_not_a_huge_array(tmp_path, line, token):
    path = write_file(tmp_path, f"0 qid:1 1:1\n{line}\n")
    with pytest.raises(ValueError) as error:
        read_uncached(path)
    assert str(error.value) == (f"{path}:2: feature index exceeds max_features=100000 (pass a "
                                f"larger max_features if the index is real): '{token}'")


def test_max_features_is_a_parameter_and_num_features_overrides_it(tmp_path):
    path = write_file(tmp_path, "0 qid:1 1:1\n1 qid:1 300:2\n")
    assert read_uncached(path).features.shape == (2, 300)  # LightGBM's example has 300 features
    with pytest.raises(ValueError) as error:
        read_uncached(path, max_features=299)
    assert str(error.value) == (f"{path}:2: feature index exceeds max_features=299 (pass a "
                                f"larger max_features if the index is real): '300:2'")
    assert read_uncached(path, max_features=299, num_features=400).features.shape == (2, 400)
    wide = write_file(tmp_path, "1 qid:1 200000:1.5\n", name="wide.txt")
    data = read_uncached(wide, max_features=200_000)
    assert data.features.shape == (1, 200_000) and data.features[0, -1] == 1.5


def test_error_deep_in_a_large_file_has_the_right_line(tmp_path):
    good = "1 qid:{} " + " ".join(f"{j}:0.{j}" for j in range(1, 41)) + "\n"
    lines = ["# comment line\n", "\n"] + [good.format(i // 10) for i in range(3000)]
    lines[2500] = "1 qid:7 1:0.1 3:oops\n"
    path = write_file(tmp_path, "".join(lines))
    with pytest.raises(ValueError) as error:
        read_uncached(path, chunk_bytes=100_000)
    assert str(error.value) == f"{path}:2501: invalid feature value: '3:oops'"


def test_argument_validation(tmp_path):
    path = write_file(tmp_path, "1 qid:1 1:1\n")
    with pytest.raises(ValueError, match="`num_features` must be None or an int >= 1; got 0"):
        read_uncached(path, num_features=0)
    with pytest.raises(ValueError, match="`null_value` must be finite in float32; got nan"):
        read_uncached(path, null_value=float("nan"))
    with pytest.raises(ValueError, match="`null_value` must be finite in float32; got 1e"):
        read_uncached(path, null_value=1e39)
    with pytest.raises(ValueError, match=re.escape(
            "`max_features` must be an int in [1, 2147483647]; got 0")):
        read_uncached(path, max_features=0)
    with pytest.raises(ValueError, match="`group_path` must be None, False or a path; got True"):
        read_uncached(path, group_path=True)
    with pytest.raises(FileNotFoundError) as error:
        read_uncached(tmp_path / "missing.txt")
    assert str(error.value) == f"{tmp_path / 'missing.txt'}: no such file"


def test_a_directory_as_path_says_it_is_a_directory(tmp_path):
    folder = tmp_path / "Fold1"
    folder.mkdir()
    with pytest.raises(IsADirectoryError) as error:
        read_uncached(folder)
    assert str(error.value) == f"{folder}: is a directory, not a LibSVM file"


@pytest.mark.parametrize("tokenizer", ["pandas", "numpy"])
def test_fast_parser_agrees_with_slow_parser_on_mutated_lines(tokenizer, monkeypatch):
    """The vectorized parser accepts exactly the lines the reference parser accepts,
    with identical output (so the fast path never changes what a file means), with
    either tokenizer (pandas' where installed, NumPy's in the core install)."""
    if tokenizer == "pandas":
        pytest.importorskip("pandas")
    monkeypatch.setattr(_parse, "read_pairs", getattr(_parse, f"read_pairs_{tokenizer}"))
    rng = np.random.default_rng(0)
    junk = [b":", b" ", b"x", b"-", b".", b"e", b"qid:", b"NULL", b"#", b"\t", b"0", b"9", b"+",
            b"\x00", b"\xef\xbb\xbf", b"e38", b"e39", b"99"]
    accepted = rejected = 0
    for qids, base, first in ((True, b"2 qid:5 1:0.25 3:-1.5e2 4:7", b"1 qid:4 2:1\n"),
                              (False, b"2 1:0.25 3:-1.5e2 4:7", b"1 2:1\n")):
        for _ in range(400):
            line = bytearray(base)
            for _ in range(int(rng.integers(1, 3))):
                pos = int(rng.integers(0, len(line) + 1))
                piece = junk[int(rng.integers(len(junk)))]
                if rng.random() < 0.5 and pos < len(line):
                    line[pos:pos + 1] = piece
                else:
                    line[pos:pos] = piece
            text = first + bytes(line) + b"\n"
            fast = _parse.parse_fast(text, b"0.0", None, lines=True, qids=qids, max_features=99)
            try:
                slow = _parse.parse_slow(text, 1, "f", 0.0, None, qids=qids, max_features=99)
            except ValueError:
                assert fast is None, text
                rejected += 1
                continue
            assert fast is not None, text
            accepted += 1
            for a, b in zip(fast[:2] + _triplets(fast), slow[:2] + _triplets(slow)):
                np.testing.assert_array_equal(a, b, err_msg=repr(text))
    assert accepted > 100 and rejected > 100, (accepted, rejected)


@pytest.mark.parametrize("tokenizer", ["pandas", "numpy"])
def test_fast_parser_handles_regular_letor_blocks(tokenizer, monkeypatch):
    """The vectorized path (not the per-token fallback) reads LETOR's usual forms."""
    if tokenizer == "pandas":
        pytest.importorskip("pandas")
    monkeypatch.setattr(_parse, "read_pairs", getattr(_parse, f"read_pairs_{tokenizer}"))
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


# --------------------------------------------------------------------------- scikit-learn


def test_mq2008_matches_scikit_learn_on_every_file(mq2008_dir, monkeypatch):
    no_slow_path(monkeypatch)
    paths = sorted(mq2008_dir.glob("Fold*/*.txt"))
    assert len(paths) == 15, paths
    for path in paths:
        data = read_libsvm(path, cache=False)
        features, labels, qids = load_svmlight_file(str(path), query_id=True, dtype=np.float32)
        np.testing.assert_array_equal(data.features, features.toarray(), err_msg=str(path))
        np.testing.assert_array_equal(data.labels, labels, err_msg=str(path))
        np.testing.assert_array_equal(data.qids, qids, err_msg=str(path))
        assert data.features.shape[1] == 46
