"""Per-query evaluation of rankings, with an explicit no-relevant-document rule.

:func:`evaluate` turns per-document labels and scores (rows grouped by query,
as in :class:`tfr_extensions.data.LibSVMData`) into a per-query
:class:`pandas.DataFrame` (``qid``, ``num_docs``, ``has_relevant``, then one
column per metric such as ``ndcg@5``, ``map@10``, ``map_min@10``, ``nerr@10``,
``p@5``) and a summary of means. The metric values are the exact per-list
metrics of :mod:`tfr_extensions.metrics` (ties broken by document order, the
lower row first). Column names come from the vocabulary of
:mod:`tfr_extensions.ops.vocabulary`, and so does their meaning: ``map@k``
divides by all relevant documents R of the list (TF-Ranking, trec_eval),
``map_min@k`` by ``min(k, R)`` (LightGBM's ``map@k``). The summary's
``metric_definitions`` says, for each column prefix it holds, which
definition (and normalization) its numbers use.

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

A mean over no counted query (an empty set, or only lists without a relevant
document under ``"exclude"``) is NaN in a summary; :func:`json_summary` writes
it as ``None`` (JSON null), never as a bare ``NaN``. :func:`check_evaluable`
rejects such a set where a number is needed (the validation set that picks the
best epoch).

The per-query table is pandas' (the ``jobs`` extra installs it): :func:`evaluate` and
:func:`summarize` need pandas, and say so where it is not installed. The means alone
(:func:`evaluate_summary`, and :class:`BestEpochCallback`, which uses them) need
NumPy only.

>>> result = evaluate([0., 1., 2., 0., 0.], [3., 2., 1., 1., 0.], [0, 3, 5],
...                   topns=(3,), metrics=("ndcg",))
>>> round(result.summary["ndcg@3"], 4), result.summary["num_counted"]
(0.5869, 1)
"""
from __future__ import annotations

import dataclasses
import importlib
import weakref
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfr_extensions import backend
from tfr_extensions import metrics as tfrx_metrics
from tfr_extensions.backend import keras
from tfr_extensions.data.dense import bucket_width
from tfr_extensions.ops import conventions
from tfr_extensions.ops import validation
from tfr_extensions.ops import vocabulary

if TYPE_CHECKING:  # the per-query table's type; pandas is imported where a table is made
    import pandas as pd

#: what a list without a relevant document scores (:data:`tfr_extensions.metrics.NO_RELEVANT_RULES`)
NO_RELEVANT_RULES = tfrx_metrics.NO_RELEVANT_RULES
#: the cutoffs k of every metric@k that :func:`evaluate` reports by default
DEFAULT_TOPNS = (1, 3, 5, 10, 20, 50)
#: column prefix -> exact per-list metric, for every metric of the vocabulary
COLUMN_METRICS = {metric.column: tfrx_metrics.METRIC_FUNCTIONS[metric.name]
                  for metric in vocabulary.METRICS}
#: the columns :func:`evaluate` writes by default (``map_min`` on request)
DEFAULT_METRICS = ("ndcg", "map", "nerr", "p")


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """``per_query``: one row per query; ``summary``: means and the rule used."""

    per_query: pd.DataFrame
    summary: Dict[str, Any]


def _pandas(what: str):
    """pandas, or an ImportError saying that ``what`` needs it and how to install it."""
    try:
        return importlib.import_module("pandas")
    except ImportError as error:
        raise ImportError(
            f"{what} returns a pandas DataFrame, and pandas is not installed: "
            "pip install 'tfr_extensions[jobs]' (or evaluate_summary: the means alone, "
            "with NumPy).") from error


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


def column_prefixes(metrics: Sequence[str]) -> List[str]:
    """The column prefix of each metric name (any name of the vocabulary:
    ``"ap"`` and ``"map"`` give ``"map"``), with ``ValueError`` naming ``metrics``."""
    for metric in metrics:
        if metric not in vocabulary.METRIC_NAMES:
            raise ValueError(f"`metrics` entries must be in {list(vocabulary.METRIC_NAMES)}; "
                             f"got {metric!r}.")
    return [vocabulary.column_prefix(metric) for metric in metrics]


def evaluate(labels, scores, query_offsets, qids=None,
             topns: Sequence[int] = DEFAULT_TOPNS,
             metrics: Sequence[str] = DEFAULT_METRICS,
             no_relevant: str = "exclude") -> Evaluation:
    """Per-query metrics and their means.

    Args:
      labels: float ``[N]`` graded relevance, documents grouped by query.
      scores: float ``[N]``, the ranker's scores for the same rows.
      query_offsets: int ``[Q + 1]``; query q is rows ``offsets[q]:offsets[q+1]``.
      qids: optional ``[Q]`` query ids for the ``qid`` column (default 0..Q-1).
      topns: the cutoffs k.
      metrics: names of :mod:`~tfr_extensions.ops.vocabulary` (``ndcg``,
        ``map``, ``map_min``, ``nerr``, ``p``, or their aliases); each gives
        the columns ``<prefix>@<k>``.
      no_relevant: ``"exclude"``, ``"zero"`` or ``"one"`` (module docstring).

    Returns:
      An :class:`Evaluation`; ``summary`` holds ``no_relevant``,
      ``num_queries``, ``num_counted`` (queries in the means), each column's
      mean and ``metric_definitions`` (column prefix -> definition).

    Raises:
      ImportError: pandas is not installed (the ``jobs`` extra).
    """
    pandas = _pandas("tfr_extensions.evaluation.evaluate")
    columns, values, relevant, offsets = _metric_table(
        labels, scores, query_offsets, topns, metrics, no_relevant)
    frame = pandas.DataFrame(values, columns=columns)
    frame.insert(0, "has_relevant", relevant)
    frame.insert(0, "num_docs", np.diff(offsets))
    frame.insert(0, "qid", np.arange(offsets.size - 1) if qids is None else np.asarray(qids))
    return Evaluation(per_query=frame, summary=_summary(columns, values, no_relevant))


def evaluate_summary(labels, scores, query_offsets, topns: Sequence[int] = DEFAULT_TOPNS,
                     metrics: Sequence[str] = DEFAULT_METRICS,
                     no_relevant: str = "exclude") -> Dict[str, Any]:
    """The ``summary`` of :func:`evaluate` (the same numbers) without the per-query
    table, with NumPy alone.

    >>> summary = evaluate_summary([0., 1., 2., 0., 0.], [3., 2., 1., 1., 0.], [0, 3, 5],
    ...                            topns=(3,), metrics=("ndcg",))
    >>> round(summary["ndcg@3"], 4), summary["num_counted"]
    (0.5869, 1)
    """
    columns, values, _, _ = _metric_table(labels, scores, query_offsets, topns, metrics,
                                          no_relevant)
    return _summary(columns, values, no_relevant)


def _metric_table(labels, scores, query_offsets, topns, metrics, no_relevant):
    """``(columns, values float64 [Q, C], has_relevant bool [Q], offsets [Q + 1])`` of
    :func:`evaluate`, in NumPy."""
    validation.validate_choice(no_relevant, NO_RELEVANT_RULES, "no_relevant")
    metrics = list(dict.fromkeys(column_prefixes(metrics)))  # "ap" and "map": one column
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
        padded_labels = pad_lists(labels, offsets, queries, conventions.PADDING_LABEL)
        padded_scores = pad_lists(scores, offsets, queries, 0.0)
        relevant[queries] = tfrx_metrics.to_numpy(tfrx_metrics.has_relevant(padded_labels))
        for j, (metric, k) in enumerate((m, k) for m in metrics for k in topns):
            values[queries, j] = tfrx_metrics.to_numpy(
                COLUMN_METRICS[metric](padded_labels, padded_scores, topn=k))
    if no_relevant != "zero":
        values[~relevant] = np.nan if no_relevant == "exclude" else 1.0
    return columns, values, relevant, offsets


def summarize(per_query: pd.DataFrame, no_relevant: str) -> Dict[str, Any]:
    """Means of the metric columns (NaN = excluded), the rule that made them,
    and the definition of each column prefix (``metric_definitions``)."""
    metric_columns = [c for c in per_query.columns if "@" in c]
    return _summary(metric_columns, per_query[metric_columns].to_numpy(np.float64),
                    no_relevant)


def _summary(columns: Sequence[str], values: np.ndarray, no_relevant: str) -> Dict[str, Any]:
    """:func:`summarize` of the metric columns ``columns`` (``values`` float64 ``[Q, C]``,
    NaN = excluded): each mean over its non-NaN values, as pandas' ``mean``."""
    excluded = np.isnan(values)
    counts = (~excluded).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):  # no value counted: NaN
        means = np.where(excluded, 0.0, values).sum(axis=0) / counts
    summary = {"no_relevant": no_relevant, "num_queries": int(values.shape[0]),
               "num_counted": int((~excluded).all(axis=1).sum())}
    summary.update({c: float(mean) for c, mean in zip(columns, means)})
    prefixes = dict.fromkeys(c.partition("@")[0] for c in columns)
    summary["metric_definitions"] = {
        prefix: vocabulary.definition(vocabulary.metric_of_column(prefix)) for prefix in prefixes}
    return summary


def json_metric(value: Any) -> Any:
    """``value`` for strict JSON: a non-finite float (a mean over no query) as None."""
    if isinstance(value, (float, np.floating)) and not np.isfinite(value):
        return None
    return value


def json_summary(summary: Dict[str, Any]) -> Dict[str, Any]:
    """A :func:`summarize` result for strict JSON: NaN means (no query counted) become
    None (JSON null); counts, the rule and the definitions are unchanged."""
    return {key: json_metric(value) for key, value in summary.items()}


def num_countable_queries(data, no_relevant: str = "exclude") -> int:
    """How many queries of ``data`` (a ``LibSVMData``) a mean under ``no_relevant``
    counts: all of them, or under ``"exclude"`` those with a document of label > 0."""
    validation.validate_choice(no_relevant, NO_RELEVANT_RULES, "no_relevant")
    offsets = np.asarray(data.query_offsets, np.int64)
    if no_relevant != "exclude":
        return int(offsets.size - 1)
    relevant = np.concatenate([[0], np.cumsum(np.asarray(data.labels) > 0)])
    return int(np.count_nonzero(relevant[offsets[1:]] > relevant[offsets[:-1]]))


def check_evaluable(data, no_relevant: str = "exclude", what: str = "validation") -> None:
    """Raises a ValueError naming ``what`` when no mean over ``data`` can be computed:
    no query, or under ``"exclude"`` no query with a relevant document."""
    num_queries = int(np.asarray(data.query_offsets).size - 1)
    if num_queries == 0:
        raise ValueError(f"The {what} set has no query: its metrics cannot be computed.")
    if num_countable_queries(data, no_relevant) == 0:
        raise ValueError(
            f"The {what} set has no query with a relevant document (label > 0) among its "
            f"{num_queries}: under no_relevant='exclude' its metrics cannot be computed. Use "
            "a set with relevant documents, or no_relevant 'zero' or 'one'.")


def predict_scores(model: keras.Model, data, max_docs_per_batch: int = 1 << 16,
                   max_queries_per_batch: int = 512) -> np.ndarray:
    """Scores of every row of ``data`` (a ``LibSVMData``), ``float32 [N]``.

    Queries are scored whole, grouped by similar length so that a batch holds
    at most ``max_docs_per_batch`` padded documents (a single longer query is
    a batch of its own). The model gets raw features and the mask; its own
    normalization layer does the rest. On TensorFlow each batch runs through one
    cached ``tf.function``; on JAX and PyTorch through Keras's ``predict_on_batch``
    (compiled on JAX), with each batch padded to
    :func:`~tfr_extensions.data.dense.bucket_width` of its longest list (two sizes
    per doubling) so that few shapes compile.
    """
    offsets = _validate_offsets(data.query_offsets, len(data.labels))
    features = np.asarray(data.features, np.float32)
    scores = np.zeros(len(data.labels), np.float32)

    score = _scoring_function(model, features.shape[1])
    for queries in _length_batches(offsets, max_docs_per_batch, max_queries_per_batch):
        sizes = offsets[queries + 1] - offsets[queries]
        batch = score(pad_lists(features, offsets, queries, 0.0), sizes)
        for row, (q, size) in enumerate(zip(queries, sizes)):
            scores[offsets[q]:offsets[q] + size] = batch[row, :size]
    return scores


_SCORING_FUNCTIONS = weakref.WeakKeyDictionary()


def _scoring_function(model: keras.Model, num_features: int):
    """A cached ``(padded features [B, L, F], list lengths [B]) -> float32 scores [B, L]``
    NumPy function: a ``tf.function`` on TensorFlow, ``predict_on_batch`` elsewhere."""
    functions = _SCORING_FUNCTIONS.setdefault(model, {})
    if num_features in functions:
        return functions[num_features]
    if backend.uses_tensorflow_ops():
        tf = backend.tensorflow()

        @tf.function(input_signature=[tf.TensorSpec([None, None, num_features], tf.float32),
                                      tf.TensorSpec([None], tf.int32)])
        def graph_score(batch_features, lengths):
            mask = tf.sequence_mask(lengths, tf.shape(batch_features)[1])
            return tf.cast(model({"features": batch_features, "mask": mask}, training=False),
                           tf.float32)

        def score(batch_features, lengths):
            return graph_score(tf.constant(batch_features),
                               tf.constant(lengths, tf.int32)).numpy()
    else:
        def score(batch_features, lengths):
            rows, width = batch_features.shape[:2]
            padded = bucket_width(width)
            # under a distribution the rows split over the devices: pad with empty lists
            extra = -rows % _devices_per_batch()
            batch_features = np.pad(batch_features, [(0, extra), (0, padded - width), (0, 0)])
            lengths = np.concatenate([np.asarray(lengths), np.zeros(extra, np.int64)])
            mask = np.arange(padded)[None, :] < lengths[:, None]
            out = model.predict_on_batch({"features": batch_features, "mask": mask})
            return local_numpy(out).astype(np.float32)[:rows, :width]
    functions[num_features] = score
    return score


def _devices_per_batch() -> int:
    """How many parts Keras's distribution (if any) splits a batch into in this process."""
    distribution = getattr(keras, "distribution", None)
    active = distribution.distribution() if distribution is not None else None
    if active is None:
        return 1
    import jax  # pylint: disable=import-outside-toplevel  (distributions are JAX's)
    return jax.local_device_count()


def local_numpy(values) -> np.ndarray:
    """A backend tensor as NumPy; in a run of several JAX processes, this process's part
    of a global array: its addressable shards along the first axis, in order (a
    replicated array: its local copy)."""
    if getattr(values, "is_fully_addressable", True):
        return np.asarray(keras.ops.convert_to_numpy(values))
    shards = {}
    for shard in values.addressable_shards:
        start = shard.index[0].start if shard.index else None
        shards.setdefault(start or 0, np.asarray(shard.data))
    return np.concatenate([shards[k] for k in sorted(shards)]) if len(shards) > 1 \
        else next(iter(shards.values()))


def evaluate_model(model: keras.Model, data, no_relevant: str = "exclude",
                   topns: Sequence[int] = DEFAULT_TOPNS,
                   metrics: Sequence[str] = DEFAULT_METRICS,
                   max_docs_per_batch: int = 1 << 16) -> Evaluation:
    """:func:`predict_scores` then :func:`evaluate` on a ``LibSVMData``."""
    scores = predict_scores(model, data, max_docs_per_batch=max_docs_per_batch)
    return evaluate(data.labels, scores, data.query_offsets, qids=data.query_ids,
                    topns=topns, metrics=metrics, no_relevant=no_relevant)


def parse_metric(metric: str) -> Tuple[str, int]:
    """``"ndcg@5"`` -> ``("ndcg", 5)``: the column prefix and the cutoff, for
    any name of the vocabulary (``"ap@10"`` -> ``("map", 10)``, the column
    ``map@10``); ValueError naming ``metric`` otherwise."""
    name, _, topn = str(metric).partition("@")
    if name not in vocabulary.METRIC_NAMES or not topn.isdigit() or int(topn) < 1:
        raise ValueError(f"`metric` must look like 'ndcg@5' with a name in "
                         f"{list(vocabulary.METRIC_NAMES)}; got {metric!r}.")
    return vocabulary.column_prefix(name), int(topn)


class BestEpochCallback(keras.callbacks.Callback):
    """Evaluates a validation ``LibSVMData`` after each epoch; keeps the best weights.

    The metric (e.g. ``"ndcg@5"``) is the exact per-query mean of
    :func:`evaluate_model` under ``no_relevant``; it is added to the epoch's
    logs as ``log_key`` (default ``val_<name>_<k>``, e.g. ``val_ndcg_5``:
    TensorBoard tags cannot hold ``@``), so TensorBoard and the history see it
    (put this callback before ``TensorBoard``), and kept per epoch in
    ``values`` (a curve on other data, e.g. the test set: ``pipelines.callbacks.CurveLogger``).
    ``scorer`` is the model evaluated and restored when it is not the model being
    fit (one player of an adversarial model). At the end of training the weights
    of the best epoch (first of equals) are restored. A validation set whose
    metric cannot be computed (:func:`check_evaluable`) is a ValueError.

    Resuming: :meth:`state` returns the callback's state as a ``tf.Module`` of
    variables (written after every epoch). Put it into a checkpoint that is
    restored before or at the start of ``fit`` (``pipelines.resume.TrainingBackup``
    restores before ``fit``); the callback reads it back at the first epoch begin or
    at the train end that follows, so a resumed run keeps the values and the
    best epoch (with its weights) of the epochs before the interruption. Put
    this callback before the one that writes the checkpoint at epoch end.
    """

    def __init__(self, data, metric: str = "ndcg@5", no_relevant: str = "exclude", *,
                 scorer: Optional[keras.Model] = None,
                 log_key: Optional[str] = None):
        super().__init__()
        name, topn = parse_metric(metric)
        check_evaluable(data, no_relevant, what="validation")
        self.data, self.metric, self.no_relevant = data, metric, no_relevant
        self._name, self._topn = name, int(topn)
        self._scorer = scorer
        self.log_key = log_key or f"val_{name}_{int(topn)}"
        self.values: List[float] = []
        self.best_value, self.best_epoch, self._best_weights = -np.inf, None, None
        self._state = None  # a BestEpochState once state() is asked for
        self._state_read = True

    @property
    def scorer(self) -> keras.Model:
        return self._scorer if self._scorer is not None else self.model

    def state(self, capacity: Optional[int] = None):
        """The state's variables, a ``tf.Module`` for a TensorFlow checkpoint
        (:class:`tfr_extensions.evaluation_state.BestEpochState`; created on the first
        call, with the current values), for at most ``capacity`` epochs (default:
        ``fit``'s ``epochs``). Elsewhere :meth:`snapshot` and :meth:`load_snapshot`."""
        from tfr_extensions.evaluation_state import BestEpochState  # pylint: disable=import-outside-toplevel
        if self._state is None:
            capacity = capacity or (getattr(self, "params", None) or {}).get("epochs")
            if not capacity:
                raise ValueError("`capacity` must be given outside `fit` (no `epochs` param).")
            if len(self.values) > capacity:
                raise ValueError(f"`capacity` ({capacity}) must hold the {len(self.values)} "
                                 "epochs recorded already.")
            weights = self._best_weights or self.scorer.get_weights()
            self._state = BestEpochState(weights, capacity)
            self._write_state(weights_changed=True)
            self._state_read = False
        return self._state

    def _write_state(self, weights_changed: bool) -> None:
        state = self._state
        count = len(self.values)
        if count > state.capacity:
            raise ValueError(f"BestEpochCallback's state holds {state.capacity} epochs; "
                             f"epoch {count} does not fit.")
        padding = [np.nan] * (state.capacity - count)
        state.num_epochs.assign(count)
        state.values.assign(np.asarray(self.values + padding, np.float64))
        state.best_epoch.assign(self.best_epoch or 0)
        state.best_value.assign(self.best_value)
        if weights_changed and self._best_weights is not None:
            for variable, value in zip(state.best_weights, self._best_weights):
                variable.assign(value)

    def _read_state(self) -> None:
        """The callback's attributes from its state (possibly just restored)."""
        if self._state is None or self._state_read:
            return
        state, self._state_read = self._state, True
        count = int(state.num_epochs.numpy())
        self.values = [float(v) for v in state.values.numpy()[:count]]
        self.best_epoch = int(state.best_epoch.numpy()) or None
        self.best_value = float(state.best_value.numpy())
        self._best_weights = ([v.numpy() for v in state.best_weights]
                              if self.best_epoch is not None else None)

    def snapshot(self) -> Dict[str, Any]:
        """The callback's state as plain values, for a checkpoint of any backend: the
        epochs' ``values``, ``best_epoch`` (0: none yet), ``best_value`` and
        ``best_weights`` (the scorer's weights of the best epoch, NumPy arrays)."""
        self._read_state()
        return {"values": np.asarray(self.values, np.float64),
                "best_epoch": int(self.best_epoch or 0), "best_value": float(self.best_value),
                "best_weights": [np.asarray(w) for w in (self._best_weights or [])]}

    def load_snapshot(self, snapshot: Dict[str, Any]) -> None:
        """The state :meth:`snapshot` returned (a resumed run restores it before ``fit``)."""
        self.values = [float(v) for v in np.asarray(snapshot["values"]).reshape(-1)]
        self.best_epoch = int(snapshot["best_epoch"]) or None
        self.best_value = float(snapshot["best_value"])
        weights = list(snapshot["best_weights"])
        self._best_weights = weights if self.best_epoch is not None and weights else None
        if self._state is not None:
            self._write_state(weights_changed=True)

    def _evaluate(self, data) -> float:
        scores = predict_scores(self.scorer, data)
        summary = evaluate_summary(data.labels, scores, data.query_offsets,
                                   topns=(self._topn,), metrics=(self._name,),
                                   no_relevant=self.no_relevant)
        return float(summary[f"{self._name}@{self._topn}"])

    def on_train_begin(self, logs=None):
        self._state_read = self._state is None

    def on_epoch_begin(self, epoch, logs=None):
        self._read_state()

    def on_epoch_end(self, epoch, logs=None):
        self._read_state()
        value = self._evaluate(self.data)
        self.values.append(value)
        if logs is not None:
            logs[self.log_key] = value
        improved = value > self.best_value
        if improved:
            self.best_value, self.best_epoch = value, epoch + 1
            self._best_weights = self.scorer.get_weights()
        if self._state is not None:
            self._write_state(weights_changed=improved)

    def on_train_end(self, logs=None):
        self._read_state()
        if self._best_weights is not None:
            self.scorer.set_weights(self._best_weights)

#: the public names, in the order a user meets them (the API reference documents these)
__all__ = [
    "evaluate",
    "evaluate_summary",
    "evaluate_model",
    "predict_scores",
    "Evaluation",
    "BestEpochCallback",
    "parse_metric",
    "check_evaluable",
    "DEFAULT_TOPNS",
    "DEFAULT_METRICS",
    "NO_RELEVANT_RULES",
]
