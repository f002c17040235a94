"""read_libsvm / write_libsvm: parsing features, group files (LightGBM / XGBoost), exact error
messages, and scikit-learn parity (the cache: test_cache.py, its key: test_checksum.py)."""
import re
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


@pytest.mark.parametrize("text, why", [
    (b"", "it is empty"),
    (b"# nothing\n\n   \n\t# more\n", "only blank lines and comments"),
    (b"\xef\xbb\xbf\r\n", "only blank lines and comments"),
])
def test_file_without_documents_is_an_error_naming_it(tmp_path, text, why):
    path = _write(tmp_path, text, name="train.txt")
    with pytest.raises(ValueError) as error:
        _read(path)
    assert str(error.value) == f"{path}: the file has no documents ({why})"


def test_utf8_bom_at_the_start_is_accepted_like_crlf(tmp_path, monkeypatch):
    path = _write(tmp_path, b"\xef\xbb\xbf2 qid:1 1:0.5 2:3\r\n0 qid:1 1:1 2:2\r\n")
    with monkeypatch.context() as patch:
        _no_slow_path(patch)
        for chunk_bytes in (1, 1 << 20):
            data = _read(path, chunk_bytes=chunk_bytes)
            np.testing.assert_array_equal(data.features, [[0.5, 3], [1, 2]])
            np.testing.assert_array_equal(data.labels, [2, 0])
    # Only at the start: elsewhere it is garbage in a label.
    path = _write(tmp_path, b"2 qid:1 1:0.5\n\xef\xbb\xbf0 qid:1 1:1\n")
    with pytest.raises(ValueError) as error:
        _read(path)
    assert str(error.value) == f"{path}:2: invalid label: '\\ufeff0'"  # repr escapes it


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
    def fail(*args, **kwargs):
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


# --------------------------------------------------------------------------- group files

# LightGBM's examples/lambdarank layout: lines without qid:, counts in rank.train.query.
_RANK_TRAIN = (
    "0 10:0.89 11:0.75 3:0.01\n"
    "1 1:0.69 11:0.64\n"
    "0 2:0.5   # a comment\n"
    "2 4:1 1:0.25\n"
    "1 3:7\n")


def _rank_train(tmp_path, sizes="2\n3\n", suffix=".query", text=_RANK_TRAIN):
    path = _write(tmp_path, text, name="rank.train")
    group = _write(tmp_path, sizes, name="rank.train" + suffix)
    return path, group


def test_lightgbm_query_file_beside_the_data_gives_the_queries(tmp_path, monkeypatch):
    path, _ = _rank_train(tmp_path)
    expected = np.zeros((5, 11), np.float32)
    expected[0, [9, 10, 2]] = [0.89, 0.75, 0.01]
    expected[1, [0, 10]] = [0.69, 0.64]
    expected[2, 1] = 0.5
    expected[3, [3, 0]] = [1, 0.25]
    expected[4, 2] = 7
    _no_slow_path(monkeypatch)
    for chunk_bytes in (1, 30, 1 << 20):
        data = _read(path, chunk_bytes=chunk_bytes)
        np.testing.assert_array_equal(data.features, expected)
        np.testing.assert_array_equal(data.labels, [0, 1, 0, 2, 1])
        np.testing.assert_array_equal(data.qids, [0, 0, 1, 1, 1])
        assert data.qids.dtype == np.int64
        np.testing.assert_array_equal(data.query_offsets, [0, 2, 5])


def test_xgboost_group_file_and_the_query_file_wins_when_both_exist(tmp_path):
    path, _ = _rank_train(tmp_path, sizes="4\n1\n", suffix=".group")
    np.testing.assert_array_equal(_read(path).query_offsets, [0, 4, 5])
    _write(tmp_path, "1\n1\n3\n", name="rank.train.query")
    np.testing.assert_array_equal(_read(path).query_offsets, [0, 1, 2, 5])


def test_group_path_names_the_group_file(tmp_path):
    path = _write(tmp_path, _RANK_TRAIN, name="train.svm")
    group = _write(tmp_path, "\xef\xbb\xbf1\r\n\r\n  4 \t\r\n".encode("latin-1"), name="sizes.txt")
    data = _read(path, group_path=group)
    np.testing.assert_array_equal(data.query_offsets, [0, 1, 5])
    np.testing.assert_array_equal(data.qids, [0, 1, 1, 1, 1])
    with pytest.raises(FileNotFoundError) as error:
        _read(path, group_path=tmp_path / "nope.query")
    assert str(error.value) == f"{tmp_path / 'nope.query'}: no such group file"
    with pytest.raises(IsADirectoryError) as error:
        _read(path, group_path=tmp_path)
    assert str(error.value) == f"{tmp_path}: is a directory, not a group file"


def test_lines_without_qid_and_no_group_file_say_which_files_were_looked_for(tmp_path):
    path = _write(tmp_path, _RANK_TRAIN, name="rank.train")
    with pytest.raises(ValueError) as error:
        _read(path)
    assert str(error.value) == (
        f"{path}:1: expected 'qid:<id>' after the label (or a group file: found neither "
        f"{path}.query nor {path}.group): '10:0.89'")
    with pytest.raises(ValueError) as error:
        _read(path, group_path=False)
    assert str(error.value) == f"{path}:1: expected 'qid:<id>' after the label: '10:0.89'"


def test_qid_tokens_and_a_group_file_is_an_error_naming_both(tmp_path):
    text = "1 qid:5 1:1\n0 qid:5 1:2\n2 qid:6 1:3\n"
    path, group = _rank_train(tmp_path, sizes="2\n1\n", text=text)
    with pytest.raises(ValueError) as error:
        _read(path)
    assert str(error.value) == (
        f"{path}:1: unexpected 'qid:' token ({group} gives the queries; pass group_path=False "
        f"to read the qid: tokens instead): 'qid:5'")
    _write(tmp_path, "1 1:1\n0 1:2 qid:6\n", name="rank.train")  # anywhere in the line
    with pytest.raises(ValueError, match=r"rank.train:2: unexpected 'qid:' token \("):
        _read(path)
    _write(tmp_path, text, name="rank.train")
    data = _read(path, group_path=False)
    np.testing.assert_array_equal(data.qids, [5, 5, 6])
    np.testing.assert_array_equal(data.query_offsets, [0, 2, 3])


@pytest.mark.parametrize("sizes, total", [("2\n2\n", 4), ("5\n1\n", 6), ("3\n", 3), ("", 0)])
def test_group_sizes_must_add_up_to_the_documents(tmp_path, sizes, total):
    path, group = _rank_train(tmp_path, sizes=sizes)
    with pytest.raises(ValueError) as error:
        _read(path)
    assert str(error.value) == (f"{group}: the query sizes add up to {total} documents, but "
                                f"{path} has 5 documents")


@pytest.mark.parametrize("sizes, line, message", [
    ("2\n0\n3\n", 2, "query size must be a positive integer: '0'"),
    ("2\n-3\n", 2, "query size must be a positive integer: '-3'"),
    ("2\n1.5\n", 2, "query size must be a positive integer: '1.5'"),
    ("2\n3e0\n", 2, "query size must be a positive integer: '3e0'"),
    ("x\n", 1, "query size must be a positive integer: 'x'"),
    ("2\n3 0\n", 2, "expected one query size per line: '3 0'"),
    ("\n\n2\n\n0\n3\n", 5, "query size must be a positive integer: '0'"),  # blank lines
    ("1\n" * 3 + "00\n", 4, "query size must be a positive integer: '00'"),
])
def test_bad_group_sizes_name_the_group_file_and_line(tmp_path, sizes, line, message):
    path, group = _rank_train(tmp_path, sizes=sizes)
    with pytest.raises(ValueError) as error:
        _read(path)
    assert str(error.value) == f"{group}:{line}: {message}"


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("group_file", [".query", ".group", "sizes.txt"])
def test_group_file_round_trip_write_read_is_exact(tmp_path, sparse, group_file, monkeypatch):
    data = synthetic(num_queries=40, num_features=7, seed=5)
    data = LibSVMData(data.features, data.labels, data.qids, data.query_offsets,
                      np.array([f"d{i}" for i in range(data.num_documents)]))
    path = tmp_path / "synthetic.train"
    if group_file == "sizes.txt":
        group_file = tmp_path / group_file
    written = write_libsvm(data, path, sparse=sparse, group_file=group_file)
    expected_group = tmp_path / ("sizes.txt" if not isinstance(group_file, str)
                                 else "synthetic.train" + group_file)
    assert written == expected_group
    assert expected_group.read_text() == "".join(f"{n}\n" for n in data.list_sizes)
    assert "qid:" not in path.read_text()
    _no_slow_path(monkeypatch)
    back = _read(path, num_features=7, docids=True,
                 group_path=None if isinstance(group_file, str) else group_file)
    for name in ("features", "labels", "query_offsets", "docids"):
        np.testing.assert_array_equal(getattr(back, name), getattr(data, name), err_msg=name)
    np.testing.assert_array_equal(back.qids, np.repeat(np.arange(40), data.list_sizes))


def test_write_libsvm_writes_qid_lines_and_refuses_empty_queries_in_a_group_file(tmp_path):
    data = LibSVMData(np.array([[1, 0], [0, 2.5]], np.float32), np.array([1, 0], np.float32),
                      np.array([7, 9]), np.array([0, 1, 1, 2]))
    assert write_libsvm(data, tmp_path / "letor.txt") is None
    assert (tmp_path / "letor.txt").read_text() == "1 qid:7 1:1 2:0\n0 qid:9 1:0 2:2.5\n"
    with pytest.raises(ValueError) as error:
        write_libsvm(data, tmp_path / "rank.train", group_file=".query")
    assert str(error.value) == ("query 1 has no documents: a group file cannot express an "
                                "empty query.")


def test_mq2008_without_qids_plus_a_group_file_matches_scikit_learn(mq2008_dir, tmp_path,
                                                                     monkeypatch):
    """Real data in LightGBM's layout, checked against scikit-learn's own parse of it."""
    source = mq2008_dir / "Fold1" / "vali.txt"
    _, _, qids = load_svmlight_file(str(source), query_id=True, dtype=np.float32)
    starts = np.flatnonzero(np.r_[True, qids[1:] != qids[:-1]])
    sizes = np.diff(np.r_[starts, qids.size])
    path = tmp_path / "vali.txt"
    path.write_bytes(re.sub(rb" qid:\d+", b"", source.read_bytes()))
    (tmp_path / "vali.txt.query").write_text("".join(f"{n}\n" for n in sizes))
    features, labels = load_svmlight_file(str(path), dtype=np.float32, n_features=46)
    _no_slow_path(monkeypatch)
    data = _read(path, chunk_bytes=1 << 18)
    np.testing.assert_array_equal(data.features, features.toarray())
    np.testing.assert_array_equal(data.labels, labels)
    np.testing.assert_array_equal(data.query_offsets, np.r_[0, np.cumsum(sizes)])
    np.testing.assert_array_equal(data.qids, np.repeat(np.arange(sizes.size), sizes))


def test_group_file_error_deep_in_a_large_file_has_the_right_line(tmp_path):
    good = "1 " + " ".join(f"{j}:0.{j}" for j in range(1, 41)) + "\n"
    lines = ["# comment line\n", "\n"] + [good] * 3000
    lines[2500] = "1 1:0.1 3:1e39\n"
    path = _write(tmp_path, "".join(lines), name="big.train")
    _write(tmp_path, "10\n" * 300, name="big.train.query")
    with pytest.raises(ValueError) as error:
        _read(path, chunk_bytes=100_000)
    assert str(error.value) == f"{path}:2501: feature value overflows float32: '3:1e39'"


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
    path = _write(tmp_path, f"0 qid:1 1:0.5\n{line}\n2 qid:3 1:1\n")
    with pytest.raises(ValueError) as error:
        _read(path, num_features=4)
    assert str(error.value) == f"{path}:{lineno}: {message.format(path=path)}"


def test_largest_float32_is_accepted_and_values_round_to_float32(tmp_path):
    path = _write(tmp_path, "3.4028235e38 qid:1 1:3.4028235e38 2:-3.4028235e38 3:1e-50\n")
    data = _read(path)
    f32_max = np.finfo(np.float32).max
    np.testing.assert_array_equal(data.features, [[f32_max, -f32_max, 0.0]])
    np.testing.assert_array_equal(data.labels, [f32_max])


@pytest.mark.parametrize("line, token", [
    ("1 qid:1 100000000:1", "100000000:1"),
    ("1 qid:1 2:1 100001:1", "100001:1"),
    ("1 qid:1 1e20:1", "1e20:1"),
])
def test_huge_feature_index_is_an_error_not_a_huge_array(tmp_path, line, token):
    path = _write(tmp_path, f"0 qid:1 1:1\n{line}\n")
    with pytest.raises(ValueError) as error:
        _read(path)
    assert str(error.value) == (f"{path}:2: feature index exceeds max_features=100000 (pass a "
                                f"larger max_features if the index is real): '{token}'")


def test_max_features_is_a_parameter_and_num_features_overrides_it(tmp_path):
    path = _write(tmp_path, "0 qid:1 1:1\n1 qid:1 300:2\n")
    assert _read(path).features.shape == (2, 300)  # LightGBM's example has 300 features
    with pytest.raises(ValueError) as error:
        _read(path, max_features=299)
    assert str(error.value) == (f"{path}:2: feature index exceeds max_features=299 (pass a "
                                f"larger max_features if the index is real): '300:2'")
    assert _read(path, max_features=299, num_features=400).features.shape == (2, 400)
    wide = _write(tmp_path, "1 qid:1 200000:1.5\n", name="wide.txt")
    data = _read(wide, max_features=200_000)
    assert data.features.shape == (1, 200_000) and data.features[0, -1] == 1.5


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
    with pytest.raises(ValueError, match="`num_features` must be None or an int >= 1; got 0"):
        _read(path, num_features=0)
    with pytest.raises(ValueError, match="`null_value` must be finite in float32; got nan"):
        _read(path, null_value=float("nan"))
    with pytest.raises(ValueError, match="`null_value` must be finite in float32; got 1e"):
        _read(path, null_value=1e39)
    with pytest.raises(ValueError, match=re.escape(
            "`max_features` must be an int in [1, 2147483647]; got 0")):
        _read(path, max_features=0)
    with pytest.raises(ValueError, match="`group_path` must be None, False or a path; got True"):
        _read(path, group_path=True)
    with pytest.raises(FileNotFoundError) as error:
        _read(tmp_path / "missing.txt")
    assert str(error.value) == f"{tmp_path / 'missing.txt'}: no such file"


def test_a_directory_as_path_says_it_is_a_directory(tmp_path):
    folder = tmp_path / "Fold1"
    folder.mkdir()
    with pytest.raises(IsADirectoryError) as error:
        _read(folder)
    assert str(error.value) == f"{folder}: is a directory, not a LibSVM file"


def test_fast_parser_agrees_with_slow_parser_on_mutated_lines():
    """The vectorized parser accepts exactly the lines the reference parser accepts,
    with identical output (so the fast path never changes what a file means)."""
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
