"""The twin-sigmoid backward pass against the machine: pairs per second as a
fraction of the cheapest fused O(L^2) pass this machine runs.

The limit is a micro-benchmark of the least work any pairwise backward pass
does: one sigmoid and one multiply-add per pair,
:math:`\\sum_j \\sigma(s_k - s_j)\\,u_j`, compiled by XLA into one loop that
stores no pair. It is timed in the two layouts XLA:CPU runs (a plain
``[B, L, L]`` row sum, and row sums over blocks of 32 columns, the layout of
our backward pass) and the faster one is the limit. The twin-sigmoid
backward (:func:`tfr_extensions.ops.twin_sigmoid_ranks`'s, ``type3`` with
labels, from a given rank gradient) runs in the same harness as
:mod:`benchmarks.twin_profile` (10 passes per call, best of 5 windows), in
graph mode (where it runs as its own XLA program) and inside a caller's XLA
program.

    python -m benchmarks.pair_limit [--sizes 32,128,512,1024] [--modes graph,xla]
"""
import argparse

import tensorflow as tf

from benchmarks import loss_throughput
from benchmarks import twin_profile
from tfr_extensions.ops import lists


def _plain_limit(scores, weights):
    pairs = tf.sigmoid(scores[:, :, None] - scores[:, None, :])  # [B, k, j]
    return tf.reduce_sum(pairs * weights[:, None, :], axis=-1)


def _blocked_limit(scores, weights):
    batch, size = scores.shape
    blocks = [batch, 1, size // lists.PAIR_BLOCK, lists.PAIR_BLOCK]  # as our backward pass's
    pairs = tf.sigmoid(scores[:, :, None, None] - tf.reshape(scores, blocks))
    return tf.reduce_sum(tf.reduce_sum(pairs * tf.reshape(weights, blocks), -1), -1)


_LIMITS = {"plain": tf.function(_plain_limit, jit_compile=True),
           "blocked": tf.function(_blocked_limit, jit_compile=True)}


def _stage(limit):
    def stage(labels, scores):
        weights = tf.where(labels >= 0, 1.0 / (1.0 + tf.abs(scores)), 0.0)
        return tf.reduce_sum(limit(scores, weights))
    return stage


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="32,128,512,1024")
    parser.add_argument("--modes", default="graph,xla")
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args(argv)
    print(f"TensorFlow {tf.__version__}; CPU: {loss_throughput.cpu_name()}; "
          "pairs per second (millions)")
    print(f"{'L':>5} {'mode':>5} {'limit plain':>12} {'limit blocked':>14} "
          f"{'twin backward':>14} {'fraction':>9}", flush=True)
    stages = [_stage(_LIMITS["plain"]), _stage(_LIMITS["blocked"]), twin_profile.STAGES["backward"]]
    for size in (int(s) for s in args.sizes.split(",")):
        labels, scores = loss_throughput.make_batch(size)
        for mode in args.modes.split(","):
            times = twin_profile.microseconds_per_list(stages, labels, scores, mode == "xla",
                                                       args.seconds)
            plain, blocked, ours = (size * size / t for t in times)  # pairs per microsecond
            print(f"{size:>5} {mode:>5} {plain:>12.0f} {blocked:>14.0f} {ours:>14.0f} "
                  f"{ours / max(plain, blocked):>9.2f}", flush=True)


if __name__ == "__main__":
    main()
