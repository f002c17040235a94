"""LambdaMART pipeline: outputs on a fixture, the paper's preset on MQ2008, and the
twin-sigmoid objective (``--objective twin_<metric>_<type>``)."""
import json
import os
from dataclasses import replace as dataclasses_replace

import numpy as np
import pandas as pd
import pytest

from pipelines import common
from pipelines import lambdamart


def test_flags_and_presets():
    config = lambdamart.parse_args(["--data", "x", "--preset", "paper", "--params",
                                    '{"num_leaves": 63}'])
    assert config.preset == "paper" and config.params == {"num_leaves": 63}
    preset, params = lambdamart.resolve_params(config, num_rows=10)
    assert preset == "paper" and params["num_leaves"] == 63
    assert params["min_sum_hessian_in_leaf"] == 200.0 and params["learning_rate"] == 0.05
    assert lambdamart.resolve_params(lambdamart.LambdaMARTConfig(), 10_000)[0] == "small"
    assert lambdamart.resolve_params(lambdamart.LambdaMARTConfig(), 1_000_000)[0] == "paper"
    with pytest.raises(ValueError, match="preset"):
        lambdamart.LambdaMARTConfig(preset="large")
    # the old name of the paper's preset still works, from flags and in code
    assert lambdamart.parse_args(["--preset", "seeds"]).preset == "paper"
    assert lambdamart.LambdaMARTConfig(preset="seeds") == lambdamart.LambdaMARTConfig(
        preset="paper")


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


def test_paper_preset_stops_after_one_tree_on_mq2008(mq2008_dir, tmp_path):
    """min_sum_hessian_in_leaf=200 exceeds what ~10k lambdarank rows can put in a leaf."""
    splits = common.load_splits(str(mq2008_dir / "Fold1"))
    assert len(splits.train.labels) == 9630
    paper = lambdamart.run(lambdamart.LambdaMARTConfig(preset="paper", output_dir=str(tmp_path)),
                           splits=splits)
    trees = paper.booster.trees_to_dataframe()
    assert paper.num_trees == 1 and trees["split_feature"].notna().sum() == 0  # a single leaf
    # the first split becomes possible only below a threshold of about 167
    _, params = lambdamart.resolve_params(
        lambdamart.LambdaMARTConfig(preset="paper", params={"min_sum_hessian_in_leaf": 150.0,
                                                             "num_threads": 1}), 9630)
    import lightgbm as lgb
    booster = lgb.train(params, lambdamart._lgb_dataset(splits.train), num_boost_round=1)
    assert booster.trees_to_dataframe()["split_feature"].notna().sum() > 0
    assert np.ptp(paper.booster.predict(splits.test.features)) == 0.0  # constant scores


def test_twin_objective_from_flags_or_params_and_its_errors():
    from tfr_extensions import gbdt

    config = lambdamart.parse_args(["--data", "x", "--objective", "twin_ndcg_type3",
                                    "--objective-args", '{"hessian": "lambdamart"}',
                                    "--params", '{"objective.topn": 10}', "--seed", "4"])
    assert config.objective == "twin_ndcg_type3"
    assert config.objective_args == {"hessian": "lambdamart"}
    _, params = lambdamart.resolve_params(config, num_rows=10)
    params, objective, record = lambdamart.resolve_objective(config, params)
    assert isinstance(objective, gbdt.TwinSigmoidObjective)
    assert (objective.metric, objective.gradient, objective.hessian, objective.topn,
            objective.seed) == ("ndcg", "type3", "lambdamart", 10, [4])
    assert record == {"name": "twin_ndcg_type3", **objective.config}
    assert params["objective"] == "twin_ndcg_type3" and "objective.topn" not in params
    json.dumps(params)  # what results.json records
    # the objective as a LightGBM override, as pipelines.cross_validate passes presets
    config = lambdamart.LambdaMARTConfig(params={"objective": "twin_ap_type2",
                                                 "objective.hessian": "exact"})
    _, objective, record = lambdamart.resolve_objective(
        config, lambdamart.resolve_params(config, 10)[1])
    assert (objective.metric, objective.gradient, record["hessian"]) == ("ap", "type2", "exact")
    default = lambdamart.LambdaMARTConfig()  # lambdarank stays the default
    assert lambdamart.resolve_objective(default, lambdamart.resolve_params(default, 10)[1])[1:] \
        == ("lambdarank", {"name": "lambdarank"})
    with pytest.raises(ValueError, match="objective"):
        lambdamart.LambdaMARTConfig(objective="twin_mrr_type3")
    for bad in ({"objective.topn": 3}, {"objective": "twin_ndcg_type1", "objective.alpha": 2}):
        config = lambdamart.LambdaMARTConfig(params=bad)
        with pytest.raises(ValueError, match="objective"):
            lambdamart.resolve_objective(config, lambdamart.resolve_params(config, 10)[1])


def test_run_with_the_twin_objective_records_it(tiny_fold, tmp_path):
    config = lambdamart.LambdaMARTConfig(
        data=str(tiny_fold), preset="small", num_boost_round=20, early_stopping_rounds=5,
        output_dir=str(tmp_path), objective="twin_ndcg_type3",
        objective_args={"hessian": "lambdamart"})
    result = lambdamart.run(config)
    summary = json.loads((tmp_path / "results.json").read_text())
    assert summary["objective"]["name"] == "twin_ndcg_type3"
    assert summary["objective"]["hessian"] == "lambdamart" and summary["objective"]["seed"] == 0
    assert summary["params"]["objective"] == "twin_ndcg_type3"
    written = json.loads((tmp_path / "config.json").read_text())  # strict JSON, atomically
    assert sorted(os.listdir(tmp_path)) == ["config.json", "done.json", "model.txt",
                                            "results.json", "test_per_query.csv",
                                            "vali_per_query.csv"]
    assert written["objective"] == "twin_ndcg_type3"
    assert written["objective_args"] == {"hessian": "lambdamart"}
    per_query = pd.read_csv(tmp_path / "test_per_query.csv")
    assert summary["test"]["ndcg@5"] == pytest.approx(per_query["ndcg@5"].mean())
    again = lambdamart.run(dataclasses_replace(config, output_dir=str(tmp_path / "again")))
    assert again.test.summary["ndcg@5"] == result.test.summary["ndcg@5"]  # seeded


def test_a_finished_run_is_not_redone_and_another_config_is_refused(tiny_fold, tmp_path,
                                                                     capsys):
    """As pipelines.train: config.json first, done.json last (the config and the caller's
    marker); the same config again is a finished run, another one needs overwrite."""
    from pipelines import resume

    config = lambdamart.LambdaMARTConfig(data=str(tiny_fold), preset="small", num_boost_round=5,
                                         early_stopping_rounds=5, output_dir=str(tmp_path))
    lambdamart.run(config, marker={"note": 1})
    done = json.loads((tmp_path / resume.DONE_FILE).read_text())
    assert done["note"] == 1 and done["config"] == config.to_json() and "finished" in done
    assert json.loads((tmp_path / resume.CONFIG_FILE).read_text()) == config.to_json()
    with pytest.raises(resume.FinishedRunError):
        lambdamart.run(config)
    argv = ["--data", str(tiny_fold), "--preset", "small", "--num-boost-round", "5",
            "--early-stopping-rounds", "5", "--output-dir", str(tmp_path)]
    capsys.readouterr()
    lambdamart.main(argv)  # prints the stored results, trains nothing
    out = capsys.readouterr().out
    assert "finished run of this config" in out and "test:" in out
    with pytest.raises(SystemExit, match="another config"):
        lambdamart.main(argv[:-4] + ["--output-dir", str(tmp_path), "--num-boost-round", "6"])
    again = lambdamart.run(dataclasses_replace(config, num_boost_round=6), overwrite=True)
    assert again.config.num_boost_round == 6
    # an unfinished run of the same config (no done.json) is trained again from the start
    (tmp_path / resume.DONE_FILE).unlink()
    assert lambdamart.run(again.config).num_trees == again.num_trees


def test_objective_arguments_come_from_its_signature():
    import inspect

    from tfr_extensions import gbdt

    params = inspect.signature(gbdt.twin_sigmoid_objective).parameters
    assert set(lambdamart.OBJECTIVE_ARGS) == set(params) - {"metric", "gradient", "seed",
                                                            "num_threads"}
    assert {"topn", "alpha_b", "hessian", "tie_break", "hessian_floor"} <= \
        set(lambdamart.OBJECTIVE_ARGS)


def test_a_twinmart_preset_trains_through_the_cross_validation_runner(tiny_fold, tmp_path):
    """``twinmart_<metric>_<type>`` presets: LightGBM trees on the twin-sigmoid objective,
    trained, marked done, read back and reported like LambdaMART; grids set
    ``objective.<arg>``; a second run skips them."""
    from pipelines import cv_presets, cv_report, cv_runner

    data = tmp_path / "data"
    data.mkdir()
    (data / "Fold1").symlink_to(tiny_fold, target_is_directory=True)
    method = cv_presets.METHODS["twinmart_nerr_type3"]
    assert method.kind == "lambdamart"
    assert dict(method.overrides) == {"objective": "twin_nerr_type3", "objective.topn": 10}
    cv = cv_runner.CVConfig(name="twinmart", data=str(data), folds=(1,), methods=(method.key,),
                            grid=cv_runner.parse_grid(
                                ["twinmart_*:objective.hessian=lambdamart"]),
                            lambdamart=lambdamart.LambdaMARTConfig(
                                num_boost_round=20, early_stopping_rounds=5),
                            output_dir=str(tmp_path / "runs"),
                            report_dir=str(tmp_path / "report"))
    assert cv_runner.run_all(cv, log=lambda line: None) == {"trained": 1, "skipped": 0}
    run = tmp_path / "runs" / method.key / "objective.hessian=lambdamart" / "fold1"
    results = json.loads((run / "results.json").read_text())  # pipelines.lambdamart's
    assert results["objective"]["name"] == "twin_nerr_type3"
    assert results["objective"]["hessian"] == "lambdamart" and results["objective"]["topn"] == 10
    summary = cv_runner.finished_run(cv, method, {"objective.hessian": "lambdamart"}, 1)
    assert summary["kind"] == "lambdamart" and summary["players"][""]["best_epoch"] >= 1
    curves = summary["players"][""]["curves"]
    assert len(curves["iterations"]) == len(curves["test_ndcg@5"]) >= 1
    [row] = cv_report.collect_rows(cv)
    assert row.label == "TwinMART nERR10-type3" and row.selected == {1: "objective.hessian=lambdamart"}
    assert cv_runner.run_all(cv, log=lambda line: None) == {"trained": 0, "skipped": 1}
