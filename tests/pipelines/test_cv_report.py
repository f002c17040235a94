"""The report's significance against a named reference, and the method presets."""
import numpy as np
import pandas as pd
import pytest

import tfr_extensions as tfrx
from pipelines import cross_validate, cv_presets, cv_report
from pipelines.cv_config import CVConfig, reference_matches

METRICS = ("ndcg@5", "map@5")


def row(key, values, method=None, seed_values=None):
    """A report row of 30 queries in two folds whose metrics are ``values`` (+ noise)."""
    rng = np.random.default_rng(len(key))
    frame = pd.DataFrame({"fold": [1] * 15 + [2] * 15, "qid": list(range(15)) * 2,
                          "has_relevant": True, "num_docs": 10})
    for metric, value in zip(METRICS, values):
        frame[metric] = np.clip(value + rng.normal(0, 0.05, 30), 0, 1)
    return cv_report.Row(key, key.upper(), "family", frame, {1: "default", 2: "default"},
                         None, "", 1.0, method=method or key)


def test_reference_tests_every_method_against_the_named_one():
    rows = [row("ranknet", (0.5, 0.4)), row("twin_ndcg_type3", (0.6, 0.3)),
            row("twin_ap_type2", (0.55, 0.35)), row("lambdamart", (0.7, 0.45))]
    default = cv_report.comparison_table(rows, metrics=METRICS)
    assert "reference_ndcg@5" not in default  # as before: against the best of the column
    assert default["best_ndcg@5"].tolist() == [False, False, False, True]
    assert default.loc[0, "wilcoxon_p_ndcg@5"] == \
        cv_report.significance(rows[3].per_query, rows[0].per_query, "ndcg@5")[0]

    named = cv_report.comparison_table(rows, metrics=METRICS, reference="twin_ap_type2")
    for metric in METRICS:
        assert named[f"reference_{metric}"].tolist() == [False, False, True, False]
        assert named[f"best_{metric}"].tolist() == default[f"best_{metric}"].tolist()
        assert np.isnan(named.loc[2, f"wilcoxon_p_{metric}"])
        for i in (0, 1, 3):  # the best method too is tested against the reference
            assert (named.loc[i, f"wilcoxon_p_{metric}"], named.loc[i, f"ttest_p_{metric}"]) == \
                cv_report.significance(rows[2].per_query, rows[i].per_query, metric)
    # a pattern: per column the best matching method
    twins = cv_report.comparison_table(rows, metrics=METRICS, reference="twin_*")
    assert twins["reference_ndcg@5"].tolist() == [False, True, False, False]  # 0.6 > 0.55
    assert twins["reference_map@5"].tolist() == [False, False, True, False]   # 0.35 > 0.3
    with pytest.raises(ValueError, match="names no method with finished runs"):
        cv_report.comparison_table(rows[:1], metrics=METRICS, reference="twin_*")


def test_markdown_marks_the_reference():
    table = pd.DataFrame({"label": ["A", "B", "C"], "ndcg@5": [0.5, 0.6, 0.55],
                          "best_ndcg@5": [False, True, False],
                          "reference_ndcg@5": [False, False, True],
                          "wilcoxon_p_ndcg@5": [0.001, 0.003, np.nan],
                          "ttest_p_ndcg@5": [0.2, 0.004, np.nan]})
    lines = cv_report.markdown_table(table, metrics=("ndcg@5",)).splitlines()
    assert lines[2:] == ["| A | 0.5000* |", "| B | **0.6000**\\*† |", "| C | _0.5500_ |"]


def test_reference_flag_and_its_validation():
    config, _ = cross_validate.parse_args(["--methods", "ranknet,twin_ndcg_type3,irgan_pair",
                                           "--reference", "twin_ndcg_type3"])
    assert config.reference == "twin_ndcg_type3"
    assert CVConfig(methods=("lambdamart_paper",), reference="lambdamart_seeds").reference == \
        "lambdamart_paper"  # an alias, as in --methods
    assert reference_matches("irgan_pair_generator", config.methods) == ["irgan_pair_generator"]
    assert reference_matches("twin_ndcg_type3[scorer=CE4.L]",
                             ["twin_ndcg_type3[scorer=CE4.L]"]) == ["twin_ndcg_type3[scorer=CE4.L]"]
    for bad in ("listnet", "twin_ap_*"):
        with pytest.raises(ValueError, match="`reference` must be one of the methods"):
            CVConfig(methods=config.methods, reference=bad)


def test_lambda_loss_and_neural_ndcg_presets():
    keys = list(cv_presets.METHODS)
    assert keys[keys.index("approxndcg") + 1:keys.index("approxndcg") + 3] == \
        ["lambda_loss", "neural_ndcg"]
    lambdaloss, neural = cv_presets.METHODS["lambda_loss"], cv_presets.METHODS["neural_ndcg"]
    assert (lambdaloss.label, lambdaloss.family, lambdaloss.loss) == \
        ("LambdaLoss (NDCG-Loss2++)", "pairwise surrogate", "lambda_loss")
    assert tfrx.losses.get("lambda_loss").get_config()["weighting"] == "ndcg_loss2pp"
    assert (neural.label, neural.family, neural.loss) == \
        ("NeuralNDCG", "metric approximation", "neural_ndcg")
    for method in (lambdaloss, neural):
        assert method.kind == "loss" and method.players == ("",)
        assert not method.needs_tf_ranking  # ours: on every stack
        assert method.key in cv_presets.default_methods()
        loss = tfrx.losses.get(method.loss, **method.loss_args)
        labels = np.array([[2.0, 0.0, 1.0, -1.0]], np.float32)
        scores = np.array([[0.3, 0.1, 0.2, 0.0]], np.float32)
        assert np.isfinite(float(loss(labels, scores)))


def test_the_old_lambdaloss_method_key_works_with_a_warning_naming_the_new_one():
    for old, new in cv_presets.DEPRECATED_METHODS.items():
        with pytest.warns(DeprecationWarning, match=f"{old!r} is deprecated.*use {new!r}"):
            method = cv_presets.resolve_method(f"{old}[loss.topn=5]")
        assert method.key == f"{new}[loss.topn=5]" and method.loss == new
        with pytest.warns(DeprecationWarning, match=f"use {new!r}"):
            assert CVConfig(methods=(old,)).methods == (new,)
