"""Train a neural ranker on LETOR/LibSVM data with any registered loss.

    python -m pipelines.train --data ../shared/data/MQ2008/Fold1 \\
        --loss twin_ndcg_type3 --loss-args '{"topn": 10}' --scorer R4.L --epochs 20
    python -m pipelines.train --data synthetic --epochs 3     # the embedded default

Outputs under ``--output-dir`` (default ``runs/<name>``, ignored by git):
``config.json`` (the resolved :class:`TrainConfig`), ``results.json`` (history,
best epoch, validation/test means and the no-relevant rule used; a mean over no
query is ``null``), ``vali_per_query.csv`` / ``test_per_query.csv`` (one row per
query, for significance tests), ``logs/`` (TensorBoard), with ``--export-dir`` a
TF Serving SavedModel (:func:`tfr_extensions.serving.export`), and last
``done.json``, the completion marker (the finish time and the config). Every
file is written atomically (a temporary file, then a rename) and every JSON is
strict (no ``NaN``).

Resuming: during training ``backup/`` holds Keras's ``BackupAndRestore``
checkpoint of the last finished epoch (model, optimizer, epoch) extended with
what else the rest of the run depends on: the loss's variables (the step
counter a randomized loss folds into its seed) and the best-epoch callback's
state (:class:`TrainingBackup`), plus the per-epoch logs (``history.json``). A
rerun with the same config (all fields but ``verbose``) resumes from it, with
the training stream advanced past the finished epochs, and gives the results of
an uninterrupted run; ``backup/`` is deleted once ``done.json`` is written. A
rerun over a finished run of the same config does nothing (the CLI prints the
stored results); over a run of another config, finished or not, it refuses,
naming the fields that differ, unless ``--overwrite`` is given, which deletes
the old outputs first. A NaN or infinite training loss stops the run with an
error naming the epoch (exit status 1, no ``done.json``).

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
import math
import os
import shutil
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

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
CONFIG_FILE = "config.json"
RESULTS_FILE = "results.json"
DONE_FILE = "done.json"             # the completion marker, written last
BACKUP_DIR = "backup"               # BackupAndRestore's checkpoint and history.json
HISTORY_FILE = "history.json"       # per-epoch logs, beside the checkpoint
#: what a run writes in its output dir (all of it is deleted by --overwrite)
OUTPUT_FILES = (CONFIG_FILE, RESULTS_FILE, "vali_per_query.csv", "test_per_query.csv", DONE_FILE)
OUTPUT_DIRS = ("logs", BACKUP_DIR)
#: TrainConfig fields that do not change a run's results (not compared on a rerun)
NOT_IDENTITY_FIELDS = ("verbose",)


class OutputDirError(ValueError):
    """The output directory holds a run of another config (or unreadable outputs)."""


class FinishedRunError(OutputDirError):
    """The output directory holds a finished run of this very config."""


class NonFiniteLossError(RuntimeError):
    """The training loss became NaN or infinite."""


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
    train_seconds: float               # the epochs' wall time, over all invocations
    resumed_from_epoch: int = 0        # epochs restored from the backup (0: a fresh start)


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


# ----------------------------------------------------------------------------- files
def write_atomically(path: str, write: Callable[[str], None]) -> None:
    """``write(temp_path)``, then the temporary file renamed to ``path`` (``os.replace``):
    a reader, or a run killed meanwhile, sees the old file or the new one, never a part."""
    temp = f"{path}.tmp-{os.getpid()}"
    try:
        write(temp)
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.remove(temp)


def write_json(path: str, value: Any) -> None:
    """``value`` as strict JSON (``allow_nan=False``: a NaN or inf raises a ValueError
    rather than writing a bare ``NaN``), atomically (:func:`write_atomically`)."""
    text = json.dumps(value, indent=2, allow_nan=False) + "\n"

    def write(temp):
        with open(temp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    write_atomically(path, write)


def read_json(path: str) -> Optional[Any]:
    """The JSON in ``path``; None when the file does not exist; OutputDirError when it
    is not JSON."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except json.JSONDecodeError as error:
        raise OutputDirError(f"{path} is not valid JSON ({error}); pass --overwrite to "
                             "replace the run in its folder.") from error


# ----------------------------------------------------------------------------- run identity
def run_identity(config: Any) -> Dict[str, Any]:
    """What a rerun must match to resume (or be a finished run of the same thing): the
    JSON form of the resolved config (a :class:`TrainConfig` or its ``config.json``
    dict) without :data:`NOT_IDENTITY_FIELDS`."""
    config = config.to_json() if isinstance(config, TrainConfig) else dict(config)
    return {k: v for k, v in json.loads(json.dumps(config, allow_nan=False)).items()
            if k not in NOT_IDENTITY_FIELDS}


def config_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> List[str]:
    """``["epochs: 3 -> 5", ...]`` for the fields of two :func:`run_identity` dicts that
    differ, in the order of ``new`` (then fields only ``old`` has)."""
    missing = "<absent>"
    keys = list(new) + [k for k in old if k not in new]
    return [f"{k}: {old.get(k, missing)!r} -> {new.get(k, missing)!r}"
            for k in keys if old.get(k, missing) != new.get(k, missing)]


def check_output_dir(config: TrainConfig) -> None:
    """Raises unless ``config``'s output dir is new, or holds an unfinished run of
    the same identity (which is then resumed).

    Raises:
      FinishedRunError: a finished run (``done.json``) of the same identity.
      OutputDirError: a run of another identity, finished or not (the error names
        the first fields that differ and ``--overwrite``), or outputs without a config.
    """
    run_dir = config.resolved_output_dir
    done = read_json(os.path.join(run_dir, DONE_FILE))
    stored = done.get("config") if isinstance(done, dict) else read_json(
        os.path.join(run_dir, CONFIG_FILE))
    if stored is None:
        leftovers = [name for name in OUTPUT_FILES + OUTPUT_DIRS
                     if os.path.exists(os.path.join(run_dir, name))]
        if leftovers:
            raise OutputDirError(f"{run_dir} holds {leftovers} but no {CONFIG_FILE}: outputs of "
                                 "an unknown run. Pass --overwrite to replace them, or choose "
                                 "another --output-dir.")
        return
    differences = config_differences(run_identity(stored), run_identity(config))
    state = "a finished" if done is not None else "an unfinished"
    if differences:
        shown = "; ".join(differences[:3]) + (
            f"; and {len(differences) - 3} more" if len(differences) > 3 else "")
        raise OutputDirError(
            f"{run_dir} holds {state} run of another config ({shown}). Pass --overwrite "
            "to delete its outputs and train this config there, or choose another --output-dir.")
    if done is not None:
        raise FinishedRunError(
            f"{run_dir} holds a finished run of this config ({DONE_FILE}: "
            f"{done.get('finished', '?')}); its results are in {RESULTS_FILE}. Pass "
            "--overwrite to train it again.")


def clear_outputs(folder: str) -> None:
    """Deletes what a run writes in ``folder`` (:data:`OUTPUT_FILES`, :data:`OUTPUT_DIRS`),
    the completion marker first; anything else in the folder stays."""
    for name in (DONE_FILE,) + OUTPUT_FILES + OUTPUT_DIRS:
        path = os.path.join(folder, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)


def sync_workers(strategy: Optional[tf.distribute.Strategy]) -> None:
    """A barrier: returns once every worker of a multi-worker run has called it (an
    all-reduce across the workers); nothing to wait for otherwise."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        ones = strategy.run(lambda: tf.constant(1.0))
        strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None).numpy()


def prepare_output_dir(config: TrainConfig, output_dir: str,
                       strategy: Optional[tf.distribute.Strategy], overwrite: bool) -> None:
    """Checks the run's folder (:func:`check_output_dir`; with ``overwrite`` the chief
    clears it instead), then writes ``config.json`` in ``output_dir``.

    In a multi-worker run every worker checks the chief's folder, and nobody writes
    before all have (:func:`sync_workers`), so all refuse or proceed alike; a
    non-chief worker starts its own scratch ``output_dir`` afresh.
    """
    chief = is_chief(strategy)
    if not overwrite:
        check_output_dir(config)
    sync_workers(strategy)
    if chief and overwrite:
        clear_outputs(config.resolved_output_dir)
    if not chief:
        clear_outputs(output_dir)
    tf.io.gfile.makedirs(output_dir)
    write_json(os.path.join(output_dir, CONFIG_FILE), config.to_json())


# ----------------------------------------------------------------------------- callbacks
class StopOnNonFiniteLoss(tf.keras.callbacks.Callback):
    """Raises :class:`NonFiniteLossError` at the end of the first batch whose loss (every
    log whose name ends in ``loss``: Keras's running mean of the epoch) is NaN or
    infinite, naming the epoch and the batch. Put it first: nothing after that batch
    runs (no evaluation of NaN weights, no backup of them)."""

    def __init__(self):
        super().__init__()
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        for key, value in (logs or {}).items():
            if key.endswith("loss") and not math.isfinite(float(value)):
                steps = (getattr(self, "params", None) or {}).get("steps")
                raise NonFiniteLossError(
                    f"The training {key} is {float(value)} in epoch {self._epoch + 1} (batch "
                    f"{batch + 1}{f' of {steps}' if steps else ''}): training stopped. Lower "
                    "the learning rate, or look for NaN/inf in the features or labels.")


def loss_state(loss: tf.keras.losses.Loss) -> tf.Module:
    """The loss's ``tf.Variable`` attributes (a randomized loss's step counter, see
    ``StepSeeded`` in :mod:`tfr_extensions.losses.base`) as a ``tf.Module``, so that a
    checkpoint holds them (Keras checkpoints a model without its loss)."""
    module = tf.Module(name="loss_state")
    attributes = getattr(loss, "__dict__", {})
    module.loss_variables = {name: value for name, value in sorted(attributes.items())
                             if isinstance(value, tf.Variable)}
    return module


class TrainingBackup(tf.keras.callbacks.BackupAndRestore):
    """Keras's ``BackupAndRestore`` (every worker restores from ``backup_dir``'s
    checkpoint in ``on_train_begin``; the chief writes it after each epoch), plus what
    else a resumed run needs to equal an uninterrupted one.

    * ``state``: name -> a trackable (or a function returning one, called in
      ``on_train_begin``), added to the same checkpoint, so saved and restored
      atomically with the model and optimizer: the loss's variables, the
      best-epoch callback's state.
    * ``history``: the logs and wall time of each epoch, kept in
      ``<backup_dir>/history.json`` by the chief (``write_history``) before the
      checkpoint is written, so that it holds at least the checkpoint's epochs;
      ``on_train_begin`` keeps its first ``initial_epoch`` entries.

    ``initial_epoch`` is the number of epochs of the checkpoint (:func:`backed_up_epochs`,
    read by the caller before ``fit`` to advance the training stream); ``fit`` must
    start there, which the first epoch checks. The checkpoint stays after training
    (``delete_checkpoint=False``): the caller deletes it once its outputs are written.
    """

    def __init__(self, backup_dir: str, initial_epoch: int,
                 state: Mapping[str, Any], write_history: bool = True):
        super().__init__(backup_dir, save_freq="epoch", delete_checkpoint=False)
        self.initial_epoch = int(initial_epoch)
        self._state = dict(state)
        self._write_history = write_history
        self.history: List[Dict[str, Any]] = []
        self._epoch_start = 0.0
        self._checked_start = False

    @property
    def history_path(self) -> str:
        return os.path.join(self.backup_dir, HISTORY_FILE)

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)  # Keras restores its checkpoint (if any) here
        extra = tf.Module(name="tfrx_training_state")
        for name, trackable in self._state.items():
            setattr(extra, name, trackable() if callable(trackable) else trackable)
        training_state = getattr(self, "_training_state", None)
        if training_state is None:
            raise RuntimeError("Keras's BackupAndRestore kept no `_training_state` in "
                               "on_train_begin: this Keras version is not supported.")
        # deferred restoration: attaching restores the new part from the checkpoint read
        training_state.read_checkpoint_manager.checkpoint.tfrx_state = extra
        self.history = []
        if self._write_history:
            os.makedirs(self.backup_dir, exist_ok=True)
        if self.initial_epoch:
            stored = (read_json(self.history_path) or {}).get("epochs", [])
            if len(stored) < self.initial_epoch:
                raise RuntimeError(
                    f"{self.history_path} has {len(stored)} epochs, fewer than the "
                    f"{self.initial_epoch} of the checkpoint beside it: pass --overwrite "
                    "to start this run afresh.")
            self.history = stored[:self.initial_epoch]

    def on_epoch_begin(self, epoch, logs=None):
        if not self._checked_start:
            self._checked_start = True
            if epoch != self.initial_epoch:
                raise RuntimeError(f"fit resumed at epoch {epoch + 1}, but the training "
                                   f"stream was advanced to epoch {self.initial_epoch + 1}.")
        self._epoch_start = time.perf_counter()
        super().on_epoch_begin(epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self.history.append({"logs": {k: float(v) for k, v in (logs or {}).items()},
                             "seconds": time.perf_counter() - self._epoch_start})
        if self._write_history:
            write_json(self.history_path, {"epochs": self.history})
        super().on_epoch_end(epoch, logs)  # the checkpoint

    def history_by_key(self) -> Dict[str, List[float]]:
        """Keras's ``History.history`` layout (key -> one value per epoch, None where an
        epoch lacks the key), over all epochs, those restored included."""
        keys = list(dict.fromkeys(k for entry in self.history for k in entry["logs"]))
        return {k: [entry["logs"].get(k) for entry in self.history] for k in keys}


def backed_up_epochs(backup_dir: str) -> int:
    """How many epochs the ``BackupAndRestore`` checkpoint under ``backup_dir`` holds
    (0: none). Keras keeps it in ``<backup_dir>/chief`` with the last finished epoch's
    index as ``ckpt_saved_epoch``."""
    path = tf.train.latest_checkpoint(os.path.join(backup_dir, "chief"))
    if path is None:
        return 0
    return int(tf.train.load_variable(path, "ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE")) + 1


# ----------------------------------------------------------------------------- run
def check_splits(splits: Splits, no_relevant: str) -> None:
    """ValueError for an empty split, or a validation set whose metric cannot be
    computed under ``no_relevant`` (it picks the best epoch)."""
    for name, data in (("training", splits.train), ("validation", splits.vali),
                       ("test", splits.test)):
        if data.num_queries == 0:
            raise ValueError(f"The {name} set has no query.")
    evaluation.check_evaluable(splits.vali, no_relevant, what="validation")


def run(config: TrainConfig, splits: Optional[Splits] = None, *,
        overwrite: bool = False) -> TrainResult:
    """Trains (resuming from a backup of the same config), restores the best validation
    epoch, evaluates, writes outputs and then the completion marker.

    Raises:
      FinishedRunError, OutputDirError: see :func:`check_output_dir` (not with
        ``overwrite``, which deletes the old outputs first).
      NonFiniteLossError: the training loss became NaN or infinite.
      ValueError: bad data (:func:`check_splits`) or config.
    """
    strategy = make_strategy(config.strategy)  # first: collectives need a fresh context
    config = dataclasses.replace(config, output_dir=config.resolved_output_dir)  # resolved
    tf.keras.utils.set_random_seed(config.seed)
    splits = splits or load_splits(config.data, config.fold, config.seed)
    check_splits(splits, config.no_relevant)
    chief = is_chief(strategy)
    output_dir = config.resolved_output_dir
    if not chief:  # TF-Ranking's per-worker scratch directory
        output_dir = compat.get_output_filepath(output_dir, strategy)
    prepare_output_dir(config, output_dir, strategy, overwrite)
    backup_dir = os.path.join(config.resolved_output_dir, BACKUP_DIR)  # the chief's, for all

    previous_policy = tf.keras.mixed_precision.global_policy()
    if config.mixed_precision:
        tf.keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        with compat.strategy_scope(strategy):
            model = build_model(config, splits.num_features)
            dataset = train_dataset(config, splits.train)
            steps = _steps_per_epoch(config, dataset)
            done = backed_up_epochs(backup_dir)  # after the model: workers are in step here
            best = evaluation.BestEpochCallback(splits.vali, config.validation_metric,
                                                config.no_relevant)
            backup = TrainingBackup(backup_dir, done, write_history=chief, state={
                "loss": loss_state(model.loss), "best_epoch": best.state})
            callbacks = [StopOnNonFiniteLoss(), best]
            if config.tensorboard:
                callbacks.append(tf.keras.callbacks.TensorBoard(os.path.join(output_dir, "logs")))
            callbacks.append(backup)  # last: its checkpoint holds this epoch's best state
            # the stream of an uninterrupted run, past the epochs restored from the backup
            model.fit(dataset.repeat().skip(done * steps), epochs=config.epochs,
                      steps_per_epoch=steps, callbacks=callbacks, verbose=config.verbose)
    finally:
        tf.keras.mixed_precision.set_global_policy(previous_policy)

    validation = evaluation.evaluate_model(model, splits.vali, no_relevant=config.no_relevant)
    test = evaluation.evaluate_model(model, splits.test, no_relevant=config.no_relevant)
    export_dir = None
    if config.export_dir and chief:
        export_dir = serving.export(model, config.export_dir, overwrite=True,
                                    metadata={"train_config": config.to_json()})
    result = TrainResult(config=config, model=model, history=backup.history_by_key(),
                         best_epoch=best.best_epoch, validation=validation, test=test,
                         output_dir=output_dir, export_dir=export_dir,
                         train_seconds=sum(entry["seconds"] for entry in backup.history),
                         resumed_from_epoch=done)
    write_outputs(result)
    write_json(os.path.join(output_dir, DONE_FILE), {
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": config.to_json()})
    if chief:
        shutil.rmtree(backup_dir, ignore_errors=True)
    return result


def write_outputs(result: TrainResult) -> None:
    """``results.json`` and the per-query CSVs in ``result.output_dir``."""
    write_evaluations(result.output_dir, result.validation, result.test, {
        "config": result.config.to_json(), "best_epoch": result.best_epoch,
        "history": result.history, "train_seconds": result.train_seconds,
        "resumed_from_epoch": result.resumed_from_epoch, "export_dir": result.export_dir})


def write_evaluations(output_dir: str, validation, test, summary: Dict[str, Any]) -> None:
    """``vali_per_query.csv`` and ``test_per_query.csv`` from the two
    :class:`tfr_extensions.evaluation` results, and ``results.json``:
    ``summary`` plus their summaries under ``"validation"`` and ``"test"`` (a mean
    over no query as null). Each file is written atomically; the JSON is strict."""
    for name, result in (("vali_per_query.csv", validation), ("test_per_query.csv", test)):
        write_atomically(os.path.join(output_dir, name),
                         lambda temp, frame=result.per_query: frame.to_csv(temp, index=False))
    summary = dict(summary, validation=evaluation.json_summary(validation.summary),
                   test=evaluation.json_summary(test.summary))
    write_json(os.path.join(output_dir, RESULTS_FILE), summary)


def build_parser() -> argparse.ArgumentParser:
    """The command line: :class:`TrainConfig`'s fields, and ``--overwrite``."""
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
    parser.add_argument("--overwrite", action="store_true",
                        help="delete the outputs of another run (another config, or a "
                             "finished one) in the output dir and train afresh")
    return parser


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The :class:`TrainConfig` of parsed flags (all but ``--overwrite``)."""
    return TrainConfig(**{k: v for k, v in vars(args).items() if k != "overwrite"})


def parse_args(argv=None) -> TrainConfig:
    """Flags -> :class:`TrainConfig`."""
    return config_from_args(build_parser().parse_args(argv))


def format_summary(summary: Mapping[str, Any], columns=("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10",
                                                      "map@10", "nerr@10")) -> str:
    """One line: the chosen means and the no-relevant rule."""
    values = "  ".join(f"{c}={format_mean(summary[c])}" for c in columns if c in summary)
    return f"{values}  ({summary['num_counted']}/{summary['num_queries']} queries, " \
           f"no_relevant={summary['no_relevant']})"


def format_mean(value: Optional[float]) -> str:
    """A mean to 4 decimals; ``n/a`` for a mean over no query (None or NaN)."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.4f}"


def main(argv=None) -> None:
    """Runs :func:`run` from flags. Exit status 1 with a one-line error for an output
    dir of another run (without ``--overwrite``) or a non-finite loss; a finished run
    of the same config prints its stored results and exits 0."""
    args = build_parser().parse_args(argv)
    config = config_from_args(args)
    try:
        result = run(config, overwrite=args.overwrite)
    except FinishedRunError as finished:
        print(finished)
        stored = read_json(os.path.join(config.resolved_output_dir, RESULTS_FILE)) or {}
        for part in ("validation", "test"):
            if part in stored:
                print(f"{part + ':':<11} {format_summary(stored[part])}")
        return
    except (OutputDirError, NonFiniteLossError) as error:
        raise SystemExit(f"pipelines.train: error: {error}") from error
    resumed = f" (resumed after epoch {result.resumed_from_epoch})" \
        if result.resumed_from_epoch else ""
    print(f"best epoch {result.best_epoch}{resumed}; outputs in {result.output_dir}")
    print("validation:", format_summary(result.validation.summary))
    print("test:      ", format_summary(result.test.summary))


if __name__ == "__main__":
    main()
