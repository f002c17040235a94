"""The generations of a training run's backup: written durably, verified before a restore.

A backup folder holds the last :data:`KEPT` good generations, one folder each,
named by the number of finished epochs it holds::

    <folder>/epoch-3/   the newest: the checkpoint's files, history.json, manifest.json
    <folder>/epoch-2/   the one before, kept in case the newest is damaged

A generation is written into a temporary folder, its ``manifest.json`` last
(:func:`tfr_extensions.data.durable.write_manifest`: each file's size and
checksum, and ``epochs``), ``fsync``ed and renamed into place; then the
generations other than it and the previous good one are deleted.
:meth:`Generations.newest_good` verifies the generations newest first: a damaged
one (a file truncated, emptied or overwritten, the manifest missing or altered)
is skipped with a warning that names it. When none is good, the run starts from
the beginning with a warning, or, when the user asked for it
(``--fail-on-damaged-backup``), stops with :class:`DamagedBackupError`.
The checkpoints that use it: :mod:`pipelines.resume` (TensorFlow) and
:mod:`pipelines.keras_backup` (Keras 3 on JAX and PyTorch).
"""
import os
import re
import shutil
import warnings
from typing import Callable, List, Optional, Tuple

from . import run_dir
from tfr_extensions.data import durable

#: good generations kept: the newest and the one before
KEPT = 2
PREFIX = "epoch-"
_NAME = re.compile(rf"^{PREFIX}(\d+)$")


class DamagedBackupError(run_dir.OutputDirError):
    """Every generation of a backup is damaged, and the run was told not to start afresh."""


def generations(folder: str) -> List[Tuple[int, str]]:
    """``(epochs, path)`` of every generation folder under ``folder``, newest first."""
    if not os.path.isdir(folder):
        return []
    found = [(int(match.group(1)), os.path.join(folder, name))
             for name in os.listdir(folder) for match in [_NAME.match(name)] if match]
    return sorted(found, reverse=True)


def verify(path: str) -> int:
    """The epochs of the generation at ``path`` once every file checks
    (:func:`tfr_extensions.data.durable.verify_folder`); DamagedError otherwise."""
    manifest = durable.verify_folder(path)
    epochs = manifest.get("epochs")
    if not isinstance(epochs, int) or os.path.basename(path) != f"{PREFIX}{epochs}":
        raise durable.DamagedError(f"{durable.MANIFEST_FILE} names {epochs!r} epochs")
    return epochs


class Generations:
    """The generations under ``folder`` (module docstring)."""

    def __init__(self, folder: str):
        self.folder = folder
        self._good: List[int] = []  # epochs of the generations known good, newest last

    def newest_good(self, fail_on_damage: bool = False) -> Optional[Tuple[int, str]]:
        """``(epochs, path)`` of the newest generation that verifies, None when there is
        none. Each damaged generation is named in a warning; when every one is damaged,
        a warning says the run starts from the beginning, or, with ``fail_on_damage``,
        :class:`DamagedBackupError` says what to do."""
        damaged = []
        for epochs, path in generations(self.folder):
            try:
                verify(path)
            except (durable.DamagedError, OSError) as error:
                damaged.append(path)
                warnings.warn(f"The backup {path} is damaged ({error}): skipped.",
                              UserWarning, stacklevel=2)
                continue
            self._good = [epochs]
            return epochs, path
        others = [name for name in (os.listdir(self.folder) if os.path.isdir(self.folder) else ())
                  if not name.startswith(f".{PREFIX}")]
        if not damaged and others:
            warnings.warn(f"{self.folder} holds no backup generation but {sorted(others)[:3]}: a "
                          "backup of an older version, which this one does not read; the run "
                          "starts from the first epoch.", UserWarning, stacklevel=2)
        if damaged and fail_on_damage:
            raise DamagedBackupError(
                f"Every backup under {self.folder} is damaged ({len(damaged)} checked). Run "
                "again without --fail-on-damaged-backup to train from the first epoch, or "
                "with --overwrite to start afresh.")
        if damaged:
            warnings.warn(f"No good backup is left under {self.folder}: the run starts from "
                          "the first epoch.", UserWarning, stacklevel=2)
        return None

    def write(self, epochs: int, write_files: Callable[[str], None]) -> str:
        """Writes the generation of ``epochs`` (``write_files(folder)`` fills a temporary
        folder), its manifest last, publishes it durably, and deletes every other
        generation but the previous good one. Returns its path."""
        os.makedirs(self.folder, exist_ok=True)
        final = os.path.join(self.folder, f"{PREFIX}{epochs}")
        temp = os.path.join(self.folder, f".{PREFIX}{epochs}.tmp-{os.getpid()}")
        shutil.rmtree(temp, ignore_errors=True)
        os.makedirs(temp)
        try:
            write_files(temp)
            durable.write_manifest(temp, {"epochs": int(epochs)})
            durable.remove(final)  # a damaged generation of these epochs, or a stale one
            durable.replace_durably(temp, final)
        finally:
            shutil.rmtree(temp, ignore_errors=True)
        self._good = [e for e in self._good if e < epochs][-(KEPT - 1):] + [epochs]
        for other, path in generations(self.folder):
            if other not in self._good:
                shutil.rmtree(path, ignore_errors=True)
        return final


def backed_up_epochs(folder: str) -> int:
    """The epochs of the newest good generation under ``folder`` (0: none)."""
    for epochs, path in generations(folder):
        try:
            return verify(path)
        except (durable.DamagedError, OSError):
            continue
    return 0
