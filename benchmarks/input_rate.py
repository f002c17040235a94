"""Input batches per second against training steps per second of ``tfrx-train`` on
Keras 3's JAX and PyTorch backends (no TensorFlow needed).

The input is what :func:`pipelines.train.run` feeds ``fit`` there
(:func:`pipelines.train.training_batches` in a
:class:`pipelines.keras_runtime.TrainingStream`); the step is the job's model
(:func:`pipelines.train.build_trainable`: ``R4.L`` with ``twin_ndcg_type3``,
Adam, the training nDCG@5) trained by ``fit`` on that stream. Reported per shape:

* ``input``: batches per second of one thread building batches
  (``RankingPyDataset.batch``; the job runs :data:`INPUT_WORKERS
  <pipelines.keras_runtime.INPUT_WORKERS>` such threads ahead of the step);
* ``steps``: training steps per second of ``fit``, fed by the stream, after two
  warm-up epochs that compile every list size (:class:`pipelines.callbacks.StepTimer`
  on the last epoch), and the share of the training time the steps waited for
  a batch (:attr:`pipelines.keras_runtime.TrainingStream.wait_seconds`);
* the ratio input / steps (target: at least 3).

Shapes: ``mq2008`` is MQ2008 Fold1's train.txt (``../shared/data`` or
``$TFRX_DATA_DIR``; 46 features, lists of up to 121 documents), ``mslr`` is
synthetic in MSLR-WEB30K's shape (136 features, 20..200 documents per query).

    KERAS_BACKEND=jax python -m benchmarks.input_rate [--shapes mq2008 mslr] [--steps 20]
"""
import argparse
import os
import pathlib
import platform
import time
from typing import Dict

from pipelines import keras_runtime
from pipelines import train
from pipelines.callbacks import StepTimer
import tfr_extensions as tfrx
from tfr_extensions import backend
from tfr_extensions.backend import keras

REPO = pathlib.Path(__file__).resolve().parents[1]


def shape_data(shape: str, seed: int = 0):
    """The training data of a shape."""
    if shape == "mq2008":
        root = pathlib.Path(os.environ.get("TFRX_DATA_DIR", REPO.parent / "shared" / "data"))
        path = root / "MQ2008" / "Fold1" / "train.txt"
        if not path.is_file():
            raise SystemExit(f"MQ2008 not found at {path}: set TFRX_DATA_DIR.")
        return tfrx.data.read_libsvm(path)
    if shape == "mslr":
        return tfrx.data.synthetic(num_queries=2000, num_features=136, seed=seed,
                                   list_size=(20, 200))
    raise SystemExit(f"unknown shape {shape!r}")


def measure(shape: str, steps: int, batch_size: int = 32) -> Dict[str, float]:
    data = shape_data(shape)
    config = train.TrainConfig(batch_size=batch_size, steps_per_epoch=steps, seed=0)
    batches = train.training_batches(config, data)
    start = time.perf_counter()
    for i in range(steps):
        batches.batch(0, i % batches.num_batches)
    input_rate = steps / (time.perf_counter() - start)
    keras.utils.set_random_seed(0)
    model = train.build_trainable(config, data.num_features).model
    # the first epochs compile the step for every padded list size the stream serves
    warm_up = keras_runtime.TrainingStream(batches, batches.num_batches)
    model.fit(warm_up, epochs=2, shuffle=False, verbose=0)
    warm_up.close()
    stream = keras_runtime.TrainingStream(batches, steps, epoch=1)
    timer = StepTimer(input_wait=lambda: stream.wait_seconds)
    model.fit(stream, epochs=1, shuffle=False, verbose=0, callbacks=[timer])
    stream.close()
    summary = timer.summary()
    step_rate = summary["steps_per_second"]
    return {"input": input_rate, "steps": step_rate, "ratio": input_rate / step_rate,
            "wait": summary["input_wait_fraction"]}


def main(argv=None) -> Dict[str, Dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=["mq2008", "mslr"])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    print(f"{backend.describe()}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs; batches of 32 queries")
    print(f"{'shape':<8}{'input batches/s':>17}{'steps/s':>10}{'input/steps':>13}"
          f"{'waiting':>10}")
    results = {}
    for shape in args.shapes:
        r = results[shape] = measure(shape, args.steps)
        print(f"{shape:<8}{r['input']:>17.1f}{r['steps']:>10.2f}{r['ratio']:>13.1f}"
              f"{r['wait']:>10.1%}")
    return results


if __name__ == "__main__":
    main()
