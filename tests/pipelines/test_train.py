"""The training pipeline: config, flags, a smoke run on a LibSVM fixture, outputs."""
import json
import os

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

import tfr_extensions as tfrx
from pipelines import train
from stack import needs_tf_ranking


def test_flags_build_the_config():
    config = train.parse_args(["--data", "some/fold", "--loss", "twin_ndcg_type3",
                               "--loss-args", '{"topn": 10}', "--scorer", "CE4.L",
                               "--epochs", "3", "--l2", "0", "--strategy", "mirrored"])
    assert config == train.TrainConfig(data="some/fold", loss="twin_ndcg_type3",
                                       loss_args={"topn": 10}, scorer="CE4.L", epochs=3, l2=0.0,
                                       strategy="mirrored")
    assert config.resolved_output_dir == os.path.join("runs", "default")
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
        train.load_splits("/nonexistent/folder")


def test_build_loss_ours_with_arguments():
    ours = train.build_loss("twin_ndcg_type3", {"topn": 10}, seed=7)
    assert ours.get_config()["topn"] == 10 and ours.get_config()["seed"] == 7


@needs_tf_ranking
def test_build_loss_tf_ranking_with_arguments():
    theirs = train.build_loss("approx_ndcg_loss", {"temperature": 0.5}, seed=7)
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
    summary = json.loads((out / "results.json").read_text())
    assert summary["test"]["no_relevant"] == "exclude"
    assert summary["best_epoch"] == result.best_epoch
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
