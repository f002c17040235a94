"""LibSVM/LETOR reading speed and memory: ``tfrx.data.read_libsvm`` against scikit-learn.

Generates an MSLR-WEB30K-like file (136 features, about 120 documents per query,
MSLR's number formats: counts, 6-digit decimals, some negative and large values)
of ``--size-mb`` megabytes in a temporary directory, then in this one process
times, alternating, ``read_libsvm(path, cache=False)`` and scikit-learn's
``load_svmlight_file(path, query_id=True, dtype=np.float32)`` (its sparse CSR
result, without densifying: the conservative comparison), and prints MB/s of
both and their ratio (the target: ``TARGET_RATIO``). Both results are checked equal.

Then the binary cache: the first cached read (parse + write), the second read
(a memory map), and the second read touching every byte of the features
(``mmap=False``, a full load), each as a speedup over parsing (target: 20x).
Every cached read checksums the whole file (the cache is keyed on the content),
so the checksum alone is timed too, and the hit-vs-parse ratio printed with it.

``--path`` reads an existing file instead (e.g. MQ2008's ``Fold1/train.txt``),
``--synthetic`` writes ``tfrx.data.synthetic`` data (136 features) with
``tfrx.data.write_libsvm`` (``--group-file`` in LightGBM's layout: no ``qid:``,
plus ``<file>.query``).

Peak memory: the peak resident set size (VmHWM, reset through
``/proc/self/clear_refs`` before each phase) over the RSS before it, next to the
size of the dense float32 array.

    python -m benchmarks.libsvm_read                     # 120 MB, 3 repeats
    python -m benchmarks.libsvm_read --size-mb 1000 --no-sklearn --repeats 1
    python -m benchmarks.libsvm_read --path ../shared/data/MQ2008/Fold1/train.txt
    python -m benchmarks.libsvm_read --synthetic 200000 --group-file --no-sklearn
"""
import argparse
import json
import os
import pathlib
import shutil
import tempfile
import time

import numpy as np

from tfr_extensions.data import read_libsvm, synthetic, write_libsvm
from tfr_extensions.data.checksum import file_checksum

NUM_FEATURES = 136
TARGET_RATIO = 4.0
TARGET_CACHE_SPEEDUP = 20.0


def _token_pool(rng: np.random.Generator, pool: int = 512) -> np.ndarray:
    """object [F, pool]: b"j:value" tokens in MSLR's formats per feature j."""
    kinds = rng.choice(["count", "ratio", "score", "zero", "big"], NUM_FEATURES,
                       p=[0.35, 0.3, 0.2, 0.1, 0.05])
    tokens = np.empty((NUM_FEATURES, pool), object)
    for j, kind in enumerate(kinds):
        if kind == "count":
            values = [str(v) for v in rng.geometric(0.2, pool) - 1]
        elif kind == "ratio":
            values = [f"{v:.6f}".rstrip("0").rstrip(".") or "0" for v in rng.random(pool)]
        elif kind == "score":
            values = [f"{v:.6g}" for v in rng.normal(-10.0, 8.0, pool)]
        elif kind == "big":
            values = [str(v) for v in rng.integers(0, 200_000, pool)]
        else:
            values = ["0"] * pool
        tokens[j] = [f"{j + 1}:{v}".encode() for v in values]
    return tokens


def generate(path: pathlib.Path, size_mb: float, seed: int = 0) -> int:
    """Writes an MSLR-like file of about ``size_mb`` MB; returns its size in bytes."""
    rng = np.random.default_rng(seed)
    pool = _token_pool(rng)
    columns = np.arange(NUM_FEATURES)
    target, written, qid = int(size_mb * 1e6), 0, 0
    with open(path, "wb") as handle:
        while written < target:
            qid += 1
            lines = []
            for _ in range(20):  # queries per write
                size = int(rng.integers(60, 181))  # mean 120 documents per query
                labels = np.minimum(rng.geometric(0.5, size) - 1, 4)
                picks = pool[columns, rng.integers(0, pool.shape[1], (size, NUM_FEATURES))]
                prefix = f" qid:{qid}".encode()
                lines.extend(b"%d%s %s\n" % (label, prefix, b" ".join(row))
                             for label, row in zip(labels, picks))
                qid += 1
            text = b"".join(lines)
            handle.write(text)
            written += len(text)
    return written


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _measure(function):
    """(result, (wall seconds, CPU seconds), peak RSS growth in MiB) of ``function()``."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass
    before = _rss_kib("VmRSS")
    start, cpu_start = time.perf_counter(), time.process_time()
    result = function()
    seconds = (time.perf_counter() - start, time.process_time() - cpu_start)
    return result, seconds, (_rss_kib("VmHWM") - before) / 1024


def _speed(name: str, size: int, times, peaks) -> dict:
    wall, cpu = (min(t[i] for t in times) for i in (0, 1))
    stats = {"wall_seconds": [t[0] for t in times], "cpu_seconds": [t[1] for t in times],
             "mb_per_s": size / 1e6 / wall, "cpu_mb_per_s": size / 1e6 / cpu,
             "peak_rss_growth_mib": max(peaks)}
    print(f"{name:8s}: best {wall:.2f} s wall ({stats['mb_per_s']:.1f} MB/s), "
          f"{cpu:.2f} s CPU ({stats['cpu_mb_per_s']:.1f} MB/s), peak RSS +{max(peaks):.0f} MiB")
    return stats


def _cache_phase(path: pathlib.Path, cache: pathlib.Path, parse_seconds: float,
                 repeats: int) -> dict:
    _, (first, _), _ = _measure(lambda: read_libsvm(path, cache=cache))
    mapped = loaded = checksum = float("inf")
    for _ in range(max(repeats, 3)):  # best of: these take milliseconds, noise dominates
        hit, (seconds, _), _ = _measure(lambda: read_libsvm(path, cache=cache))
        assert isinstance(hit.features, np.memmap)
        del hit
        mapped = min(mapped, seconds)
        _, (seconds, _), _ = _measure(lambda: read_libsvm(path, cache=cache, mmap=False))
        loaded = min(loaded, seconds)
        _, (seconds, _), _ = _measure(lambda: file_checksum(path))
        checksum = min(checksum, seconds)
    speedup = parse_seconds / loaded
    print(f"cache   : first read {first:.2f} s (parse + write); hit {mapped * 1e3:.1f} ms "
          f"memory-mapped ({parse_seconds / mapped:.0f}x), {loaded * 1e3:.0f} ms fully loaded "
          f"({speedup:.0f}x; target {TARGET_CACHE_SPEEDUP:.0f}x: "
          f"{'PASS' if speedup >= TARGET_CACHE_SPEEDUP else 'FAIL'})")
    size = os.path.getsize(path)
    ratio = parse_seconds / mapped
    print(f"cache key: checksum of {size / 1e6:.1f} MB in {checksum * 1e3:.1f} ms "
          f"({size / 1e9 / checksum:.1f} GB/s, {checksum / mapped:.0%} of a hit); parse "
          f"{parse_seconds:.3f} s vs cache hit {mapped * 1e3:.1f} ms (checksum + memory map): "
          f"hit {ratio:.0f}x faster than parsing (target {TARGET_CACHE_SPEEDUP:.0f}x: "
          f"{'PASS' if ratio >= TARGET_CACHE_SPEEDUP else 'FAIL'})")
    return {"first_read_seconds": first, "hit_mmap_seconds": mapped,
            "hit_full_load_seconds": loaded, "speedup_mmap": ratio,
            "speedup_full_load": speedup, "checksum_seconds": checksum,
            "parse_seconds": parse_seconds}


def generate_synthetic(path: pathlib.Path, num_documents: int, group_file: bool) -> int:
    """``write_libsvm(synthetic(...))``: 136 features, about ``num_documents`` documents."""
    data = synthetic(num_queries=max(1, num_documents // 100), num_features=NUM_FEATURES,
                     seed=0, list_size=(50, 150))
    write_libsvm(data, path, group_file=".query" if group_file else None)
    return os.path.getsize(path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, default=120.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-sklearn", action="store_true", help="only our reader (huge files)")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--path", help="read this existing file instead of generating one")
    parser.add_argument("--synthetic", type=int, metavar="DOCUMENTS",
                        help="write tfrx.data.synthetic data of about this many documents")
    parser.add_argument("--group-file", action="store_true",
                        help="with --synthetic: LightGBM's layout (no qid:, a .query file)")
    args = parser.parse_args(argv)

    workdir = pathlib.Path(tempfile.mkdtemp(prefix="libsvm_bench_"))
    try:
        start = time.perf_counter()
        if args.path:
            path = pathlib.Path(args.path)
            size = os.path.getsize(path)
            print(f"reading {size / 1e6:.1f} MB: {path}")
        elif args.synthetic:
            path = workdir / "synthetic.train"
            size = generate_synthetic(path, args.synthetic, args.group_file)
            print(f"wrote {size / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s: {path}")
        else:
            path = workdir / "mslr_like.txt"
            size = generate(path, args.size_mb)
            print(f"generated {size / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s: {path}")
        with_qids = not (args.synthetic and args.group_file)  # else sklearn reads no qid:
        ours_times, ours_peaks, sklearn_times, sklearn_peaks = [], [], [], []
        for _ in range(args.repeats):  # alternating, so both see the same machine load
            ours, seconds, peak = _measure(lambda: read_libsvm(path, cache=False))
            ours_times.append(seconds)
            ours_peaks.append(peak)
            if not args.no_sklearn:
                from sklearn.datasets import load_svmlight_file
                theirs, seconds, peak = _measure(lambda: load_svmlight_file(
                    str(path), query_id=with_qids, dtype=np.float32))
                sklearn_times.append(seconds)
                sklearn_peaks.append(peak)
        dense_mib = ours.features.nbytes / 2**20
        print(f"{ours.num_documents} documents, {ours.num_queries} queries, "
              f"dense float32 features {dense_mib:.0f} MiB")
        results = {"file_mb": size / 1e6, "documents": int(ours.num_documents),
                   "queries": int(ours.num_queries), "dense_features_mib": dense_mib,
                   "ours": _speed("ours", size, ours_times, ours_peaks)}
        if not args.no_sklearn:
            features, labels = theirs[:2]
            assert np.array_equal(features.toarray(), ours.features), "features differ"
            assert np.array_equal(labels, ours.labels)
            assert not with_qids or np.array_equal(theirs[2], ours.qids), "qids differ"
            del theirs, features
            results["sklearn"] = _speed("sklearn", size, sklearn_times, sklearn_peaks)
            ratio = results["ours"]["mb_per_s"] / results["sklearn"]["mb_per_s"]
            cpu_ratio = results["ours"]["cpu_mb_per_s"] / results["sklearn"]["cpu_mb_per_s"]
            results.update(ratio=ratio, cpu_ratio=cpu_ratio)
            print(f"ratio ours/sklearn: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU time "
                  f"(target {TARGET_RATIO:.0f}x: {'PASS' if ratio >= TARGET_RATIO else 'FAIL'})"
                  f"; arrays identical")
        del ours
        results["cache"] = _cache_phase(path, workdir / "cache", min(t[0] for t in ours_times),
                                        args.repeats)
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(results, indent=2))
        return results
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main()
