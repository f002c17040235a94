"""Forward+backward throughput and peak memory of our losses against TF-Ranking's.

Each case pairs one of our losses (built by registry name) with the TF-Ranking
loss it competes with, and all run in this one process on the same random
batch, in graph mode (``tf.function``) and under XLA (``jit_compile=True``):

* ``peer``: the broadcast port of TF-Ranking's computation
  (:mod:`benchmarks.peers`: the same values, pairs formed by broadcasting
  with no ``tile``, 1.1-1.4x TF-Ranking's own code in graph mode and more
  under XLA), on every stack: the strongest version of the peer anyone
  would write;
* ``tfr``: TF-Ranking's own Keras class, where TF-Ranking imports (tf215).

Throughput is lists per second of ``loss + d loss / d scores``, the best of
``WINDOWS`` timing windows in which ours and the peers alternate; each ratio
is ours / that peer (> 1: ours is faster). Each call of the compiled step runs
``--steps-per-call`` (default 10) forward+backward passes in a
``tf.while_loop``, on scores shifted by a tiny step-dependent amount so that
no pass can be folded into another. Calling a ``tf.function`` from Python
has a fixed cost (argument handling, dispatch, the result's copy) comparable
to a whole forward+backward pass on small batches: with one pass per call,
the figures at small sizes would measure that dispatch, which a training step
pays once for the whole model and not per loss. ``--steps-per-call 1`` gives
the one-pass protocol.

Peak memory: each (loss, size, mode) runs once more in a fresh subprocess,
which reports two figures:

* ``MB``, the peak tensor memory of a warmed-up step above what was allocated
  before it, from TensorFlow's own allocator statistics
  (``tf.config.experimental.get_memory_info("CPU:0")``, which the probe
  enables with ``TF_CPU_ALLOCATOR_USE_BFC=true``): the working set a
  training step needs, XLA's buffers included. The ratio ``mem`` is ours /
  peer on this figure (< 1: ours uses less).
* ``rss``, the growth of the peak resident set (``VmHWM``, reset through
  ``/proc/self/clear_refs``) over the first call after tracing. It adds the
  one-time cost of optimizing the graph (Grappler) or compiling it (XLA),
  which grows with the number of ops rather than with the batch.

    python -m benchmarks.loss_throughput                      # every case
    python -m benchmarks.loss_throughput --cases twin_ndcg_type3 --sizes 128
    python -m benchmarks.loss_throughput --no-memory --modes graph
"""
import argparse
import json
import os
import subprocess
import sys
import time
from typing import Dict, List, Tuple

import numpy as np
import tensorflow as tf

from benchmarks import peers
import tfr_extensions as tfrx
from tfr_extensions.backend import keras

# Batch size for each list size: lists of 32 and 128 in batches of 64,
# lists of 512 and 1024 in batches of 16.
BATCH_FOR_SIZE = {32: 64, 128: 64, 512: 16, 1024: 16}

# Timing windows per loss: ours and the peer alternate, and each keeps its best
# window, so that load which comes and goes on a shared machine (it can halve a
# case's throughput from one minute to the next) cannot favour either.
WINDOWS = 5

# case name -> (our registry name, kwargs, peer)
CASES: Dict[str, Tuple[str, dict, str]] = {
    "twin_ndcg_type3": ("twin_ndcg_type3", {"seed": 0}, "ApproxNDCG"),
    "twin_ndcg_type1": ("twin_ndcg_type1", {"seed": 0}, "ApproxNDCG"),
    "twin_ndcg_type2": ("twin_ndcg_type2", {"seed": 0}, "ApproxNDCG"),
    "twin_ap_type3": ("twin_ap_type3", {"seed": 0}, "ApproxNDCG"),
    "twin_precision_type3": ("twin_precision_type3", {"seed": 0}, "ApproxNDCG"),
    "twin_nerr_type3": ("twin_nerr_type3", {"seed": 0}, "ApproxNDCG"),
    "softndcg10_exact": ("softndcg", {"topn": 10, "method": "exact"}, "ApproxNDCG"),
    "softndcg10_normal": ("softndcg", {"topn": 10, "method": "normal"}, "ApproxNDCG"),
    "wassrank": ("wassrank", {}, "ApproxNDCG"),
    # LambdaLoss's NDCG-Loss2++ and NeuralNDCG beside the metric approximation they compete
    # with (TF-Ranking's own LambdaLoss, PairwiseLogisticLoss + NDCGLambdaWeightV2, has no
    # port in benchmarks.peers)
    "lambda_loss": ("lambda_loss", {}, "ApproxNDCG"),
    "neural_ndcg": ("neural_ndcg", {}, "ApproxNDCG"),
    "expected_utility_1": ("expected_utility", {"num_samples": 1, "topn": 10, "seed": 0}, "Softmax"),
    "expected_utility_5": ("expected_utility", {"num_samples": 5, "topn": 10, "seed": 0}, "Softmax"),
    "mdprank_1": ("mdprank", {"num_samples": 1, "topn": 10, "seed": 0}, "Softmax"),
    "mdprank_5": ("mdprank", {"num_samples": 5, "topn": 10, "seed": 0}, "Softmax"),
}


def make_batch(list_size: int, seed: int = 0) -> Tuple[tf.Tensor, tf.Tensor]:
    """MSLR-like labels (graded 0..4, most 0, 10% padding) and random scores."""
    batch = BATCH_FOR_SIZE.get(list_size, 16)
    rng = np.random.default_rng(seed)
    labels = rng.choice(5, size=(batch, list_size), p=[0.5, 0.3, 0.13, 0.05, 0.02])
    lengths = rng.integers(int(0.9 * list_size), list_size + 1, size=batch)
    labels = np.where(np.arange(list_size)[None] < lengths[:, None], labels, -1)
    scores = rng.normal(size=(batch, list_size))
    return tf.constant(labels, tf.float32), tf.constant(scores, tf.float32)


def build_loss(which: str, case: str) -> keras.losses.Loss:
    """``which``: ``"ours"``, ``"peer"`` (the broadcast port) or ``"tfr"``
    (TF-Ranking's own class; only where it imports)."""
    name, kwargs, peer = CASES[case]
    if which == "ours":
        return tfrx.losses.get(name, **kwargs)
    if which == "tfr" and not tfrx.compat.has_tf_ranking():
        raise ValueError("TF-Ranking does not import on this stack")
    return peers.peer_loss(peer, ported=which == "peer")


def competitors() -> List[str]:
    """The losses each case times: ours, the broadcast port, TF-Ranking's own where it imports."""
    return ["ours", "peer"] + (["tfr"] if tfrx.compat.has_tf_ranking() else [])


def step_fn(loss: keras.losses.Loss, xla: bool, steps: int = 1):
    """A compiled function running ``steps`` forward+backward passes of ``loss``;
    returns the last loss value and the sum of the score gradients."""
    def one_pass(labels, scores):
        with tf.GradientTape() as tape:
            tape.watch(scores)
            value = loss(labels, scores)
        return value, tape.gradient(value, scores)

    @tf.function(jit_compile=xla)
    def step(labels, scores):
        if steps == 1:
            return one_pass(labels, scores)

        def body(i, value, grads):
            shifted = scores + tf.cast(i, scores.dtype) * 1e-6  # no pass equals another
            value, new_grads = one_pass(labels, shifted)
            return i + 1, value, grads + new_grads

        value = tf.zeros([], scores.dtype)  # float32 scores: float32 losses
        return tf.while_loop(lambda i, *_: i < steps, body,
                             (tf.constant(0), value, tf.zeros_like(scores)))[1:]
    return step


def lists_per_second(losses, labels, scores, xla: bool, seconds: float, steps: int,
                     windows: int = WINDOWS) -> List[float]:
    """Lists per second of each loss: the losses run in turn, ``windows``
    windows of ``seconds / windows`` each (at least one call), and each figure
    is that loss's best window."""
    step_fns = [step_fn(loss, xla, steps) for loss in losses]
    for step in step_fns:
        for _ in range(2):  # trace, compile, warm up
            tf.nest.map_structure(lambda t: t.numpy(), step(labels, scores))
    best = [float("inf")] * len(step_fns)
    for _ in range(windows):
        for k, step in enumerate(step_fns):
            calls, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds / windows or calls < 1:
                step(labels, scores)[1].numpy()
                calls += 1
            best[k] = min(best[k], (time.perf_counter() - start) / calls)
    return [steps * int(labels.shape[0]) / per_call for per_call in best]


def cpu_name() -> str:
    """The CPU model and the cores this process may use, for the benchmarks' first line."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(line.split(":", 1)[1].strip() for line in cpuinfo
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {len(os.sched_getaffinity(0))} cores"


def peak_memory_mb(which: str, case: str, list_size: int, xla: bool) -> Tuple[float, float]:
    """(tensor peak, first-call RSS growth) in MB of one loss, in a fresh process."""
    command = [sys.executable, "-m", "benchmarks.loss_throughput", "--memory-probe",
               json.dumps([which, case, list_size, xla])]
    # TF keeps allocator statistics on CPU only with its BFC allocator.
    env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC="true")
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
    tensors, rss = out.strip().splitlines()[-1].split()
    return float(tensors), float(rss)


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def memory_probe(spec: str) -> None:
    """Prints the peak tensor memory of a warmed-up step above what was
    allocated before it (TF's allocator statistics), then the growth of the
    peak resident set over the first call (which also holds graph optimization
    and, under XLA, compilation)."""
    which, case, list_size, xla = json.loads(spec)
    labels, scores = make_batch(list_size)
    step = step_fn(build_loss(which, case), xla)
    step.get_concrete_function(labels, scores)  # trace outside the window
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    before = _status_kb("VmRSS")
    step(labels, scores)[1].numpy()
    rss = (_status_kb("VmHWM") - before) / 1024.0
    tf.config.experimental.reset_memory_stats("CPU:0")
    allocated = tf.config.experimental.get_memory_info("CPU:0")["current"]
    step(labels, scores)[1].numpy()
    tensors = (tf.config.experimental.get_memory_info("CPU:0")["peak"] - allocated) / 2.0 ** 20
    print(tensors, rss)


def run(cases: List[str], sizes: List[int], modes: List[str], seconds: float,
        memory: bool, steps: int = 10) -> List[dict]:
    rows = []
    which = competitors()
    header = (f"{'case':<22}{'peer':<11}{'L':>6}{'B':>4}{'mode':>6}{'ours/s':>11}"
              f"{'peer/s':>11}{'ratio':>8}"
              + (f"{'tfr/s':>11}{'vs tfr':>8}" if "tfr" in which else "")
              + (f"{'ours MB':>9}{'peer MB':>9}{'mem':>6}{'ours rss':>10}{'peer rss':>10}"
                 if memory else ""))
    print(header, flush=True)
    for case in cases:
        for size in sizes:
            labels, scores = make_batch(size)
            for mode in modes:
                xla = mode == "xla"
                rates = dict(zip(which, lists_per_second([build_loss(w, case) for w in which],
                                                         labels, scores, xla, seconds, steps)))
                ours, peer = rates["ours"], rates["peer"]
                row = {"case": case, "peer": CASES[case][2], "list_size": size,
                       "batch": int(labels.shape[0]), "mode": mode,
                       "ours_lists_per_s": ours, "peer_lists_per_s": peer, "ratio": ours / peer}
                line = (f"{case:<22}{row['peer']:<11}{size:>6}{row['batch']:>4}{mode:>6}"
                        f"{ours:>11.0f}{peer:>11.0f}{ours / peer:>8.2f}")
                if "tfr" in rates:
                    row["tfr_lists_per_s"], row["ratio_tfr"] = rates["tfr"], ours / rates["tfr"]
                    line += f"{rates['tfr']:>11.0f}{row['ratio_tfr']:>8.2f}"
                if memory:
                    row["ours_mb"], row["ours_rss_mb"] = peak_memory_mb("ours", case, size, xla)
                    row["peer_mb"], row["peer_rss_mb"] = peak_memory_mb("peer", case, size, xla)
                    row["memory_ratio"] = row["ours_mb"] / max(row["peer_mb"], 1.0)
                    line += (f"{row['ours_mb']:>9.1f}{row['peer_mb']:>9.1f}"
                             f"{row['memory_ratio']:>6.2f}"
                             f"{row['ours_rss_mb']:>10.0f}{row['peer_rss_mb']:>10.0f}")
                print(line, flush=True)
                rows.append(row)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", default=",".join(CASES),
                        help=f"comma-separated subset of: {', '.join(CASES)}")
    parser.add_argument("--sizes", default="32,128,512,1024")
    parser.add_argument("--modes", default="graph,xla")
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="timing per loss and setting, split into WINDOWS windows")
    parser.add_argument("--steps-per-call", type=int, default=10,
                        help="forward+backward passes per call of the compiled step")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory probes")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--memory-probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_probe:
        memory_probe(args.memory_probe)
        return
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}; choose from {list(CASES)}")
    for mode in args.modes.split(","):
        if mode not in ("graph", "xla"):
            parser.error(f"unknown mode {mode!r}; choose graph and/or xla")
    print(f"TensorFlow {tf.__version__}, {tfrx.backend.describe()}; CPU: {cpu_name()}; peer: the broadcast port of "
          f"TF-Ranking's computation; tfr: {peers.peer_source()}", flush=True)
    rows = run(cases, [int(s) for s in args.sizes.split(",")], args.modes.split(","),
               args.seconds, not args.no_memory, args.steps_per_call)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
