"""A damaged training backup never stops a run with a traceback and never changes a result.

Every backend's backup (TensorFlow's checkpoint on Keras 2 and Keras 3's TensorFlow
backend, :mod:`pipelines.resume`; the NumPy archive on JAX and PyTorch,
:mod:`pipelines.keras_backup`) keeps two generations. Each file of the newest one is
damaged in turn (truncated to half, emptied, 64 bytes overwritten): the restore warns,
naming it, and brings back the generation before, bitwise. With both damaged the run
starts from the first epoch with a warning, or stops with a one-line error when asked.
End to end, a run interrupted after its second epoch, whose newest backup is then
damaged, ends with the results of an uninterrupted run.
"""
import dataclasses
import json
import os
import shutil

import numpy as np
import pytest

from pipelines import backup_store
from pipelines import train
from support.damage import empty, overwrite, truncate_to_half
from support.run_results import assert_same_results, read_results
from tfr_extensions.backend import keras
from tfr_extensions.data.durable import MANIFEST_FILE

ON_TENSORFLOW = train.on_tensorflow()
#: the files of a generation holding ``epochs`` epochs, on this backend
FILES = ((lambda epochs: [f"ckpt-{epochs}.index", f"ckpt-{epochs}.data-00000-of-00001"])
         if ON_TENSORFLOW else (lambda epochs: ["checkpoint.npz"]))
TOLERANCE = 1e-6


DAMAGE = {"truncated_to_half": truncate_to_half, "emptied": empty,
          "64_bytes_overwritten": overwrite}


def config_of(tiny_fold, output_dir, **overrides):
    return dataclasses.replace(train.TrainConfig(
        data=str(tiny_fold), loss="ranknet", scorer="R2.L", hidden_units=8, epochs=3,
        batch_size=8, steps_per_epoch=2, seed=1, learning_rate=0.001, tensorboard=False,
        output_dir=str(output_dir), verbose=0), **overrides)


def generation_folder(backup_dir):
    """Where this backend's backup keeps its generations."""
    return os.path.join(backup_dir, "chief") if ON_TENSORFLOW else str(backup_dir)


class Built:
    """A model, its optimizer built, and this backend's backup in ``backup_dir``."""

    def __init__(self, tiny_fold, backup_dir):
        from pipelines import common  # pylint: disable=import-outside-toplevel
        config = config_of(tiny_fold, backup_dir)
        splits = common.load_splits(str(tiny_fold))
        keras.utils.set_random_seed(1)
        self.model = train.build_trainable(config, splits.num_features)
        if ON_TENSORFLOW:
            from pipelines import resume  # pylint: disable=import-outside-toplevel
            dataset = train.train_dataset(config, splits.train)
            state = resume.training_state(self.model, dataset.element_spec, {}, config.epochs)
            self.backup = resume.TrainingBackup(str(backup_dir), state)
        else:
            from pipelines import keras_backup  # pylint: disable=import-outside-toplevel
            self.backup = keras_backup.KerasBackup(str(backup_dir), self.model.model,
                                                   self.model.optimizers(), {})
        self.variables = list(self.model.model.weights) + [
            v for optimizer, _ in self.model.optimizers().values() for v in optimizer.variables]

    def fill(self, seed):
        """Every variable set to values drawn from ``seed``; returns them."""
        rng = np.random.default_rng(seed)
        values = []
        for variable in self.variables:
            dtype = np.asarray(variable.numpy()).dtype
            value = rng.uniform(-1, 1, tuple(variable.shape)).astype(dtype) \
                if dtype.kind == "f" else np.full(tuple(variable.shape), seed, dtype)
            variable.assign(value)
            values.append(value)
        return values

    def values(self):
        return [np.array(v.numpy()) for v in self.variables]


@pytest.fixture(scope="module")
def saved(tiny_fold, tmp_path_factory):
    """Two generations (epochs 1 and 2) of distinct states, and those states."""
    folder = tmp_path_factory.mktemp("backup_damage") / "backup"
    built = Built(tiny_fold, folder)
    states = {}
    for epochs in (1, 2):
        states[epochs] = built.fill(seed=epochs)
        built.backup.history = [{"logs": {"loss": float(i)}, "seconds": 1.0}
                                for i in range(epochs)]
        built.backup.save(epochs)
    assert [e for e, _ in backup_store.generations(generation_folder(folder))] == [2, 1]
    return built, folder, states


def restored_copy(saved, tmp_path, damage_files):
    """A copy of the saved backup, ``damage_files(folder_of_generations)`` applied, then
    restored into the model (filled with other values first): (epochs, values)."""
    built, folder, _ = saved
    copy = tmp_path / "backup"
    shutil.copytree(folder, copy)
    damage_files(generation_folder(copy))
    built.backup.backup_dir = str(copy)
    built.backup._generations = backup_store.Generations(generation_folder(copy))
    built.fill(seed=9)
    return built.backup.restore(), built.values()


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("file_index", range(len(FILES(2)) + 2),
                         ids=[*FILES("N"), "history.json", MANIFEST_FILE])
def test_a_damaged_newest_generation_restores_the_one_before(saved, tmp_path, file_index,
                                                             damage):
    name = [*FILES(2), "history.json", MANIFEST_FILE][file_index]
    with pytest.warns(UserWarning, match=r"The backup .*epoch-2 is damaged") as caught:
        epochs, values = restored_copy(
            saved, tmp_path, lambda folder: DAMAGE[damage](os.path.join(folder, "epoch-2", name)))
    assert not [w for w in caught if "No good backup" in str(w.message)]
    assert epochs == 1
    assert [e["logs"]["loss"] for e in saved[0].backup.history] == [0.0]
    for got, want in zip(values, saved[2][1]):
        np.testing.assert_array_equal(got, want)


def test_no_good_generation_starts_afresh_with_a_warning_or_stops_when_asked(saved, tmp_path):
    def damage_both(folder):
        for epochs in (1, 2):
            truncate_to_half(os.path.join(folder, f"epoch-{epochs}", FILES(epochs)[-1]))
    with pytest.warns(UserWarning, match="No good backup is left .*starts from the first epoch"):
        epochs, _ = restored_copy(saved, tmp_path / "a", damage_both)
    assert epochs == 0 and saved[0].backup.history == []
    with pytest.warns(UserWarning, match="is damaged"):
        with pytest.raises(backup_store.DamagedBackupError,
                           match="Every backup under .* is damaged.*--fail-on-damaged-backup"):
            saved[0].backup.restore(fail_on_damage=True)
    assert backup_store.backed_up_epochs(saved[0].backup._generations.folder) == 0


def test_a_save_keeps_two_good_generations_and_replaces_a_damaged_one(saved, tmp_path):
    built = saved[0]
    with pytest.warns(UserWarning, match="epoch-2 is damaged"):
        restored_copy(saved, tmp_path, lambda folder: empty(
            os.path.join(folder, "epoch-2", "history.json")))
    folder = built.backup._generations.folder
    built.backup.save(2)  # the rerun's second epoch, over the damaged generation
    assert [e for e, _ in backup_store.generations(folder)] == [2, 1]
    assert backup_store.backed_up_epochs(folder) == 2
    built.backup.save(3)
    assert [e for e, _ in backup_store.generations(folder)] == [3, 2]
    manifest = json.loads((tmp_path / "backup" / os.path.relpath(
        folder, tmp_path / "backup") / "epoch-3" / MANIFEST_FILE).read_text())
    assert manifest["epochs"] == 3
    assert set(manifest["files"]) == {*FILES(3), "history.json"}
    assert not [n for n in os.listdir(folder) if ".tmp" in n]


def test_a_backup_of_an_older_layout_is_named_and_the_run_starts_afresh(tmp_path):
    (tmp_path / "checkpoint.npz").write_bytes(b"PK")
    with pytest.warns(UserWarning, match=r"no backup generation but \['checkpoint.npz'\]"):
        assert backup_store.Generations(str(tmp_path)).newest_good() is None
    assert backup_store.Generations(str(tmp_path / "none")).newest_good() is None


def test_the_flag_that_refuses_a_fresh_start():
    args = train.build_parser().parse_args(["--fail-on-damaged-backup"])
    assert args.fail_on_damaged_backup and not train.build_parser().parse_args([]).\
        fail_on_damaged_backup


def test_a_run_whose_newest_backup_is_damaged_ends_as_an_uninterrupted_one(tiny_fold, tmp_path,
                                                                           monkeypatch):
    """Interrupted after its second epoch of three; the newest backup's checkpoint
    truncated: the rerun warns, resumes after epoch 1 and ends as an uninterrupted run."""
    config = config_of(tiny_fold, tmp_path / "run")
    if ON_TENSORFLOW:
        from pipelines import resume  # pylint: disable=import-outside-toplevel
        backup_class = resume.TrainingBackup
    else:
        from pipelines import keras_backup  # pylint: disable=import-outside-toplevel
        backup_class = keras_backup.KerasBackup
    back_up = backup_class.on_epoch_end

    class Interrupted(Exception):
        pass

    def on_epoch_end(self, epoch, logs=None):
        back_up(self, epoch, logs)
        if epoch + 1 == 2:
            raise Interrupted()
    with monkeypatch.context() as patch:
        patch.setattr(backup_class, "on_epoch_end", on_epoch_end)
        with pytest.raises(Interrupted):
            train.run(config)
    folder = generation_folder(tmp_path / "run" / "backup")
    assert [e for e, _ in backup_store.generations(folder)] == [2, 1]
    truncate_to_half(os.path.join(folder, "epoch-2", FILES(2)[-1]))

    with pytest.warns(UserWarning, match="epoch-2 is damaged"):
        resumed = train.run(config)
    reference = train.run(dataclasses.replace(config, output_dir=str(tmp_path / "reference")))
    assert resumed.resumed_from_epoch == 1 and reference.resumed_from_epoch == 0
    assert_same_results(read_results(tmp_path / "run"), read_results(tmp_path / "reference"),
                        TOLERANCE)
    assert not (tmp_path / "run" / "backup").exists()
