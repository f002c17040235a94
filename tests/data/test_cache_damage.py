"""A damaged LibSVM cache entry never fails a read and never changes its result.

Each file of an entry (every array, and the manifest) is damaged in turn: truncated to
half, emptied (as after a power loss), or 64 bytes overwritten in the data or in the
``.npy`` header. The next read warns once, naming the entry, returns the arrays of the
source file, and rewrites the entry, which the read after serves again (memory-mapped)
without a warning.
"""
import os
import pathlib
import warnings

import numpy as np
import pytest

from support.damage import empty, overwrite, truncate_to_half
from tfr_extensions.data import cache as cache_module
from tfr_extensions.data import read_libsvm, synthetic, write_libsvm
from tfr_extensions.data.durable import MANIFEST_FILE

FILES = ("features.npy", "labels.npy", "qids.npy", "query_offsets.npy", "docids.npy",
         MANIFEST_FILE)
ARRAYS = ("features", "labels", "qids", "query_offsets", "docids")


DAMAGE = {
    "truncated_to_half": truncate_to_half,
    "emptied": empty,
    "64_bytes_overwritten": overwrite,
    "header_overwritten": lambda path: overwrite(path, 0),
}


@pytest.fixture()
def source(tmp_path):
    """A LibSVM file of 20 queries with docids, and the arrays a read without cache gives."""
    data = synthetic(num_queries=20, num_features=5, seed=4)
    data = data.__class__(data.features, data.labels, data.qids, data.query_offsets,
                          np.array([f"d{i}" for i in range(data.num_documents)]))
    path = tmp_path / "source.txt"
    write_libsvm(data, path)
    return path, read_libsvm(path, cache=False, docids=True)


def only_entry(folder: pathlib.Path) -> pathlib.Path:
    entries = [p for p in folder.iterdir() if p.is_dir()]
    assert len(entries) == 1, entries
    return entries[0]


def assert_same(got, want):
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
        assert getattr(got, name).dtype == getattr(want, name).dtype, name


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("name", FILES)
def test_a_damaged_entry_warns_once_and_reads_the_source(source, tmp_path, name, damage):
    path, want = source
    cache = tmp_path / "cache"
    read_libsvm(path, cache=cache, docids=True)  # parses and writes the entry
    entry = only_entry(cache)
    DAMAGE[damage](entry / name)

    with pytest.warns(UserWarning, match=f"cache entry {entry} is damaged") as caught:
        got = read_libsvm(path, cache=cache, docids=True)
    assert len([w for w in caught if "is damaged" in str(w.message)]) == 1
    assert_same(got, want)
    assert not isinstance(got.features, np.memmap)  # parsed, not served from the entry

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rewritten entry: no warning
        again = read_libsvm(path, cache=cache, docids=True)
    assert isinstance(again.features, np.memmap)  # a hit of the rewritten entry
    assert_same(again, want)
    assert only_entry(cache) == entry


def test_a_missing_array_or_manifest_is_an_incomplete_entry(source, tmp_path):
    path, want = source
    cache = tmp_path / "cache"
    read_libsvm(path, cache=cache, docids=True)
    entry = only_entry(cache)
    (entry / "qids.npy").unlink()
    with pytest.warns(UserWarning, match=r"damaged \(qids.npy is missing\)"):
        assert_same(read_libsvm(path, cache=cache, docids=True), want)
    (entry / MANIFEST_FILE).unlink()
    with pytest.warns(UserWarning, match=rf"damaged \({MANIFEST_FILE} is missing\)"):
        assert_same(read_libsvm(path, cache=cache, docids=True), want)


def test_checksums_are_checked_at_the_first_open_in_a_process_sizes_at_every_read(
        source, tmp_path):
    """A same-size overwrite that keeps the modification time, after this process
    verified the entry, is seen by the next process (here: the record cleared); a
    change of size is seen at once."""
    path, want = source
    cache = tmp_path / "cache"
    read_libsvm(path, cache=cache, docids=True)
    entry = only_entry(cache)
    assert_same(read_libsvm(path, cache=cache, docids=True), want)  # verified: recorded
    labels = entry / "labels.npy"
    stat = os.stat(labels)
    overwrite(labels, stat.st_size - 64)
    os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not np.array_equal(read_libsvm(path, cache=cache, docids=True).labels, want.labels)
    cache_module._VERIFIED.clear()  # a new process
    with pytest.warns(UserWarning, match=r"labels.npy does not match its checksum"):
        assert_same(read_libsvm(path, cache=cache, docids=True), want)
    assert_same(read_libsvm(path, cache=cache, docids=True), want)  # verified: recorded
    truncate_to_half(entry / "features.npy")
    with pytest.warns(UserWarning, match=r"features.npy has \d+ bytes, its manifest says"):
        assert_same(read_libsvm(path, cache=cache, docids=True), want)


def test_the_manifest_records_shapes_dtypes_sizes_and_checksums(source, tmp_path):
    path, want = source
    cache = tmp_path / "cache"
    read_libsvm(path, cache=cache, docids=True)
    entry = only_entry(cache)
    manifest = cache_module.durable.verify_folder(entry)
    assert manifest["arrays"]["features"] == {"shape": list(want.features.shape),
                                              "dtype": "<f4"}
    assert set(manifest["files"]) == {f"{name}.npy" for name in ARRAYS}
    for name, record in manifest["files"].items():
        assert record["bytes"] == os.path.getsize(entry / name)
        assert record["checksum"].startswith(f"{record['bytes']}:")
    assert not list(cache.glob("*.tmp"))
