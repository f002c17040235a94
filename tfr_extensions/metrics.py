r"""Exact ranking metrics, per list, and their Keras metric wrappers.

The functions ``ndcg``, ``average_precision``, ``precision`` and ``nerr`` sort
each list by score (ties go to the lower index, padded documents last) and
apply the formulas of :mod:`tfr_extensions.ops.rank_metrics` to those integer
ranks, so the exact metrics and the twin-sigmoid losses share one definition:

* nDCG@k: gain ``2^y - 1``, discount ``1/log2(1 + rank)``, over the ideal DCG@k.
* AP@k: relevance ``label > 0``; normalized by all relevant documents of the
  list (TF-Ranking's ``MeanAveragePrecisionMetric`` convention), or with
  :func:`average_precision_min` by ``min(k, R)`` (LightGBM's ``map@k``).
* Precision@k: relevant documents in the top k over ``min(k, #valid)``
  (TF-Ranking's ``PrecisionMetric`` convention).
* nERR@k: Chapelle et al.'s ERR with ``R = (2^y - 1) / 2^{max y}`` (the list's
  maximum label, Eq. 16 of the twin-sigmoid paper) over the ideal ERR@k.

Metric names are those of :mod:`tfr_extensions.ops.vocabulary` (``"ap"``
and ``"map"`` alike). A list without relevant documents scores 0 here; :func:`has_relevant` tells
which lists those are, so an evaluation can exclude them or count them as 1
(``tfrx`` pipelines make that choice explicit).

>>> labels = tf.constant([[0., 1., 2.]])
>>> scores = tf.constant([[3., 2., 1.]])
>>> round(float(ndcg(labels, scores)[0]), 4)  # (1/log2(3) + 3/2) / (3 + 1/log2(3))
0.5869
"""
from typing import Optional

import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import rank_metrics
from tfr_extensions.ops import sorting
from tfr_extensions.ops import validation
from tfr_extensions.ops import vocabulary


def _exact(metric_fn, labels, scores, topn, mask):
    topn = validation.validate_topn(topn)
    labels, scores, valid = lists.prepare_lists(labels, scores, mask)
    positions = sorting.exact_ranks(scores, valid)
    return metric_fn(labels, tf.cast(positions, scores.dtype), valid, topn, positions)


def ndcg(labels, scores, topn: Optional[int] = None, mask=None) -> tf.Tensor:
    """Exact nDCG@topn per list, ``[B]``."""
    return _exact(rank_metrics.ndcg, labels, scores, topn, mask)


def average_precision(labels, scores, topn: Optional[int] = None, mask=None) -> tf.Tensor:
    """Exact AP@topn per list, ``[B]`` (MAP is its mean over lists)."""
    return _exact(rank_metrics.average_precision, labels, scores, topn, mask)


def average_precision_min(labels, scores, topn: Optional[int] = None, mask=None) -> tf.Tensor:
    """Exact AP@topn over ``min(topn, R)`` per list, ``[B]`` (LightGBM's ``map@k``)."""
    return _exact(rank_metrics.average_precision_min, labels, scores, topn, mask)


def precision(labels, scores, topn: Optional[int] = None, mask=None) -> tf.Tensor:
    """Exact Precision@topn per list, ``[B]``."""
    return _exact(rank_metrics.precision, labels, scores, topn, mask)


def nerr(labels, scores, topn: Optional[int] = None, mask=None) -> tf.Tensor:
    """Exact nERR@topn per list, ``[B]``."""
    return _exact(rank_metrics.nerr, labels, scores, topn, mask)


def has_relevant(labels, mask=None) -> tf.Tensor:
    """Bool ``[B]``: the list has a valid document with label > 0."""
    labels, _, valid = lists.prepare_lists(labels, tf.zeros_like(labels, tf.float32), mask)
    return lists.has_relevant(labels, valid)


#: canonical metric name (:mod:`~tfr_extensions.ops.vocabulary`) -> exact per-list metric
METRIC_FUNCTIONS = {
    "ndcg": ndcg,
    "ap": average_precision,
    "ap_min": average_precision_min,
    "precision": precision,
    "nerr": nerr,
}


def metric_function(name: str):
    """The exact per-list metric for any name of the vocabulary (``"map"`` ->
    :func:`average_precision`); ``ValueError`` for an unknown name."""
    return METRIC_FUNCTIONS[vocabulary.canonical_metric(name)]


#: rules for lists without a relevant document (see ``tfr_extensions.evaluation``)
NO_RELEVANT_RULES = ("exclude", "zero", "one")


@tf.keras.utils.register_keras_serializable(package="tfr_extensions")
class RankingMetric(tf.keras.metrics.Mean):
    """Mean of an exact per-list metric over the lists seen, for ``model.compile``.

    ``metric`` is any name of :mod:`~tfr_extensions.ops.vocabulary`; the
    default name is ``<metric>_<topn>`` with the metric as given (``map_10``).

    Lists with no valid document are skipped. Lists without a relevant document
    follow ``no_relevant``: ``"zero"`` (default) counts them 0, as TF-Ranking's
    Keras metrics do; ``"exclude"`` leaves them out of the mean (PT-Ranking,
    and the default of :mod:`tfr_extensions.evaluation`); ``"one"`` counts them
    1 (LightGBM, XGBoost). So the metric over a validation set equals
    ``tfrx.evaluation.evaluate(..., no_relevant=rule)``'s mean. ``y_pred`` may
    be float16. A ``[B, 1]`` sample weight weighs lists; a ``[B, L]`` one is
    averaged per list.

    >>> m = RankingMetric("nerr", topn=10)
    >>> _ = m.update_state([[0., 1.]], [[0.2, 0.9]])
    >>> float(m.result())
    1.0
    >>> m = RankingMetric("ndcg", no_relevant="exclude")
    >>> _ = m.update_state([[0., 1.], [0., 0.]], [[0.2, 0.9], [0.5, 0.1]])
    >>> float(m.result())  # the second list has no relevant document
    1.0
    """

    def __init__(self, metric: str = "ndcg", topn: Optional[int] = None,
                 name: Optional[str] = None, dtype=None, *, no_relevant: str = "zero",
                 **kwargs):
        self._function = metric_function(metric)
        validation.validate_choice(no_relevant, NO_RELEVANT_RULES, "no_relevant")
        self._metric = metric  # as given: it names the metric (``map_10``)
        self._topn = validation.validate_topn(topn)
        self._no_relevant = no_relevant
        default = f"{metric}_{topn}" if topn else metric
        if no_relevant != "zero":
            default += f"_{no_relevant}"
        super().__init__(name=name or default, dtype=dtype, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        if isinstance(y_true, tf.RaggedTensor):
            y_true = y_true.to_tensor(-1.0)
        if isinstance(y_pred, tf.RaggedTensor):
            y_pred = y_pred.to_tensor(0.0)
        values = self._function(y_true, y_pred, self._topn)
        any_valid = tf.reduce_any(tf.greater_equal(tf.cast(y_true, tf.float32), 0.0), axis=-1)
        weights = tf.cast(any_valid, values.dtype)
        if self._no_relevant != "zero":
            relevant = has_relevant(y_true)
            if self._no_relevant == "exclude":
                weights *= tf.cast(relevant, values.dtype)
            else:
                values = tf.where(relevant, values, tf.ones_like(values))
        if sample_weight is not None:
            sample_weight = tf.cast(sample_weight, values.dtype)
            if sample_weight.shape.rank == 2:
                sample_weight = tf.reduce_mean(sample_weight, axis=-1)
            weights = weights * sample_weight
        return super().update_state(values, sample_weight=weights)

    def get_config(self):
        config = super().get_config()
        config.update({"metric": self._metric, "topn": self._topn,
                       "no_relevant": self._no_relevant})
        return config
