"""Train a neural ranker on LETOR/LibSVM data with any registered loss.

    python -m pipelines.train --data ../shared/data/MQ2008/Fold1 \\
        --loss twin_ndcg_type3 --loss-args '{"topn": 10}' --scorer R4.L --epochs 20
    python -m pipelines.train --data synthetic --epochs 3     # the embedded default

Outputs under ``--output-dir`` (default ``runs/<name>``, ignored by git):
``config.json`` (the resolved :class:`TrainConfig`), ``results.json`` (history,
best epoch, validation/test means and the no-relevant rule used),
``vali_per_query.csv`` / ``test_per_query.csv`` (one row per query, for
significance tests), ``logs/`` (TensorBoard) and, with ``--export-dir``, a TF
Serving SavedModel (:func:`tfr_extensions.serving.export`).

How it is built, and why Keras ``fit`` directly rather than TF-Ranking's
``ModelFitPipeline``/``SimplePipeline``: those classes hard-wire what we need
to change: the loss comes from TF-Ranking's fixed name table, the model from a
``ModelBuilder`` over ELWC feature specs, validation is Keras's per-batch mean
under TF-Ranking's count-as-zero rule, the best model is exported from a
checkpoint rather than restored, there is no test evaluation, and the export
uses ``model.save`` with the dataset builder's signatures. Overriding
``build_loss``, ``build_callbacks``, ``export_saved_model`` and
``train_and_validate`` would leave little of them. We keep their structure and
reuse their parts: strategies come from TF-Ranking's
``strategy_utils.get_strategy`` and non-chief outputs go to its
``get_output_filepath`` (as :mod:`tfr_extensions.compat`, so no TF-Ranking is needed); model, loss, metrics and optimizer are built inside
the strategy scope (as ``ModelFitPipeline.train_and_validate`` does); the
train set is our ``tfrx.data.ranking_dataset`` repeated with a fixed
``steps_per_epoch`` (so every worker of a multi-worker run takes the same
number of steps); the exact validation nDCG@5 of each epoch is computed by
:class:`tfr_extensions.evaluation.BestEpochCallback`, which restores the best
epoch's weights at the end; the SavedModel comes from ``tfrx.serving.export``
(TF-Ranking's ELWC predict signature plus ours).

Multi-machine training: ``--strategy multi_worker`` builds
``tf.distribute.MultiWorkerMirroredStrategy`` from ``TF_CONFIG``; the strategy is
created before any other TensorFlow work, as collective ops require.
"""
import argparse
import dataclasses
import inspect
import json
import os
import time
from typing import Any, Dict, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

import tfr_extensions as tfrx
from tfr_extensions import compat
from tfr_extensions import evaluation
from tfr_extensions import models
from tfr_extensions import serving

STRATEGIES = {"default": None, "mirrored": compat.MIRRORED_STRATEGY,
              "multi_worker": compat.MWMS_STRATEGY}
SYNTHETIC = "synthetic"
#: query fractions of the synthetic default's train / validation / test splits
SYNTHETIC_SPLIT = (0.6, 0.2, 0.2)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on (written as ``config.json``)."""

    name: str = "default"
    data: str = SYNTHETIC              # "synthetic" or a folder with train/vali/test.txt
    fold: Optional[int] = None         # picks <data>/Fold<k> when given
    loss: str = "twin_ndcg_type3"      # any name of tfrx.losses.get
    loss_args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    scorer: str = "R4.L"               # tfrx.models notation
    hidden_units: int = 100
    batch_norm: bool = True
    epochs: int = 20
    batch_size: int = 32               # queries per (global) batch
    learning_rate: float = 1e-3        # Adam, as the seeds
    l2: float = 1e-3                   # as PyTorch weight decay, as the seeds
    list_size: Optional[int] = None    # None: the longest list of each batch
    seed: int = 0
    strategy: str = "default"          # default | mirrored | multi_worker
    output_dir: Optional[str] = None   # None: runs/<name>
    export_dir: Optional[str] = None   # e.g. saved_models/<name>/1; None: no export
    validation_metric: str = "ndcg@5"
    no_relevant: str = "exclude"       # evaluation rule for lists without relevant docs
    drop_no_relevant: bool = True      # training lists without relevant docs carry no signal
    steps_per_epoch: Optional[int] = None  # None: one pass over the training queries
    mixed_precision: bool = False
    jit_compile: bool = False
    tensorboard: bool = True
    verbose: int = 1                   # Keras progress bar: 0 silent, 1 bar, 2 a line per epoch

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"`strategy` must be one of {list(STRATEGIES)}; "
                             f"got {self.strategy!r}.")
        if self.no_relevant not in evaluation.NO_RELEVANT_RULES:
            raise ValueError(f"`no_relevant` must be one of {list(evaluation.NO_RELEVANT_RULES)}; "
                             f"got {self.no_relevant!r}.")
        for arg in ("epochs", "batch_size", "hidden_units"):
            value = getattr(self, arg)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{arg}` must be a positive int; got {value!r}.")
        if not isinstance(self.loss_args, Mapping):
            raise ValueError(f"`loss_args` must be a mapping; got {self.loss_args!r}.")
        models.parse_notation(self.scorer, self.hidden_units)
        evaluation.parse_metric(self.validation_metric)

    @property
    def resolved_output_dir(self) -> str:
        return self.output_dir or os.path.join("runs", self.name)

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Splits:
    """Train, validation and test ``LibSVMData`` with one feature count."""

    train: Any
    vali: Any
    test: Any

    @property
    def num_features(self) -> int:
        return int(self.train.features.shape[1])


@dataclasses.dataclass
class TrainResult:
    """What :func:`run` returns (``results.json`` holds its JSON part)."""

    config: TrainConfig
    model: tf.keras.Model
    history: Dict[str, list]
    best_epoch: Optional[int]
    validation: evaluation.Evaluation
    test: evaluation.Evaluation
    output_dir: str
    export_dir: Optional[str]
    train_seconds: float


def split_queries(data, fractions: Sequence[float], seed: int = 0) -> list:
    """Random disjoint query subsets of ``data`` with the given fractions."""
    order = np.random.default_rng(seed).permutation(data.num_queries)
    bounds = np.round(np.cumsum([0.0, *fractions]) / sum(fractions) * len(order)).astype(int)
    return [data.subset(np.sort(order[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]


def load_splits(data: str, fold: Optional[int] = None, seed: int = 0) -> Splits:
    """The three splits of a LETOR folder, or of the synthetic default."""
    if data == SYNTHETIC:
        return Splits(*split_queries(tfrx.data.synthetic(seed=seed), SYNTHETIC_SPLIT, seed))
    folder = os.path.join(data, f"Fold{fold}") if fold is not None else data
    paths = [os.path.join(folder, f"{part}.txt") for part in ("train", "vali", "test")]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise ValueError(f"`data` must be 'synthetic' or a folder with train.txt, vali.txt and "
                         f"test.txt (or Fold<k>/ with --fold); missing {missing}.")
    train = tfrx.data.read_libsvm(paths[0])
    num_features = int(train.features.shape[1])
    return Splits(train, *(tfrx.data.read_libsvm(p, num_features=num_features) for p in paths[1:]))


def build_loss(name: str, loss_args: Mapping[str, Any], seed: int) -> tf.keras.losses.Loss:
    """``tfrx.losses.get(name, **loss_args)``; seeded with ``seed`` if it takes one."""
    loss = tfrx.losses.get(name, **loss_args)
    if "seed" not in loss_args and "seed" in inspect.signature(type(loss).__init__).parameters:
        loss = tfrx.losses.get(name, **{**loss_args, "seed": seed})
    return loss


def train_dataset(config: TrainConfig, train) -> tf.data.Dataset:
    """The repeated, batched training stream (raw features: the model normalizes)."""
    dataset = tfrx.data.ranking_dataset(
        train, list_size=config.list_size, batch_size=config.batch_size, shuffle=True,
        normalization="none", drop_no_relevant=config.drop_no_relevant, seed=config.seed)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def _steps_per_epoch(config: TrainConfig, dataset: tf.data.Dataset) -> int:
    if config.steps_per_epoch:
        return int(config.steps_per_epoch)
    steps = int(dataset.cardinality())
    if steps < 0:  # unknown: count one pass
        steps = sum(1 for _ in dataset)
    return max(steps, 1)


def build_model(config: TrainConfig, num_features: int) -> tf.keras.Model:
    """The compiled scorer (call inside the strategy scope)."""
    model = models.scorer(config.scorer, num_features, hidden_units=config.hidden_units,
                          batch_norm=config.batch_norm, l2=config.l2)
    model.compile(optimizer=tf.keras.optimizers.Adam(config.learning_rate),
                  loss=build_loss(config.loss, config.loss_args, config.seed),
                  metrics=[tfrx.metrics.RankingMetric("ndcg", topn=5)],
                  jit_compile=config.jit_compile)
    return model


def make_strategy(name: str) -> Optional[tf.distribute.Strategy]:
    """TF-Ranking's strategy factory under our short names (None = default)."""
    return compat.get_strategy(STRATEGIES[name])


def is_chief(strategy: Optional[tf.distribute.Strategy]) -> bool:
    """True unless this is a non-chief worker of a multi-worker run.

    The chief is the ``chief`` task, or worker 0 when the cluster has no chief.
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type in (None, "chief"):
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and task_id == 0 and not has_chief


def run(config: TrainConfig, splits: Optional[Splits] = None) -> TrainResult:
    """Trains, restores the best validation epoch, evaluates, writes outputs."""
    strategy = make_strategy(config.strategy)  # first: collectives need a fresh context
    config = dataclasses.replace(config, output_dir=config.resolved_output_dir)  # resolved
    tf.keras.utils.set_random_seed(config.seed)
    splits = splits or load_splits(config.data, config.fold, config.seed)
    chief = is_chief(strategy)
    output_dir = config.resolved_output_dir
    if not chief:  # TF-Ranking's per-worker scratch directory
        output_dir = compat.get_output_filepath(output_dir, strategy)
    tf.io.gfile.makedirs(output_dir)
    with open(os.path.join(output_dir, "config.json"), "w") as f:
        json.dump(config.to_json(), f, indent=2)

    previous_policy = tf.keras.mixed_precision.global_policy()
    if config.mixed_precision:
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        with compat.strategy_scope(strategy):
            model = build_model(config, splits.num_features)
            dataset = train_dataset(config, splits.train)
            steps = _steps_per_epoch(config, dataset)
            best = evaluation.BestEpochCallback(splits.vali, config.validation_metric,
                                                config.no_relevant)
            callbacks = [best]
            if config.tensorboard:
                callbacks.append(tf.keras.callbacks.TensorBoard(os.path.join(output_dir, "logs")))
            start = time.perf_counter()
            history = model.fit(dataset.repeat(), epochs=config.epochs, steps_per_epoch=steps,
                                callbacks=callbacks, verbose=config.verbose)
            train_seconds = time.perf_counter() - start
    finally:
        tf.keras.mixed_precision.set_global_policy(previous_policy)

    validation = evaluation.evaluate_model(model, splits.vali, no_relevant=config.no_relevant)
    test = evaluation.evaluate_model(model, splits.test, no_relevant=config.no_relevant)
    export_dir = None
    if config.export_dir and chief:
        export_dir = serving.export(model, config.export_dir, overwrite=True,
                                    metadata={"train_config": config.to_json()})
    result = TrainResult(config=config, model=model,
                         history={k: [float(v) for v in vs] for k, vs in history.history.items()},
                         best_epoch=best.best_epoch, validation=validation, test=test,
                         output_dir=output_dir, export_dir=export_dir,
                         train_seconds=train_seconds)
    write_outputs(result)
    return result


def write_outputs(result: TrainResult) -> None:
    """``results.json`` and the per-query CSVs in ``result.output_dir``."""
    write_evaluations(result.output_dir, result.validation, result.test, {
        "config": result.config.to_json(), "best_epoch": result.best_epoch,
        "history": result.history, "train_seconds": result.train_seconds,
        "export_dir": result.export_dir})


def write_evaluations(output_dir: str, validation, test, summary: Dict[str, Any]) -> None:
    """``vali_per_query.csv`` and ``test_per_query.csv`` from the two
    :class:`tfr_extensions.evaluation` results, and ``results.json``:
    ``summary`` plus their summaries under ``"validation"`` and ``"test"``."""
    validation.per_query.to_csv(os.path.join(output_dir, "vali_per_query.csv"), index=False)
    test.per_query.to_csv(os.path.join(output_dir, "test_per_query.csv"), index=False)
    summary = dict(summary, validation=validation.summary, test=test.summary)
    with open(os.path.join(output_dir, "results.json"), "w") as f:
        json.dump(summary, f, indent=2)


def parse_args(argv=None) -> TrainConfig:
    """Flags -> :class:`TrainConfig` (only ``main`` calls this)."""
    defaults = TrainConfig()
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.train", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--name", default=defaults.name, help="run name (output dir runs/<name>)")
    parser.add_argument("--data", default=defaults.data,
                        help="'synthetic' or a folder with train.txt, vali.txt, test.txt")
    parser.add_argument("--fold", type=int, default=None, help="use <data>/Fold<k>")
    parser.add_argument("--loss", default=defaults.loss,
                        help="any tfrx.losses.get name (ours or TF-Ranking's)")
    parser.add_argument("--loss-args", default="{}", type=json.loads,
                        help="JSON keyword arguments of the loss, e.g. '{\"topn\": 10}'")
    parser.add_argument("--scorer", default=defaults.scorer,
                        help="scorer notation: R5, CE5, GE5, R4.L, CE4.L, B64..B1024")
    parser.add_argument("--hidden-units", type=int, default=defaults.hidden_units)
    parser.add_argument("--no-batch-norm", dest="batch_norm", action="store_false")
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size,
                        help="queries per batch")
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate)
    parser.add_argument("--l2", type=float, default=defaults.l2)
    parser.add_argument("--list-size", type=int, default=None,
                        help="pad/truncate lists to this size (default: longest in batch)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--strategy", default=defaults.strategy, choices=sorted(STRATEGIES))
    parser.add_argument("--output-dir", default=None, help="default runs/<name>")
    parser.add_argument("--export-dir", default=None,
                        help="SavedModel version dir, e.g. saved_models/<name>/1")
    parser.add_argument("--validation-metric", default=defaults.validation_metric)
    parser.add_argument("--no-relevant", default=defaults.no_relevant,
                        choices=evaluation.NO_RELEVANT_RULES)
    parser.add_argument("--keep-no-relevant", dest="drop_no_relevant", action="store_false",
                        help="keep training lists without relevant documents")
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    parser.add_argument("--mixed-precision", action="store_true")
    parser.add_argument("--jit-compile", action="store_true")
    parser.add_argument("--no-tensorboard", dest="tensorboard", action="store_false")
    parser.add_argument("--verbose", type=int, default=defaults.verbose)
    return TrainConfig(**vars(parser.parse_args(argv)))


def format_summary(summary: Mapping[str, Any], columns=("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10",
                                                      "map@10", "nerr@10")) -> str:
    """One line: the chosen means and the no-relevant rule."""
    values = "  ".join(f"{c}={summary[c]:.4f}" for c in columns if c in summary)
    return f"{values}  ({summary['num_counted']}/{summary['num_queries']} queries, " \
           f"no_relevant={summary['no_relevant']})"


def main(argv=None) -> None:
    config = parse_args(argv)
    result = run(config)
    print(f"best epoch {result.best_epoch}; outputs in {result.output_dir}")
    print("validation:", format_summary(result.validation.summary))
    print("test:      ", format_summary(result.test.summary))


if __name__ == "__main__":
    main()
