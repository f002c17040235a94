"""The checkpoint of a training run on Keras 3's JAX and PyTorch backends: :class:`KerasBackup`.

The counterpart of :class:`pipelines.resume.TrainingBackup` (TensorFlow) for a run without
TensorFlow: after every epoch it writes a generation of the backup
(:mod:`pipelines.backup_store`: ``<backup_dir>/epoch-<N>/``, the last two good ones
kept, each verified by its manifest before a restore) holding one NumPy archive,
``checkpoint.npz``, with everything a resumed run needs to end with the results of
an uninterrupted one:

* the model's weights (every weight, batch normalization's statistics included);
* each optimizer's variables (Adam's moments and iteration count), built first;
* the loss's own state (a seeded loss's seed generator, through its
  ``save_own_variables``);
* each best-epoch callback's :meth:`~tfr_extensions.evaluation.BestEpochCallback.snapshot`;
* the number of finished epochs, which also places the training stream
  (:class:`pipelines.keras_runtime.TrainingStream`) at its next epoch.

The per-epoch logs of those epochs go to ``history.json`` beside it. Variables are
matched by position: the same code builds the same model, and a mismatch of shapes
fails the restore with a message that says to pass ``--overwrite``.
"""
import json
import os
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import backup_store
from . import common
from tfr_extensions import evaluation
from tfr_extensions.backend import keras

CHECKPOINT_FILE = "checkpoint.npz"
HISTORY_FILE = "history.json"


def _values(variables: Sequence[Any]) -> List[np.ndarray]:
    return [evaluation.local_numpy(v.value) for v in variables]


def _assign(variables: Sequence[Any], values: Sequence[np.ndarray], what: str) -> None:
    if len(variables) != len(values):
        raise RuntimeError(f"The checkpoint holds {len(values)} {what}, this run has "
                           f"{len(variables)}: was it written by another version of the code "
                           "or config? Pass --overwrite to start this run afresh.")
    for variable, value in zip(variables, values):
        if tuple(variable.shape) != tuple(value.shape):
            raise RuntimeError(f"The checkpoint's {what} {variable.path} has shape "
                               f"{value.shape}, this run's {tuple(variable.shape)}: pass "
                               "--overwrite to start this run afresh.")
        variable.assign(value)


class _Store(dict):
    """The ``store`` of Keras's ``save_own_variables``/``load_own_variables``."""


class KerasBackup(keras.callbacks.Callback):
    """Our checkpoint of a training run on any Keras 3 backend: restored before ``fit``,
    written after each epoch (module docstring).

    Args:
      backup_dir: the run's backup folder.
      model: the compiled Keras model that ``fit`` trains (built).
      optimizers: name -> ``(optimizer, the variables it trains)``; each is built here.
      best: player -> its best-epoch callback.
      chief: whether this process writes the checkpoint (in a run of several JAX
        processes, every process reads the model's state, the chief writes it, and
        every process restores from the chief's file).
    """

    def __init__(self, backup_dir: str, model, optimizers: Mapping[str, Tuple[Any, List[Any]]],
                 best: Mapping[str, evaluation.BestEpochCallback], chief: bool = True):
        super().__init__()
        self.backup_dir = backup_dir
        self.chief = chief
        self._model = model
        self._optimizers = dict(optimizers)
        for optimizer, variables in self._optimizers.values():
            optimizer.build(list(variables))
        self._best = dict(best)
        self.initial_epoch = 0
        self.history: List[Dict[str, Any]] = []
        self._epoch_start = 0.0
        self._generations = backup_store.Generations(backup_dir)

    def _loss(self):
        return getattr(self._model, "loss", None)

    def _arrays(self, epochs: int) -> Dict[str, np.ndarray]:
        arrays = {"epoch": np.asarray(epochs, np.int64)}
        for i, value in enumerate(_values(self._model.weights)):
            arrays[f"model/{i}"] = value
        for name, (optimizer, _) in self._optimizers.items():
            for i, value in enumerate(_values(optimizer.variables)):
                arrays[f"optimizer/{name}/{i}"] = value
        loss = self._loss()
        if hasattr(loss, "save_own_variables"):
            store = _Store()
            loss.save_own_variables(store)
            for key, value in store.items():
                arrays[f"loss/{key}"] = np.asarray(value)
        for player, callback in self._best.items():
            snapshot = callback.snapshot()
            arrays[f"best/{player}/values"] = snapshot["values"]
            arrays[f"best/{player}/best_epoch"] = np.asarray(snapshot["best_epoch"])
            arrays[f"best/{player}/best_value"] = np.asarray(snapshot["best_value"])
            for i, value in enumerate(snapshot["best_weights"]):
                arrays[f"best/{player}/weight/{i}"] = value
        return arrays

    def save(self, epochs: int) -> str:
        """Writes the backup generation of ``epochs`` finished epochs (the chief; every
        process reads the state): ``checkpoint.npz`` and the history of those epochs.
        Returns its folder."""
        arrays = self._arrays(epochs)
        history = {"epochs": self.history[:epochs]}
        if not self.chief:
            return os.path.join(self.backup_dir, f"{backup_store.PREFIX}{epochs}")

        def write(folder):
            with open(os.path.join(folder, CHECKPOINT_FILE), "wb") as f:
                np.savez(f, **arrays)
            common.write_json(os.path.join(folder, HISTORY_FILE), history)
        return self._generations.write(epochs, write)

    def restore(self, fail_on_damage: bool = False) -> int:
        """Restores the newest good backup generation, if any, and the history of its
        epochs; returns its number of epochs (0: a fresh start). Damaged generations
        are skipped with a warning (:meth:`pipelines.backup_store.Generations.newest_good`;
        ``fail_on_damage``: stop when none is good)."""
        self.initial_epoch, self.history = 0, []
        found = self._generations.newest_good(fail_on_damage)
        if found is None:
            return 0
        folder = found[1]
        with np.load(os.path.join(folder, CHECKPOINT_FILE)) as archive:
            arrays = {key: archive[key] for key in archive.files}

        def indexed(prefix):
            keys = sorted((k for k in arrays if k.startswith(prefix)),
                          key=lambda k: int(k.rsplit("/", 1)[1]))
            return [arrays[k] for k in keys]
        _assign(self._model.weights, indexed("model/"), "model weights")
        for name, (optimizer, _) in self._optimizers.items():
            _assign(optimizer.variables, indexed(f"optimizer/{name}/"),
                    f"variables of optimizer {name}")
        loss = self._loss()
        store = _Store({key[len("loss/"):]: value for key, value in arrays.items()
                        if key.startswith("loss/")})
        if store and hasattr(loss, "load_own_variables"):
            loss.load_own_variables(store)
        for player, callback in self._best.items():
            prefix = f"best/{player}/"
            callback.load_snapshot({
                "values": arrays[prefix + "values"],
                "best_epoch": int(arrays[prefix + "best_epoch"]),
                "best_value": float(arrays[prefix + "best_value"]),
                "best_weights": indexed(prefix + "weight/")})
        self.initial_epoch = int(arrays["epoch"])
        with open(os.path.join(folder, HISTORY_FILE)) as f:
            stored = json.load(f).get("epochs", [])
        if len(stored) < self.initial_epoch:
            raise RuntimeError(
                f"{folder}/{HISTORY_FILE} has {len(stored)} epochs, fewer than the "
                f"{self.initial_epoch} of the checkpoint beside it: pass --overwrite "
                "to start this run afresh.")
        self.history = stored[:self.initial_epoch]
        return self.initial_epoch

    def on_train_begin(self, logs=None):
        if self.chief:
            os.makedirs(self.backup_dir, exist_ok=True)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        # a mean over no query (a test curve under "exclude") is NaN: None in strict JSON
        self.history.append({"logs": {k: evaluation.json_metric(float(v))
                                      for k, v in (logs or {}).items()},
                             "seconds": time.perf_counter() - self._epoch_start})
        self.save(epoch + 1)

    def history_by_key(self) -> Dict[str, List[Optional[float]]]:
        """Keras's ``History.history`` layout (key -> one value per epoch, None where an
        epoch lacks the key), over all epochs, those restored included."""
        keys = list(dict.fromkeys(k for entry in self.history for k in entry["logs"]))
        return {k: [entry["logs"].get(k) for entry in self.history] for k in keys}


def backed_up_epochs(backup_dir: str) -> int:
    """How many epochs the newest good :class:`KerasBackup` generation under
    ``backup_dir`` holds (0: none)."""
    return backup_store.backed_up_epochs(backup_dir)
