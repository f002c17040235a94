"""The training pipeline: config, flags, a smoke run on a LibSVM fixture, outputs."""
import json
import os
import pathlib

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from pipelines import common
from pipelines import resume
from pipelines import train
from pipelines import trainable
from support.stack import needs_tf_ranking
import tfr_extensions as tfrx
from tfr_extensions.backend import keras


def test_flags_build_the_config():
    config = train.parse_args(["--data", "some/fold", "--loss", "twin_ndcg_type3",
                               "--loss-args", '{"topn": 10}', "--scorer", "CE4.L",
                               "--epochs", "3", "--l2", "0", "--strategy", "mirrored"])
    assert config == train.TrainConfig(data="some/fold", loss="twin_ndcg_type3",
                                       loss_args={"topn": 10}, scorer="CE4.L", epochs=3, l2=0.0,
                                       strategy="mirrored")
    assert config.resolved_output_dir == os.path.join("runs", "default")
    assert train.build_parser().parse_args(["--overwrite"]).overwrite
    assert train.parse_args(["--overwrite"]) == train.TrainConfig()  # not part of the config
    with pytest.raises(SystemExit) as exit_info:
        train.main(["--help"])
    assert exit_info.value.code == 0


def test_config_validation():
    with pytest.raises(ValueError, match="strategy"):
        train.TrainConfig(strategy="tpu")
    with pytest.raises(ValueError, match="notation"):
        train.TrainConfig(scorer="R4L")
    with pytest.raises(ValueError, match="epochs"):
        train.TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="metric"):
        train.TrainConfig(validation_metric="ndcg")
    with pytest.raises(ValueError, match="data"):
        common.load_splits("/nonexistent/folder")


def test_build_loss_ours_with_arguments():
    ours = trainable.build_loss("twin_ndcg_type3", {"topn": 10}, seed=7)
    assert ours.get_config()["topn"] == 10 and ours.get_config()["seed"] == 7


@needs_tf_ranking
def test_build_loss_tf_ranking_with_arguments():
    theirs = trainable.build_loss("approx_ndcg_loss", {"temperature": 0.5}, seed=7)
    assert theirs.get_config()["temperature"] == 0.5


def test_run_writes_outputs_restores_best_epoch_and_exports(tiny_fold, tmp_path):
    config = train.TrainConfig(
        name="smoke", data=str(tiny_fold), loss="twin_ndcg_type3", loss_args={"topn": 5},
        scorer="R2.L", hidden_units=8, epochs=3, batch_size=8, seed=1,
        output_dir=str(tmp_path / "run"), export_dir=str(tmp_path / "saved" / "smoke" / "1"),
        verbose=0)
    result = train.run(config)
    out = tmp_path / "run"
    assert train.TrainConfig(**json.loads((out / "config.json").read_text())) == config
    summary = strict_json(out / "results.json")
    assert summary["test"]["no_relevant"] == "exclude"
    assert summary["best_epoch"] == result.best_epoch and summary["resumed_from_epoch"] == 0
    assert strict_json(out / "done.json")["config"] == config.to_json()  # the marker
    assert not (out / "backup").exists()  # deleted once the run is complete
    per_query = pd.read_csv(out / "test_per_query.csv")
    test = tfrx.data.read_libsvm(tiny_fold / "test.txt", num_features=6)
    assert per_query["qid"].tolist() == test.query_ids.tolist()
    assert summary["test"]["ndcg@5"] == pytest.approx(per_query["ndcg@5"].mean())
    assert os.listdir(out / "logs")  # TensorBoard
    # the restored weights are the best epoch's: validation nDCG@5 equals the best logged one
    history = result.history["val_ndcg_5"]
    assert result.best_epoch == int(np.argmax(history)) + 1
    assert result.validation.summary["ndcg@5"] == pytest.approx(max(history), abs=1e-6)
    # the SavedModel scores raw features like the model
    loaded = tf.saved_model.load(result.export_dir)
    rows = slice(test.query_offsets[0], test.query_offsets[1])
    features = test.features[rows][None]
    got = loaded.signatures["predict_dense"](
        features=tf.constant(features), list_lengths=tf.constant([features.shape[1]]))["scores"]
    want = result.model({"features": features}, training=False)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def tiny_config(tiny_fold, output_dir, **overrides):
    """A run of a few seconds on the tiny fold (RankNet: the quickest loss to trace)."""
    return train.TrainConfig(**{
        "name": "tiny", "data": str(tiny_fold), "loss": "ranknet", "scorer": "R2.L",
        "hidden_units": 8,
        "epochs": 2, "batch_size": 8, "steps_per_epoch": 3, "seed": 1,
        "output_dir": str(output_dir), "tensorboard": False, "verbose": 0, **overrides})


def strict_json(path):
    """The JSON in ``path``, failing on the non-standard NaN / Infinity constants."""
    def reject(constant):
        raise AssertionError(f"{path} holds a bare {constant}")
    return json.loads(pathlib.Path(path).read_text(), parse_constant=reject)


def test_write_json_is_strict_and_atomic(tmp_path):
    path = tmp_path / "out.json"
    common.write_json(str(path), {"a": 1.5})
    with pytest.raises(ValueError, match="JSON compliant"):
        common.write_json(str(path), {"a": float("nan")})
    assert strict_json(path) == {"a": 1.5}      # the old file, whole
    assert os.listdir(tmp_path) == ["out.json"]  # no temporary file left


def test_an_empty_or_unusable_validation_set_is_a_clear_error(tiny_fold, tmp_path):
    splits = common.load_splits(str(tiny_fold))
    vali = splits.vali
    no_relevant = tfrx.data.LibSVMData(vali.features, np.zeros_like(vali.labels), vali.qids,
                                       vali.query_offsets)
    config = tiny_config(tiny_fold, tmp_path / "run")
    with pytest.raises(ValueError, match="validation set has no query with a relevant"):
        train.run(config, splits=common.Splits(splits.train, no_relevant, splits.test))
    with pytest.raises(ValueError, match="validation set has no query"):
        train.run(config, splits=common.Splits(splits.train, vali.subset([]), splits.test))
    assert not (tmp_path / "run").exists()  # refused before writing anything


def test_a_test_metric_over_no_query_is_null_in_strict_json(tiny_fold, tmp_path):
    splits = common.load_splits(str(tiny_fold))
    test = splits.test
    no_relevant = tfrx.data.LibSVMData(test.features, np.zeros_like(test.labels), test.qids,
                                       test.query_offsets)
    config = tiny_config(tiny_fold, tmp_path / "run", epochs=1)
    result = train.run(config, splits=common.Splits(splits.train, splits.vali, no_relevant))
    summary = strict_json(tmp_path / "run" / "results.json")
    assert summary["test"]["num_counted"] == 0 and summary["test"]["num_queries"] == 10
    assert summary["test"]["ndcg@5"] is None and summary["test"]["map@10"] is None
    assert summary["validation"]["ndcg@5"] == pytest.approx(result.validation.summary["ndcg@5"])
    assert common.format_summary(summary["test"]).startswith("ndcg@1=n/a")


class NaNFromCall(keras.losses.Loss):
    """Squared error over valid documents, NaN from its ``first_nan``-th call (1-based)."""

    def __init__(self, first_nan):
        super().__init__(name="nan_from_call")
        self.first_nan = first_nan
        self.calls = tf.Variable(0, dtype=tf.int64, trainable=False)

    def call(self, labels, scores):
        error = tf.where(labels >= 0, tf.square(scores - labels), 0.0)
        calls = self.calls.assign_add(1)
        return tf.where(calls >= self.first_nan, np.nan, tf.reduce_mean(error, axis=-1))


def test_a_nan_loss_stops_naming_the_epoch_without_completion(tiny_fold, tmp_path,
                                                              monkeypatch):
    # 3 steps per epoch: call 5 is epoch 2, batch 2
    monkeypatch.setattr(trainable, "build_loss", lambda *args: NaNFromCall(first_nan=5))
    out = tmp_path / "run"
    argv = ["--data", str(tiny_fold), "--scorer", "R2.L", "--hidden-units", "8", "--epochs",
            "3", "--batch-size", "8", "--steps-per-epoch", "3", "--output-dir", str(out),
            "--no-tensorboard", "--verbose", "0"]
    with pytest.raises(SystemExit) as exit_info:
        train.main(argv)
    message = str(exit_info.value.code)   # a string: printed, exit status 1
    assert message.startswith("pipelines.train: error: The training loss is nan in epoch 2 "
                              "(batch 2 of 3)"), message
    assert not (out / "done.json").exists() and not (out / "results.json").exists()
    assert resume.backed_up_epochs(str(out / "backup")) == 1   # epoch 2 was never backed up
