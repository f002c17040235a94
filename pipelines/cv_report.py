"""The report of a cross-validated comparison: pooled test results, significance
tests, a Markdown table and learning curves.

:func:`collect_rows` takes, per method (and IRGAN player) and fold, the grid
point with the best validation nDCG@5 among the finished runs whose identity
matches the comparison (:func:`pipelines.cv_runner.finished_run`), and pools
the selected runs' per-query test results over the folds (each query is a
test query of exactly one fold). :func:`write_report` writes:

* ``<report-dir>/<name>_table.md`` and ``<name>.csv``: mean nDCG@{1,3,5,10,20},
  MAP@{1,3,5,10,20} and nERR@10 per method; per column the best method is
  marked and every other method is tested against it over the pooled queries
  with the Wilcoxon signed-rank test and the paired t-test (p < 0.01);
* ``<report-dir>/<name>_curves/<method>.png``: training loss and
  validation/test nDCG@5 per epoch (per tree batch for LambdaMART) on the
  first fold, for the selected grid point (the paper's Figure 2).

>>> table = pd.DataFrame({"label": ["A", "B"], "ndcg@5": [0.5, 0.6],
...                       "best_ndcg@5": [False, True], "wilcoxon_p_ndcg@5": [0.001, np.nan],
...                       "ttest_p_ndcg@5": [0.2, np.nan]})
>>> print(markdown_table(table, metrics=("ndcg@5",)))
| Method | ndcg@5 |
|---|---|
| A | 0.5000* |
| B | **0.6000** |
"""
import dataclasses
import math
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from . import common
from .cv_presets import resolve_method
from .cv_runner import SELECTION_METRIC, CVConfig, config_name, finished_run, grid_points
from .trainable import player_suffix

REPORT_METRICS = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "ndcg@20",
                  "map@1", "map@3", "map@5", "map@10", "map@20", "nerr@10")
SIGNIFICANCE_LEVEL = 0.01


@dataclasses.dataclass
class Row:
    """One report row: a method (and IRGAN player) with its pooled test queries."""

    key: str
    label: str
    family: str
    per_query: pd.DataFrame             # fold, qid, has_relevant, metric columns
    selected: Dict[int, str]            # fold -> grid point name
    first_fold_run: Optional[Dict[str, Any]]  # cv_runner.load_run of the first selection
    player: str
    seconds: float


def collect_rows(cv: CVConfig) -> List[Row]:
    """Per method and player: per fold the grid point with the best validation nDCG@5,
    among the finished runs whose identity matches ``cv``
    (:func:`pipelines.cv_runner.run_identity`)."""
    rows = []
    for key in cv.methods:
        method = resolve_method(key)
        points = grid_points(cv, method)
        for player in method.players:
            frames, selected, first_fold_run, seconds = [], {}, None, 0.0
            for fold in cv.folds:
                best = None
                for point in points:
                    run = finished_run(cv, method, point, fold)
                    if run is None:
                        continue
                    seconds += run["train_seconds"]
                    value = run["players"][player]["validation"][SELECTION_METRIC]
                    if value is not None and (best is None or value > best[0]):
                        best = (value, run, config_name(point))
                if best is None:
                    continue
                frame = pd.read_csv(best[1]["players"][player]["test_per_query"])
                frame.insert(0, "fold", fold)
                frames.append(frame)
                selected[fold] = best[2]
                first_fold_run = first_fold_run or best[1]
            if not frames:
                continue
            suffix = {"generator": " (G)", "discriminator": " (D)"}.get(player, "")
            rows.append(Row(f"{key}{player_suffix(player)}", method.label + suffix,
                            method.family, pd.concat(frames, ignore_index=True), selected,
                            first_fold_run, player, seconds))
    return rows


def _paired(best: pd.DataFrame, other: pd.DataFrame, column: str) -> Tuple[np.ndarray, np.ndarray]:
    merged = best[["fold", "qid", column]].merge(other[["fold", "qid", column]],
                                                 on=["fold", "qid"], suffixes=("_a", "_b"))
    merged = merged.dropna()
    return merged[f"{column}_a"].to_numpy(), merged[f"{column}_b"].to_numpy()


def significance(best: pd.DataFrame, other: pd.DataFrame, column: str) -> Tuple[float, float]:
    """(Wilcoxon signed-rank p, paired t-test p) of ``best`` vs ``other`` on ``column``.

    Queries are paired by (fold, qid); queries excluded by the no-relevant rule
    (NaN) are dropped. Identical results give p = 1.
    """
    from scipy import stats
    a, b = _paired(best, other, column)
    diff = a - b
    if a.size < 2 or np.allclose(diff, 0.0):
        return 1.0, 1.0
    wilcoxon = float(stats.wilcoxon(a, b, zero_method="wilcox").pvalue)
    ttest = float(stats.ttest_rel(a, b).pvalue)
    return wilcoxon, (1.0 if math.isnan(ttest) else ttest)


def comparison_table(rows: Sequence[Row], metrics: Sequence[str] = REPORT_METRICS
                     ) -> pd.DataFrame:
    """Means per method and, per metric, best flag and p-values against the best."""
    table = pd.DataFrame({
        "method": [r.key for r in rows], "label": [r.label for r in rows],
        "family": [r.family for r in rows],
        "folds": [",".join(str(f) for f in sorted(r.selected)) for r in rows],
        "num_queries": [int(r.per_query[list(metrics)].notna().all(axis=1).sum()) for r in rows],
        "selected": [";".join(f"{f}:{p}" for f, p in sorted(r.selected.items())) for r in rows],
        "train_seconds": [round(r.seconds, 1) for r in rows]})
    for metric in metrics:
        means = np.array([r.per_query[metric].mean() for r in rows])
        table[metric] = means
        best = int(np.nanargmax(means))
        table[f"best_{metric}"] = [i == best for i in range(len(rows))]
        pvalues = [significance(rows[best].per_query, r.per_query, metric) if i != best
                   else (np.nan, np.nan) for i, r in enumerate(rows)]
        table[f"wilcoxon_p_{metric}"] = [p[0] for p in pvalues]
        table[f"ttest_p_{metric}"] = [p[1] for p in pvalues]
    return table


def markdown_table(table: pd.DataFrame, metrics: Sequence[str] = REPORT_METRICS) -> str:
    """Bold = best per column; ``*`` Wilcoxon p < 0.01 vs the best, ``†`` t-test p < 0.01."""
    header = "| Method | " + " | ".join(metrics) + " |"
    lines = [header, "|" + "---|" * (len(metrics) + 1)]
    for _, row in table.iterrows():
        cells = []
        for metric in metrics:
            value = f"{row[metric]:.4f}"
            if row[f"best_{metric}"]:
                value = f"**{value}**"
            else:
                value += ("*" if row[f"wilcoxon_p_{metric}"] < SIGNIFICANCE_LEVEL else "") + \
                         ("†" if row[f"ttest_p_{metric}"] < SIGNIFICANCE_LEVEL else "")
            cells.append(value)
        lines.append(f"| {row['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def no_relevant_table(rows: Sequence[Row], metric: str = SELECTION_METRIC) -> pd.DataFrame:
    """``metric`` under the three no-relevant rules (and on lists of >= 10 documents
    only, as PT-Ranking filters MQ2008), from the same per-query results."""
    out = {}
    for r in rows:
        values = r.per_query[metric]
        relevant = r.per_query["has_relevant"].astype(bool)
        long = r.per_query["num_docs"] >= 10
        out[r.label] = {"exclude": values[relevant].mean(),
                        "zero": values.where(relevant, 0.0).mean(),
                        "one": values.where(relevant, 1.0).mean(),
                        "exclude, >=10 docs": values[relevant & long].mean(),
                        "zero, >=10 docs": values.where(relevant, 0.0)[long].mean()}
    return pd.DataFrame(out).T


def plot_curves(row: Row, path: str) -> Optional[str]:
    """Figure 2 style: training loss and validation/test nDCG@5 per epoch (per tree
    batch for LambdaMART) of the first fold's selected run."""
    if row.first_fold_run is None:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = row.first_fold_run
    curves = run["players"][row.player]["curves"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(7.0, 2.6), dpi=80)
    if run["kind"] == "lambdamart":
        x = curves["iterations"]
        left.plot(x, curves["train_ndcg@5"], color="C2")
        left.set_xlabel("trees")
        left.set_ylabel("train nDCG@5")
        right.set_xlabel("trees")
    else:
        history = run["history"]
        keys = [k for k in ("loss", "d_loss", "g_loss") if k in history]
        for k in keys:
            left.plot(range(1, len(history[k]) + 1), history[k], label=k)
        if len(keys) > 1:
            left.legend(fontsize=7)
        left.set_xlabel("epoch")
        left.set_ylabel("training loss")
        x = list(range(1, len(curves["vali_ndcg@5"]) + 1))
        right.set_xlabel("epoch")
    for name, label in (("vali_ndcg@5", "validation"), ("test_ndcg@5", "test")):
        right.plot(x, [np.nan if v is None else v for v in curves[name]], label=label)
    right.set_ylabel("nDCG@5")
    right.legend(fontsize=7)
    fold = min(row.selected)
    fig.suptitle(f"{row.label}, fold {fold} ({row.selected[fold]})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(cv: CVConfig, wall_seconds: Optional[float] = None,
                 command: Optional[str] = None) -> Dict[str, Any]:
    """The Markdown table, the CSV and the curve PNGs from the finished runs."""
    rows = collect_rows(cv)
    if not rows:
        raise ValueError(f"no finished runs of these settings under {cv.resolved_output_dir} "
                         "(runs of other settings are not reported: train them first).")
    table = comparison_table(rows)
    os.makedirs(cv.report_dir, exist_ok=True)
    csv_path = os.path.join(cv.report_dir, f"{cv.name}.csv")
    common.write_atomically(csv_path, lambda temp: table.to_csv(temp, index=False,
                                                                 float_format="%.6g"))
    curves_dir = os.path.join(cv.report_dir, f"{cv.name}_curves")
    os.makedirs(curves_dir, exist_ok=True)
    plots = {r.key: plot_curves(r, os.path.join(curves_dir, f"{r.key}.png")) for r in rows}

    rules = no_relevant_table(rows)
    lines = [f"# Cross-validated comparison: {cv.name}", "",
             f"Data `{cv.data}`, folds {', '.join(map(str, cv.folds))}; test metrics over "
             f"queries pooled across folds (no-relevant rule `{cv.no_relevant}`). Per fold the "
             f"grid point with the best validation {SELECTION_METRIC} is used. **Bold**: best "
             f"per column; `*`: Wilcoxon signed-rank p < {SIGNIFICANCE_LEVEL} against the best; "
             f"`†`: paired t-test p < {SIGNIFICANCE_LEVEL}.", ""]
    if command:
        lines += ["Regenerate:", "", "```", command, "```", ""]
    if wall_seconds is not None:
        lines += [f"Wall time of this invocation: {wall_seconds:.0f} s.", ""]
    lines += [markdown_table(table), "",
              f"{SELECTION_METRIC} under the three no-relevant rules, and on the queries "
              f"with at least 10 documents only:", "",
              "| Method | " + " | ".join(rules.columns) + " |",
              "|---|" + "---|" * len(rules.columns)]
    lines += [f"| {label} | " + " | ".join(f"{v:.4f}" for v in r) + " |"
              for label, r in rules.iterrows()]
    lines += ["", "Selected grid points and training time:", "",
              "| Method | selected (fold:config) | train s |", "|---|---|---|"]
    lines += [f"| {r['label']} | {r['selected']} | {r['train_seconds']:.0f} |"
              for _, r in table.iterrows()]
    lines += ["", "Curves (first fold):", ""]
    lines += [f"![{r.label}]({os.path.relpath(plots[r.key], cv.report_dir)})"
              for r in rows if plots[r.key]]
    md_path = os.path.join(cv.report_dir, f"{cv.name}_table.md")
    text = "\n".join(lines) + "\n"
    common.write_text(md_path, text)
    return {"table": table, "markdown": md_path, "csv": csv_path,
            "plots": [p for p in plots.values() if p]}
