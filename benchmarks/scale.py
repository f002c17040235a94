"""MSLR-WEB30K scale: read, cache, one training epoch, and LightGBM on the same arrays.

Writes, once, an MSLR-WEB30K-sized synthetic LETOR fold to a temporary folder
(``train.txt``: about 19k queries, 2.3M documents, 136 features, values with
three decimals like MSLR's; ``vali.txt`` and ``test.txt`` of 2,000 queries
each), then measures, each step in its own process so that its peak RSS is
its own:

1. ``read``: ``tfrx.data.read_libsvm`` of ``train.txt`` with an empty cache
   (parse + write the cache), and again (a cache hit);
2. ``train``: one epoch of ``python -m pipelines.train`` (``R4.L``,
   ``twin_ndcg_type3``, batch 32, lists padded to the longest of each batch,
   validation and test evaluation included);
3. ``lightgbm``: ``lgb.train`` with the ``lambdarank`` objective, 100 trees at
   LightGBM's defaults (31 leaves, learning rate 0.1) on the same arrays (the
   cached read), and the same 100 trees' time with our reader's arrays
   already in memory.

It prints seconds and peak RSS per step. Everything must fit in 24 GiB.

    python -m benchmarks.scale [--queries 18900] [--workdir DIR] [--steps read train lightgbm]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

READ = """
import json, sys, time
import tfr_extensions as tfrx
path, cache = sys.argv[1], sys.argv[2]
start = time.perf_counter(); data = tfrx.data.read_libsvm(path, cache=cache)
cold = time.perf_counter() - start
start = time.perf_counter(); hit = tfrx.data.read_libsvm(path, cache=cache)
warm = time.perf_counter() - start
print("RESULT" + json.dumps({"parse_and_cache_s": cold, "cache_hit_s": warm,
      "documents": data.num_documents, "queries": data.num_queries,
      "features": data.num_features, "features_gb": data.features.nbytes / 2**30}))
"""

LIGHTGBM = """
import json, sys, time
import lightgbm as lgb, numpy as np
import tfr_extensions as tfrx
path, cache, trees = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = tfrx.data.read_libsvm(path, cache=cache)
start = time.perf_counter()
dataset = lgb.Dataset(np.asarray(data.features), data.labels, group=data.list_sizes,
                      params={"verbose": -1})
dataset.construct()
construct = time.perf_counter() - start
start = time.perf_counter()
lgb.train({"objective": "lambdarank", "verbose": -1, "num_threads": 2}, dataset,
          num_boost_round=trees)
print("RESULT" + json.dumps({"dataset_construct_s": construct,
                             "seconds_per_100_trees": (time.perf_counter() - start) * 100 / trees}))
"""


def write_fold(folder: str, queries: int, seed: int = 0) -> Dict[str, float]:
    """train/vali/test.txt of MSLR-WEB30K's shape; returns sizes and the write time."""
    import tfr_extensions as tfrx

    start = time.perf_counter()
    sizes = {}
    for part, count, part_seed in (("train", queries, seed), ("vali", 2000, seed + 1),
                                   ("test", 2000, seed + 2)):
        data = tfrx.data.synthetic(num_queries=count, num_features=136, seed=part_seed,
                                   list_size=(1, 240))
        features = np.round(data.features, 3)  # MSLR's values have few digits
        data = tfrx.data.LibSVMData(features, data.labels, data.qids, data.query_offsets)
        path = os.path.join(folder, f"{part}.txt")
        tfrx.data.write_libsvm(data, path)
        sizes[f"{part}_documents"] = data.num_documents
        sizes[f"{part}_gb"] = os.path.getsize(path) / 2**30
    sizes["write_s"] = time.perf_counter() - start
    return sizes


#: Runs ``-m module args...`` or ``-c code args...`` and, at exit, prints the
#: process's own peak RSS (``VmHWM`` of its address space: unlike the rusage
#: of a child, it does not start from the RSS of the parent that forked it).
PEAK_RSS_WRAPPER = """
import atexit, runpy, sys
def report():
    with open("/proc/self/status") as status:
        kib = next(line for line in status if line.startswith("VmHWM")).split()[1]
    print("PEAK_RSS_KIB", kib, file=sys.stderr, flush=True)
atexit.register(report)
kind, target, *args = sys.argv[1:]
if kind == "-m":
    sys.argv = [target, *args]
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    sys.argv = ["-c", *args]
    exec(compile(target, "<child>", "exec"), {"__name__": "__main__"})
"""


def run_child(args: List[str], env: Optional[dict] = None) -> Dict[str, float]:
    """Runs ``python <args>`` (``-m module ...`` or ``-c code ...``); returns its
    wall time, its own peak RSS and its RESULT."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", PEAK_RSS_WRAPPER, *args], stdout=out,
                              stderr=err, text=True, cwd=REPO,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {})))
        seconds = time.perf_counter() - start
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{args[:3]} failed:\n{stderr[-4000:]}")
    peak_kib = int(stderr.rsplit("PEAK_RSS_KIB", 1)[1].split()[0])
    result = {"wall_s": seconds, "peak_rss_gb": peak_kib / 2**20}
    if "RESULT" in stdout:
        result.update(json.loads(stdout.split("RESULT", 1)[1].splitlines()[0]))
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=18900, help="training queries")
    parser.add_argument("--workdir", default=None, help="keep the fold here (default: temp)")
    parser.add_argument("--steps", nargs="+", default=["read", "train", "lightgbm"],
                        choices=["read", "train", "lightgbm"])
    parser.add_argument("--trees", type=int, default=100)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as temp:
        folder = args.workdir or temp
        os.makedirs(folder, exist_ok=True)
        cache = os.path.join(folder, "cache")
        train_path = os.path.join(folder, "train.txt")
        if not os.path.exists(train_path):
            print("write:", json.dumps(write_fold(folder, args.queries)), flush=True)
        if "read" in args.steps:
            result = run_child(["-c", READ, train_path, cache])
            print("read:", json.dumps(result), flush=True)
        if "train" in args.steps:
            result = run_child(["-m", "pipelines.train", "--data", folder,
                                "--epochs", "1", "--no-tensorboard", "--verbose", "0",
                                "--output-dir", os.path.join(folder, "run"), "--overwrite"],
                               env={"TFRX_CACHE_DIR": cache})
            print("train (one epoch, with evaluation):", json.dumps(result), flush=True)
        if "lightgbm" in args.steps:
            result = run_child(["-c", LIGHTGBM, train_path, cache,
                                str(args.trees)])
            print("lightgbm lambdarank:", json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
