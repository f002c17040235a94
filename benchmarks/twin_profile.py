"""Where the time of a twin-sigmoid loss goes: each stage timed on its own.

The stages of ``twin_sigmoid_loss(metric="ndcg", gradient="type3", seed=0)``,
each run alone in the harness of :mod:`benchmarks.loss_throughput` (10 passes
per call inside one ``tf.function``, best of 5 windows, graph mode and XLA),
on the same batches, beside the broadcast ApproxNDCG peer's forward+backward:

* ``screen``: the bad-input screening of :func:`tfr_extensions.ops.screening.screen_lists`;
* ``tie_keys``: the stateless random tie-breaking keys;
* ``ranks``: the forward ranks (sort or count, tie keys included);
* ``metric``: nDCG and its rank derivative from given ranks and positions;
* ``backward``: the pairwise backward pass from a given rank gradient;
* ``forward``: the whole loss without its gradient;
* ``loss``: the whole loss with its gradient (what a training step runs).

Microseconds per list; the peer's line gives the scale.

    python -m benchmarks.twin_profile [--sizes 32,128,512,1024] [--modes graph,xla]
"""
import argparse
import time
from typing import Callable, Dict, List

import sys

import tensorflow as tf

from benchmarks import loss_throughput
from benchmarks import peers
from tfr_extensions.losses.twin_sigmoid import twin_sigmoid_loss
from tfr_extensions.ops import lists
from tfr_extensions.ops import rank_metrics
from tfr_extensions.ops import screening
from tfr_extensions.ops import sorting
from tfr_extensions.ops import twin_sigmoid as _unused  # noqa: F401 (loads the module)

STEPS = 10
twin_sigmoid = sys.modules["tfr_extensions.ops.twin_sigmoid"]  # the package exports a function of that name


def _loss_with_gradient(loss: Callable):
    def stage(labels, scores):
        with tf.GradientTape() as tape:
            tape.watch(scores)
            value = loss(labels, scores)
        return value + tf.reduce_sum(tape.gradient(value, scores))
    return stage


def _twin(labels, scores):
    losses, weights = twin_sigmoid_loss(labels, scores, metric="ndcg", gradient="type3", seed=0)
    return tf.reduce_sum(losses * weights)


def _screen(labels, scores):
    labels, scores, valid, broken = screening.screen_lists(labels, scores, lists.MAX_LABEL)
    return (tf.reduce_sum(labels) + tf.reduce_sum(scores)
            + tf.reduce_sum(tf.cast(valid, tf.float32)) + tf.reduce_sum(tf.cast(broken, tf.float32)))


def _tie_keys(labels, scores):
    keys = sorting.random_tie_keys(tf.shape(scores), lists.seed_tensor(0))
    return tf.cast(tf.reduce_sum(keys % 7), tf.float32)


def _ranks(labels, scores):
    ranks, _ = twin_sigmoid.exact_forward_ranks(scores, labels >= 0, True, 0)
    return tf.reduce_sum(ranks)


def _metric(labels, scores):
    # ranks of the scores as given (the harness shifts them every pass)
    mask = labels >= 0
    positions = sorting.exact_ranks(tf.stop_gradient(scores) * 0.0 + tf.range(
        tf.shape(scores)[1], dtype=scores.dtype)[None], mask)
    ranks = tf.cast(positions, scores.dtype) + 0.0 * scores
    value, gradient = rank_metrics.value_and_rank_gradient(
        "ndcg", tf.maximum(labels, 0.0), ranks, mask, None, positions)
    return tf.reduce_sum(value) + tf.reduce_sum(gradient)


def _backward(labels, scores):
    mask = labels >= 0
    upstream = tf.where(mask, 1.0 / (1.0 + tf.abs(scores)), 0.0)
    grads = twin_sigmoid._ranks_backward(upstream, scores, tf.maximum(labels, 0.0), mask,
                                         1.0, "type3")
    return tf.reduce_sum(grads)


def _peer(labels, scores):
    return tf.reduce_sum(peers.PortedApproxNDCGLoss().call(labels, scores))


STAGES: Dict[str, Callable] = {
    "peer fwd+bwd": _loss_with_gradient(_peer),
    "screen": _screen,
    "tie_keys": _tie_keys,
    "ranks": _ranks,
    "metric": _metric,
    "backward": _backward,
    "forward": _twin,
    "loss fwd+bwd": _loss_with_gradient(_twin),
}


def _compiled(stage: Callable, xla: bool):
    @tf.function(jit_compile=xla)
    def run(labels, scores):
        def body(i, total):
            shifted = scores + tf.cast(i, scores.dtype) * 1e-6
            return i + 1, total + stage(labels, shifted)
        return tf.while_loop(lambda i, _: i < STEPS, body,
                             (tf.constant(0), tf.constant(0.0)))[1]
    return run


def microseconds_per_list(stages: List[Callable], labels, scores, xla: bool,
                          seconds: float) -> List[float]:
    runs = [_compiled(stage, xla) for stage in stages]
    for run in runs:
        run(labels, scores).numpy()
        run(labels, scores).numpy()
    best = [float("inf")] * len(runs)
    for _ in range(loss_throughput.WINDOWS):
        for k, run in enumerate(runs):
            calls, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds / loss_throughput.WINDOWS or calls < 1:
                run(labels, scores).numpy()
                calls += 1
            best[k] = min(best[k], (time.perf_counter() - start) / calls)
    batch = int(labels.shape[0])
    return [1e6 * per_call / (STEPS * batch) for per_call in best]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="32,128,512,1024")
    parser.add_argument("--modes", default="graph,xla")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args(argv)
    names = args.stages.split(",")
    print(f"TensorFlow {tf.__version__}; microseconds per list (lower is faster)")
    print(f"{'L':>5} {'mode':>5} " + " ".join(f"{n:>13}" for n in names), flush=True)
    for size in (int(s) for s in args.sizes.split(",")):
        labels, scores = loss_throughput.make_batch(size)
        for mode in args.modes.split(","):
            times = microseconds_per_list([STAGES[n] for n in names], labels, scores,
                                          mode == "xla", args.seconds)
            print(f"{size:>5} {mode:>5} " + " ".join(f"{t:>13.1f}" for t in times), flush=True)


if __name__ == "__main__":
    main()
