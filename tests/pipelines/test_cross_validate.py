"""Cross-validation pipeline: one fold of MQ2008, one epoch, two methods; resume; report;
presets, grids and run identities; IRGAN's two players."""
import dataclasses
import json
import os
import shlex
import time

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pipelines import cross_validate, cv_presets, cv_report, cv_runner, flags
from pipelines.lambdamart import LambdaMARTConfig
from pipelines.train import TrainConfig
from support import stack


@stack.heavy_integration("tf215", "keras3")
def test_smoke_one_fold_two_methods_and_resume(mq2008_dir, tmp_path, capsys):
    argv = ["--name", "smoke", "--data", str(mq2008_dir), "--folds", "1",
            "--methods", "twin_ndcg_type3,lambdamart", "--epochs", "1",
            "--lambdamart-rounds", "5", "--lambdamart-early-stopping", "5",
            "--num-threads", "1", "--output-dir", str(tmp_path / "runs"),
            "--report-dir", str(tmp_path / "report")]
    first = cross_validate.main(argv)
    assert first["counts"] == {"trained": 2, "skipped": 0}
    for method in ("twin_ndcg_type3", "lambdamart"):
        run = tmp_path / "runs" / method / "default" / "fold1"
        assert (run / "done.json").is_file() and (run / "test_per_query.csv").is_file()

    table = pd.read_csv(tmp_path / "report" / "smoke.csv")
    assert list(table["method"]) == ["twin_ndcg_type3", "lambdamart"]
    for metric in cv_report.REPORT_METRICS:
        assert metric in table and f"wilcoxon_p_{metric}" in table and f"ttest_p_{metric}" in table
        assert table[f"best_{metric}"].sum() == 1
        # the non-best method has both p-values, the best has none
        other = table[~table[f"best_{metric}"]]
        assert other[f"wilcoxon_p_{metric}"].between(0, 1).all()
        assert other[f"ttest_p_{metric}"].between(0, 1).all()
        assert table.loc[table[f"best_{metric}"], f"wilcoxon_p_{metric}"].isna().all()
    assert (table["num_queries"] > 100).all()  # MQ2008 Fold1 test: ~150 queries with relevant docs
    assert table["ndcg@5"].between(0.2, 1.0).all()

    markdown = (tmp_path / "report" / "smoke_table.md").read_text()
    header = "| Method | " + " | ".join(cv_report.REPORT_METRICS) + " |"
    assert header in markdown and "nDCG-type3" in markdown and "LambdaMART(L)" in markdown
    assert markdown.count("**") >= 2 * len(cv_report.REPORT_METRICS)
    assert shlex.join(["python", "-m", "pipelines.cross_validate", *argv]) in markdown
    for method in ("twin_ndcg_type3", "lambdamart"):
        png = tmp_path / "report" / "smoke_curves" / f"{method}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 200_000

    capsys.readouterr()
    start = time.perf_counter()
    second = cross_validate.main(argv)
    assert second["counts"] == {"trained": 0, "skipped": 2}
    assert "done before, skipped" in capsys.readouterr().out
    assert time.perf_counter() - start < 15
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "report" / "smoke.csv"), table)


def test_significance_matches_scipy_on_paired_queries():
    rng = np.random.default_rng(0)
    a = rng.uniform(size=40)
    b = np.clip(a - rng.normal(0.05, 0.1, size=40), 0, 1)
    frame = lambda v: pd.DataFrame({"fold": [1] * 20 + [2] * 20, "qid": list(range(20)) * 2,
                                    "ndcg@5": v})
    # the other method's rows in another order, one query excluded (NaN)
    other = frame(np.r_[np.nan, b[1:]]).iloc[::-1]
    wilcoxon, ttest = cv_report.significance(frame(a), other, "ndcg@5")
    assert wilcoxon == pytest.approx(stats.wilcoxon(a[1:], b[1:]).pvalue)
    assert ttest == pytest.approx(stats.ttest_rel(a[1:], b[1:]).pvalue)
    assert cv_report.significance(frame(a), frame(a), "ndcg@5") == (1.0, 1.0)


def test_markdown_marks_best_and_significance():
    table = pd.DataFrame({"label": ["A", "B", "C"], "ndcg@5": [0.5, 0.6, 0.55],
                          "best_ndcg@5": [False, True, False],
                          "wilcoxon_p_ndcg@5": [0.001, np.nan, 0.2],
                          "ttest_p_ndcg@5": [0.002, np.nan, 0.005]})
    lines = cv_report.markdown_table(table, metrics=("ndcg@5",)).splitlines()
    assert lines[2:] == ["| A | 0.5000*† |", "| B | **0.6000** |", "| C | 0.5500† |"]


def test_grid_and_config_validation():
    assert cv_runner.parse_grid(["twin_*:learning_rate=0.001,0.01"]) == \
        (("twin_*", "learning_rate", (0.001, 0.01)),)
    with pytest.raises(ValueError, match="grid"):
        cv_runner.parse_grid(["learning_rate=0.1"])
    with pytest.raises(ValueError, match="methods"):
        cv_runner.CVConfig(methods=("no_such_method",))
    config = cv_runner.CVConfig(methods=("twin_ndcg_type3", "ranknet"),
                         grid=cv_runner.parse_grid(["twin_ndcg_*:learning_rate=0.001,0.01",
                                             "twin_ndcg_*:loss.alpha_b=1,2"]))
    points = cv_runner.grid_points(config, cv_presets.METHODS["twin_ndcg_type3"])
    assert len(points) == 4 and {"learning_rate": 0.01, "loss.alpha_b": 2} in points
    assert cv_runner.grid_points(config, cv_presets.METHODS["ranknet"]) == [{}]
    assert cv_runner.config_name(points[0]) == "learning_rate=0.001,loss.alpha_b=1"
    assert os.path.basename(cv_runner.run_dir(config, "ranknet", {}, 3)) == "fold3"
    variant = cv_presets.resolve_method("twin_ndcg_type3[scorer=CE4.L;loss.alpha_b=2]")
    assert dict(variant.overrides) == {"scorer": "CE4.L", "loss.alpha_b": 2}
    assert variant.loss == "twin_ndcg_type3" and variant.label.startswith("nDCG-type3 [")
    assert len(cv_runner.grid_points(dataclasses.replace(config, methods=(variant.key,)), variant)) == 4
    with pytest.raises(ValueError, match="methods"):
        cv_presets.resolve_method("twin_ndcg_type3[scorer]")


@stack.heavy_integration("tf215", "keras3")
def test_changed_settings_retrain_and_the_report_uses_matching_runs_only(tiny_fold, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "Fold1").symlink_to(tiny_fold, target_is_directory=True)
    base = cv_runner.CVConfig(name="tiny", data=str(data), folds=(1,), methods=("ranknet",),
                       train=TrainConfig(epochs=1, batch_size=8), output_dir=str(tmp_path / "runs"),
                       report_dir=str(tmp_path / "report"))
    run = tmp_path / "runs" / "ranknet" / "default" / "fold1"
    lines = []
    assert cv_runner.run_all(base, log=lines.append) == {"trained": 1, "skipped": 0}
    assert cv_runner.run_all(base, log=lines.append) == {"trained": 0, "skipped": 1}
    identity = json.loads((run / "done.json").read_text())["identity"]
    assert identity["config"]["epochs"] == 1 and "output_dir" not in identity["config"]

    changed = flags.with_flags(base, epochs=2, seed=1)
    lines.clear()
    assert cv_runner.run_all(changed, log=lines.append) == {"trained": 1, "skipped": 0}
    assert "settings changed (config.epochs: 1 -> 2; config.seed: 0 -> 1), retraining" in lines[0]
    assert len(json.loads((run / "results.json").read_text())["history"]["loss"]) == 2
    # the report takes only runs of its own settings
    assert cv_report.collect_rows(base) == []
    with pytest.raises(ValueError, match="no finished runs of these settings"):
        cv_report.write_report(base)
    rows = cv_report.collect_rows(changed)
    assert [r.key for r in rows] == ["ranknet"] and rows[0].selected == {1: "default"}
    # a marker of an older version (no identity) does not count as done
    (run / "done.json").write_text(json.dumps({"seconds": 1.0}))
    assert cv_runner.run_status(str(run), cv_runner.run_identity(changed, cv_presets.METHODS["ranknet"], {}, 1)) == \
        ("changed", ["done.json records no identity"])
    assert cv_report.collect_rows(changed) == []


def test_run_identity_holds_the_whole_resolved_config():
    base = cv_runner.CVConfig(methods=("twin_ndcg_type3", "lambdamart"), folds=(1,))
    method = cv_presets.METHODS["twin_ndcg_type3"]
    identity = cv_runner.run_identity(base, method, {"loss.alpha_b": 2}, 1)
    assert identity["config"]["learning_rate"] == base.train.learning_rate
    assert identity["config"]["loss_args"] == {"alpha_b": 2}
    assert identity["grid_point"] == {"loss.alpha_b": 2}
    for field, value in (("learning_rate", 0.01), ("seed", 3), ("epochs", 2), ("l2", 0.0)):
        other = cv_runner.run_identity(flags.with_flags(base, **{field: value}), method,
                                {"loss.alpha_b": 2}, 1)
        assert other["config"][field] == value and other != identity, field
    trees = cv_runner.run_identity(base, cv_presets.METHODS["lambdamart"], {}, 1)
    assert trees["config"]["num_boost_round"] == base.lambdamart.num_boost_round
    assert cv_runner.run_identity(flags.with_flags(base, lambdamart_rounds=7),
                           cv_presets.METHODS["lambdamart"], {}, 1) != trees


def test_presets_aliases_and_defaults():
    defaults = cv_presets.default_methods()
    assert "lambdamart" in defaults and "twin_ndcg_type3" in defaults
    assert not [m for m in defaults if m.startswith("twinmart_") or m == "lambdamart_paper"]
    twinmart = [key for key in cv_presets.METHODS if key.startswith("twinmart_")]
    assert len(twinmart) == 12 and list(cv_presets.METHODS).index(twinmart[0]) > \
        list(cv_presets.METHODS).index("lambdamart_paper")
    assert dict(cv_presets.METHODS["twinmart_ndcg_type2"].overrides) == \
        {"objective": "twin_ndcg_type2"}
    # the old names keep working, as method keys and with settings
    assert cv_presets.resolve_method("lambdamart_seeds") == cv_presets.METHODS["lambdamart_paper"]
    assert cv_presets.resolve_method("lambdamart_seeds[num_leaves=63]").key == \
        "lambdamart_paper[num_leaves=63]"
    config = cv_runner.CVConfig(methods=("lambdamart_seeds",),
                                lambdamart=LambdaMARTConfig(preset="seeds"))
    assert config.methods == ("lambdamart_paper",) and config.lambdamart.preset == "paper"
    trees = cv_runner.lambdamart_config(cv_presets.METHODS["lambdamart_paper"], {}, 1, "", config)
    assert trees.preset == "paper"


def test_grid_fields_and_run_fields_come_from_the_config_dataclasses():
    """A grid may set every TrainConfig / LambdaMARTConfig field but those the comparison
    sets for each run; the templates may not set those either."""
    trains = {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(cv_runner.NEURAL_GRID_FIELDS) == trains - set(cv_runner.NEURAL_RUN_FIELDS)
    assert {"learning_rate", "l2", "scorer", "batch_size", "epochs", "hidden_units"} <= \
        set(cv_runner.NEURAL_GRID_FIELDS)
    assert {"preset", "num_boost_round", "early_stopping_rounds", "objective"} <= \
        set(cv_runner.LAMBDAMART_GRID_FIELDS)
    assert "params" not in cv_runner.LAMBDAMART_GRID_FIELDS
    config = cv_runner.CVConfig(methods=("ranknet",))
    method = cv_presets.METHODS["ranknet"]
    run = cv_runner.neural_config(method, {"list_size": 50, "scorer": "CE4.L"}, 1, "o", config)
    assert (run.list_size, run.scorer, run.epochs) == (50, "CE4.L", 30)  # the template's
    with pytest.raises(ValueError, match="grid"):
        cv_runner.neural_config(method, {"seed": 3}, 1, "o", config)
    # the lambdamart template: its params are the base of each run's, its fields the defaults
    config = cv_runner.CVConfig(methods=("lambdamart",), lambdamart=LambdaMARTConfig(
        params={"num_leaves": 7}, eval_at=10, num_threads=1))
    trees = cv_runner.lambdamart_config(cv_presets.METHODS["lambdamart"],
                                        {"learning_rate": 0.1, "eval_at": 3}, 2, "o", config)
    assert trees.params == {"num_leaves": 7, "learning_rate": 0.1}
    assert (trees.eval_at, trees.num_threads, trees.fold, trees.output_dir) == (3, 1, 2, "o")
    # what the comparison sets is not the templates'
    for bad in (dict(train=TrainConfig(seed=3)), dict(train=TrainConfig(scorer="CE4.L")),
                dict(lambdamart=LambdaMARTConfig(no_relevant="zero"))):
        with pytest.raises(ValueError, match="sets for each run"):
            cv_runner.CVConfig(methods=("ranknet",), **bad)
    with pytest.raises(TypeError, match="TrainConfig"):
        cv_runner.CVConfig(methods=("ranknet",), train={"epochs": 3})


def test_cv_config_json_nested_and_the_older_flat_layout():
    config = cv_runner.CVConfig(
        methods=("ranknet", "lambdamart"), folds=(2,), seed=3,
        grid=cv_runner.parse_grid(["twin_*:learning_rate=0.001,0.01"]),
        train=TrainConfig(epochs=3, batch_size=8),
        lambdamart=LambdaMARTConfig(num_boost_round=7, num_threads=1))
    written = json.loads(json.dumps(config.to_json()))
    assert written["train"]["epochs"] == 3 and written["lambdamart"]["num_boost_round"] == 7
    assert cv_runner.CVConfig.from_json(written) == config
    # cv_config.json as versions before the templates wrote it: flat, the flags' names
    flat = {"name": "comparison", "data": "synthetic", "folds": [2],
            "methods": ["ranknet", "lambdamart"],
            "grid": [["twin_*", "learning_rate", [0.001, 0.01]]], "epochs": 3,
            "batch_size": 8, "learning_rate": 0.001, "l2": 0.001, "seed": 3,
            "lambdamart_preset": "auto", "lambdamart_rounds": 7,
            "lambdamart_early_stopping": 200, "num_threads": 1, "no_relevant": "exclude",
            "output_dir": None, "report_dir": config.report_dir}
    assert cv_runner.CVConfig.from_json(flat) == config
    with pytest.raises(ValueError, match="hidden_units"):
        cv_runner.CVConfig.from_json({**flat, "hidden_units": 8})


def test_a_presets_learning_rate_is_part_of_the_run_identity():
    base = cv_runner.CVConfig(methods=("ranknet",), folds=(1,))
    listnet = cv_presets.METHODS["listnet"]
    identity = cv_runner.run_identity(base, listnet, {}, 1)
    assert identity["config"]["learning_rate"] == 0.01 != base.train.learning_rate
    assert identity["grid_point"] == {"learning_rate": 0.01}
    # a grid point over the preset's setting wins, and is another identity
    other = cv_runner.run_identity(base, listnet, {"learning_rate": 0.1}, 1)
    assert other["config"]["learning_rate"] == 0.1 and other != identity
    assert cv_runner.run_identity(base, cv_presets.METHODS["ranknet"], {}, 1)["config"][
        "learning_rate"] == base.train.learning_rate


def tiny_cv(tiny_fold, tmp_path, **overrides):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    if not (data / "Fold1").exists():
        (data / "Fold1").symlink_to(tiny_fold, target_is_directory=True)
    return flags.with_flags(cv_runner.CVConfig(
        name="tiny", data=str(data), folds=(1,), methods=("ranknet",),
        train=TrainConfig(epochs=1, batch_size=8), output_dir=str(tmp_path / "runs"),
        report_dir=str(tmp_path / "report")), **overrides)


@stack.heavy_integration("tf215", "keras3")
def test_an_interrupted_neural_run_resumes_from_its_backup(tiny_fold, tmp_path, monkeypatch):
    from pipelines import train

    config = tiny_cv(tiny_fold, tmp_path, epochs=2)

    def killed(result):  # as a kill during the final evaluation would
        raise KeyboardInterrupt
    with monkeypatch.context() as patch:
        patch.setattr(train, "write_outputs", killed)
        with pytest.raises(KeyboardInterrupt):
            cv_runner.run_all(config, log=lambda line: None)
    run = tmp_path / "runs" / "ranknet" / "default" / "fold1"
    assert not (run / "done.json").exists() and (run / "backup").is_dir()
    assert cv_runner.run_all(config, log=lambda line: None) == {"trained": 1, "skipped": 0}
    results = json.loads((run / "results.json").read_text())
    assert results["resumed_from_epoch"] == 2 and len(results["history"]["test_ndcg_5"]) == 2
    assert json.loads((run / "done.json").read_text())["identity"] == \
        cv_runner.run_identity(config, cv_presets.METHODS["ranknet"], {}, 1)
    # an unfinished run of older settings is not resumed: it starts afresh
    (run / "done.json").unlink()
    changed = dataclasses.replace(config, seed=5)
    assert cv_runner.run_all(changed, log=lambda line: None) == {"trained": 1, "skipped": 0}
    assert json.loads((run / "results.json").read_text())["resumed_from_epoch"] == 0


@stack.heavy_integration("tf215", "keras3")
def test_irgan_trains_both_players_and_reports_each(tiny_fold, tmp_path):
    config = tiny_cv(tiny_fold, tmp_path, methods=("irgan_pair",))
    assert cv_runner.run_all(config, log=lambda line: None) == {"trained": 1, "skipped": 0}
    run = tmp_path / "runs" / "irgan_pair" / "default" / "fold1"
    results = json.loads((run / "results.json").read_text())
    assert set(results["players"]) == {"generator", "discriminator"}
    assert {"d_loss", "g_loss", "val_ndcg_5_generator", "test_ndcg_5_discriminator"} <= \
        set(results["history"])
    for player in ("generator", "discriminator"):
        frame = pd.read_csv(run / f"test_per_query_{player}.csv")
        assert results["players"][player]["test"]["ndcg@5"] == \
            pytest.approx(frame["ndcg@5"].mean())
    rows = cv_report.collect_rows(config)
    assert [r.label for r in rows] == ["IRGAN-pair (G)", "IRGAN-pair (D)"]
    assert [r.key for r in rows] == ["irgan_pair_generator", "irgan_pair_discriminator"]
    png = tmp_path / "curve.png"
    assert cv_report.plot_curves(rows[0], str(png)) == str(png) and png.stat().st_size > 1000
