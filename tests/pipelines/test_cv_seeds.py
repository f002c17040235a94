"""Cross-validation with several seeds: the flags, the layout and run identities, and the
report's per-query means over seeds and its mean and spread across seeds."""
import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pipelines import cross_validate, cv_presets, cv_report, cv_runner, flags
from pipelines.cv_config import CVConfig
from pipelines.lambdamart import LambdaMARTConfig
from pipelines.train import TrainConfig
from support import stack

METRIC = cv_runner.SELECTION_METRIC


def test_seeds_flag_and_its_conflict_with_seed(capsys):
    config, _ = cross_validate.parse_args(["--seeds", "0,1,2", "--methods", "ranknet"])
    assert config.seeds == (0, 1, 2) and config.seed == 0
    assert flags.config_to_argv(config) == ["--methods", "ranknet", "--seeds", "0,1,2"]
    single, _ = cross_validate.parse_args(["--seed", "3", "--methods", "ranknet"])
    assert (single.seed, single.seeds) == (3, ())
    assert flags.config_to_argv(single) == ["--methods", "ranknet", "--seed", "3"]
    for argv in (["--seed", "3", "--seeds", "0,1"], ["--seeds", "1", "--seed", "0"]):
        with pytest.raises(SystemExit) as exit_info:
            cross_validate.parse_args(argv + ["--methods", "ranknet"])
        assert exit_info.value.code == 2
        assert "--seed and --seeds exclude each other" in capsys.readouterr().err
    with pytest.raises(ValueError, match="`seed` and `seeds` exclude each other"):
        CVConfig(methods=("ranknet",), seed=3, seeds=(0, 1))
    for bad in ((0, 0), (-1,), (True,)):
        with pytest.raises(ValueError, match="`seeds` must be distinct ints >= 0"):
            CVConfig(methods=("ranknet",), seeds=bad)
    # cv_config.json keeps the seeds
    written = json.loads(json.dumps(config.to_json()))
    assert written["seeds"] == [0, 1, 2] and CVConfig.from_json(written) == config


def test_which_methods_train_per_seed():
    cv = CVConfig(methods=("ranknet", "lambdamart", "twinmart_ndcg_type3"), folds=(1,),
                  seeds=(0, 1))
    method = cv_presets.resolve_method
    assert cv_runner.method_seeds(cv, method("ranknet")) == (0, 1)
    assert cv_runner.method_seeds(cv, method("irgan_pair")) == (0, 1)
    # lambdarank is deterministic: one run; the twin-sigmoid objective breaks ties at random
    assert cv_runner.method_seeds(cv, method("lambdamart")) == (None,)
    assert cv_runner.method_seeds(cv, method("twinmart_ndcg_type3")) == (0, 1)
    assert not cv_runner.seed_matters(cv, method("twinmart_ndcg_type3[objective.tie_break=false]"))
    # LightGBM's sampling makes lambdarank's trees depend on the seed, from a grid or template
    for grid in ("lambdamart:feature_fraction=0.5,1.0", "lambdamart:bagging_fraction=0.8",
                 "lambdamart:extra_trees=true"):
        assert cv_runner.seed_matters(dataclasses.replace(cv, grid=cv_runner.parse_grid([grid])),
                                      method("lambdamart")), grid
    assert not cv_runner.seed_matters(dataclasses.replace(cv, grid=cv_runner.parse_grid(
        ["lambdamart:feature_fraction=1.0"])), method("lambdamart"))
    sampled = dataclasses.replace(cv, lambdamart=LambdaMARTConfig(params={"subsample": 0.5}))
    assert cv_runner.seed_matters(sampled, method("lambdamart"))
    # without seeds every method runs once, as before
    assert cv_runner.method_seeds(dataclasses.replace(cv, seeds=()), method("ranknet")) == (None,)


def test_seed_layout_plan_and_identities(tmp_path):
    cv = CVConfig(methods=("ranknet", "lambdamart"), folds=(1, 2), seeds=(3, 5),
                  grid=cv_runner.parse_grid(["ranknet:learning_rate=0.001,0.01"]),
                  output_dir=str(tmp_path))
    runs = [(m.key, cv_runner.config_name(p), fold, seed) for m, p, fold, seed in cv_runner.plan(cv)]
    # seed after seed, each fold-major; the deterministic trees once, with the first seed
    assert runs == [
        ("ranknet", "learning_rate=0.001", 1, 3), ("ranknet", "learning_rate=0.01", 1, 3),
        ("lambdamart", "default", 1, None),
        ("ranknet", "learning_rate=0.001", 2, 3), ("ranknet", "learning_rate=0.01", 2, 3),
        ("lambdamart", "default", 2, None),
        ("ranknet", "learning_rate=0.001", 1, 5), ("ranknet", "learning_rate=0.01", 1, 5),
        ("ranknet", "learning_rate=0.001", 2, 5), ("ranknet", "learning_rate=0.01", 2, 5)]
    ranknet = cv_presets.METHODS["ranknet"]
    point = {"learning_rate": 0.01}
    assert cv_runner.run_dir(cv, "ranknet", point, 2, 5) == \
        str(tmp_path / "ranknet" / "learning_rate=0.01" / "seed5" / "fold2")
    assert cv_runner.run_dir(cv, "lambdamart", {}, 2) == str(tmp_path / "lambdamart" / "default" / "fold2")
    # the seed is part of the identity: in the config (seed and name) and so in done.json
    identities = {seed: cv_runner.run_identity(cv, ranknet, point, 2, seed) for seed in (3, 5)}
    assert identities[3]["config"]["seed"] == 3 and identities[5]["config"]["seed"] == 5
    assert identities[5]["config"]["name"] == "ranknet_seed5_fold2"
    assert identities[3] != identities[5]
    # the layout without seeds keeps its identities (its finished runs stay finished) ...
    single = dataclasses.replace(cv, seeds=())
    legacy = cv_runner.run_identity(single, ranknet, point, 2)
    assert legacy["config"]["seed"] == 0 and legacy["config"]["name"] == "ranknet_fold2"
    # ... and a run of seed 0 is not the run of --seed 0 (another folder, another identity)
    assert cv_runner.run_identity(dataclasses.replace(cv, seeds=(0,)), ranknet, point, 2, 0) != legacy
    # a tree method that runs once has the same run with and without seeds
    trees = cv_presets.METHODS["lambdamart"]
    assert cv_runner.run_identity(cv, trees, {}, 1) == cv_runner.run_identity(single, trees, {}, 1)


def tiny_seeds_cv(tiny_fold, tmp_path, **overrides):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    if not (data / "Fold1").exists():
        (data / "Fold1").symlink_to(tiny_fold, target_is_directory=True)
    return flags.with_flags(CVConfig(
        name="seeds", data=str(data), folds=(1,), methods=("ranknet", "lambdamart"),
        seeds=(0, 1), reference="lambdamart", train=TrainConfig(epochs=1, batch_size=8),
        lambdamart=LambdaMARTConfig(num_boost_round=5, early_stopping_rounds=5, num_threads=1),
        output_dir=str(tmp_path / "runs"), report_dir=str(tmp_path / "report")), **overrides)


def per_query(run_folder):
    return pd.read_csv(run_folder / "test_per_query.csv")[["qid", METRIC]].set_index("qid")[METRIC]


@stack.heavy_integration("tf215", "keras3")
def test_seeded_runs_report_per_query_means_and_the_spread(tiny_fold, tmp_path, capsys):
    cv = tiny_seeds_cv(tiny_fold, tmp_path)
    lines = []
    assert cv_runner.run_all(cv, log=lines.append) == {"trained": 3, "skipped": 0}
    assert [line.split(":")[0] for line in lines] == [
        "[1/3] ranknet default seed0 fold1", "[2/3] lambdamart default fold1",
        "[3/3] ranknet default seed1 fold1"]
    runs = tmp_path / "runs"
    seeds = {s: runs / "ranknet" / "default" / f"seed{s}" / "fold1" for s in (0, 1)}
    for seed, folder in seeds.items():
        done = json.loads((folder / "done.json").read_text())
        assert done["identity"]["config"]["seed"] == seed
    assert (runs / "lambdamart" / "default" / "fold1" / "done.json").is_file()
    assert not (runs / "ranknet" / "default" / "fold1").exists()
    assert cv_runner.run_all(cv, log=lines.append) == {"trained": 0, "skipped": 3}

    # --report-only rebuilds the report from the seeded runs
    argv = flags.config_to_argv(cv) + ["--report-only"]
    report = cross_validate.main(argv)
    assert report["counts"] == {"trained": 0, "skipped": 0}
    printed = capsys.readouterr().out
    assert f"seed_mean_{METRIC}" in printed and f"seed_std_{METRIC}" in printed
    table = pd.read_csv(tmp_path / "report" / "seeds.csv").set_index("method")
    values = {s: per_query(folder) for s, folder in seeds.items()}
    seed_means = np.array([values[0].mean(), values[1].mean()])
    ranknet = table.loc["ranknet"]
    assert (ranknet["seeds"], ranknet["num_seeds"]) == ("0,1", 2)
    for seed in (0, 1):
        assert ranknet[f"seed{seed}_{METRIC}"] == pytest.approx(seed_means[seed], abs=1e-5)
    assert ranknet[f"seed_mean_{METRIC}"] == pytest.approx(seed_means.mean(), abs=1e-5)
    assert ranknet[f"seed_std_{METRIC}"] == pytest.approx(seed_means.std(ddof=1), abs=1e-5)
    assert ranknet[f"seed_min_{METRIC}"] == pytest.approx(seed_means.min(), abs=1e-5)
    assert ranknet[f"seed_max_{METRIC}"] == pytest.approx(seed_means.max(), abs=1e-5)
    assert {f"seed_mean_{m}" for m in cv_report.REPORT_METRICS} <= set(table.columns)
    # the pooled mean and the tests are over each query's mean over the seeds
    averaged = (values[0] + values[1]) / 2
    assert ranknet[METRIC] == pytest.approx(averaged.mean(), abs=1e-5)
    trees = per_query(runs / "lambdamart" / "default" / "fold1")
    both = pd.concat([trees, averaged], axis=1, keys=["trees", "ranknet"]).dropna()
    assert ranknet[f"wilcoxon_p_{METRIC}"] == pytest.approx(
        stats.wilcoxon(both["trees"], both["ranknet"]).pvalue, rel=1e-4)
    assert ranknet[f"ttest_p_{METRIC}"] == pytest.approx(
        stats.ttest_rel(both["trees"], both["ranknet"]).pvalue, rel=1e-4)
    # the tree method ran once: one value, no spread; it is the reference
    lambdamart = table.loc["lambdamart"]
    assert lambdamart["num_seeds"] == 1 and pd.isna(lambdamart["seeds"])
    assert np.isnan(lambdamart[f"seed_std_{METRIC}"])
    assert lambdamart[f"seed_mean_{METRIC}"] == pytest.approx(trees.mean(), abs=1e-5)
    assert lambdamart[f"reference_{METRIC}"] and not ranknet[f"reference_{METRIC}"]
    assert np.isnan(lambdamart[f"wilcoxon_p_{METRIC}"])

    markdown = (tmp_path / "report" / "seeds_table.md").read_text()
    assert "Across seeds" in markdown and "| LambdaMART(L) | once |" in markdown
    assert f"| RankNet | 0,1 | {seed_means[0]:.4f}, {seed_means[1]:.4f} |" in markdown
    assert "0/1:default;1/1:default" in markdown and "against the reference `lambdamart`" in markdown

    # other seeds: the finished seed is kept, the new one trained, the report takes these only
    other = dataclasses.replace(cv, seeds=(0, 2))
    assert cv_runner.run_all(other, log=lambda line: None) == {"trained": 1, "skipped": 2}
    rows = {r.key: r for r in cv_report.collect_rows(other)}
    assert list(rows["ranknet"].per_seed) == [0, 2] and rows["lambdamart"].per_seed == {}
    # without seeds nothing of these runs is the comparison's (ranknet's run of --seed 0 is
    # another folder), but the deterministic trees are the same run
    rows = cv_report.collect_rows(dataclasses.replace(cv, seeds=()))
    assert [r.key for r in rows] == ["lambdamart"]
