"""Input throughput: ``tfrx.data.ranking_dataset`` against TF-Ranking's ELWC pipeline.

Both input paths serve the same queries in one process:

* ours: :func:`tfr_extensions.data.ranking_dataset` (shuffled, repeated) over
  the arrays in memory, with ``normalization="query_zscore"`` and ``"none"``;
* TF-Ranking: ``tfr.keras.pipeline.SimpleDatasetBuilder.build_train_dataset()``
  over the same queries written as ELWC TFRecords by ``tfrx.data.to_elwc``
  (TF-Ranking parses the protos; it has no normalization option); where
  TF-Ranking does not import, the port of :mod:`benchmarks.peers`.

Each path is timed as batches per second of a Python loop over the dataset
(what ``model.fit`` sees), after a warm-up. The paths alternate in
``--rounds`` windows and each keeps its best window, so a noisy neighbour
slows both rather than one. The ratio is ours / TF-Ranking's (> 1: ours is faster).

Shapes: ``mq2008`` is MQ2008 Fold1's train.txt when ``../shared/data`` (or
``$TFRX_DATA_DIR``) has it, else a synthetic set of its shape (46 features,
5..121 documents); ``mslr`` is synthetic with MSLR-WEB30K's shape (136
features, 20..220 documents, mean 120), at batch 32 and 128 and ``list_size``
None and 200.

With ``--train`` it also reports the training steps per second of ``R4.L``
with ``twin_ndcg_type3`` fed by each path and by one cached batch (the model's
own speed): ours is not input-bound when it is within 10% of the cached batch.

    python -m benchmarks.input_pipeline [--batches 200] [--rounds 3] [--train]
"""
import argparse
import os
import pathlib
import tempfile
import time
from typing import Dict, Iterable, List, Optional, Tuple

import tensorflow as tf

from benchmarks import peers
import tfr_extensions as tfrx
from tfr_extensions.backend import keras

MQ2008_TRAIN = pathlib.Path(os.environ.get(
    "TFRX_DATA_DIR", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data"),
) / "MQ2008" / "Fold1" / "train.txt"

#: name -> (data source, batch size, list_size)
CASES: Dict[str, Tuple[str, int, Optional[int]]] = {
    "mq2008 B32": ("mq2008", 32, None),
    "mslr B32": ("mslr", 32, None),
    "mslr B32 L200": ("mslr", 32, 200),
    "mslr B128": ("mslr", 128, None),
    "mslr B128 L200": ("mslr", 128, 200),
}


def load(source: str) -> tfrx.data.LibSVMData:
    if source == "mq2008":
        if MQ2008_TRAIN.is_file():
            return tfrx.data.read_libsvm(MQ2008_TRAIN)
        print(f"(MQ2008 not found at {MQ2008_TRAIN}: a synthetic set of its shape)")
        return tfrx.data.synthetic(num_queries=471, num_features=46, list_size=(5, 121))
    return tfrx.data.synthetic(num_queries=2000, num_features=136, list_size=(20, 220))


def ours_dataset(data, batch_size: int, list_size: Optional[int],
                 normalization: str) -> tf.data.Dataset:
    return tfrx.data.ranking_dataset(data, list_size=list_size, batch_size=batch_size,
                                     normalization=normalization, shuffle=True).repeat()


def batches_per_second(iterator, batches: int) -> float:
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches / (time.perf_counter() - start)


def compare_inputs(datasets: Dict[str, tf.data.Dataset], batches: int,
                   rounds: int) -> Dict[str, float]:
    """Best batches/s of each dataset over alternating windows."""
    iterators = {name: iter(dataset) for name, dataset in datasets.items()}
    for iterator in iterators.values():
        batches_per_second(iterator, max(batches // 4, 5))  # warm-up, traces
    best = {name: 0.0 for name in datasets}
    for _ in range(rounds):
        for name, iterator in iterators.items():
            best[name] = max(best[name], batches_per_second(iterator, batches))
    return best


def train_steps_per_second(datasets: Dict[str, tf.data.Dataset], num_features: int,
                           steps: int, rounds: int) -> Dict[str, float]:
    """Best steps/s of R4.L + twin_ndcg_type3 fed by each dataset (same model)."""
    model = tfrx.models.scorer("R4.L", num_features, normalization="none")
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=tfrx.losses.get("twin_ndcg_type3", seed=0))
    for dataset in datasets.values():
        model.fit(dataset, epochs=1, steps_per_epoch=max(steps // 2, 5), verbose=0)
    best = {name: 0.0 for name in datasets}
    for _ in range(rounds):
        for name, dataset in datasets.items():
            start = time.perf_counter()
            model.fit(dataset, epochs=1, steps_per_epoch=steps, verbose=0)
            best[name] = max(best[name], steps / (time.perf_counter() - start))
    return best


def run_case(name: str, data, workdir: str, batches: int, rounds: int,
             train: bool, steps: int) -> List[str]:
    source, batch_size, list_size = CASES[name]
    elwc = os.path.join(workdir, f"{source}.tfrecord")
    if not os.path.exists(elwc):
        tfrx.data.to_elwc(data, elwc)
    theirs = peers.peer_elwc_dataset(elwc, data.num_features, batch_size, list_size)
    datasets = {
        "ours z-score": ours_dataset(data, batch_size, list_size, "query_zscore"),
        "ours none": ours_dataset(data, batch_size, list_size, "none"),
        "TF-Ranking ELWC": theirs,
    }
    rates = compare_inputs(datasets, batches, rounds)
    peer = rates["TF-Ranking ELWC"]
    lines = [f"{name:16s} batches/s: ours z-score {rates['ours z-score']:8.1f}  "
             f"ours none {rates['ours none']:8.1f}  TF-Ranking {peer:7.1f}  "
             f"ratio z-score {rates['ours z-score'] / peer:5.2f}  "
             f"ratio none {rates['ours none'] / peer:5.2f}"]
    if train:
        # The model normalizes nothing: each path feeds the same (raw) features.
        feeds = {"ours": ours_dataset(data, batch_size, list_size, "none"),
                 "TF-Ranking ELWC": theirs,
                 "one cached batch": ours_dataset(data, batch_size, list_size, "none")
                 .take(1).cache().repeat()}
        steps_rates = train_steps_per_second(feeds, data.num_features, steps, rounds)
        cached = steps_rates["one cached batch"]
        lines.append(f"{'':16s} train steps/s (R4.L, twin_ndcg_type3): ours "
                     f"{steps_rates['ours']:6.1f}  TF-Ranking {steps_rates['TF-Ranking ELWC']:6.1f}"
                     f"  cached batch {cached:6.1f}  ours/cached {steps_rates['ours'] / cached:4.2f}"
                     f"  TF-Ranking/cached {steps_rates['TF-Ranking ELWC'] / cached:4.2f}")
    return lines


def main(argv: Optional[Iterable[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=200, help="batches per timing window")
    parser.add_argument("--rounds", type=int, default=3, help="alternating windows per path")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--train", action="store_true", help="also time training steps")
    parser.add_argument("--steps", type=int, default=40, help="training steps per window")
    args = parser.parse_args(argv)
    print(f"TensorFlow {tf.__version__}, {os.cpu_count()} CPU cores; peer: "
          f"{peers.peer_source()}")
    loaded: Dict[str, tfrx.data.LibSVMData] = {}
    with tempfile.TemporaryDirectory() as workdir:
        for name in args.cases:
            source = CASES[name][0]
            if source not in loaded:
                loaded[source] = load(source)
            for line in run_case(name, loaded[source], workdir, args.batches, args.rounds,
                                 args.train, args.steps):
                print(line, flush=True)


if __name__ == "__main__":
    main()
