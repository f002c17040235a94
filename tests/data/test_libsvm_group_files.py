"""read_libsvm / write_libsvm with group files: lines without ``qid:`` and the query
sizes in a file beside the data (LightGBM's ``.query``, XGBoost's ``.group``), their
round trip, their errors, and MQ2008 without qids against scikit-learn."""
import re

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from support.libsvm_files import no_slow_path, read_uncached, write_file
from tfr_extensions.data import LibSVMData, synthetic, write_libsvm

# LightGBM's examples/lambdarank layout: lines without qid:, counts in rank.train.query.
_RANK_TRAIN = (
    "0 10:0.89 11:0.75 3:0.01\n"
    "1 1:0.69 11:0.64\n"
    "0 2:0.5   # a comment\n"
    "2 4:1 1:0.25\n"
    "1 3:7\n")


def _rank_train(tmp_path, sizes="2\n3\n", suffix=".query", text=_RANK_TRAIN):
    path = write_file(tmp_path, text, name="rank.train")
    group = write_file(tmp_path, sizes, name="rank.train" + suffix)
    return path, group


def test_lightgbm_query_file_beside_the_data_gives_the_queries(tmp_path, monkeypatch):
    path, _ = _rank_train(tmp_path)
    expected = np.zeros((5, 11), np.float32)
    expected[0, [9, 10, 2]] = [0.89, 0.75, 0.01]
    expected[1, [0, 10]] = [0.69, 0.64]
    expected[2, 1] = 0.5
    expected[3, [3, 0]] = [1, 0.25]
    expected[4, 2] = 7
    no_slow_path(monkeypatch)
    for chunk_bytes in (1, 30, 1 << 20):
        data = read_uncached(path, chunk_bytes=chunk_bytes)
        np.testing.assert_array_equal(data.features, expected)
        np.testing.assert_array_equal(data.labels, [0, 1, 0, 2, 1])
        np.testing.assert_array_equal(data.qids, [0, 0, 1, 1, 1])
        assert data.qids.dtype == np.int64
        np.testing.assert_array_equal(data.query_offsets, [0, 2, 5])


def test_xgboost_group_file_and_the_query_file_wins_when_both_exist(tmp_path):
    path, _ = _rank_train(tmp_path, sizes="4\n1\n", suffix=".group")
    np.testing.assert_array_equal(read_uncached(path).query_offsets, [0, 4, 5])
    write_file(tmp_path, "1\n1\n3\n", name="rank.train.query")
    np.testing.assert_array_equal(read_uncached(path).query_offsets, [0, 1, 2, 5])


def test_group_path_names_the_group_file(tmp_path):
    path = write_file(tmp_path, _RANK_TRAIN, name="train.svm")
    group = write_file(tmp_path, "\xef\xbb\xbf1\r\n\r\n  4 \t\r\n".encode("latin-1"),
                       name="sizes.txt")
    data = read_uncached(path, group_path=group)
    np.testing.assert_array_equal(data.query_offsets, [0, 1, 5])
    np.testing.assert_array_equal(data.qids, [0, 1, 1, 1, 1])
    with pytest.raises(FileNotFoundError) as error:
        read_uncached(path, group_path=tmp_path / "nope.query")
    assert str(error.value) == f"{tmp_path / 'nope.query'}: no such group file"
    with pytest.raises(IsADirectoryError) as error:
        read_uncached(path, group_path=tmp_path)
    assert str(error.value) == f"{tmp_path}: is a directory, not a group file"


def test_lines_without_qid_and_no_group_file_say_which_files_were_looked_for(tmp_path):
    path = write_file(tmp_path, _RANK_TRAIN, name="rank.train")
    with pytest.raises(ValueError) as error:
        read_uncached(path)
    assert str(error.value) == (
        f"{path}:1: expected 'qid:<id>' after the label (or a group file: found neither "
        f"{path}.query nor {path}.group): '10:0.89'")
    with pytest.raises(ValueError) as error:
        read_uncached(path, group_path=False)
    assert str(error.value) == f"{path}:1: expected 'qid:<id>' after the label: '10:0.89'"


def test_qid_tokens_and_a_group_file_is_an_error_naming_both(tmp_path):
    text = "1 qid:5 1:1\n0 qid:5 1:2\n2 qid:6 1:3\n"
    path, group = _rank_train(tmp_path, sizes="2\n1\n", text=text)
    with pytest.raises(ValueError) as error:
        read_uncached(path)
    assert str(error.value) == (
        f"{path}:1: unexpected 'qid:' token ({group} gives the queries; pass group_path=False "
        f"to read the qid: tokens instead): 'qid:5'")
    write_file(tmp_path, "1 1:1\n0 1:2 qid:6\n", name="rank.train")  # anywhere in the line
    with pytest.raises(ValueError, match=r"rank.train:2: unexpected 'qid:' token \("):
        read_uncached(path)
    write_file(tmp_path, text, name="rank.train")
    data = read_uncached(path, group_path=False)
    np.testing.assert_array_equal(data.qids, [5, 5, 6])
    np.testing.assert_array_equal(data.query_offsets, [0, 2, 3])


@pytest.mark.parametrize("sizes, total", [("2\n2\n", 4), ("5\n1\n", 6), ("3\n", 3), ("", 0)])
def test_group_sizes_must_add_up_to_the_documents(tmp_path, sizes, total):
    path, group = _rank_train(tmp_path, sizes=sizes)
    with pytest.raises(ValueError) as error:
        read_uncached(path)
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
        read_uncached(path)
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
    no_slow_path(monkeypatch)
    back = read_uncached(path, num_features=7, docids=True,
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
    no_slow_path(monkeypatch)
    data = read_uncached(path, chunk_bytes=1 << 18)
    np.testing.assert_array_equal(data.features, features.toarray())
    np.testing.assert_array_equal(data.labels, labels)
    np.testing.assert_array_equal(data.query_offsets, np.r_[0, np.cumsum(sizes)])
    np.testing.assert_array_equal(data.qids, np.repeat(np.arange(sizes.size), sizes))


def test_group_file_error_deep_in_a_large_file_has_the_right_line(tmp_path):
    good = "1 " + " ".join(f"{j}:0.{j}" for j in range(1, 41)) + "\n"
    lines = ["# comment line\n", "\n"] + [good] * 3000
    lines[2500] = "1 1:0.1 3:1e39\n"
    path = write_file(tmp_path, "".join(lines), name="big.train")
    write_file(tmp_path, "10\n" * 300, name="big.train.query")
    with pytest.raises(ValueError) as error:
        read_uncached(path, chunk_bytes=100_000)
    assert str(error.value) == f"{path}:2501: feature value overflows float32: '3:1e39'"
