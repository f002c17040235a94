"""The context-aware scorer ``SA<n>`` against the feed-forward ``R4.L`` on long lists, on
the CPU: training steps per second and peak memory, per Keras backend.

Each (backend, scorer, list size) runs in a process of its own: ``--lists`` lists of
``--size`` documents with MSLR-WEB30K's 136 features, ``--hidden-units`` 128 (allRank's
width), ListNet as the loss (O(L) per list, so the scorer's cost is what moves), Adam,
``train_on_batch`` after two warm-up steps; steps/s is the best of ``--rounds`` timed
rounds. Peak memory is the process's peak resident memory (``ru_maxrss``) after the
timed steps: the runtime, the model and a step at its peak (self-attention keeps
``heads`` matrices of ``L x L`` per list and block for the backward pass). Its growth over
the timed steps is printed too; on JAX the peak comes in the warm-up, so compare RSS.

    python -m benchmarks.attention_scorer [--backends jax torch tensorflow]
        [--sizes 200 500 1000] [--lists 16] [--notations R4.L SA2 SA4]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Dict, List

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FEATURES = 136


def child(notation: str, size: int, lists: int, hidden_units: int, rounds: int) -> Dict:
    """One configuration, in this process: steps/s and the peak-memory growth (MiB)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    import tfr_extensions as tfrx  # pylint: disable=import-outside-toplevel
    from tfr_extensions.backend import keras  # pylint: disable=import-outside-toplevel
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    features = rng.normal(size=(lists, size, FEATURES)).astype(np.float32)
    labels = rng.integers(0, 5, size=(lists, size)).astype(np.float32)
    model = tfrx.models.scorer(notation, FEATURES, hidden_units=hidden_units)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=tfrx.losses.get("listnet"))
    for _ in range(2):
        model.train_on_batch(features, labels)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    best = 0.0
    for _ in range(rounds):
        steps, start = 0, time.perf_counter()
        while steps < 3 or time.perf_counter() - start < 2.0:
            model.train_on_batch(features, labels)
            steps += 1
        best = max(best, steps / (time.perf_counter() - start))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"steps_per_s": best, "peak_growth_mib": (after - before) / 1024.0,
            "peak_rss_mib": after / 1024.0, "parameters": int(model.count_params())}


def run(backends: List[str], notations: List[str], sizes: List[int], lists: int,
        hidden_units: int, rounds: int) -> List[Dict]:
    rows = []
    for backend in backends:
        for size in sizes:
            for notation in notations:
                env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2",
                           JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")
                env.pop("TF_USE_LEGACY_KERAS", None)
                proc = subprocess.run(
                    [sys.executable, "-m", "benchmarks.attention_scorer", "--child",
                     notation, "--sizes", str(size), "--lists", str(lists),
                     "--hidden-units", str(hidden_units), "--rounds", str(rounds)],
                    cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
                line = [l for l in proc.stdout.splitlines() if l.startswith("ROW")]
                if proc.returncode or not line:
                    print(f"{backend} {notation} L={size}: failed\n{proc.stderr[-1500:]}")
                    continue
                row = dict(json.loads(line[-1][3:]), backend=backend, notation=notation,
                           size=size, lists=lists)
                rows.append(row)
                print(f"{backend:10s} {notation:5s} L={size:5d}: {row['steps_per_s']:7.2f} "
                      f"steps/s, peak +{row['peak_growth_mib']:7.0f} MiB "
                      f"(RSS {row['peak_rss_mib']:6.0f} MiB)", flush=True)
    return rows


def print_ratios(rows: List[Dict], baseline: str = "R4.L") -> None:
    """Each scorer's steps/s and peak growth against ``baseline``'s, same backend and L."""
    base = {(r["backend"], r["size"]): r for r in rows if r["notation"] == baseline}
    print(f"\nagainst {baseline} (same backend and list size): time per step x, peak RSS +MiB")
    for row in rows:
        ref = base.get((row["backend"], row["size"]))
        if row["notation"] == baseline or ref is None:
            continue
        print(f"{row['backend']:10s} {row['notation']:5s} L={row['size']:5d}: "
              f"{ref['steps_per_s'] / row['steps_per_s']:6.1f}x the time, "
              f"{row['peak_rss_mib'] - ref['peak_rss_mib']:+8.0f} MiB")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=["jax", "torch", "tensorflow"])
    parser.add_argument("--notations", nargs="+", default=["R4.L", "SA2", "SA4"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[200, 500, 1000])
    parser.add_argument("--lists", type=int, default=16)
    parser.add_argument("--hidden-units", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        row = child(args.child, args.sizes[0], args.lists, args.hidden_units, args.rounds)
        print("ROW" + json.dumps(row), flush=True)
        return
    rows = run(args.backends, args.notations, args.sizes, args.lists, args.hidden_units,
               args.rounds)
    print_ratios(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
