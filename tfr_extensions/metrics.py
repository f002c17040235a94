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
import importlib
from typing import Optional

import tensorflow as tf

from tfr_extensions import backend
from tfr_extensions.backend import keras
from tfr_extensions.ops import lists
from tfr_extensions.ops import numerics
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


#: what a list without a relevant document scores: left out of the mean, 0 or 1
#: (the ``no_relevant`` option here and in :mod:`tfr_extensions.evaluation`)
NO_RELEVANT_RULES = ("exclude", "zero", "one")


def per_list_weights(weights, relevance, valid) -> tf.Tensor:
    r"""Per-item sample weights ``[B, L]`` -> per-list weights ``[B]``, by TF-Ranking's
    and keras-rs's rule (``_per_example_weights_to_per_list_weights``,
    ``keras_rs...ranking_metrics_utils.get_list_weights``):

    .. math:: w_q = \frac{\sum_i w_i\,\mathrm{rel}_i}{\sum_i \mathrm{rel}_i}

    over the valid documents of list q. A list without relevance but with
    some weight gets the mean :math:`w_q` of the batch's lists that have both
    (1 when none has); a list whose weights sum to 0 gets 0.

    Args:
      weights: float ``[B, L]``; padded documents' weights are ignored.
      relevance: float ``[B, L]``, >= 0: the metric's relevance (gain
        ``2^y - 1`` for nDCG and nERR, ``y > 0`` for AP and Precision).
      valid: bool ``[B, L]``.

    >>> w = per_list_weights(tf.constant([[1., 3.], [2., 2.]]), tf.constant([[1., 1.], [0., 0.]]),
    ...                      tf.constant([[True, True], [True, True]]))
    >>> w.numpy().tolist()  # (1 + 3) / 2; the second list has no relevance: the mean, 2
    [2.0, 2.0]
    """
    zero = tf.zeros_like(weights)
    weights = tf.where(valid, weights, zero)
    relevance = tf.where(valid, tf.cast(relevance, weights.dtype), zero)
    has_weight = tf.reduce_sum(weights, axis=-1) > 0
    total_relevance = tf.reduce_sum(relevance, axis=-1)
    has_relevance = total_relevance > 0
    weighted = numerics.safe_divide(tf.reduce_sum(weights * relevance, axis=-1), total_relevance)
    counted = tf.cast(tf.logical_and(has_weight, has_relevance), weights.dtype)
    count = tf.reduce_sum(counted)
    mean = tf.where(count > 0, numerics.safe_divide(tf.reduce_sum(weighted * counted), count),
                    tf.ones_like(count))
    return tf.where(has_weight, tf.where(has_relevance, weighted, mean), tf.zeros_like(weighted))


def _relevance(metric: str, labels: tf.Tensor) -> tf.Tensor:
    """The relevance that weighs items into lists for ``metric`` (canonical name)."""
    labels = tf.maximum(labels, 0.0)
    if metric in ("ndcg", "nerr"):
        return tf.pow(2.0, labels) - 1.0
    return tf.cast(labels > 0, labels.dtype)


@keras.utils.register_keras_serializable(package="tfr_extensions")
class RankingMetric(keras.metrics.Mean):
    """Mean of an exact per-list metric over the lists seen, for ``model.compile``.

    ``metric`` is any name of :mod:`~tfr_extensions.ops.vocabulary`; the
    default name is ``<metric>_<topn>`` with the metric as given (``map_10``).
    ``y_true`` is labels ``[B, L]`` (-1 on padding) or keras-rs's dict
    ``{"labels", "mask"}`` (mask False = padding); ``y_pred`` may be float16.

    Lists with no valid document are skipped. Lists without a relevant document
    follow ``no_relevant``: ``"zero"`` (default) counts them 0, as TF-Ranking's
    and keras-rs's metrics do; ``"exclude"`` leaves them out of the mean
    (PT-Ranking, and the default of :mod:`tfr_extensions.evaluation`); ``"one"``
    counts them 1 (LightGBM, XGBoost). So the metric over a validation set
    equals ``tfrx.evaluation.evaluate(..., no_relevant=rule)``'s mean.

    ``sample_weight``: a scalar, ``[B]`` or ``[B, 1]`` weighs lists; a ``[B, L]``
    per-item weight becomes a per-list weight by TF-Ranking's and keras-rs's
    rule (:func:`per_list_weights`).

    Runs on every Keras 3 backend: on TensorFlow with the TensorFlow ops, on JAX
    and PyTorch with their ``keras.ops`` twins
    (:func:`tfr_extensions.keras_ops.rank_metrics.exact_metric`), the same rules and
    the same values.

    Against keras-rs (``keras_rs.metrics``, 0.4), ``"ndcg"`` equals ``NDCG(k)``,
    ``"precision"`` ``PrecisionAtK(k)`` and ``"ap"`` ``MeanAveragePrecision(k)``
    for labels in {0, 1, 2, ...}, without weights, with a scalar weight, with
    per-list weights when every list has a relevant document, and (Precision
    only) with positive per-item weights. Where they differ:

    * ties: we put the lower index first; keras-rs shuffles tied scores at
      random, also with ``shuffle_ties=False`` (its ``update_state`` always
      passes a mask, and ``sort_by_scores`` shuffles whenever it has one), so
      the two agree on ties only between documents of equal labels;
    * a per-list weight (``[B]``, ``[B, 1]``) of a list without relevant
      documents: we use it as given; keras-rs, like TF-Ranking's metrics,
      spreads it over the items and applies the per-item rule, which gives
      such a list the mean weight of the batch's lists with relevance;
    * per-item weights: the list weight is the same, but keras-rs and
      TF-Ranking also weigh the items inside nDCG (DCG and ideal DCG) and AP,
      where we rank unweighted; keras-rs also drops the items of weight 0
      from the ranking, we rank them and only weigh the list;
    * keras-rs counts a label ``>= 1`` as relevant for MAP and Precision, we
      count ``> 0`` (they differ on fractional labels below 1); keras-rs has
      no nERR and no rule for lists without relevant documents (it counts
      them 0, our ``"zero"``); its MAP@k divides by all relevant documents,
      as our ``"ap"`` does (``"ap_min"``: by ``min(k, R)``).

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
        self._canonical = vocabulary.canonical_metric(metric)
        self._topn = validation.validate_topn(topn)
        self._no_relevant = no_relevant
        default = f"{metric}_{topn}" if topn else metric
        if no_relevant != "zero":
            default += f"_{no_relevant}"
        super().__init__(name=name or default, dtype=dtype, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        if not backend.uses_tensorflow_ops():  # JAX, PyTorch: the keras.ops twin
            return self._neutral_update_state(y_true, y_pred, sample_weight)
        y_true = lists.labels_with_mask(y_true)
        if isinstance(y_true, tf.RaggedTensor):
            y_true = y_true.to_tensor(lists.PADDING_LABEL)
        if isinstance(y_pred, tf.RaggedTensor):
            y_pred = y_pred.to_tensor(0.0)
        labels = tf.cast(tf.convert_to_tensor(y_true), tf.float32)
        values = self._function(labels, y_pred, self._topn)
        valid = tf.greater_equal(labels, 0.0)
        weights = tf.cast(tf.reduce_any(valid, axis=-1), values.dtype)
        if self._no_relevant != "zero":
            relevant = has_relevant(labels)
            if self._no_relevant == "exclude":
                weights *= tf.cast(relevant, values.dtype)
            else:
                values = tf.where(relevant, values, tf.ones_like(values))
        if sample_weight is not None:
            weights *= self._list_weights(tf.cast(sample_weight, values.dtype), labels, valid)
        return super().update_state(values, sample_weight=weights)

    def _list_weights(self, sample_weight, labels, valid):
        """Per-list weights ``[B]`` from a scalar, ``[B]``, ``[B, 1]`` or ``[B, L]`` weight."""
        rank = sample_weight.shape.rank
        if rank == 0:
            return tf.fill(tf.shape(labels)[:1], sample_weight)
        if rank == 1 or (rank == 2 and sample_weight.shape[1] == 1):
            return tf.reshape(sample_weight, [-1])
        if rank != 2:
            raise ValueError("`sample_weight` must be a scalar, [batch], [batch, 1] or "
                             f"[batch, list_size]; got shape {sample_weight.shape}.")
        weights = tf.broadcast_to(sample_weight, tf.shape(labels))
        return per_list_weights(weights, _relevance(self._canonical, labels), valid)

    def _neutral_update_state(self, y_true, y_pred, sample_weight):
        """:meth:`update_state` on Keras's JAX and PyTorch backends: the same rules
        in ``keras.ops`` (:mod:`tfr_extensions.keras_ops`), no TensorFlow."""
        from keras import ops  # pylint: disable=import-outside-toplevel
        keras_lists, keras_rank_metrics = _keras_ops("lists"), _keras_ops("rank_metrics")
        labels = ops.cast(ops.convert_to_tensor(keras_lists.labels_with_mask(y_true)), "float32")
        values = keras_rank_metrics.exact_metric(self._canonical, labels,
                                                 ops.convert_to_tensor(y_pred), self._topn)
        dtype = keras_lists.dtype_name(values)
        valid = labels >= 0.0
        weights = ops.cast(ops.any(valid, axis=-1), dtype)
        if self._no_relevant != "zero":
            relevant = keras_lists.has_relevant(
                ops.where(valid, labels, ops.zeros_like(labels)), valid)
            if self._no_relevant == "exclude":
                weights = weights * ops.cast(relevant, dtype)
            else:
                values = ops.where(relevant, values, ops.ones_like(values))
        if sample_weight is not None:
            weights = weights * _neutral_list_weights(
                ops.cast(ops.convert_to_tensor(sample_weight), dtype), labels, valid,
                self._canonical)
        return super().update_state(values, sample_weight=weights)

    def get_config(self):
        config = super().get_config()
        config.update({"metric": self._metric, "topn": self._topn,
                       "no_relevant": self._no_relevant})
        return config


def _keras_ops(module: str):
    """A module of :mod:`tfr_extensions.keras_ops`, imported on first use (it needs
    Keras 3's ``keras.ops``; this module also serves Keras 2)."""
    return importlib.import_module(f"tfr_extensions.keras_ops.{module}")


def _neutral_list_weights(sample_weight, labels, valid, metric: str):
    """:meth:`RankingMetric._list_weights` in ``keras.ops`` (JAX, PyTorch)."""
    from keras import ops  # pylint: disable=import-outside-toplevel
    rank = len(sample_weight.shape)
    if rank == 0:
        return ops.ones((ops.shape(labels)[0],), dtype=sample_weight.dtype) * sample_weight
    if rank == 1 or (rank == 2 and sample_weight.shape[1] == 1):
        return ops.reshape(sample_weight, (-1,))
    if rank != 2:
        raise ValueError("`sample_weight` must be a scalar, [batch], [batch, 1] or "
                         f"[batch, list_size]; got shape {tuple(sample_weight.shape)}.")
    weights = ops.broadcast_to(sample_weight, ops.shape(labels))
    clipped = ops.maximum(labels, 0.0)
    if metric in ("ndcg", "nerr"):
        relevance = ops.power(2.0, clipped) - 1.0
    else:
        relevance = ops.cast(clipped > 0, labels.dtype)
    return _neutral_per_list_weights(weights, relevance, valid)


def _neutral_per_list_weights(weights, relevance, valid):
    """:func:`per_list_weights` in ``keras.ops`` (JAX, PyTorch)."""
    from keras import ops  # pylint: disable=import-outside-toplevel
    keras_numerics = _keras_ops("numerics")
    zero = ops.zeros_like(weights)
    weights = ops.where(valid, weights, zero)
    relevance = ops.where(valid, ops.cast(relevance, weights.dtype), zero)
    has_weight = ops.sum(weights, axis=-1) > 0
    total_relevance = ops.sum(relevance, axis=-1)
    has_relevance = total_relevance > 0
    weighted = keras_numerics.safe_divide(ops.sum(weights * relevance, axis=-1),
                                          total_relevance)
    counted = ops.cast(ops.logical_and(has_weight, has_relevance), weights.dtype)
    count = ops.sum(counted)
    mean = ops.where(count > 0, keras_numerics.safe_divide(ops.sum(weighted * counted), count),
                     ops.ones_like(count))
    return ops.where(has_weight, ops.where(has_relevance, weighted, mean),
                     ops.zeros_like(weighted))
