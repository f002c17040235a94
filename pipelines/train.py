"""Train a neural ranker on LETOR/LibSVM data with any registered loss, on any Keras backend.

    python -m pipelines.train --data ../shared/data/MQ2008 --fold 1 \\
        --loss twin_ndcg_type3 --loss-args '{"topn": 10}' --scorer R4.L --epochs 20
    python -m pipelines.train --data synthetic --epochs 3     # the embedded default
    KERAS_BACKEND=jax tfrx-train --data synthetic --epochs 3  # no TensorFlow needed

:func:`run` is three steps: :func:`prepare` (strategy, seed, data, the output
folder's guard), :func:`fit` (Keras ``fit`` inside the strategy's scope, resuming
from the backup, keeping each scorer's epoch with the best exact validation metric,
``ndcg@5``) and :func:`finish` (evaluates validation and test per query, saves and
exports, writes). It writes, under ``--output-dir`` (default ``runs/<name>``):
``config.json`` (the resolved :class:`TrainConfig`, :mod:`pipelines.train_config`),
``results.json`` (history, best epoch, validation/test means and their no-relevant
rule; a mean over no query is ``null``), ``vali_per_query.csv`` / ``test_per_query.csv``, ``logs/``
(TensorBoard), on Keras 3 ``model.keras`` (the served scorer; it loads on any
backend), with ``--export-dir`` a TF Serving SavedModel, and last ``done.json``, the
completion marker. Files are written atomically; JSON is strict.

Two routes, by :func:`on_tensorflow`: on Keras 2 and Keras 3's TensorFlow backend,
tf.data, TensorFlow's strategies (``--strategy mirrored``, or ``multi_worker`` on
several machines from ``TF_CONFIG``) and checkpoint; on Keras 3's JAX and PyTorch
backends, :mod:`pipelines.keras_runtime` (``RankingPyDataset`` input, ``--strategy
data_parallel`` and several JAX processes) and :mod:`pipelines.keras_backup`, where
``--export-dir`` is written by ``tfrx-export`` (:mod:`pipelines.export`) on
TensorFlow. A killed run resumes from ``backup/`` when rerun with the same config
(from the newest of its last two backups that is undamaged: a damaged one is skipped
with a warning, and with none left the run starts from the first epoch, or with
``--fail-on-damaged-backup`` stops; :mod:`pipelines.backup_store`);
a finished run of the same config is not trained again; a run of another config in
the folder is refused unless ``--overwrite``. The ``loss`` names the kind of model
(:mod:`pipelines.trainable`): ``--loss irgan_<mode>`` trains an IRGAN (TensorFlow),
whose generator and discriminator are selected and evaluated each at its own best
epoch. Why ``fit`` rather than TF-Ranking's pipeline classes, and how resuming
works: ``docs/notes/train_pipeline.md``.
"""
import argparse
import dataclasses
import functools
import math
import os
import shutil
import tempfile
from typing import Any, Dict, List, Mapping, Optional

from . import common
from . import export
from . import flags
from . import keras_backup
from . import keras_runtime
from . import run_dir
from . import trainable
from .callbacks import (CurveLogger, NonFiniteLossError, StepTimer, StopOnNonFiniteLoss,
                        history_key)
from .run_dir import FinishedRunError, OutputDirError
from .train_config import STRATEGIES, TrainConfig
from .trainable import player_suffix
from tfr_extensions import backend
from tfr_extensions import evaluation
from tfr_extensions import models
import tfr_extensions as tfrx
from tfr_extensions.backend import keras


@dataclasses.dataclass
class ScorerResult:
    """One scorer's best epoch and its evaluations at that epoch."""

    best_epoch: Optional[int]
    validation: evaluation.Evaluation
    test: evaluation.Evaluation


@dataclasses.dataclass
class TrainResult:
    """What :func:`run` returns (``results.json`` holds its JSON part).

    ``best_epoch``, ``validation`` and ``test`` are those of the model's scorer
    (of an IRGAN: its served player, the discriminator); ``players`` holds
    every scorer evaluated by name (``""``: the only one).
    """

    config: TrainConfig
    model: keras.Model
    history: Dict[str, list]
    best_epoch: Optional[int]
    validation: evaluation.Evaluation
    test: evaluation.Evaluation
    output_dir: str
    export_dir: Optional[str]
    train_seconds: float               # the epochs' wall time, over all invocations
    resumed_from_epoch: int = 0        # epochs restored from the backup (0: a fresh start)
    players: Dict[str, ScorerResult] = dataclasses.field(default_factory=dict)
    model_file: Optional[str] = None   # the served scorer as a .keras file (Keras 3)
    timing: Optional[Dict[str, Any]] = None  # this invocation's step timing (JAX, PyTorch)
    epoch_seconds: List[float] = dataclasses.field(default_factory=list)  # each epoch's wall time


def train_dataset(config: TrainConfig, train):
    """The endless, batched training stream (raw features: the model normalizes):
    epoch after epoch of the training queries, each epoch in its own seeded order,
    the same from every iterator (``ranking_dataset(..., repeat=True)``), so that
    Keras 3's extra iterator under a strategy cannot change it and a resumed run
    can skip to where it stopped."""
    dataset = tfrx.data.ranking_dataset(
        train, list_size=config.list_size, batch_size=config.batch_size, shuffle=True,
        normalization="none", drop_no_relevant=config.drop_no_relevant, seed=config.seed,
        repeat=True)
    tf = backend.tensorflow()
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def steps_per_epoch(config: TrainConfig, train) -> int:
    """``config.steps_per_epoch``, or the batches of one pass over the training
    queries that :func:`train_dataset` serves."""
    if config.steps_per_epoch:
        return int(config.steps_per_epoch)
    queries = tfrx.data.select_queries(train, drop_no_relevant=config.drop_no_relevant)
    return max(math.ceil(queries.size / config.batch_size), 1)


def build_scorer(config: TrainConfig, num_features: int,
                 name: Optional[str] = None) -> keras.Model:
    """The (uncompiled) scorer of ``config``: notation, width, batch norm and L2."""
    return models.scorer(config.scorer, num_features, hidden_units=config.hidden_units,
                         batch_norm=config.batch_norm, l2=config.l2, name=name)


def build_trainable(config: TrainConfig, num_features: int) -> trainable.Trainable:
    """The compiled model of ``config`` (call inside the strategy scope), seen through
    :class:`pipelines.trainable.Trainable`: the kind ``config.loss`` names, built of
    :func:`build_scorer` scorers."""
    return trainable.model_kind(config.loss).build(
        config, functools.partial(build_scorer, config, num_features))


def build_model(config: TrainConfig, num_features: int) -> keras.Model:
    """The compiled Keras model that ``fit`` trains: :func:`build_trainable`'s."""
    return build_trainable(config, num_features).model


def make_strategy(name: str):
    """TF-Ranking's strategy factory under our short names (None = default), on TensorFlow."""
    from tfr_extensions import strategies  # pylint: disable=import-outside-toplevel
    if name == "data_parallel":
        raise ValueError("`strategy` 'data_parallel' is Keras's DataParallel distribution on "
                         "JAX (KERAS_BACKEND=jax); on TensorFlow use 'mirrored'.")
    return strategies.get_strategy(STRATEGIES[name])


def on_tensorflow() -> bool:
    """Whether this run trains as a TensorFlow program (Keras 2, or Keras 3's TensorFlow
    backend: tf.data, TensorFlow's strategies and checkpoint); else Keras 3 on JAX or
    PyTorch (:mod:`pipelines.keras_runtime`, :mod:`pipelines.keras_backup`)."""
    return backend.implementation() == backend.TENSORFLOW


# ----------------------------------------------------------------------------- run
def check_splits(splits: common.Splits, no_relevant: str) -> None:
    """ValueError for an empty split, or a validation set whose metric cannot be
    computed under ``no_relevant`` (it picks the best epoch)."""
    for name, data in (("training", splits.train), ("validation", splits.vali),
                       ("test", splits.test)):
        if data.num_queries == 0:
            raise ValueError(f"The {name} set has no query.")
    evaluation.check_evaluable(splits.vali, no_relevant, what="validation")


@dataclasses.dataclass
class Setup:
    """What :func:`prepare` hands to :func:`fit` and :func:`finish`."""

    config: TrainConfig                # its output_dir resolved
    splits: common.Splits
    strategy: Any                      # TensorFlow's strategy, or Keras's distribution
    chief: bool
    output_dir: str                    # this worker's (a non-chief's: its scratch folder)
    backup_dir: str                    # the chief's, for every worker
    fail_on_damaged_backup: bool = False  # stop, rather than start afresh, when every
    #                                       backup generation is damaged


@dataclasses.dataclass
class Fitted:
    """What :func:`fit` hands to :func:`finish`: the trained model, each scorer's
    best-epoch callback (its best weights restored) and the run's backup."""

    model: trainable.Trainable
    best: Dict[str, evaluation.BestEpochCallback]
    backup: Any                        # resume.TrainingBackup or keras_backup.KerasBackup
    resumed_from_epoch: int            # epochs restored from the backup (0: a fresh start)
    step_timer: Optional[StepTimer] = None


def prepare(config: TrainConfig, splits: Optional[common.Splits] = None, *,
            overwrite: bool = False, fail_on_damaged_backup: bool = False) -> Setup:
    """The strategy (first: collectives need a fresh context), the resolved config,
    the global seed, the checked splits (loaded unless given) and the output folder,
    checked (:func:`pipelines.run_dir.prepare_output_dir`) with its ``config.json``;
    ``fail_on_damaged_backup`` goes to the restore (:class:`Setup`)."""
    if on_tensorflow():
        strategy = make_strategy(config.strategy)
    else:
        keras_runtime.check_strategy(config.strategy)
        keras_runtime.join_processes(config.strategy)  # before any JAX computation
        strategy = keras_runtime.distribution(config.strategy)
    config = dataclasses.replace(config, output_dir=config.resolved_output_dir)
    keras.utils.set_random_seed(config.seed)
    splits = splits or common.load_splits(config.data, config.fold, config.seed)
    check_splits(splits, config.no_relevant)
    output_dir = config.resolved_output_dir
    backup_dir = os.path.join(config.resolved_output_dir, run_dir.BACKUP_DIR)
    if not on_tensorflow():
        chief = keras_runtime.process_index() == 0
        if not chief:  # a scratch folder of its own, deleted at the end
            output_dir = tempfile.mkdtemp(prefix=f"tfrx_process{keras_runtime.process_index()}_")
        run_dir.prepare_output_dir(config, output_dir, overwrite, chief=chief,
                                   sync=lambda: keras_runtime.sync_processes("tfrx prepare"))
        return Setup(config, splits, strategy, chief, output_dir, backup_dir,
                     fail_on_damaged_backup)
    from . import resume  # pylint: disable=import-outside-toplevel
    from tfr_extensions import strategies  # pylint: disable=import-outside-toplevel
    chief = resume.is_chief(strategy)
    if not chief:  # TF-Ranking's per-worker scratch directory
        output_dir = strategies.get_output_filepath(output_dir, strategy)
    resume.prepare_output_dir(config, output_dir, strategy, overwrite)
    return Setup(config, splits, strategy, chief, output_dir, backup_dir, fail_on_damaged_backup)


def _callbacks(setup: Setup, model: trainable.Trainable):
    """The best-epoch callbacks by player, and the test curves (``test_curve``)."""
    config, splits = setup.config, setup.splits
    best = {player: evaluation.BestEpochCallback(
        splits.vali, config.validation_metric, config.no_relevant,
        scorer=None if scorer is model.model else scorer,
        log_key=history_key("val", config.validation_metric, player))
        for player, scorer in model.scorers().items()}
    curves = [CurveLogger(splits.test, config.validation_metric, config.no_relevant,
                          scorer, history_key("test", config.validation_metric, player))
              for player, scorer in model.scorers().items()] if config.test_curve else []
    return best, curves


def fit(setup: Setup) -> Fitted:
    """Builds the model inside the strategy's scope (under ``mixed_float16`` if asked),
    restores the backup, if any, and trains the remaining epochs with Keras ``fit``;
    each scorer ends with the weights of its best validation epoch. On TensorFlow with
    tf.data, its strategies and checkpoint (:func:`_fit_tensorflow`); on JAX and
    PyTorch with :mod:`pipelines.keras_runtime` and :mod:`pipelines.keras_backup`."""
    config = setup.config
    previous_policy = keras.mixed_precision.global_policy()
    if config.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        return _fit_tensorflow(setup) if on_tensorflow() else _fit_keras(setup)
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)


def _fit_tensorflow(setup: Setup) -> Fitted:
    from . import distributed, resume  # pylint: disable=import-outside-toplevel
    from tfr_extensions import strategies  # pylint: disable=import-outside-toplevel
    config, splits, strategy = setup.config, setup.splits, setup.strategy
    with strategies.strategy_scope(strategy):
        model = build_trainable(config, splits.num_features)
        dataset = train_dataset(config, splits.train)
        steps = steps_per_epoch(config, splits.train)
        best, curves = _callbacks(setup, model)
        backup = resume.TrainingBackup(
            setup.backup_dir,
            resume.training_state(model, dataset.element_spec, best, config.epochs),
            strategy)
        # after the model: workers are in step here
        done = backup.restore(setup.fail_on_damaged_backup)
        # first at epoch end: the replicas' copies of a weight made one, then read
        fit_callbacks = [StopOnNonFiniteLoss(), distributed.SyncReplicaCopies(strategy),
                         *best.values(), *curves]
        if config.tensorboard:
            fit_callbacks.append(
                keras.callbacks.TensorBoard(os.path.join(setup.output_dir, "logs")))
        fit_callbacks.append(backup)  # last: its checkpoint holds this epoch's best state
        # the stream of an uninterrupted run, past the epochs restored from the backup
        distributed.fit(model.model, dataset.skip(done * steps), strategy,
                        epochs=config.epochs, initial_epoch=done, steps_per_epoch=steps,
                        callbacks=fit_callbacks, verbose=config.verbose)
    return Fitted(model, best, backup, resumed_from_epoch=done)


def training_batches(config: TrainConfig, train) -> "tfrx.data.RankingPyDataset":
    """The training queries as :class:`tfr_extensions.data.RankingPyDataset` batches
    for Keras 3 on JAX and PyTorch: what :func:`train_dataset` serves on TensorFlow
    (raw features and masks, each epoch in its own seeded order), padded to a few
    list sizes."""
    return tfrx.data.RankingPyDataset(
        train, batch_size=config.batch_size, list_size=config.list_size, shuffle=True,
        normalization="none", drop_no_relevant=config.drop_no_relevant, seed=config.seed,
        with_mask=True, bucket_list_sizes=True)


def _fit_keras(setup: Setup) -> Fitted:
    config, splits, dist = setup.config, setup.splits, setup.strategy
    with keras_runtime.scope(dist):
        model = build_trainable(config, splits.num_features)
        batches = training_batches(config, splits.train)
        devices = keras_runtime.num_devices(dist)
        left_out = keras_runtime.left_out_per_epoch(batches, devices)
        if left_out:
            print(f"data_parallel over {devices} devices: each pass over the training data "
                  f"leaves out the last {left_out} queries of its last batch (which must "
                  "split evenly).")
        best, curves = _callbacks(setup, model)
        backup = keras_backup.KerasBackup(setup.backup_dir, model.model, model.optimizers(),
                                          best, chief=setup.chief)
        done = backup.restore(setup.fail_on_damaged_backup)
        stream = keras_runtime.TrainingStream(
            batches, steps_per_epoch(config, splits.train), epoch=done, devices=devices,
            process=keras_runtime.process_index(), processes=keras_runtime.process_count())
        timer = StepTimer(input_wait=lambda: stream.wait_seconds)
        fit_callbacks = [StopOnNonFiniteLoss(), timer, *best.values(), *curves]
        if config.tensorboard and export.tensorflow_installed():
            fit_callbacks.append(
                keras.callbacks.TensorBoard(os.path.join(setup.output_dir, "logs")))
        elif config.tensorboard and done == 0:
            print("TensorBoard logs: Keras writes them with TensorFlow's summary writer, "
                  "which is not installed here; no logs/ (the history is in results.json).")
        fit_callbacks.append(backup)  # last: its checkpoint holds this epoch's best state
        # shuffle=False: the stream's order is its own, a function of the seed and the
        # epoch (Keras would shuffle the batches with Python's global random state)
        try:
            model.model.fit(stream, epochs=config.epochs, initial_epoch=done, shuffle=False,
                            callbacks=fit_callbacks, verbose=config.verbose)
        finally:
            stream.close()
    return Fitted(model, best, backup, resumed_from_epoch=done, step_timer=timer)


def finish(setup: Setup, fitted: Fitted,
           marker: Optional[Mapping[str, Any]] = None) -> TrainResult:
    """Evaluates every scorer on validation and test, exports the served one (the
    chief, with ``export_dir``), writes the outputs (:func:`write_outputs`) and then
    ``done.json``; the chief deletes the backup last."""
    config = setup.config
    players = fitted.model.scorers()
    results = {player: ScorerResult(
        fitted.best[player].best_epoch,
        evaluation.evaluate_model(scorer, setup.splits.vali, no_relevant=config.no_relevant),
        evaluation.evaluate_model(scorer, setup.splits.test, no_relevant=config.no_relevant))
        for player, scorer in players.items()}
    served = fitted.model.served
    model_file = export_dir = None
    # a .keras file loads on every Keras 3 backend; on JAX every process of a run saves
    # (the chief into the run's folder), since saving reads the model's global arrays
    if backend.IS_KERAS_3 and (setup.chief or not on_tensorflow()):
        model_file = export.save_model(players[served],
                                       os.path.join(setup.output_dir, run_dir.MODEL_FILE))
    if config.export_dir and setup.chief:
        metadata = {"train_config": config.to_json()}
        if backend.uses_tensorflow_ops():
            from tfr_extensions import serving  # pylint: disable=import-outside-toplevel
            export_dir = serving.export(players[served], config.export_dir, overwrite=True,
                                        metadata=metadata)
        else:  # TensorFlow writes the SavedModel: beside, in its own process, or later
            export_dir = export.export_in_tensorflow(model_file, config.export_dir, metadata)
    result = TrainResult(
        config=config, model=fitted.model.model, history=fitted.backup.history_by_key(),
        best_epoch=results[served].best_epoch, validation=results[served].validation,
        test=results[served].test, output_dir=setup.output_dir, export_dir=export_dir,
        train_seconds=sum(entry["seconds"] for entry in fitted.backup.history),
        epoch_seconds=[entry["seconds"] for entry in fitted.backup.history],
        resumed_from_epoch=fitted.resumed_from_epoch, players=results, model_file=model_file,
        timing=fitted.step_timer.summary() if fitted.step_timer else None)
    write_outputs(result)
    common.write_done(os.path.join(setup.output_dir, run_dir.DONE_FILE), config.to_json(),
                      marker)
    if not on_tensorflow():
        keras_runtime.sync_processes("tfrx finish")
        if not setup.chief:
            shutil.rmtree(setup.output_dir, ignore_errors=True)
    if setup.chief:
        shutil.rmtree(setup.backup_dir, ignore_errors=True)
    return result


def run(config: TrainConfig, splits: Optional[common.Splits] = None, *,
        overwrite: bool = False, marker: Optional[Mapping[str, Any]] = None,
        fail_on_damaged_backup: bool = False) -> TrainResult:
    """Trains (resuming from a backup of the same config), restores each scorer's best
    validation epoch, evaluates, writes outputs and then the completion marker
    ``done.json`` (its finish time, the config, and the JSON fields of ``marker``):
    :func:`prepare`, :func:`fit`, :func:`finish`. A damaged backup generation is
    skipped with a warning; with none good left the run starts from the first epoch
    (a warning says so), unless ``fail_on_damaged_backup``.

    Raises:
      FinishedRunError, OutputDirError: see :func:`pipelines.resume.check_output_dir` (not with
        ``overwrite``, which deletes the old outputs first).
      DamagedBackupError (an OutputDirError): every backup generation is damaged, and
        ``fail_on_damaged_backup``.
      NonFiniteLossError: the training loss became NaN or infinite.
      ValueError: bad data (:func:`check_splits`) or config.
    """
    setup = prepare(config, splits, overwrite=overwrite,
                    fail_on_damaged_backup=fail_on_damaged_backup)
    return finish(setup, fit(setup), marker)


def write_outputs(result: TrainResult) -> None:
    """``results.json`` and the per-query CSVs in ``result.output_dir``; for a model of
    several scorers (IRGAN) also each one's CSVs (``test_per_query_<player>.csv``) and
    results (``results.json``'s ``players``)."""
    summary = {"config": result.config.to_json(), "best_epoch": result.best_epoch,
               "history": result.history, "train_seconds": result.train_seconds,
               "resumed_from_epoch": result.resumed_from_epoch, "export_dir": result.export_dir,
               "model_file": result.model_file, "epoch_seconds": result.epoch_seconds,
               "backend": backend.describe()}
    if result.timing is not None:
        summary["timing"] = result.timing
    if set(result.players) != {""}:
        for player, scores in result.players.items():
            common.write_per_query(result.output_dir, scores.validation, scores.test,
                                   suffix=player_suffix(player))
        summary["players"] = {player: {
            "best_epoch": scores.best_epoch,
            "validation": evaluation.json_summary(scores.validation.summary),
            "test": evaluation.json_summary(scores.test.summary)}
            for player, scores in result.players.items()}
    common.write_evaluations(result.output_dir, result.validation, result.test, summary)


# ----------------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    """The command line: a flag per :class:`TrainConfig` field, and ``--overwrite``."""
    parser = argparse.ArgumentParser(prog="python -m pipelines.train",
                                     description=__doc__.split("\n\n")[0])
    flags.add_config_flags(parser, TrainConfig)
    parser.add_argument("--overwrite", action="store_true",
                        help="delete the outputs of another run (another config, or a "
                             "finished one) in the output dir and train afresh")
    parser.add_argument("--fail-on-damaged-backup", action="store_true",
                        help="when every backup of an interrupted run is damaged, stop with "
                             "an error instead of training from the first epoch")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The :class:`TrainConfig` of parsed flags (all but ``--overwrite`` and
    ``--fail-on-damaged-backup``)."""
    return flags.config_from_args(TrainConfig, args)


def parse_args(argv=None) -> TrainConfig:
    """Flags -> :class:`TrainConfig`."""
    return config_from_args(build_parser().parse_args(argv))


def main(argv=None) -> None:
    """Runs :func:`run` from flags. Exit status 1 with a one-line error for an output
    dir of another run (without ``--overwrite``) or a non-finite loss; a finished run
    of the same config prints its stored results and exits 0."""
    args = build_parser().parse_args(argv)
    config = config_from_args(args)
    try:
        result = run(config, overwrite=args.overwrite,
                     fail_on_damaged_backup=args.fail_on_damaged_backup)
    except FinishedRunError as finished:
        print(finished)
        for line in common.stored_summary_lines(config.resolved_output_dir):
            print(line)
        return
    except (OutputDirError, NonFiniteLossError) as error:
        raise SystemExit(f"pipelines.train: error: {error}") from error
    resumed = f" (resumed after epoch {result.resumed_from_epoch})" \
        if result.resumed_from_epoch else ""
    print(f"best epoch {result.best_epoch}{resumed}; outputs in {result.output_dir}")
    for player, scores in result.players.items():
        name = f" ({player}, best epoch {scores.best_epoch})" if player else ""
        print(f"validation{name}:", common.format_summary(scores.validation.summary))
        print(f"test{name}:      ", common.format_summary(scores.test.summary))


if __name__ == "__main__":
    main()
