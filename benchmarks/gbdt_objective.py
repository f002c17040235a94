"""Seconds per boosting round: the twin-sigmoid objective (``tfrx.gbdt``) vs
LightGBM's built-in ``lambdarank``, same trees, same data, one process.

Both boosters are built on the same ``lgb.Dataset`` with the same tree settings
(the ``small`` preset of :mod:`pipelines.lambdamart`: 31 leaves, learning rate
0.05, ``min_data_in_leaf`` 20, ``min_sum_hessian_in_leaf`` 1e-3;
``--num-threads`` LightGBM threads, and as many for our objective's blocks).
A round is ``Booster.update()`` for lambdarank and ``Booster.update(fobj=...)``
for ours (what ``lgb.train`` runs: LightGBM's scores, our gradients and
Hessians, the tree), after ``--warmup`` rounds each. The two alternate in
``--windows`` windows of ``--rounds`` rounds and each keeps its best window,
so load that comes and goes on a shared machine cannot favour either; the
median window is printed too. The ratio is ours / lambdarank (< 1: ours is
faster). ``objective`` is the share of our rounds' time spent computing our
gradients and Hessians (the rest is LightGBM: scores, tree, bookkeeping).

Shapes:

* ``mq2008``: the training file of MQ2008 Fold1 (9,630 documents, 471
  queries, 46 features), from ``--data`` (default ``../shared/data/MQ2008``,
  or ``$TFRX_DATA_DIR/MQ2008``);
* ``mslr``: MSLR-WEB30K-shaped synthetic data from ``tfrx.data.synthetic``:
  136 features, MSLR's label skew, 3% of queries without a relevant document,
  98% of the queries with 20..200 documents and 2% with 500..1,251 (mean about
  125 documents per query, as MSLR-WEB30K's 124.6), ``--mslr-queries``
  queries (default 3,000: 0.37M documents; MSLR-WEB30K has 30,295 queries and
  3.77M documents, and both objectives grow linearly with the queries).

    python -m benchmarks.gbdt_objective                      # both shapes
    python -m benchmarks.gbdt_objective --shapes mslr --mslr-queries 5000 --hessian lambdamart
"""
import argparse
import os
import statistics
import time
from typing import Dict, List

import lightgbm as lgb
import numpy as np

import tfr_extensions as tfrx
from pipelines import lambdamart
from tfr_extensions import gbdt

SHAPES = ("mq2008", "mslr")
TREE_PARAMS = {**lambdamart.PRESETS["small"], "verbose": -1, "deterministic": True, "seed": 0}


def default_data_dir() -> str:
    root = os.environ.get("TFRX_DATA_DIR",
                          os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    return os.path.join(root, "MQ2008")


def mslr_like(num_queries: int, seed: int = 0) -> tfrx.data.LibSVMData:
    """MSLR-WEB30K-shaped synthetic data (see the module docstring)."""
    num_long = max(1, num_queries // 50)
    parts = [tfrx.data.synthetic(num_queries=num_queries - num_long, num_features=136, seed=seed,
                                 list_size=(20, 200), no_relevant_fraction=0.03),
             tfrx.data.synthetic(num_queries=num_long, num_features=136, seed=seed + 1,
                                 list_size=(500, 1251), no_relevant_fraction=0.03)]
    offsets = np.concatenate([parts[0].query_offsets,
                              parts[0].query_offsets[-1] + parts[1].query_offsets[1:]])
    qids = np.concatenate([parts[0].qids, parts[1].qids + parts[0].qids.max()])
    return tfrx.data.LibSVMData(np.concatenate([p.features for p in parts]),
                                np.concatenate([p.labels for p in parts]), qids, offsets)


def load_shape(shape: str, data_dir: str, mslr_queries: int) -> tfrx.data.LibSVMData:
    if shape == "mq2008":
        path = os.path.join(data_dir, "Fold1", "train.txt")
        if not os.path.isfile(path):
            raise SystemExit(f"MQ2008 not found at {path}: pass --data or set TFRX_DATA_DIR.")
        return tfrx.data.read_libsvm(path)
    return mslr_like(mslr_queries)


def seconds_per_round(booster: lgb.Booster, rounds: int, fobj=None) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        booster.update(fobj=fobj)
    return (time.perf_counter() - start) / rounds


class Timed:
    """Calls the objective and adds up its own time (``seconds``, ``calls``)."""

    def __init__(self, objective):
        self.objective, self.seconds, self.calls = objective, 0.0, 0

    def __call__(self, preds, dataset):
        start = time.perf_counter()
        result = self.objective(preds, dataset)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return result


def benchmark(data, num_threads: int, rounds: int, windows: int, warmup: int,
              objective_args: Dict) -> Dict[str, float]:
    """Best and median window seconds per round for lambdarank and ours, and
    the share of our rounds spent in our objective."""
    group = np.diff(data.query_offsets)
    dataset = lgb.Dataset(np.asarray(data.features, np.float32), data.labels, group=group,
                          params={"verbose": -1, "num_threads": num_threads})
    params = {**TREE_PARAMS, "num_threads": num_threads}
    objective = Timed(gbdt.twin_sigmoid_objective(**objective_args, seed=0,
                                                  num_threads=num_threads or None))
    peer = lgb.Booster({**params, "objective": "lambdarank"}, dataset)
    ours = lgb.Booster({**params, "objective": "none"}, dataset)
    seconds_per_round(peer, warmup)
    seconds_per_round(ours, warmup, objective)
    objective.seconds, objective.calls = 0.0, 0
    times: Dict[str, List[float]] = {"lambdarank": [], "ours": []}
    for _ in range(windows):
        times["lambdarank"].append(seconds_per_round(peer, rounds))
        times["ours"].append(seconds_per_round(ours, rounds, objective))
    return {"lambdarank": min(times["lambdarank"]), "ours": min(times["ours"]),
            "lambdarank_median": statistics.median(times["lambdarank"]),
            "ours_median": statistics.median(times["ours"]),
            "objective_share": objective.seconds / sum(t * rounds for t in times["ours"])}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--data", default=default_data_dir(), help="MQ2008's folder")
    parser.add_argument("--mslr-queries", type=int, default=3000)
    parser.add_argument("--objective", default="twin_ndcg_type3", choices=gbdt.OBJECTIVE_NAMES)
    parser.add_argument("--hessian", default="exact", choices=gbdt.HESSIANS)
    parser.add_argument("--num-threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds per window (default: 20 for mq2008, 3 for mslr)")
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    objective_args = {**gbdt.parse_objective_name(args.objective), "hessian": args.hessian}
    print(f"LightGBM {lgb.__version__}; {args.objective}, hessian {args.hessian}; "
          f"{args.num_threads} threads; tree settings {lambdamart.PRESETS['small']}")
    print(f"{'shape':<8} {'docs':>9} {'queries':>7}  {'lambdarank s/round':>18}  "
          f"{'ours s/round':>12}  {'ratio':>5}  {'(medians)':>17}  {'objective':>9}")
    for shape in args.shapes:
        data = load_shape(shape, args.data, args.mslr_queries)
        rounds = args.rounds or (20 if shape == "mq2008" else 3)
        result = benchmark(data, args.num_threads, rounds, args.windows, args.warmup,
                           objective_args)
        ratio = result["ours"] / result["lambdarank"]
        medians = f"{result['lambdarank_median']:.4f} / {result['ours_median']:.4f}"
        print(f"{shape:<8} {len(data.labels):>9,} {data.num_queries:>7,}  "
              f"{result['lambdarank']:>18.4f}  {result['ours']:>12.4f}  {ratio:>5.2f}  "
              f"{medians:>17}  {result['objective_share']:>9.0%}", flush=True)


if __name__ == "__main__":
    main()
