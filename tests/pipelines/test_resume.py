"""pipelines.resume's checkpoint: what a restore brings back, on every stack.

A run builds its training state (:func:`pipelines.resume.training_state`), trains
one epoch with :class:`pipelines.resume.TrainingBackup` writing the checkpoint,
and a second, freshly built state (other initial weights) restores it: every
variable must come back bitwise, the optimizers' slots (Adam's moments and
iteration count) included.
"""
import numpy as np
import pytest
import tensorflow as tf

from pipelines import callbacks
from pipelines import common
from pipelines import resume
from pipelines import train
from tfr_extensions import evaluation
from tfr_extensions.backend import keras

STEPS = 3


def build(config, splits, init_seed):
    """The model (a :class:`pipelines.trainable.Trainable`), its best-epoch callbacks and
    backup of ``config``, with the initial weights of ``init_seed``; the training stream."""
    keras.utils.set_random_seed(init_seed)
    model = train.build_trainable(config, splits.num_features)
    best = {player: evaluation.BestEpochCallback(
        splits.vali, scorer=None if scorer is model.model else scorer,
        log_key=callbacks.history_key("val", "ndcg@5", player))
        for player, scorer in model.scorers().items()}
    dataset = train.train_dataset(config, splits.train)
    state = resume.training_state(model, dataset.element_spec, best, config.epochs)
    backup = resume.TrainingBackup(str(config.output_dir), state)
    return model, best, backup, dataset


def snapshot(model, best, backup):
    """Every variable of the training state, by name: weights, each optimizer's
    variables, the loss's, the best-epoch states' and the epoch."""
    values = {f"weight_{i}": w for i, w in enumerate(model.model.get_weights())}
    for name, (optimizer, _) in model.optimizers().items():
        values.update({f"{name}_{i}": np.asarray(v) for i, v in enumerate(optimizer.variables)})
    loss = resume.loss_state(getattr(model.model, "loss", None))
    values.update({f"loss_{k}": v.numpy() for k, v in loss.loss_variables.items()})
    for player, callback in best.items():
        state = callback.state()
        values.update({f"best{player}_{i}": v.numpy() for i, v in enumerate(state.variables)})
    values["epoch"] = backup.epoch.numpy()
    return values


@pytest.mark.parametrize("loss", ["expected_utility", "irgan_list"])
def test_a_restore_brings_back_every_variable_and_the_optimizer_slots(tiny_fold, tmp_path,
                                                                      loss):
    config = train.TrainConfig(data=str(tiny_fold), loss=loss, scorer="R2.L", hidden_units=8,
                               epochs=2, batch_size=8, steps_per_epoch=STEPS, seed=1,
                               output_dir=str(tmp_path / "backup"), verbose=0)
    splits = common.load_splits(str(tiny_fold))
    model, best, backup, dataset = build(config, splits, init_seed=1)
    assert backup.restore() == 0  # nothing to restore yet
    model.model.fit(dataset, epochs=1, steps_per_epoch=STEPS, verbose=0, shuffle=False,
              callbacks=[*best.values(), backup])
    saved = snapshot(model, best, backup)
    assert resume.backed_up_epochs(str(tmp_path / "backup")) == 1 and saved["epoch"] == 1
    for name, (optimizer, _) in model.optimizers().items():
        assert int(optimizer.iterations.numpy()) == STEPS, name  # stepped: slots hold values
    if loss == "expected_utility":  # the seeded loss's step counter
        assert saved["loss__calls"] == STEPS

    other, other_best, other_backup, _ = build(config, splits, init_seed=2)
    fresh = snapshot(other, other_best, other_backup)
    assert set(fresh) == set(saved)
    assert not all(np.array_equal(fresh[k], saved[k]) for k in saved if k.startswith("weight"))
    assert other_backup.restore() == 1
    restored = snapshot(other, other_best, other_backup)
    for key, value in saved.items():
        np.testing.assert_array_equal(restored[key], value, err_msg=key)
    moments = [k for k in saved if "optimizer_" in k and saved[k].ndim > 0]
    assert moments and any(np.any(saved[k] != 0) for k in moments)  # Adam's moments, non-zero


def test_the_checkpoint_holds_every_weight_batch_norm_statistics_included(tiny_fold, tmp_path):
    config = train.TrainConfig(data=str(tiny_fold), loss="ranknet", scorer="R2.L",
                               hidden_units=8, epochs=1, output_dir=str(tmp_path), verbose=0)
    splits = common.load_splits(str(tiny_fold))
    model, _, backup, _ = build(config, splits, init_seed=1)
    path = backup.save(1)
    names = [name for name, _ in tf.train.list_variables(path)]
    weights = [n for n in names if n.startswith("model/weights/")]
    assert len(weights) == len(model.model.weights)  # Keras 3: Checkpoint(model=...): fewer
    moving = [w for w in model.model.non_trainable_weights if "moving" in w.name]
    assert len(moving) == 4  # two batch normalizations, each a moving mean and variance
    assert resume.EPOCH_KEY in names


def test_backed_up_epochs_and_a_restore_of_another_runs_checkpoint(tiny_fold, tmp_path):
    assert resume.backed_up_epochs(str(tmp_path / "none")) == 0
    splits = common.load_splits(str(tiny_fold))
    base = dict(data=str(tiny_fold), scorer="R2.L", epochs=3, output_dir=str(tmp_path),
                verbose=0)
    _, _, backup, _ = build(train.TrainConfig(loss="ranknet", hidden_units=8, **base),
                            splits, 1)
    backup.save(2)
    assert resume.backed_up_epochs(str(tmp_path)) == 2
    # a wider scorer's weights do not fit this checkpoint
    _, _, wider, _ = build(train.TrainConfig(loss="ranknet", hidden_units=16, **base), splits, 1)
    with pytest.raises(RuntimeError, match="does not hold this run's training state.*"
                                           "--overwrite"):
        wider.restore()


def test_a_non_chief_worker_saves_to_a_scratch_folder_it_deletes(tiny_fold, tmp_path,
                                                                monkeypatch):
    config = train.TrainConfig(data=str(tiny_fold), loss="ranknet", scorer="R2.L",
                               hidden_units=8, epochs=1, output_dir=str(tmp_path), verbose=0)
    _, _, backup, _ = build(config, common.load_splits(str(tiny_fold)), init_seed=1)
    scratch = tmp_path / "workertemp_1"
    monkeypatch.setattr(resume.strategies, "get_output_filepath",
                        lambda path, strategy: str(tmp_path / "workertemp_1"))
    backup.chief = False
    path = backup.save(1)
    assert path.startswith(str(scratch)) and not scratch.exists()
    assert resume.backed_up_epochs(str(tmp_path)) == 0  # the chief's folder: untouched
