"""The one table of rank metric names: ops, metrics, losses and evaluation columns.

Every place that takes a metric name (:mod:`tfr_extensions.ops.rank_metrics`,
:func:`tfr_extensions.metrics.RankingMetric`, the losses' ``metric``, the columns of
:mod:`tfr_extensions.evaluation`) accepts every name of :data:`METRICS`, canonical or alias,
for the metric its ``definition`` states. MAP@k: ``map`` (``ap``) divides by all R relevant
documents (TF-Ranking, trec_eval's ``map_cut``, the twin-sigmoid paper's Eq. 14), ``map_min``
(``ap_min``) by ``min(k, R)`` (LightGBM's and Kaggle's ``map@k``; LightGBM's relevance
``label > 0.5`` is ``label > 0`` for integer labels). A column is ``<column>@<k>``: ``map@10``.

>>> canonical_metric("map"), column_prefix("precision")
('ap', 'p')
>>> canonical_metric("mrr")
Traceback (most recent call last):
...
ValueError: `metric` must be one of ['ndcg', 'ap', 'map', 'average_precision', 'ap_min', 'map_min', 'precision', 'p', 'nerr']; got 'mrr'.
"""
import dataclasses
from typing import Annotated, Dict, Tuple

from tfr_extensions.ops.validation import Check


@dataclasses.dataclass(frozen=True)
class MetricName:
    """One metric: its canonical name, aliases, column prefix and definition."""

    name: str
    aliases: Tuple[str, ...]
    column: str
    definition: str


METRICS: Tuple[MetricName, ...] = (
    MetricName("ndcg", (), "ndcg",
               "nDCG@k: DCG@k (gain 2^y - 1, discount 1/log2(1 + rank)) over the ideal DCG@k"),
    MetricName("ap", ("map", "average_precision"), "map",
               "AP@k over R, all relevant documents (label > 0) of the list "
               "(TF-Ranking, trec_eval)"),
    MetricName("ap_min", ("map_min",), "map_min",
               "AP@k over min(k, R), R the relevant documents (label > 0) of the list "
               "(LightGBM's map@k)"),
    MetricName("precision", ("p",), "p",
               "Precision@k: relevant documents (label > 0) in the top k over min(k, n)"),
    MetricName("nerr", (), "nerr",
               "nERR@k: ERR@k with R = (2^y - 1) / 2^{max y} over the ideal ERR@k"),
)

#: The metrics of the twin-sigmoid paper (Eq. 13-16), named as its loss presets are.
PAPER_METRICS = ("precision", "ap", "ndcg", "nerr")
#: The twin-sigmoid gradients of the paper: Eq. 11 (type1), 20 (type2) and 21 (type3).
GRADIENT_TYPES = ("type1", "type2", "type3")

_BY_NAME: Dict[str, MetricName] = {
    alias: metric for metric in METRICS for alias in (metric.name,) + metric.aliases}
_BY_COLUMN: Dict[str, MetricName] = {metric.column: metric for metric in METRICS}

#: every accepted name, canonical ones first within each metric
METRIC_NAMES: Tuple[str, ...] = tuple(_BY_NAME)
#: the canonical names
CANONICAL_METRICS: Tuple[str, ...] = tuple(metric.name for metric in METRICS)


def canonical_metric(name: str, arg: str = "metric") -> str:
    """The canonical name of ``name`` (any name of the table), else ``ValueError``."""
    if not isinstance(name, str) or name not in _BY_NAME:
        raise ValueError(f"`{arg}` must be one of {list(METRIC_NAMES)}; got {name!r}.")
    return _BY_NAME[name].name


def metric_of_column(prefix: str) -> str:
    """The canonical metric of a column prefix or any accepted name (``"map"`` -> ``"ap"``)."""
    metric = _BY_COLUMN.get(prefix) or _BY_NAME.get(prefix)
    if metric is None:
        raise ValueError(f"Unknown metric {prefix!r}: use one of {list(METRIC_NAMES)}.")
    return metric.name


def column_prefix(name: str) -> str:
    """The evaluation column prefix of a metric (``"ap"`` -> ``"map"``)."""
    return _BY_NAME[canonical_metric(name)].column


def definition(name: str) -> str:
    """The one-line definition of a metric, normalization included."""
    return _BY_NAME[canonical_metric(name)].definition


#: a loss option naming a metric (any name of the table, canonicalized)
Metric = Annotated[str, Check(canonical_metric, f"one of {list(METRIC_NAMES)}", "mrr")]
