"""Keras ``fit`` steps per second on JAX and PyTorch: the job's model trained with our
loss against the same model trained with the framework's peer loss (no TensorFlow needed).

The step is :func:`pipelines.train.build_model`'s (``R4.L``, 100 hidden units, batch
normalization, the in-model query z-score, Adam at 1e-3, the training nDCG@5), fed by
:func:`pipelines.train.training_batches`, compiled as the job compiles it (``jax.jit`` on
JAX; eager on PyTorch, or ``torch.compile`` with ``--modes compile``), with its loss
replaced by each of:

* ``twin_ndcg_type3`` and ``approx_ndcg``: ours (``tfrx.losses.get``);
* ``peer``: on JAX Rax 0.4's ApproxNDCG, ``-rax.approx_t12n(rax.ndcg_metric)`` per list;
  on PyTorch the port of TF-Ranking's ApproxNDCG
  (:func:`benchmarks.backend_throughput.torch_approx_ndcg`), each as a Keras loss.

Each loss trains its own model: one epoch over every batch first (every padded list size
compiled), then ``--rounds`` rounds in which the losses alternate, each timing ``--steps``
steps of one ``fit`` call (:class:`pipelines.callbacks.StepTimer`); the median is
reported, with the ratio ours / peer (> 1: ours is faster).

Shapes: ``mq2008`` is MQ2008 Fold1's train.txt (``../shared/data`` or ``$TFRX_DATA_DIR``;
lists of up to 121 documents padded to the longest of each batch), ``mslr`` synthetic in
MSLR-WEB30K's shape (136 features, 20..200 documents per query) cut or padded to 128.

    KERAS_BACKEND=jax python -m benchmarks.backend_train_step [--shapes mq2008 mslr]
    KERAS_BACKEND=torch python -m benchmarks.backend_train_step [--steps 20] [--rounds 3]
"""
import argparse
import json
import os
import platform
import statistics
from typing import Dict

from benchmarks import input_rate
from pipelines import keras_runtime
from pipelines import train
from pipelines import trainable
from pipelines.callbacks import StepTimer
import tfr_extensions as tfrx
from tfr_extensions import backend
from tfr_extensions.backend import keras

LIST_SIZE = {"mq2008": None, "mslr": 128}
LOSSES = ("twin_ndcg_type3", "approx_ndcg", "peer")


class RaxApproxNDCG(keras.losses.Loss):
    """Rax 0.4's ApproxNDCG as a Keras loss on JAX: minus ``approx_t12n(ndcg_metric)``
    per list (labels < 0 are padding)."""

    def call(self, y_true, y_pred):
        import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
        from benchmarks.backend_throughput import import_rax  # pylint: disable=import-outside-toplevel
        rax = import_rax()
        y_true = jnp.asarray(y_true, y_pred.dtype)
        return -rax.approx_t12n(rax.ndcg_metric)(
            y_pred, jnp.maximum(y_true, 0.0), where=y_true >= 0, reduce_fn=None)


class PortedApproxNDCG(keras.losses.Loss):
    """The PyTorch port of TF-Ranking's ApproxNDCG as a Keras loss, per list."""

    def call(self, y_true, y_pred):
        from benchmarks.backend_throughput import torch_approx_ndcg  # pylint: disable=import-outside-toplevel
        return torch_approx_ndcg(y_true.to(y_pred.dtype), y_pred, per_list=True)


def make_loss(name: str) -> keras.losses.Loss:
    if name != "peer":
        return tfrx.losses.get(name, **({"seed": 0} if name.startswith("twin") else {}))
    return RaxApproxNDCG() if backend.backend_name() == "jax" else PortedApproxNDCG()


def build(config, num_features: int, loss_name: str) -> keras.Model:
    """The job's model of ``config`` compiled with loss ``loss_name``, as the job
    compiles it. On JAX through :class:`tfr_extensions.models.TrainingModel`, as the job
    trains a seeded loss there (it threads the loss's random state), for every loss
    alike (for the others it passes the scores on)."""
    keras.utils.set_random_seed(0)
    loss = make_loss(loss_name)
    model = train.build_scorer(config, num_features)
    if backend.backend_name() == "jax":
        model = tfrx.models.TrainingModel(model, loss)
    model.compile(optimizer=keras.optimizers.Adam(config.learning_rate), loss=loss,
                  metrics=[tfrx.metrics.RankingMetric("ndcg", topn=5)],
                  jit_compile=trainable.jit_compile(config))
    return model


def shape_data(shape: str, queries: int = 2000):
    """The training data of ``shape`` (``queries`` synthetic queries for ``mslr``)."""
    if shape == "mslr":
        return tfrx.data.synthetic(num_queries=queries, num_features=136, seed=0,
                                   list_size=(20, 200))
    return input_rate.shape_data(shape)


def measure(shape: str, steps: int, rounds: int, compiled: bool, batch_size: int = 32,
            queries: int = 2000) -> Dict[str, float]:
    """Median steps per second of each loss on ``shape``."""
    data = shape_data(shape, queries)
    config = train.TrainConfig(batch_size=batch_size, steps_per_epoch=steps, seed=0,
                               list_size=LIST_SIZE[shape], jit_compile=compiled)
    batches = train.training_batches(config, data)
    models = {}
    for name in LOSSES:  # every padded list size compiled before timing
        models[name] = build(config, data.num_features, name)
        warm_up = keras_runtime.TrainingStream(batches, batches.num_batches)
        models[name].fit(warm_up, epochs=1, shuffle=False, verbose=0)
        warm_up.close()
    rates = {name: [] for name in LOSSES}
    for round_index in range(rounds):
        for name in LOSSES:
            stream = keras_runtime.TrainingStream(batches, steps, epoch=1 + round_index)
            timer = StepTimer(input_wait=lambda: stream.wait_seconds)  # pylint: disable=cell-var-from-loop
            models[name].fit(stream, epochs=1, shuffle=False, verbose=0, callbacks=[timer])
            stream.close()
            rates[name].append(timer.summary()["steps_per_second"])
    return {name: statistics.median(values) for name, values in rates.items()}


def main(argv=None) -> Dict[str, Dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["mq2008", "mslr"])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", nargs="+", default=["eager"], choices=["eager", "compile"],
                        help="PyTorch: eager steps, or torch.compile (JAX always jits)")
    parser.add_argument("--batch", type=int, default=32, help="queries per batch")
    parser.add_argument("--queries", type=int, default=2000, help="synthetic queries (mslr)")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    modes = ["jit"] if backend.backend_name() == "jax" else args.modes
    print(f"{backend.describe()}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs; batches of {args.batch} queries; steps/s, median of "
          f"{args.rounds} rounds of {args.steps} steps")
    print(f"{'shape':<8}{'mode':<9}" + "".join(f"{name:>17}" for name in LOSSES)
          + f"{'twin / peer':>13}{'approx / peer':>15}")
    results = {}
    for shape in args.shapes:
        for mode in modes:
            r = results[f"{shape} {mode}"] = measure(shape, args.steps, args.rounds,
                                                     mode == "compile", args.batch, args.queries)
            print(f"{shape:<8}{mode:<9}" + "".join(f"{r[name]:>17.2f}" for name in LOSSES)
                  + f"{r['twin_ndcg_type3'] / r['peer']:>13.2f}"
                  + f"{r['approx_ndcg'] / r['peer']:>15.2f}", flush=True)
    if args.json:
        rows = [{"backend": backend.backend_name(), "device": device_name(),
                 "shape": key.split()[0], "mode": key.split()[1], "batch": args.batch,
                 "steps_per_s": r} for key, r in results.items()]
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(rows, file, indent=1)
    return results


def device_name() -> str:
    """The device the steps ran on."""
    if backend.backend_name() == "jax":
        import jax  # pylint: disable=import-outside-toplevel
        return str(jax.devices()[0].device_kind)
    import torch  # pylint: disable=import-outside-toplevel
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


if __name__ == "__main__":
    main()
