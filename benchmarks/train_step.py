"""Training steps per second of the train pipeline: ``twin_ndcg_type3`` vs TF-Ranking's
``approx_ndcg_loss`` computation (the broadcast port of :mod:`benchmarks.peers`, the
strongest form of it, on every stack), same model, dataset, optimizer and Keras ``fit``
loop, in graph mode and with ``jit_compile=True``, on Keras 2 or Keras 3.

Both losses run in this one process on the scorer of
:func:`pipelines.train.build_scorer`, compiled as :func:`pipelines.train.build_model`
does and fed by :func:`pipelines.train.train_dataset` (``R4.L``, 100 hidden units,
batch normalization, in-model query z-score, Adam, L2 1e-3, exact nDCG@5 train
metric). Each measurement is the rate of the last ``--steps`` steps of one
``model.fit`` call (:func:`steps_per_second`: the start of ``fit`` excluded),
after a warm-up of ``3 * steps`` (tracing, XLA compilation and per-shape
kernel set-up excluded); the two losses alternate for ``--rounds`` rounds and
the median is reported.
The ratio is ours / the peer's (> 1: ours is faster).

Shapes (synthetic data from ``tfrx.data.synthetic``):

* ``mq2008``: 46 features, lists of 5..121 documents padded to the longest of
  each batch of 32 queries (MQ2008's range);
* ``mslr``: 136 features, lists of 20..400 documents cut/padded to
  ``list_size=128``, batches of 32 (MSLR-WEB30K-like).

    python -m benchmarks.train_step [--steps 40] [--rounds 3] [--shapes mq2008 mslr]
                                    [--modes graph xla]
"""
import argparse
import statistics
import time
from typing import Dict, Optional

import tensorflow as tf

from benchmarks import peers
from benchmarks.loss_throughput import cpu_name
from pipelines import train
import tfr_extensions as tfrx
from tfr_extensions.backend import keras

SHAPES: Dict[str, dict] = {
    "mq2008": {"num_features": 46, "list_range": (5, 121), "list_size": None},
    "mslr": {"num_features": 136, "list_range": (20, 400), "list_size": 128},
}
LOSSES = {"twin_ndcg_type3 (tfrx)": lambda: tfrx.losses.get("twin_ndcg_type3", seed=0),
          "approx_ndcg_loss (broadcast)": lambda: peers.peer_loss("ApproxNDCG", ported=True)}


class _StepClock(keras.callbacks.Callback):
    """The time at the end of each training step of a ``fit`` call."""

    def __init__(self):
        super().__init__()
        self.times = []

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter())


def steps_per_second(model: keras.Model, dataset: tf.data.Dataset, steps: int,
                     skip: int = 5) -> float:
    """Steps per second inside one ``fit`` call of ``skip + steps`` steps, over
    its last ``steps`` steps: the start of ``fit`` (a new iterator over the
    dataset, callbacks) and its first steps are not counted."""
    clock = _StepClock()
    model.fit(dataset, epochs=1, steps_per_epoch=skip + steps, verbose=0, callbacks=[clock])
    return steps / (clock.times[-1] - clock.times[skip - 1])


def benchmark_shape(shape: str, steps: int, rounds: int, batch_size: int = 32,
                    jit_compile: bool = False, num_queries: int = 400) -> Dict[str, float]:
    """Median steps/s per loss for one shape."""
    spec = SHAPES[shape]
    data = tfrx.data.synthetic(num_queries=num_queries, num_features=spec["num_features"],
                               seed=0, list_size=spec["list_range"])
    runs = {}
    for label, make_loss in LOSSES.items():
        config = train.TrainConfig(batch_size=batch_size, list_size=spec["list_size"],
                                   jit_compile=jit_compile, verbose=0, tensorboard=False)
        keras.utils.set_random_seed(0)
        model = train.build_scorer(config, spec["num_features"])
        model.compile(optimizer=keras.optimizers.Adam(config.learning_rate), loss=make_loss(),
                      metrics=[tfrx.metrics.RankingMetric("ndcg", topn=5)],
                      jit_compile=jit_compile)
        dataset = train.train_dataset(config, data)  # endless already
        # warm-up: tracing, and oneDNN kernels for the padded list lengths that occur
        steps_per_second(model, dataset, 3 * steps)
        runs[label] = (model, dataset, [])
    for _ in range(rounds):
        for label, (model, dataset, rates) in runs.items():
            rates.append(steps_per_second(model, dataset, steps))
    return {label: statistics.median(rates) for label, (_, _, rates) in runs.items()}


def main(argv: Optional[list] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.train_step",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--modes", nargs="+", default=["graph", "xla"], choices=["graph", "xla"],
                        help="graph: jit_compile=False; xla: jit_compile=True")
    args = parser.parse_args(argv)
    ours, peer = LOSSES
    print(f"TensorFlow {tf.__version__}, {tfrx.backend.describe()}; CPU: {cpu_name()}")
    print(f"{'shape':8s} {'mode':5s} {ours:>24s} {peer:>28s} {'ratio':>7s}   "
          "(training steps/s, batch 32)")
    for shape in args.shapes:
        for mode in args.modes:
            rates = benchmark_shape(shape, args.steps, args.rounds, jit_compile=mode == "xla")
            print(f"{shape:8s} {mode:5s} {rates[ours]:24.1f} {rates[peer]:28.1f} "
                  f"{rates[ours] / rates[peer]:7.2f}", flush=True)


if __name__ == "__main__":
    main()
