"""Smoke run of the Figure 1 pipeline on a tiny LibSVM fixture written here."""
import csv
import json

import numpy as np
import pytest

import tfr_extensions as tfrx
from pipelines import sampled_ranking_quality as srq


def test_cli_run_on_libsvm_fixture_writes_csv_png_and_config(tmp_path):
    fold = tmp_path / "Fold1"
    fold.mkdir()
    data = tfrx.data.synthetic(num_queries=24, num_features=5, seed=2, list_size=(10, 20))
    tfrx.data.write_libsvm(data, fold / "train.txt")
    out = tmp_path / "out"
    srq.main(["--data", str(fold), "--output-dir", str(out), "--epochs", "2", "--topn", "5",
              "--hidden-units", "8", "--scorer", "R2.L", "--batch-size", "8"])
    with open(out / srq.CSV_NAME) as f:
        rows = list(csv.DictReader(f))
    assert {r["method"] for r in rows} == {"ExptUtility", "MDPRank", "ListMLE"}
    assert len(rows) == 3 * 2
    for row in rows:
        value = float(row["sampled_ndcg"])
        if row["method"] == "ListMLE":
            assert value == pytest.approx(1.0)  # ideal rankings, lists with relevant docs
        else:
            assert 0.0 < value < 1.0 and 0.0 < float(row["ranking_ndcg"]) <= 1.0
    assert (out / srq.PNG_NAME).stat().st_size > 1000
    assert json.loads((out / "config.json").read_text())["data"] == str(fold)


def test_bad_config_raises_value_error(tmp_path):
    with pytest.raises(ValueError, match="epochs"):
        srq.QualityConfig(epochs=0)
    with pytest.raises(ValueError, match="temperature"):
        srq.QualityConfig(temperature=0.0)
    with pytest.raises(ValueError, match="data"):
        srq.load_training_data(srq.QualityConfig(data=str(tmp_path)))


def test_synthetic_by_default_and_the_lists_reach_the_scorer_raw():
    config = srq.QualityConfig(synthetic_queries=20, min_list_size=1, batch_size=4)
    assert config.data == "synthetic"
    data = srq.load_training_data(config)
    raw_rows = {tuple(row) for row in np.asarray(data.features, np.float32)}
    features, labels = next(iter(srq.training_dataset(config, data)))
    valid = features["mask"].numpy()
    batch_rows = features["features"].numpy()[valid]
    assert len(batch_rows) > 0 and all(tuple(row) in raw_rows for row in batch_rows)
