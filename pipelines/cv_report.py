"""The report of a cross-validated comparison: pooled test results, significance
tests, a Markdown table and learning curves.

:func:`collect_rows` takes, per method (and IRGAN player), seed and fold, the
grid point with the best validation nDCG@5 among the finished runs whose
identity matches the comparison (:func:`pipelines.cv_runner.finished_run`), and
pools the selected runs' per-query test results over the folds (each query is a
test query of exactly one fold). With ``seeds`` each seed selects its own grid
points, and each query's values are averaged over the seeds *before* the means
and the tests (:func:`mean_over_seeds`): the tests then pair queries, not
(query, seed) pairs, which are not independent. :func:`write_report` writes:

* ``<report-dir>/<name>_table.md`` and ``<name>.csv``: mean nDCG@{1,3,5,10,20},
  MAP@{1,3,5,10,20} and nERR@10 per method; per column the best method is
  marked and every other method is tested against the column's reference (the
  best method, or the best of those ``reference`` names) over the pooled
  queries with the Wilcoxon signed-rank test and the paired t-test (p < 0.01);
* with ``seeds``, a second table and the CSV's ``seed*`` columns: per method
  each seed's own 5-fold (pooled) mean, and their mean, standard deviation,
  minimum and maximum across seeds, for every reported metric;
* ``<report-dir>/<name>_curves/<method>.png``: training loss and
  validation/test nDCG@5 per epoch (per tree batch for LambdaMART) on the
  first fold (and first seed), for the selected grid point (the paper's Figure 2).

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
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from . import common
from .cv_presets import resolve_method
from .cv_config import CVConfig, config_name, grid_points, reference_matches
from .cv_runner import SELECTION_METRIC, finished_run, method_seeds
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
    per_query: pd.DataFrame             # fold, qid, has_relevant, metric columns (seeds: means)
    selected: Dict[int, str]            # fold -> grid point name (seeds: of the first seed)
    first_fold_run: Optional[Dict[str, Any]]  # cv_runner.load_run of the first selection
    player: str
    seconds: float                      # training time of every run, all seeds
    method: str = ""                    # the method spec (a --methods entry)
    #: runs per seed only: seed -> its own pooled per-query test results ({}: one run)
    per_seed: Dict[int, pd.DataFrame] = dataclasses.field(default_factory=dict)
    #: runs per seed only: seed -> fold -> grid point name
    seed_selected: Dict[int, Dict[int, str]] = dataclasses.field(default_factory=dict)

    @property
    def seed_values(self) -> Dict[Optional[int], pd.DataFrame]:
        """seed -> pooled per-query results; ``{None: per_query}`` for a single run."""
        return dict(self.per_seed) or {None: self.per_query}


def mean_over_seeds(per_seed: Mapping[Any, pd.DataFrame]) -> pd.DataFrame:
    """One frame of per-query results: each (fold, qid)'s metric values (the ``@``
    columns) averaged over the seeds, its other columns (``num_docs``, ``has_relevant``)
    as they are. A query excluded by the no-relevant rule (NaN) is excluded in every seed
    (the rule reads labels only) and stays NaN.

    >>> seed = lambda v: pd.DataFrame({"fold": [1, 1], "qid": [7, 8],
    ...                                "has_relevant": [True, False], "ndcg@5": [v, np.nan]})
    >>> mean_over_seeds({0: seed(0.5), 1: seed(0.7)})
       fold  qid  has_relevant  ndcg@5
    0     1    7          True     0.6
    1     1    8         False     NaN
    """
    frames = list(per_seed.values())
    if len(frames) == 1:
        return frames[0]
    frame = pd.concat(frames, ignore_index=True)
    how = {c: "mean" if "@" in c else "first" for c in frame.columns if c not in ("fold", "qid")}
    return frame.groupby(["fold", "qid"], sort=False, as_index=False).agg(how)


def _select(cv: CVConfig, method, points, player: str, fold: int, seed: Optional[int]):
    """(the finished run with the best validation nDCG@5 of ``player`` or None, its grid
    point's name, the training seconds of every finished run of the fold and seed)."""
    best, seconds = None, 0.0
    for point in points:
        run = finished_run(cv, method, point, fold, seed)
        if run is None:
            continue
        seconds += run["train_seconds"]
        value = run["players"][player]["validation"][SELECTION_METRIC]
        if value is not None and (best is None or value > best[0]):
            best = (value, run, config_name(point))
    return (None, None, seconds) if best is None else (best[1], best[2], seconds)


def collect_rows(cv: CVConfig) -> List[Row]:
    """Per method and player: per seed (:func:`pipelines.cv_runner.method_seeds`) and
    fold the grid point with the best validation nDCG@5, among the finished runs whose
    identity matches ``cv`` (:func:`pipelines.cv_runner.run_identity`); each seed's
    selected runs pooled over the folds, and with several seeds each query's values
    averaged over them (:func:`mean_over_seeds`)."""
    rows = []
    for key in cv.methods:
        method = resolve_method(key)
        points = grid_points(cv, method)
        seeds = method_seeds(cv, method)
        for player in method.players:
            per_seed, seed_selected, first_fold_run, seconds = {}, {}, None, 0.0
            for seed in seeds:
                frames, selected = [], {}
                for fold in cv.folds:
                    run, point, run_seconds = _select(cv, method, points, player, fold, seed)
                    seconds += run_seconds
                    if run is None:
                        continue
                    frame = pd.read_csv(run["players"][player]["test_per_query"])
                    frame.insert(0, "fold", fold)
                    frames.append(frame)
                    selected[fold] = point
                    first_fold_run = first_fold_run or run
                if frames:
                    per_seed[seed] = pd.concat(frames, ignore_index=True)
                    seed_selected[seed] = selected
            if not per_seed:
                continue
            suffix = {"generator": " (G)", "discriminator": " (D)"}.get(player, "")
            seeded = seeds != (None,)
            rows.append(Row(f"{key}{player_suffix(player)}", method.label + suffix,
                            method.family, mean_over_seeds(per_seed),
                            next(iter(seed_selected.values())), first_fold_run, player,
                            seconds, method=key, per_seed=per_seed if seeded else {},
                            seed_selected=seed_selected if seeded else {}))
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


def _selected_text(row: Row) -> str:
    """``1:default;2:learning_rate=0.01``; with seeds ``0/1:default;0/2:...`` (seed/fold)."""
    if not row.per_seed:
        return ";".join(f"{f}:{p}" for f, p in sorted(row.selected.items()))
    return ";".join(f"{s}/{f}:{p}" for s, chosen in row.seed_selected.items()
                    for f, p in sorted(chosen.items()))


def _reference_rows(rows: Sequence[Row], reference: str) -> List[int]:
    """The indices of the rows that ``reference`` names
    (:func:`pipelines.cv_config.reference_matches`)."""
    named = set(reference_matches(reference, list(dict.fromkeys(r.method or r.key
                                                                 for r in rows))))
    matched = [i for i, r in enumerate(rows) if r.key in named]
    if not matched:
        raise ValueError(f"`reference` {reference!r} names no method with finished runs in "
                         f"this report (rows: {[r.key for r in rows]}).")
    return matched


def seed_summary(row: Row, metric: str) -> Dict[Optional[int], float]:
    """seed -> the mean of ``metric`` over that seed's pooled test queries (``{None: mean}``
    for a method that ran once)."""
    return {seed: float(frame[metric].mean()) for seed, frame in row.seed_values.items()}


def seed_columns(rows: Sequence[Row], metrics: Sequence[str]) -> pd.DataFrame:
    """``seeds`` (those a row ran with; "" if it ran once), ``num_seeds`` and per metric
    ``seed<s>_<metric>`` (each seed's pooled mean), ``seed_mean_``, ``seed_std_`` (sample
    standard deviation, ddof 1; NaN for one value), ``seed_min_`` and ``seed_max_<metric>``:
    a method that ran once counts as one value."""
    all_seeds = list(dict.fromkeys(s for r in rows for s in r.per_seed))
    columns: Dict[str, List[Any]] = {
        "seeds": [",".join(map(str, r.per_seed)) for r in rows],
        "num_seeds": [len(r.seed_values) for r in rows]}
    for metric in metrics:
        values = [seed_summary(r, metric) for r in rows]
        for seed in all_seeds:
            columns[f"seed{seed}_{metric}"] = [v.get(seed, np.nan) for v in values]
        arrays = [np.array(list(v.values())) for v in values]
        columns[f"seed_mean_{metric}"] = [a.mean() for a in arrays]
        columns[f"seed_std_{metric}"] = [a.std(ddof=1) if a.size > 1 else np.nan
                                         for a in arrays]
        columns[f"seed_min_{metric}"] = [a.min() for a in arrays]
        columns[f"seed_max_{metric}"] = [a.max() for a in arrays]
    return pd.DataFrame(columns)


def comparison_table(rows: Sequence[Row], metrics: Sequence[str] = REPORT_METRICS,
                     reference: Optional[str] = None) -> pd.DataFrame:
    """Means per method over the pooled queries (with seeds, of each query's mean over the
    seeds) and, per metric, the best flag and the p-values against the column's reference:
    the best method, or with ``reference`` the best of the rows it names
    (:func:`pipelines.cv_config.reference_matches`; flagged in ``reference_<metric>``).
    With runs per seed, also the :func:`seed_columns`."""
    table = pd.DataFrame({
        "method": [r.key for r in rows], "label": [r.label for r in rows],
        "family": [r.family for r in rows],
        "folds": [",".join(str(f) for f in sorted({f for chosen in r.seed_selected.values()
                                                     for f in chosen} or set(r.selected)))
                  for r in rows],
        "num_queries": [int(r.per_query[list(metrics)].notna().all(axis=1).sum()) for r in rows],
        "selected": [_selected_text(r) for r in rows],
        "train_seconds": [round(r.seconds, 1) for r in rows]})
    candidates = None if reference is None else _reference_rows(rows, reference)
    for metric in metrics:
        means = np.array([r.per_query[metric].mean() for r in rows])
        table[metric] = means
        best = int(np.nanargmax(means))
        table[f"best_{metric}"] = [i == best for i in range(len(rows))]
        ref = best
        if candidates is not None:
            ref = candidates[int(np.argmax(np.nan_to_num(means[candidates], nan=-np.inf)))]
            table[f"reference_{metric}"] = [i == ref for i in range(len(rows))]
        pvalues = [significance(rows[ref].per_query, r.per_query, metric) if i != ref
                   else (np.nan, np.nan) for i, r in enumerate(rows)]
        table[f"wilcoxon_p_{metric}"] = [p[0] for p in pvalues]
        table[f"ttest_p_{metric}"] = [p[1] for p in pvalues]
    if any(r.per_seed for r in rows):
        table = pd.concat([table, seed_columns(rows, metrics)], axis=1)
    return table


def markdown_table(table: pd.DataFrame, metrics: Sequence[str] = REPORT_METRICS) -> str:
    """Bold = best per column; italic = the column's reference where the table has one
    (``reference_<metric>``); ``*`` Wilcoxon p < 0.01 against the reference (without one:
    the best), ``†`` paired t-test p < 0.01."""
    header = "| Method | " + " | ".join(metrics) + " |"
    lines = [header, "|" + "---|" * (len(metrics) + 1)]
    for _, row in table.iterrows():
        cells = []
        for metric in metrics:
            value = f"{row[metric]:.4f}"
            named = f"reference_{metric}" in table
            if named and row[f"reference_{metric}"]:
                value = f"_{value}_"
            if row[f"best_{metric}"]:
                value = f"**{value}**"
            if not (row[f"reference_{metric}"] if named else row[f"best_{metric}"]):
                star = "\\*" if value.endswith("*") else "*"  # not read as emphasis
                value += (star if row[f"wilcoxon_p_{metric}"] < SIGNIFICANCE_LEVEL else "") + \
                         ("†" if row[f"ttest_p_{metric}"] < SIGNIFICANCE_LEVEL else "")
            cells.append(value)
        lines.append(f"| {row['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def seeds_markdown(table: pd.DataFrame, metrics: Sequence[str] = REPORT_METRICS) -> str:
    """Per method: its seeds, each seed's :data:`SELECTION_METRIC`, and per metric the
    mean ± standard deviation over the seeds (the selection metric with [min, max]);
    "once" for a method that ran once (its seed does nothing).

    >>> table = pd.DataFrame({"label": ["A", "T"], "seeds": ["0,1", ""],
    ...     "seed0_ndcg@5": [0.5, np.nan], "seed1_ndcg@5": [0.6, np.nan],
    ...     "seed_mean_ndcg@5": [0.55, 0.4], "seed_std_ndcg@5": [0.0707, np.nan],
    ...     "seed_min_ndcg@5": [0.5, 0.4], "seed_max_ndcg@5": [0.6, 0.4]})
    >>> print(seeds_markdown(table, metrics=("ndcg@5",)))
    | Method | seeds | ndcg@5 per seed | ndcg@5 |
    |---|---|---|---|
    | A | 0,1 | 0.5000, 0.6000 | 0.5500 ± 0.0707 [0.5000, 0.6000] |
    | T | once | 0.4000 | 0.4000 |
    """
    metric = SELECTION_METRIC
    lines = ["| Method | seeds | " + f"{metric} per seed | " + " | ".join(metrics) + " |",
             "|" + "---|" * (len(metrics) + 3)]
    seed_columns = [c for c in table.columns if c.startswith("seed") and
                    c.endswith(f"_{metric}") and c[4:-len(metric) - 1].isdigit()]
    for _, row in table.iterrows():
        once = not row["seeds"]
        per_seed = [row[f"seed_mean_{metric}"]] if once else \
            [row[c] for c in seed_columns if not pd.isna(row[c])]
        cells = [row["label"], "once" if once else row["seeds"],
                 ", ".join(f"{v:.4f}" for v in per_seed)]
        for m in metrics:
            cell = f"{row[f'seed_mean_{m}']:.4f}"
            if not once:
                std = row[f"seed_std_{m}"]
                cell += "" if pd.isna(std) else f" ± {std:.4f}"  # one seed: no spread
                if m == metric:
                    cell += f" [{row[f'seed_min_{m}']:.4f}, {row[f'seed_max_{m}']:.4f}]"
            cells.append(cell)
        lines.append("| " + " | ".join(cells) + " |")
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
    seed = "".join(f", seed {s}" for s in list(row.seed_selected)[:1])
    fig.suptitle(f"{row.label}, fold {fold}{seed} ({row.selected[fold]})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _protocol_text(cv: CVConfig, seeded: bool) -> str:
    """The report's first paragraph: data, selection, seeds, marks and tests."""
    against = "the best" if cv.reference is None else (
        f"the reference `{cv.reference}` (_italic_; with several matching methods the best "
        f"of them in the column)")
    seeds = ""
    if seeded:
        seeds = (f" Seeds {', '.join(map(str, cv.seeds))}: each seed selects its own grid "
                 f"points; a method's value of a query is its mean over the seeds, and the "
                 f"means and tests below are over those per-query means (tree methods whose "
                 f"seed does nothing ran once).")
    return (f"Data `{cv.data}`, folds {', '.join(map(str, cv.folds))}; test metrics over "
            f"queries pooled across folds (no-relevant rule `{cv.no_relevant}`). Per fold the "
            f"grid point with the best validation {SELECTION_METRIC} is used.{seeds} "
            f"**Bold**: best per column; `*`: Wilcoxon signed-rank p < {SIGNIFICANCE_LEVEL} "
            f"against {against}; `†`: paired t-test p < {SIGNIFICANCE_LEVEL}.")


def write_report(cv: CVConfig, wall_seconds: Optional[float] = None,
                 command: Optional[str] = None) -> Dict[str, Any]:
    """The Markdown table, the CSV and the curve PNGs from the finished runs."""
    rows = collect_rows(cv)
    if not rows:
        raise ValueError(f"no finished runs of these settings under {cv.resolved_output_dir} "
                         "(runs of other settings are not reported: train them first).")
    table = comparison_table(rows, reference=cv.reference)
    seeded = any(r.per_seed for r in rows)
    os.makedirs(cv.report_dir, exist_ok=True)
    csv_path = os.path.join(cv.report_dir, f"{cv.name}.csv")
    common.write_atomically(csv_path, lambda temp: table.to_csv(temp, index=False,
                                                                 float_format="%.6g"))
    curves_dir = os.path.join(cv.report_dir, f"{cv.name}_curves")
    os.makedirs(curves_dir, exist_ok=True)
    plots = {r.key: plot_curves(r, os.path.join(curves_dir, f"{r.key}.png")) for r in rows}

    rules = no_relevant_table(rows)
    lines = [f"# Cross-validated comparison: {cv.name}", "", _protocol_text(cv, seeded), ""]
    if command:
        lines += ["Regenerate:", "", "```", command, "```", ""]
    if wall_seconds is not None:
        lines += [f"Wall time of this invocation: {wall_seconds:.0f} s.", ""]
    lines += [markdown_table(table), ""]
    if seeded:
        lines += ["Across seeds: each seed's mean over its pooled test queries (its own "
                  "selected runs); mean ± sample standard deviation over the seeds, "
                  f"[min, max] for {SELECTION_METRIC}:", "", seeds_markdown(table), ""]
    lines += [f"{SELECTION_METRIC} under the three no-relevant rules, and on the queries "
              f"with at least 10 documents only:", "",
              "| Method | " + " | ".join(rules.columns) + " |",
              "|---|" + "---|" * len(rules.columns)]
    lines += [f"| {label} | " + " | ".join(f"{v:.4f}" for v in r) + " |"
              for label, r in rules.iterrows()]
    lines += ["", "Selected grid points and training time:", "",
              f"| Method | selected ({'seed/' if seeded else ''}fold:config) | train s |",
              "|---|---|---|"]
    lines += [f"| {r['label']} | {r['selected']} | {r['train_seconds']:.0f} |"
              for _, r in table.iterrows()]
    lines += ["", f"Curves (first fold{', first seed' if seeded else ''}):", ""]
    lines += [f"![{r.label}]({os.path.relpath(plots[r.key], cv.report_dir)})"
              for r in rows if plots[r.key]]
    md_path = os.path.join(cv.report_dir, f"{cv.name}_table.md")
    text = "\n".join(lines) + "\n"
    common.write_text(md_path, text)
    return {"table": table, "markdown": md_path, "csv": csv_path,
            "plots": [p for p in plots.values() if p]}
