"""LambdaMART pipeline: outputs on a fixture, and the seeds' preset on MQ2008."""
import json

import numpy as np
import pandas as pd
import pytest

from pipelines import lambdamart
from pipelines import train


def test_flags_and_presets():
    config = lambdamart.parse_args(["--data", "x", "--preset", "seeds", "--params",
                                    '{"num_leaves": 63}'])
    assert config.preset == "seeds" and config.params == {"num_leaves": 63}
    preset, params = lambdamart.resolve_params(config, num_rows=10)
    assert preset == "seeds" and params["num_leaves"] == 63
    assert params["min_sum_hessian_in_leaf"] == 200.0 and params["learning_rate"] == 0.05
    assert lambdamart.resolve_params(lambdamart.LambdaMARTConfig(), 10_000)[0] == "small"
    assert lambdamart.resolve_params(lambdamart.LambdaMARTConfig(), 1_000_000)[0] == "seeds"
    with pytest.raises(ValueError, match="preset"):
        lambdamart.LambdaMARTConfig(preset="large")


def test_run_on_fixture_writes_outputs(tiny_fold, tmp_path):
    config = lambdamart.LambdaMARTConfig(data=str(tiny_fold), preset="small", num_boost_round=20,
                                         early_stopping_rounds=5, output_dir=str(tmp_path))
    result = lambdamart.run(config)
    assert 1 <= result.best_iteration <= 20
    summary = json.loads((tmp_path / "results.json").read_text())
    assert summary["preset"] == "small" and summary["test"]["no_relevant"] == "exclude"
    per_query = pd.read_csv(tmp_path / "test_per_query.csv")
    assert summary["test"]["ndcg@5"] == pytest.approx(per_query["ndcg@5"].mean())
    assert (tmp_path / "model.txt").is_file()


def test_seeds_preset_stops_after_one_tree_on_mq2008(mq2008_dir, tmp_path):
    """min_sum_hessian_in_leaf=200 exceeds what ~10k lambdarank rows can put in a leaf."""
    splits = train.load_splits(str(mq2008_dir / "Fold1"))
    assert len(splits.train.labels) == 9630
    seeds = lambdamart.run(lambdamart.LambdaMARTConfig(preset="seeds", output_dir=str(tmp_path)),
                           splits=splits)
    trees = seeds.booster.trees_to_dataframe()
    assert seeds.num_trees == 1 and trees["split_feature"].notna().sum() == 0  # a single leaf
    # the first split becomes possible only below a threshold of about 167
    _, params = lambdamart.resolve_params(
        lambdamart.LambdaMARTConfig(preset="seeds", params={"min_sum_hessian_in_leaf": 150.0,
                                                             "num_threads": 1}), 9630)
    import lightgbm as lgb
    booster = lgb.train(params, lambdamart._lgb_dataset(splits.train), num_boost_round=1)
    assert booster.trees_to_dataframe()["split_feature"].notna().sum() > 0
    assert np.ptp(seeds.booster.predict(splits.test.features)) == 0.0  # constant scores
