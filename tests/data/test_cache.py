"""The LibSVM reader's binary cache: hits, invalidation, keys (pinned: they change only
with :data:`CACHE_FORMAT`) and an unwritable cache folder. Damaged entries:
``test_cache_damage.py``."""
import os
import pathlib

import numpy as np
import pytest

from tfr_extensions.data import checksum as checksum_module
from tfr_extensions.data import read_libsvm, synthetic, write_libsvm
from tfr_extensions.data.cache import CACHE_FORMAT, entry_path, read_options

_NO_QIDS = "0 1:0.5\n1 2:1\n0 1:2\n2 3:1\n1 1:3\n"  # 5 documents, queries from a group file


def _write(tmp_path, text, name="data.txt"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_entry_names_are_those_of_earlier_versions():
    """Entry names pinned for format 3 (entries with a manifest); a change of the key
    function must bump CACHE_FORMAT, which changes them all."""
    assert CACHE_FORMAT == 3
    cache, path = pathlib.Path("/cache"), pathlib.Path("/data/rank.train")
    options = read_options(num_features=None, null_value=0, docids=False)
    assert options == {"num_features": None, "null_value": 0.0, "docids": False, "group": None}
    assert entry_path(cache, path, "36:0123abcd", options) == (
        cache / "rank.train.05eaf8d20f.b3c15dbe5c898714")
    options = read_options(num_features=46, null_value=-1, docids=True,
                           group=pathlib.Path("/data/rank.train.query"), group_bytes=b"2\n1\n")
    assert entry_path(cache, path, "36:0123abcd", options).name == (
        "rank.train.05eaf8d20f.e25405c243c8655a")


def test_unwritable_cache_warns_and_still_reads(tmp_path):
    path = _write(tmp_path, "1 qid:1 1:1\n")
    not_a_dir = _write(tmp_path, "x", name="cache_file")
    with pytest.warns(UserWarning, match="could not write the cache entry"):
        assert read_libsvm(path, cache=not_a_dir).features.tolist() == [[1.0]]


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


def test_cache_sees_a_same_size_rewrite_with_the_old_mtime_restored(tmp_path):
    """``cp -p``, ``rsync -t`` and ``tar`` put the old mtime back: the key is the content."""
    path = _write(tmp_path, "1 qid:1 1:1\n0 qid:1 1:3\n")
    cache = tmp_path / "cache"
    assert read_libsvm(path, cache=cache).features.tolist() == [[1.0], [3.0]]
    assert isinstance(read_libsvm(path, cache=cache).features, np.memmap)  # a hit
    stat = os.stat(path)
    path.write_text("1 qid:1 1:2\n0 qid:1 1:3\n")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == stat.st_mtime_ns and os.stat(path).st_size == stat.st_size
    again = read_libsvm(path, cache=cache)
    assert not isinstance(again.features, np.memmap)  # parsed, not the old entry
    assert again.features.tolist() == [[2.0], [3.0]]
    assert read_libsvm(path, cache=cache).features.tolist() == [[2.0], [3.0]]
    assert len(list(cache.iterdir())) == 1


def test_cache_keys_on_the_group_file_content(tmp_path):
    path = _write(tmp_path, _NO_QIDS, name="rank.train")
    group = _write(tmp_path, "2\n3\n", name="rank.train.query")
    cache = tmp_path / "cache"
    assert read_libsvm(path, cache=cache).query_offsets.tolist() == [0, 2, 5]
    assert isinstance(read_libsvm(path, cache=cache).features, np.memmap)
    stat = os.stat(group)
    group.write_text("3\n2\n")  # same size, old mtime: only the content tells
    os.utime(group, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    data = read_libsvm(path, cache=cache)
    assert data.query_offsets.tolist() == [0, 3, 5] and data.qids.tolist() == [0, 0, 0, 1, 1]
    group.unlink()  # the same data file read another way is another entry
    with pytest.raises(ValueError, match="expected 'qid:<id>' after the label"):
        read_libsvm(path, cache=cache)
    other = _write(tmp_path, "1\n4\n", name="other.query")
    assert read_libsvm(path, cache=cache, group_path=other).query_offsets.tolist() == [0, 1, 5]


def test_cache_keys_include_options(tmp_path):
    path = _write(tmp_path, "1 qid:1 1:NULL #docid = d1\n")
    cache = tmp_path / "cache"
    assert read_libsvm(path, cache=cache).features.tolist() == [[0.0]]
    assert read_libsvm(path, cache=cache, null_value=5.0).features.tolist() == [[5.0]]
    assert read_libsvm(path, cache=cache, num_features=2).features.shape == (1, 2)
    assert read_libsvm(path, cache=cache, docids=True).docids.tolist() == ["d1"]
    assert read_libsvm(path, cache=cache, docids=True).docids.tolist() == ["d1"]


def test_a_file_of_many_segments_read_in_small_blocks_hits_its_entry(tmp_path, monkeypatch):
    """The key of the bytes parsed (cache write) finds the entry at the next lookup."""
    monkeypatch.setattr(checksum_module, "SEGMENT_BYTES", 64)
    data = synthetic(num_queries=6, num_features=3, seed=2)
    path = tmp_path / "multi_segment.txt"
    write_libsvm(data, path)
    assert os.path.getsize(path) > 10 * 64
    cache = tmp_path / "cache"
    read_libsvm(path, cache=cache, chunk_bytes=7)
    assert isinstance(read_libsvm(path, cache=cache, chunk_bytes=7).features, np.memmap)
