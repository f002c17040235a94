"""Per-query evaluation of rankings, with an explicit no-relevant-document rule.

:func:`evaluate` turns per-document labels and scores (rows grouped by query,
as in :class:`tfr_extensions.data.LibSVMData`) into a per-query
:class:`pandas.DataFrame` (``qid``, ``num_docs``, ``has_relevant``, then one
column per metric such as ``ndcg@5``, ``map@10``, ``nerr@10``, ``p@5``) and a
summary of means. The metric values are the exact per-list metrics of
:mod:`tfr_extensions.metrics` (ties broken by document order, the lower row
first).

Lists without a relevant document have no meaningful nDCG/AP/nERR/P; the field
disagrees on them, so ``no_relevant`` says which rule a number uses and the
summary records it:

* ``"exclude"`` (default; PT-Ranking): their metric values are NaN and the means
  are over queries with a relevant document only.
* ``"zero"``: they count 0 (TF-Ranking's and Rax's Keras metrics).
* ``"one"``: they count 1 (LightGBM's and XGBoost's ``ndcg@k``).

:func:`predict_scores` scores a dataset with a Keras scorer by groups of whole
queries (lists of thousands of documents included), and :func:`evaluate_model`
chains the two.

>>> result = evaluate([0., 1., 2., 0., 0.], [3., 2., 1., 1., 0.], [0, 3, 5],
...                   topns=(3,), metrics=("ndcg",))
>>> round(result.summary["ndcg@3"], 4), result.summary["num_counted"]
(0.5869, 1)
"""
import dataclasses
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import tensorflow as tf

from tfr_extensions import metrics as tfrx_metrics

NO_RELEVANT_RULES = ("exclude", "zero", "one")
DEFAULT_TOPNS = (1, 3, 5, 10, 20, 50)
#: column prefix -> exact per-list metric
METRICS = {
    "ndcg": tfrx_metrics.ndcg,
    "map": tfrx_metrics.average_precision,
    "nerr": tfrx_metrics.nerr,
    "p": tfrx_metrics.precision,
}
# Padding label of the padded [queries, max_list] arrays (TF-Ranking's rule).
_PADDED_LABEL = -1.0


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """``per_query``: one row per query; ``summary``: means and the rule used."""

    per_query: pd.DataFrame
    summary: Dict[str, Any]


def _validate_offsets(query_offsets, num_docs: int) -> np.ndarray:
    offsets = np.asarray(query_offsets, dtype=np.int64)
    if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != num_docs \
            or np.any(np.diff(offsets) < 0):
        raise ValueError("`query_offsets` must be non-decreasing from 0 to the number of "
                         f"documents ({num_docs}); got {offsets[:5]}... of length {offsets.size}.")
    return offsets


def pad_lists(values: np.ndarray, query_offsets: np.ndarray, queries: np.ndarray,
              pad_value: float) -> np.ndarray:
    """Rows ``queries`` of a grouped ``[N, ...]`` array as ``[len(queries), L, ...]``."""
    sizes = query_offsets[queries + 1] - query_offsets[queries]
    width = int(sizes.max()) if sizes.size else 0
    out = np.full((len(queries), width) + values.shape[1:], pad_value, dtype=values.dtype)
    for row, (q, size) in enumerate(zip(queries, sizes)):
        out[row, :size] = values[query_offsets[q]:query_offsets[q] + size]
    return out


def _length_batches(query_offsets: np.ndarray, max_docs: int, max_queries: int):
    """Query index groups of similar length with ``len * max_len <= max_docs``."""
    sizes = np.diff(query_offsets)
    order = np.argsort(sizes, kind="stable")
    batch = []
    for q in order:
        if batch and (len(batch) >= max_queries
                      or (len(batch) + 1) * max(int(sizes[q]), 1) > max_docs):
            yield np.asarray(batch)
            batch = []
        batch.append(q)
    if batch:
        yield np.asarray(batch)


def evaluate(labels, scores, query_offsets, qids=None,
             topns: Sequence[int] = DEFAULT_TOPNS,
             metrics: Sequence[str] = tuple(METRICS),
             no_relevant: str = "exclude") -> Evaluation:
    """Per-query metrics and their means.

    Args:
      labels: float ``[N]`` graded relevance, documents grouped by query.
      scores: float ``[N]``, the ranker's scores for the same rows.
      query_offsets: int ``[Q + 1]``; query q is rows ``offsets[q]:offsets[q+1]``.
      qids: optional ``[Q]`` query ids for the ``qid`` column (default 0..Q-1).
      topns: the cutoffs k.
      metrics: any of ``ndcg``, ``map``, ``nerr``, ``p``.
      no_relevant: ``"exclude"``, ``"zero"`` or ``"one"`` (module docstring).

    Returns:
      An :class:`Evaluation`; ``summary`` holds ``no_relevant``,
      ``num_queries``, ``num_counted`` (queries in the means) and each column's mean.
    """
    if no_relevant not in NO_RELEVANT_RULES:
        raise ValueError(f"`no_relevant` must be one of {list(NO_RELEVANT_RULES)}; "
                         f"got {no_relevant!r}.")
    for metric in metrics:
        if metric not in METRICS:
            raise ValueError(f"`metrics` entries must be in {list(METRICS)}; got {metric!r}.")
    labels = np.asarray(labels, np.float32).reshape(-1)
    scores = np.asarray(scores, np.float32).reshape(-1)
    if labels.shape != scores.shape:
        raise ValueError(f"`labels` and `scores` must have the same length; got "
                         f"{labels.shape} and {scores.shape}.")
    offsets = _validate_offsets(query_offsets, labels.size)
    num_queries = offsets.size - 1
    columns = [f"{metric}@{k}" for metric in metrics for k in topns]
    values = np.zeros((num_queries, len(columns)), np.float64)
    relevant = np.zeros(num_queries, bool)
    for queries in _length_batches(offsets, max_docs=1 << 20, max_queries=4096):
        padded_labels = tf.constant(pad_lists(labels, offsets, queries, _PADDED_LABEL))
        padded_scores = tf.constant(pad_lists(scores, offsets, queries, 0.0))
        relevant[queries] = tfrx_metrics.has_relevant(padded_labels).numpy()
        for j, (metric, k) in enumerate((m, k) for m in metrics for k in topns):
            values[queries, j] = METRICS[metric](padded_labels, padded_scores, topn=k).numpy()
    if no_relevant != "zero":
        values[~relevant] = np.nan if no_relevant == "exclude" else 1.0
    frame = pd.DataFrame(values, columns=columns)
    frame.insert(0, "has_relevant", relevant)
    frame.insert(0, "num_docs", np.diff(offsets))
    frame.insert(0, "qid", np.arange(num_queries) if qids is None else np.asarray(qids))
    return Evaluation(per_query=frame, summary=summarize(frame, no_relevant))


def summarize(per_query: pd.DataFrame, no_relevant: str) -> Dict[str, Any]:
    """Means of the metric columns (NaN = excluded) and the rule that made them."""
    metric_columns = [c for c in per_query.columns if "@" in c]
    counted = per_query[metric_columns].notna().all(axis=1)
    summary = {"no_relevant": no_relevant, "num_queries": int(len(per_query)),
               "num_counted": int(counted.sum())}
    summary.update({c: float(per_query[c].mean()) for c in metric_columns})
    return summary


def predict_scores(model: tf.keras.Model, data, max_docs_per_batch: int = 1 << 16,
                   max_queries_per_batch: int = 512) -> np.ndarray:
    """Scores of every row of ``data`` (a ``LibSVMData``), ``float32 [N]``.

    Queries are scored whole, grouped by similar length so that a batch holds
    at most ``max_docs_per_batch`` padded documents (a single longer query is
    a batch of its own). The model gets raw features and the mask; its own
    normalization layer does the rest.
    """
    offsets = _validate_offsets(data.query_offsets, len(data.labels))
    features = np.asarray(data.features, np.float32)
    scores = np.zeros(len(data.labels), np.float32)

    score = _scoring_function(model, features.shape[1])
    for queries in _length_batches(offsets, max_docs_per_batch, max_queries_per_batch):
        sizes = offsets[queries + 1] - offsets[queries]
        batch = score(tf.constant(pad_lists(features, offsets, queries, 0.0)),
                      tf.constant(sizes, tf.int32)).numpy()
        for row, (q, size) in enumerate(zip(queries, sizes)):
            scores[offsets[q]:offsets[q] + size] = batch[row, :size]
    return scores


_SCORING_FUNCTIONS = weakref.WeakKeyDictionary()


def _scoring_function(model: tf.keras.Model, num_features: int):
    """A cached ``tf.function`` (padded features, list lengths) -> float32 scores."""
    functions = _SCORING_FUNCTIONS.setdefault(model, {})
    if num_features not in functions:
        @tf.function(input_signature=[tf.TensorSpec([None, None, num_features], tf.float32),
                                      tf.TensorSpec([None], tf.int32)])
        def score(batch_features, lengths):
            mask = tf.sequence_mask(lengths, tf.shape(batch_features)[1])
            return tf.cast(model({"features": batch_features, "mask": mask}, training=False),
                           tf.float32)
        functions[num_features] = score
    return functions[num_features]


def evaluate_model(model: tf.keras.Model, data, no_relevant: str = "exclude",
                   topns: Sequence[int] = DEFAULT_TOPNS,
                   metrics: Sequence[str] = tuple(METRICS),
                   max_docs_per_batch: int = 1 << 16) -> Evaluation:
    """:func:`predict_scores` then :func:`evaluate` on a ``LibSVMData``."""
    scores = predict_scores(model, data, max_docs_per_batch=max_docs_per_batch)
    return evaluate(data.labels, scores, data.query_offsets, qids=query_ids(data),
                    topns=topns, metrics=metrics, no_relevant=no_relevant)


def query_ids(data) -> Optional[np.ndarray]:
    """One id per query (the qid of its first row), or None."""
    qids = getattr(data, "qids", None)
    if qids is None:
        return None
    qids = np.asarray(qids)
    offsets = np.asarray(data.query_offsets)
    return qids[offsets[:-1]] if qids.shape[0] == len(data.labels) else qids


def parse_metric(metric: str) -> Tuple[str, int]:
    """``"ndcg@5"`` -> ``("ndcg", 5)``; ValueError naming ``metric`` otherwise."""
    name, _, topn = str(metric).partition("@")
    if name not in METRICS or not topn.isdigit() or int(topn) < 1:
        raise ValueError(f"`metric` must look like 'ndcg@5' with a name in {list(METRICS)}; "
                         f"got {metric!r}.")
    return name, int(topn)


class BestEpochCallback(tf.keras.callbacks.Callback):
    """Evaluates a validation ``LibSVMData`` after each epoch; keeps the best weights.

    The metric (e.g. ``"ndcg@5"``) is the exact per-query mean of
    :func:`evaluate_model` under ``no_relevant``; it is added to the epoch's
    logs as ``log_key`` (default ``val_<name>_<k>``, e.g. ``val_ndcg_5``:
    TensorBoard tags cannot hold ``@``), so TensorBoard and the history see it
    (put this callback before ``TensorBoard``), and kept per epoch in
    ``values``. ``curve_data`` (name -> ``LibSVMData``) is evaluated with the
    same metric after each epoch too, into ``curves[name]`` (e.g. a test curve).
    ``scorer`` is the model evaluated and restored when it is not the model being
    fit (one player of an adversarial model). At the end of training the weights
    of the best epoch (first of equals) are restored.
    """

    def __init__(self, data, metric: str = "ndcg@5", no_relevant: str = "exclude", *,
                 scorer: Optional[tf.keras.Model] = None,
                 curve_data: Optional[Dict[str, Any]] = None,
                 log_key: Optional[str] = None):
        super().__init__()
        name, topn = parse_metric(metric)
        if no_relevant not in NO_RELEVANT_RULES:
            raise ValueError(f"`no_relevant` must be one of {list(NO_RELEVANT_RULES)}; "
                             f"got {no_relevant!r}.")
        self.data, self.metric, self.no_relevant = data, metric, no_relevant
        self._name, self._topn = name, int(topn)
        self._scorer = scorer
        self._curve_data = dict(curve_data or {})
        self.log_key = log_key or f"val_{name}_{int(topn)}"
        self.values: List[float] = []
        self.curves: Dict[str, List[float]] = {part: [] for part in self._curve_data}
        self.best_value, self.best_epoch, self._best_weights = -np.inf, None, None

    @property
    def scorer(self) -> tf.keras.Model:
        return self._scorer if self._scorer is not None else self.model

    def _evaluate(self, data) -> float:
        result = evaluate_model(self.scorer, data, no_relevant=self.no_relevant,
                                topns=(self._topn,), metrics=(self._name,))
        return float(result.summary[self.metric])

    def on_epoch_end(self, epoch, logs=None):
        value = self._evaluate(self.data)
        self.values.append(value)
        for part, data in self._curve_data.items():
            self.curves[part].append(self._evaluate(data))
        if logs is not None:
            logs[self.log_key] = value
        if value > self.best_value:
            self.best_value, self.best_epoch = value, epoch + 1
            self._best_weights = self.scorer.get_weights()

    def on_train_end(self, logs=None):
        if self._best_weights is not None:
            self.scorer.set_weights(self._best_weights)
