"""The cost of verifying LibSVM cache entries: a cached read, verified against unverified.

Writes an MSLR-WEB30K-like file (``benchmarks.libsvm_read.generate``: 136 features,
MSLR's number formats) of ``--size-mb`` megabytes (default 2400: about the 2.3M
documents of an MSLR-WEB30K fold's ``train.txt``), reads it once to write its cache
entry, then times, alternating, each the median of ``--repeats`` with the page cache warm
(alternating and medians: on a shared machine the load moves every figure):

* ``unverified``: what a cached read did before entries were verified: the source
  file's content key (:func:`~tfr_extensions.data.checksum.file_checksum`, on every
  read) and ``np.load`` of the entry's arrays (``features`` memory-mapped);
* ``first open``: ``read_libsvm`` on a hit the first time this process opens the entry
  (sizes, shapes and dtypes, and the checksum of every file of the entry);
* ``later reads``: ``read_libsvm`` on a hit once verified (sizes, shapes and dtypes);

and the speed of the hashes over ``features.npy``: the entry's CRC-32 checksum
(threads, as verification runs it) and, for comparison, hashlib's BLAKE2b and
SHA-256 on one thread.

    python -m benchmarks.cache_verification                   # MSLR size, 3 repeats
    python -m benchmarks.cache_verification --size-mb 200     # quicker
"""
import argparse
import hashlib
import json
import pathlib
import shutil
import tempfile
import time

import numpy as np

from benchmarks.libsvm_read import generate
from tfr_extensions.data import cache as cache_module
from tfr_extensions.data import read_libsvm
from tfr_extensions.data.checksum import file_checksum


def _seconds(function):
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _medians(functions, repeats):
    """name -> the median seconds of ``functions[name]()``, all run in turn each repeat."""
    times = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            times[name].append(_seconds(function))
    return {name: float(np.median(values)) for name, values in times.items()}


def _hash_file(path, make):
    digest = make()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(8 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=2400.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--folder", default=None, help="where to write (default: a temp dir)")
    args = parser.parse_args(argv)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="tfrx_cache_bench_", dir=args.folder))
    try:
        path, cache = folder / "train.txt", folder / "cache"
        source_bytes = generate(path, args.size_mb)
        data = read_libsvm(path, cache=cache)  # parses, writes the entry
        entry = next(p for p in cache.iterdir() if p.is_dir())
        files = {p.name: p.stat().st_size for p in entry.iterdir()}
        entry_bytes = sum(files.values())
        names = ("features", "labels", "qids", "query_offsets")

        def unverified():
            file_checksum(path)
            return [np.load(entry / f"{n}.npy", mmap_mode="r" if n == "features" else None)
                    for n in names]

        def first_open():
            cache_module._VERIFIED.clear()  # as in a new process
            assert isinstance(read_libsvm(path, cache=cache).features, np.memmap)

        def later_read():
            assert isinstance(read_libsvm(path, cache=cache).features, np.memmap)

        first_open()  # warm the page cache
        features = entry / "features.npy"
        size = features.stat().st_size
        seconds = _medians({
            "unverified_s": unverified, "first_open_s": first_open,
            "later_read_s": later_read,  # after first_open: the entry is verified
            "source_key_s": lambda: file_checksum(path),
            "crc32_segments": lambda: file_checksum(features),
            "blake2b_1_thread": lambda: _hash_file(features, hashlib.blake2b),
            "sha256_1_thread": lambda: _hash_file(features, hashlib.sha256)}, args.repeats)
        results = {"source_mb": source_bytes / 1e6, "documents": int(data.num_documents),
                   "entry_mb": entry_bytes / 1e6}
        for name, value in seconds.items():
            if name.endswith("_s"):
                results[name] = value
            else:
                results[f"{name}_mb_per_s"] = size / 1e6 / value
        base = results["unverified_s"]
        results["first_open_overhead"] = results["first_open_s"] / base - 1
        results["later_read_overhead"] = results["later_read_s"] / base - 1
        print(f"source {results['source_mb']:.0f} MB, {results['documents']} documents; "
              f"entry {results['entry_mb']:.0f} MB")
        print(f"cached read, unverified:  {base:.3f} s (of which the source's key "
              f"{results['source_key_s']:.3f} s)")
        print(f"verified, first open:     {results['first_open_s']:.3f} s "
              f"({results['first_open_overhead']:+.0%})")
        print(f"verified, later reads:    {results['later_read_s']:.3f} s "
              f"({results['later_read_overhead']:+.0%})")
        print("hash of features.npy: " + ", ".join(
            f"{k[:-9]} {v:.0f} MB/s" for k, v in results.items() if k.endswith("_mb_per_s")))
        print(json.dumps(results))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
