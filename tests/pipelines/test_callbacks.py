"""pipelines.callbacks: the test curve (CurveLogger) of a scorer, kept by a resumed run.

Imports without TensorFlow; the resumed run (``pipelines.resume``, a TensorFlow
checkpoint) skips where TensorFlow is not installed."""
import importlib

import numpy as np
import pytest

from pipelines import callbacks
from tfr_extensions.data import LibSVMData
from support.scorers import LinearScorer


def by_sign(sizes, positive_label, negative_label, seed=8):
    """Lists of 2 features whose label is ``positive_label`` where feature 0 > 0, else
    ``negative_label``: the kernel ``[[1], [0]]`` ranks the first kind first."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(int(np.sum(sizes)), 2)).astype(np.float32)
    labels = np.where(features[:, 0] > 0, positive_label, negative_label).astype(np.float32)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return LibSVMData(features, labels, np.repeat(np.arange(len(sizes)), sizes), offsets)


def run_epochs(epoch_callbacks, model, kernels, first_epoch=0):
    """Epochs ``first_epoch, ...`` of a fake fit: the kernel of each epoch, then epoch end;
    the epochs' logs."""
    history = []
    for epoch, w in enumerate(kernels, first_epoch):
        logs = {}
        for callback in epoch_callbacks:
            callback.on_epoch_begin(epoch)
        model.dense.kernel.assign([w, [0.0]])
        for callback in epoch_callbacks:
            callback.on_epoch_end(epoch, logs)
        history.append(logs)
    return history


def test_curve_logger_logs_the_metric_of_its_scorer_not_of_the_model_being_fit():
    test = by_sign([8, 9, 10], 0.0, 2.0)        # the kernel [[-1], [0]] is perfect here
    player, fitted = LinearScorer(2), LinearScorer(2)
    logger = callbacks.CurveLogger(test, "ndcg@5", "exclude", player,
                                   callbacks.history_key("test", "ndcg@5", "generator"))
    logger.set_model(fitted)
    logs = run_epochs([logger], player, [[-1.0], [1.0], [-1.0]])
    curve = [entry["test_ndcg_5_generator"] for entry in logs]
    assert curve[0] == curve[2] == pytest.approx(1.0) and curve[1] < 1.0


def test_a_resumed_run_keeps_the_curve_of_its_backed_up_epochs(tmp_path):
    pytest.importorskip("tensorflow", reason="pipelines.resume backs up to a TensorFlow "
                        "checkpoint; TensorFlow is not installed here")
    resume = importlib.import_module("pipelines.resume")
    test = by_sign([8, 9, 10], 2.0, 0.0)
    model = LinearScorer(2)
    state = {"model": resume.variables_state(model.weights, "model_weights")}

    def epoch_callbacks(backup):
        return [callbacks.CurveLogger(test, "ndcg@5", "exclude", model, "test_ndcg_5"), backup]

    backup = resume.TrainingBackup(str(tmp_path), state)
    assert backup.restore() == 0
    run_epochs(epoch_callbacks(backup), model, [[-1.0], [1.0]])
    want = backup.history_by_key()["test_ndcg_5"]
    assert want[1] == pytest.approx(1.0) and want[0] < 1.0

    # a new process: the backup restored, then epoch 3
    resumed = resume.TrainingBackup(str(tmp_path), state)
    assert resumed.restore() == 2
    run_epochs(epoch_callbacks(resumed), model, [[-0.5]], first_epoch=2)
    curve = resumed.history_by_key()["test_ndcg_5"]
    assert curve[:2] == want and len(curve) == 3


def test_a_non_finite_loss_stops_naming_the_epoch_and_the_batch():
    stop = callbacks.StopOnNonFiniteLoss()
    stop.set_params({"steps": 4})
    stop.on_epoch_begin(1)
    stop.on_train_batch_end(0, {"loss": 0.5, "d_loss": 1.0})
    with pytest.raises(callbacks.NonFiniteLossError, match=r"d_loss is inf in epoch 2 "
                                                           r"\(batch 2 of 4\)"):
        stop.on_train_batch_end(1, {"loss": 0.5, "d_loss": float("inf")})
