"""The checkpoint of a training run on TensorFlow: :class:`TrainingBackup`.

:class:`TrainingBackup` is the run's own checkpoint (a ``tf.train.Checkpoint``
of the model's weights, the optimizers, the loss's step counter, the best-epoch
callbacks' state and the epoch, gathered by :func:`training_state`; the per-epoch
logs beside it), restored before ``fit`` on every stack (Keras 2 and Keras 3's
TensorFlow backend) and every worker; :func:`backed_up_epochs` says how many
epochs a backup holds. The output folder's identity and guard are
:mod:`pipelines.run_dir` (re-exported here); the checkpoint of Keras 3 on JAX and
PyTorch is :mod:`pipelines.keras_backup`. Used by :func:`pipelines.train.run`;
``docs/notes/train_pipeline.md`` tells the design and why Keras's
``BackupAndRestore`` is not used.
"""
import os
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

import tensorflow as tf

from . import backup_store
from . import common
from . import run_dir
from . import trainable
from .run_dir import (BACKUP_DIR, CONFIG_FILE, DONE_FILE, MODEL_FILE,  # noqa: F401
                      NOT_IDENTITY_FIELDS, OUTPUT_DIRS, OUTPUT_FILES, RESULTS_FILE,
                      FinishedRunError, OutputDirError, check_output_dir, clear_outputs,
                      config_differences, read_json, run_identity)
from tfr_extensions import backend
from tfr_extensions import evaluation
from tfr_extensions import strategies
from tfr_extensions.backend import keras

CHECKPOINT_DIR = "chief"            # the chief's backup generations, under BACKUP_DIR
HISTORY_FILE = "history.json"       # per-epoch logs, beside the checkpoint in a generation
#: the checkpoint key of the number of finished epochs
EPOCH_KEY = "epoch/.ATTRIBUTES/VARIABLE_VALUE"


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


def sync_workers(strategy: Optional[tf.distribute.Strategy]) -> None:
    """A barrier: returns once every worker of a multi-worker run has called it (an
    all-reduce across the workers); nothing to wait for otherwise."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        ones = strategy.run(lambda: tf.constant(1.0))
        strategy.reduce(tf.distribute.ReduceOp.SUM, ones, axis=None).numpy()


def prepare_output_dir(config: Any, output_dir: str,
                       strategy: Optional[tf.distribute.Strategy], overwrite: bool) -> None:
    """:func:`pipelines.run_dir.prepare_output_dir` for a run under ``strategy``: the
    chief is :func:`is_chief`'s, and the workers meet at :func:`sync_workers`."""
    run_dir.prepare_output_dir(config, output_dir, overwrite, chief=is_chief(strategy),
                               sync=lambda: sync_workers(strategy))


# ----------------------------------------------------------------------------- backup
def loss_state(loss: Optional[keras.losses.Loss]) -> tf.Module:
    """The loss's ``tf.Variable`` attributes (a randomized loss's step counter, see
    ``StepSeeded`` in :mod:`tfr_extensions.losses.base`) as a ``tf.Module``, so that a
    checkpoint holds them (Keras checkpoints a model without its loss). No loss (a
    model of several scorers trains each with its own), or one without variables: an
    empty module."""
    module = tf.Module(name="loss_state")
    attributes = getattr(loss, "__dict__", {})
    module.loss_variables = {name: value for name, value in sorted(attributes.items())
                             if isinstance(value, tf.Variable)}
    return module


def variables_state(variables: Sequence[Any], name: str = "variables") -> tf.Module:
    """``variables`` (e.g. ``model.weights``: every weight, trainable or not) as a
    ``tf.Module`` that a ``tf.train.Checkpoint`` saves and restores by position.

    Why not the model itself: on Keras 3 a layer keeps the layers of an attribute
    list (``Scorer.dense_layers``) in a Keras ``TrackedList``, which TensorFlow's
    checkpoint does not follow, so ``tf.train.Checkpoint(model=model)`` would miss
    them (their batch-norm statistics included). The same code builds the same model,
    so positions match from one run to its rerun; a mismatch of shapes fails the
    restore.

    >>> state = variables_state([tf.Variable(1.0), tf.Variable([2, 3])], "model")
    >>> [v.numpy().tolist() for v in state.weights]
    [1.0, [2, 3]]
    """
    module = tf.Module(name=name)
    module.weights = list(variables)
    return module


def example_inputs(element_spec: Any) -> Any:
    """Ones shaped like one batch of ``element_spec`` (unknown dimensions: 1)."""
    return tf.nest.map_structure(
        lambda spec: tf.ones([1 if d is None else d for d in spec.shape], spec.dtype),
        element_spec)


def training_state(model: trainable.Trainable, element_spec: Any,
                   best: Mapping[str, evaluation.BestEpochCallback],
                   epochs: int) -> Dict[str, Any]:
    """Builds all the state a resumed run needs and returns it by checkpoint name,
    for :class:`TrainingBackup` (call inside the strategy scope):

    * ``model``: every weight of ``model.model`` (called once on ``example_inputs`` of
      the training stream's ``(x, labels)`` ``element_spec``, so that it is built);
    * ``model.optimizers()``, built for their variables (Adam's moments, the
      iteration count), so a restore is not deferred into the first training step;
    * ``loss``: the loss's variables (a seeded loss's step counter);
    * ``best_epoch<_player>``: each best-epoch callback's state, for ``epochs`` epochs.
    """
    keras_model = model.model
    keras_model(example_inputs(element_spec[0]), training=False)
    state: Dict[str, Any] = {"model": variables_state(keras_model.weights, "model_weights")}
    for name, (optimizer, variables) in model.optimizers().items():
        backend.build_optimizer(optimizer, variables)
        state[name] = optimizer
    state["loss"] = loss_state(getattr(keras_model, "loss", None))
    for player, callback in best.items():
        callback.set_model(keras_model)
        state[f"best_epoch{trainable.player_suffix(player)}"] = callback.state(epochs)
    return state


class TrainingBackup(keras.callbacks.Callback):
    """Our checkpoint of a training run: restored before ``fit``, written after each
    epoch, so that a resumed run equals an uninterrupted one.

    ``state`` (name -> a trackable: :func:`variables_state` of the model's weights,
    the optimizers, :func:`loss_state`, the best-epoch callbacks'
    :meth:`~tfr_extensions.evaluation.BestEpochCallback.state`) goes into one
    ``tf.train.Checkpoint`` with :attr:`epoch`, the number of finished epochs. Every
    object of ``state`` must exist, variables included, before :meth:`restore`
    (build the model and the optimizers first,
    :func:`tfr_extensions.backend.build_optimizer`), which
    restores at once and fails when the checkpoint misses part of it.

    * :meth:`restore`: every worker restores from the chief's newest good backup
      generation (:mod:`pipelines.backup_store`: ``<backup_dir>/chief/epoch-<N>/``,
      verified by its manifest; a damaged one is skipped with a warning) and returns
      its epochs; ``fit`` must then start there (``initial_epoch``, checked at the
      first epoch).
    * :meth:`on_epoch_end`: the epoch's logs and wall time go to :attr:`history`;
      then every worker saves (saving may run collective ops): the chief a new
      generation (``ckpt-<N>.index``, ``ckpt-<N>.data-*``, ``history.json`` of those
      epochs, ``manifest.json`` last; the last two good ones kept), the other
      workers into a scratch folder they delete at once (TensorFlow's multi-worker
      pattern).

    The checkpoint stays after training: the caller deletes ``backup_dir`` once
    its outputs are written.
    """

    def __init__(self, backup_dir: str, state: Mapping[str, Any],
                 strategy: Optional[tf.distribute.Strategy] = None):
        super().__init__()
        self.backup_dir = backup_dir
        self.chief = is_chief(strategy)
        self._strategy = strategy
        #: the finished epochs the checkpoint holds
        self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="epoch")
        self.checkpoint = tf.train.Checkpoint(epoch=self.epoch, **state)
        self._generations = backup_store.Generations(self.checkpoint_dir)
        self.initial_epoch = 0
        self.history: List[Dict[str, Any]] = []
        self._epoch_start = 0.0
        self._checked_start = False

    @property
    def checkpoint_dir(self) -> str:
        """The chief's backup generations, which every worker restores from."""
        return os.path.join(self.backup_dir, CHECKPOINT_DIR)

    def restore(self, fail_on_damage: bool = False) -> int:
        """Restores the chief's newest good backup generation, if any, and the history
        of its epochs; returns its number of epochs (0: a fresh start). Damaged
        generations are skipped with a warning
        (:meth:`pipelines.backup_store.Generations.newest_good`; ``fail_on_damage``:
        stop when none is good)."""
        self.initial_epoch, self.history = 0, []
        found = self._generations.newest_good(fail_on_damage)
        if found is None:
            return 0
        epochs, folder = found
        path = os.path.join(folder, f"ckpt-{epochs}")
        history_path = os.path.join(folder, HISTORY_FILE)
        try:
            self.checkpoint.restore(path).assert_existing_objects_matched()
        except (AssertionError, ValueError) as error:  # part missing, or of another shape
            raise RuntimeError(
                f"The checkpoint {path} does not hold this run's training state ({error}); "
                "was it written by another version of the code? Pass --overwrite to start "
                "this run afresh.") from error
        self.initial_epoch = int(self.epoch.numpy())
        stored = (read_json(history_path) or {}).get("epochs", [])
        if len(stored) < self.initial_epoch:
            raise RuntimeError(
                f"{history_path} has {len(stored)} epochs, fewer than the "
                f"{self.initial_epoch} of the checkpoint beside it: pass --overwrite "
                "to start this run afresh.")
        self.history = stored[:self.initial_epoch]
        return self.initial_epoch

    def save(self, epochs: int) -> str:
        """Writes the checkpoint of ``epochs`` finished epochs (every worker must
        call it); returns the chief's checkpoint path (the prefix of its files in the
        new generation), or the scratch one."""
        self.epoch.assign(epochs)
        name = f"ckpt-{epochs}"
        if self.chief:
            history = {"epochs": self.history[:epochs]}

            def write(folder):
                tf.train.CheckpointManager(self.checkpoint, folder, max_to_keep=1).save(
                    checkpoint_number=epochs)
                os.remove(os.path.join(folder, "checkpoint"))  # its index, of the temp folder
                common.write_json(os.path.join(folder, HISTORY_FILE), history)
            return os.path.join(self._generations.write(epochs, write), name)
        scratch = strategies.get_output_filepath(self.backup_dir, self._strategy)
        path = tf.train.CheckpointManager(self.checkpoint, scratch, max_to_keep=1).save(
            checkpoint_number=epochs)
        tf.io.gfile.rmtree(scratch)
        return path

    def on_train_begin(self, logs=None):
        self._checked_start = False
        if self.chief:
            os.makedirs(self.backup_dir, exist_ok=True)

    def on_epoch_begin(self, epoch, logs=None):
        if not self._checked_start:
            self._checked_start = True
            if epoch != self.initial_epoch:
                raise RuntimeError(f"fit resumed at epoch {epoch + 1}, but the checkpoint "
                                   f"holds {self.initial_epoch} epochs.")
        self._epoch_start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        # a mean over no query (a test curve under "exclude") is NaN: None in strict JSON
        self.history.append({"logs": {k: evaluation.json_metric(float(v))
                                      for k, v in (logs or {}).items()},
                             "seconds": time.perf_counter() - self._epoch_start})
        self.save(epoch + 1)

    def history_by_key(self) -> Dict[str, List[float]]:
        """Keras's ``History.history`` layout (key -> one value per epoch, None where an
        epoch lacks the key), over all epochs, those restored included."""
        keys = list(dict.fromkeys(k for entry in self.history for k in entry["logs"]))
        return {k: [entry["logs"].get(k) for entry in self.history] for k in keys}


def backed_up_epochs(backup_dir: str) -> int:
    """How many epochs the newest good :class:`TrainingBackup` generation under
    ``backup_dir`` holds (0: none), in ``<backup_dir>/chief``."""
    return backup_store.backed_up_epochs(os.path.join(backup_dir, CHECKPOINT_DIR))
