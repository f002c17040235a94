"""The output folder of a training run: its identity, its guard and its backup.

A run's identity is its resolved config without :data:`NOT_IDENTITY_FIELDS`
(:func:`run_identity`). :func:`prepare_output_dir` lets a run start only in a
new folder or over an unfinished run of the same identity, which it then
resumes (:func:`check_output_dir`); ``overwrite`` clears the folder first.
:class:`TrainingBackup` is Keras's ``BackupAndRestore`` plus the rest of the
state a resumed run needs to equal an uninterrupted one (the loss's step
counter, the best-epoch callbacks' state, the per-epoch logs);
:func:`backed_up_epochs` says how many epochs a backup holds. Used by
:func:`pipelines.train.run`; ``docs/notes/train_pipeline.md`` tells the design.

>>> config_differences(run_identity({"epochs": 3, "verbose": 1}), {"epochs": 5})
['epochs: 3 -> 5']
"""
import json
import os
import shutil
import time
from typing import Any, Dict, List, Mapping, Optional

import tensorflow as tf

from pipelines import common
from tfr_extensions import evaluation
from tfr_extensions.backend import keras

CONFIG_FILE = "config.json"
RESULTS_FILE = common.RESULTS_FILE
DONE_FILE = "done.json"             # the completion marker, written last
BACKUP_DIR = "backup"               # BackupAndRestore's checkpoint and history.json
HISTORY_FILE = "history.json"       # per-epoch logs, beside the checkpoint
#: the scorers of a model of several (IRGAN), whose per-query files carry their names
PLAYERS = ("generator", "discriminator")
#: what a run writes in its output dir (all of it is deleted by --overwrite)
OUTPUT_FILES = (CONFIG_FILE, RESULTS_FILE,
                *[name.format(suffix=suffix) for suffix in ("", *(f"_{p}" for p in PLAYERS))
                  for name in common.PER_QUERY_FILES], DONE_FILE)
OUTPUT_DIRS = ("logs", BACKUP_DIR)
#: config fields that do not change a run's results (not compared on a rerun)
NOT_IDENTITY_FIELDS = ("verbose",)


class OutputDirError(ValueError):
    """The output directory holds a run of another config (or unreadable outputs)."""


class FinishedRunError(OutputDirError):
    """The output directory holds a finished run of this very config."""


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


# ----------------------------------------------------------------------------- run identity
def run_identity(config: Any) -> Dict[str, Any]:
    """What a rerun must match to resume (or be a finished run of the same thing): the
    JSON form of the resolved config (a :class:`pipelines.train.TrainConfig` or its ``config.json``
    dict) without :data:`NOT_IDENTITY_FIELDS`."""
    config = config.to_json() if hasattr(config, "to_json") else dict(config)
    return {k: v for k, v in json.loads(json.dumps(config, allow_nan=False)).items()
            if k not in NOT_IDENTITY_FIELDS}


def config_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> List[str]:
    """``["epochs: 3 -> 5", ...]`` for the fields of two :func:`run_identity` dicts that
    differ, in the order of ``new`` (then fields only ``old`` has)."""
    missing = "<absent>"
    keys = list(new) + [k for k in old if k not in new]
    return [f"{k}: {old.get(k, missing)!r} -> {new.get(k, missing)!r}"
            for k in keys if old.get(k, missing) != new.get(k, missing)]


def check_output_dir(config: Any) -> None:
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


def prepare_output_dir(config: Any, output_dir: str,
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
    common.write_json(os.path.join(output_dir, CONFIG_FILE), config.to_json())


# ----------------------------------------------------------------------------- backup
def loss_state(loss: keras.losses.Loss) -> tf.Module:
    """The loss's ``tf.Variable`` attributes (a randomized loss's step counter, see
    ``StepSeeded`` in :mod:`tfr_extensions.losses.base`) as a ``tf.Module``, so that a
    checkpoint holds them (Keras checkpoints a model without its loss)."""
    module = tf.Module(name="loss_state")
    attributes = getattr(loss, "__dict__", {})
    module.loss_variables = {name: value for name, value in sorted(attributes.items())
                             if isinstance(value, tf.Variable)}
    return module


class TrainingBackup(keras.callbacks.BackupAndRestore):
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
        # a mean over no query (a test curve under "exclude") is NaN: None in strict JSON
        self.history.append({"logs": {k: evaluation.json_metric(float(v))
                                      for k, v in (logs or {}).items()},
                             "seconds": time.perf_counter() - self._epoch_start})
        if self._write_history:
            common.write_json(self.history_path, {"epochs": self.history})
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
