"""The same ``tfrx-train`` run on each Keras backend: test nDCG@5 over seeds, against
TensorFlow's.

    python -m benchmarks.backend_quality --data ../shared/data/MQ2008 --fold 1 --seeds 0,1,2

Each (backend, seed) is ``python -m pipelines.train`` in its own process with
``KERAS_BACKEND`` set (``--python backend=path`` runs a backend with another
interpreter, e.g. a virtualenv without TensorFlow), the job's defaults otherwise
(``twin_ndcg_type3``, ``R4.L``, 20 epochs, selection on validation nDCG@5). A
finished run is reused (the job reports it). The table gives each backend's mean
and standard deviation over the seeds and its difference from TensorFlow's mean in
units of the seeds' standard deviation (pooled over the backends): within seed
noise means a difference of the size that a change of seed makes.
"""
import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRICS = ("ndcg@1", "ndcg@5", "ndcg@10", "map@10", "nerr@10")


def run(backend: str, python: str, data: str, fold: int, seed: int, output_dir: str,
        extra: List[str]) -> Dict:
    """One run's ``results.json`` (trained unless it is there, finished)."""
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    env.pop("TF_USE_LEGACY_KERAS", None)
    args = [python, "-m", "pipelines.train", "--data", data, "--fold", str(fold),
            "--seed", str(seed), "--output-dir", output_dir, "--verbose", "0",
            "--no-tensorboard", *extra]
    proc = subprocess.run(args, env=env, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{backend} seed {seed} failed:\n{proc.stderr[-3000:]}")
    with open(os.path.join(output_dir, "results.json")) as f:
        return json.load(f)


def main(argv=None) -> Dict[str, List[Dict]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data", "MQ2008"))
    parser.add_argument("--fold", type=int, default=1)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--backends", default="tensorflow,jax,torch")
    parser.add_argument("--python", action="append", default=[],
                        help="backend=interpreter (default: this interpreter)")
    parser.add_argument("--output-dir", default=os.path.join("runs", "backend_quality"))
    args, extra = parser.parse_known_args(argv)
    pythons = dict(item.split("=", 1) for item in args.python)
    seeds = [int(s) for s in args.seeds.split(",")]
    results: Dict[str, List[Dict]] = {}
    for backend in args.backends.split(","):
        python = pythons.get(backend, sys.executable)
        results[backend] = [run(backend, python, args.data, args.fold, seed,
                                os.path.join(args.output_dir, f"{backend}_seed{seed}"), extra)
                            for seed in seeds]
    ndcg5 = {b: np.array([r["test"]["ndcg@5"] for r in rs]) for b, rs in results.items()}
    pooled = float(np.sqrt(np.mean([v.var(ddof=1) for v in ndcg5.values()]))) \
        if len(seeds) > 1 else float("nan")
    reference = ndcg5.get("tensorflow", next(iter(ndcg5.values()))).mean()
    print(f"test means over seeds {seeds} (pooled seed std of nDCG@5: {pooled:.4f})")
    print(f"{'backend':<12}" + "".join(f"{m:>10}" for m in METRICS)
          + f"{'std@5':>9}{'diff@5/std':>12}{'seconds':>9}  nDCG@5 per seed")
    for backend, runs in results.items():
        means = [np.mean([r["test"][m] for r in runs]) for m in METRICS]
        seconds = np.mean([r["train_seconds"] for r in runs])
        print(f"{backend:<12}" + "".join(f"{v:>10.4f}" for v in means)
              + f"{ndcg5[backend].std(ddof=1) if len(seeds) > 1 else float('nan'):>9.4f}"
              + f"{(ndcg5[backend].mean() - reference) / pooled:>12.2f}{seconds:>9.0f}  "
              + " ".join(f"{v:.4f}" for v in ndcg5[backend]))
    return results


if __name__ == "__main__":
    main()
