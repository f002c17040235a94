"""The output folder of a run: its identity, and the guard that lets a run start there.

A run's identity is its resolved config without :data:`NOT_IDENTITY_FIELDS`
(:func:`run_identity`). :func:`prepare_output_dir` lets a run start only in a
new folder or over an unfinished run of the same identity, which it then
resumes (:func:`check_output_dir`); ``overwrite`` clears the folder first. Every
job uses it, on every backend; the checkpoints that resume a training run are
:mod:`pipelines.resume` (TensorFlow) and :mod:`pipelines.keras_backup` (Keras 3 on
JAX and PyTorch).

>>> config_differences(run_identity({"epochs": 3, "verbose": 1}), {"epochs": 5})
['epochs: 3 -> 5']
"""
import json
import os
import shutil
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional

from . import common
from . import trainable
from tfr_extensions.data import durable

CONFIG_FILE = "config.json"
RESULTS_FILE = common.RESULTS_FILE
DONE_FILE = "done.json"             # the completion marker, written last
BACKUP_DIR = "backup"               # the training run's checkpoint and history.json
#: the trained model, a Keras 3 ``.keras`` file that loads on any backend
MODEL_FILE = "model.keras"
#: what a run writes in its output dir (all of it is deleted by --overwrite): the per-query
#: files of every scorer name a run can report (those of a model of several carry the name)
OUTPUT_FILES = (CONFIG_FILE, RESULTS_FILE, MODEL_FILE,
                *[name.format(suffix=trainable.player_suffix(player))
                  for player in trainable.SCORER_NAMES for name in common.PER_QUERY_FILES],
                DONE_FILE)
OUTPUT_DIRS = ("logs", BACKUP_DIR)
#: config fields that do not change a run's results (not compared on a rerun)
NOT_IDENTITY_FIELDS = ("verbose",)


class OutputDirError(ValueError):
    """The output directory holds a run of another config (or unreadable outputs)."""


class FinishedRunError(OutputDirError):
    """The output directory holds a finished run of this very config."""


class DamagedRunError(OutputDirError):
    """A finished run's ``done.json``, or an output it records, is damaged."""


def read_json(path: str) -> Optional[Any]:
    """The JSON in ``path``; None when the file does not exist; OutputDirError when it
    is not JSON (or not UTF-8)."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        raise OutputDirError(f"{path} is not valid JSON ({error}); pass --overwrite to "
                             "replace the run in its folder.") from error


def read_done(folder: str) -> Optional[Dict[str, Any]]:
    """The completion marker of the run in ``folder`` once it and the outputs it records
    check (their sizes and checksums; a marker of an older version, which records
    none, only has to be a JSON object); None when there is none.

    Raises:
      DamagedRunError: the marker is not JSON or altered, or an output it records is
        missing, truncated or overwritten: the run is to be done again.
    """
    path = os.path.join(folder, DONE_FILE)
    try:
        done = read_json(path)
    except OutputDirError as error:
        raise DamagedRunError(f"{path} is damaged (not valid JSON)") from error
    if done is None:
        return None
    try:
        if not isinstance(done, dict):
            raise durable.DamagedError(f"{DONE_FILE} is not a JSON object")
        if common.DONE_OUTPUTS in done or "manifest_checksum" in done:
            durable.check_sealed(done, DONE_FILE)
            durable.check_files(folder, done.get(common.DONE_OUTPUTS) or {})
    except durable.DamagedError as error:
        raise DamagedRunError(f"The finished run in {folder} is damaged ({error})") from error
    return done


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
    the same identity (which is then resumed). A finished run whose marker or outputs
    are damaged (:func:`read_done`) counts as unfinished, with a warning.

    Raises:
      FinishedRunError: a finished run (``done.json``) of the same identity.
      OutputDirError: a run of another identity, finished or not (the error names
        the first fields that differ and ``--overwrite``), or outputs without a config.
    """
    run_dir = config.resolved_output_dir
    try:
        done = read_done(run_dir)
    except DamagedRunError as error:  # a run to do again: resumed from its config.json
        warnings.warn(f"{error}: it is trained again.", UserWarning, stacklevel=2)
        done = None
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


def prepare_output_dir(config: Any, output_dir: str, overwrite: bool, *, chief: bool = True,
                       sync: Optional[Callable[[], None]] = None) -> None:
    """Checks the run's folder (:func:`check_output_dir`; with ``overwrite`` the chief
    clears it instead), then writes ``config.json`` in ``output_dir``.

    In a run of several workers every worker checks the chief's folder, and nobody
    writes before all have (``sync``, a barrier), so all refuse or proceed alike; a
    non-chief worker (``chief`` False) starts its own scratch ``output_dir`` afresh.
    """
    if not overwrite:
        check_output_dir(config)
    if sync is not None:
        sync()
    if chief and overwrite:
        clear_outputs(config.resolved_output_dir)
    if not chief:
        clear_outputs(output_dir)
    os.makedirs(output_dir, exist_ok=True)
    common.write_json(os.path.join(output_dir, CONFIG_FILE), config.to_json())
