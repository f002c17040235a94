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

The functions and :class:`RankingMetric` are one code for every backend; they
compute with the implementation that :func:`tfr_extensions.backend.implementation`
picks (:mod:`tfr_extensions.ops.list_metrics`, written once against
:mod:`tfr_extensions.arrays`: TensorFlow's ops or ``keras.ops``; :data:`IMPLEMENTATIONS`
names each function that runs) and return that backend's tensors (:func:`to_numpy`
gives NumPy). This module imports no TensorFlow.

>>> round(float(ndcg([[0., 1., 2.]], [[3., 2., 1.]])[0]), 4)  # (1/log2(3) + 3/2) / (3 + 1/log2(3))
0.5869
"""
import functools
from typing import Callable, Dict, NamedTuple, Optional

import numpy as np

from tfr_extensions import backend
from tfr_extensions.backend import keras
from tfr_extensions.ops import validation
from tfr_extensions.ops import vocabulary


class ListMetrics(NamedTuple):
    """The functions of one implementation that this module calls (the same in both)."""

    exact_metric: Callable
    has_relevant: Callable
    per_list_weights: Callable
    metric_values_and_weights: Callable
    to_numpy: Callable


def _list_metrics(which: str) -> ListMetrics:
    """The functions of :mod:`tfr_extensions.ops.list_metrics` (written once against
    :mod:`tfr_extensions.arrays`), run with implementation ``which``'s namespace: as they
    are for the package's rule (which ``arrays.use`` can override), else inside
    ``arrays.use(which)``."""
    from tfr_extensions import arrays  # pylint: disable=import-outside-toplevel
    from tfr_extensions.ops import list_metrics  # pylint: disable=import-outside-toplevel

    def run_with(function: Callable) -> Callable:
        if which == backend.implementation():
            return function

        @functools.wraps(function)
        def forced(*args, **kwargs):
            with arrays.use(which):
                return function(*args, **kwargs)
        return forced

    return ListMetrics(exact_metric=run_with(list_metrics.exact_metric),
                       has_relevant=run_with(list_metrics.has_relevant),
                       per_list_weights=run_with(list_metrics.per_list_weights),
                       metric_values_and_weights=run_with(list_metrics.metric_values_and_weights),
                       to_numpy=run_with(list_metrics.to_numpy))


#: implementation -> its :class:`ListMetrics`, made on first use (TensorFlow's namespace
#: imports TensorFlow; the ``keras.ops`` one needs Keras 3)
IMPLEMENTATIONS: Dict[str, Callable[[], ListMetrics]] = {
    backend.TENSORFLOW: functools.partial(_list_metrics, backend.TENSORFLOW),
    backend.KERAS_OPS: functools.partial(_list_metrics, backend.KERAS_OPS)}
_LOADED: Dict[str, ListMetrics] = {}


def implementation(which: Optional[str] = None) -> ListMetrics:
    """The list-metric functions of implementation ``which`` (default: the rule of
    :func:`tfr_extensions.backend.implementation`)."""
    which = which or backend.implementation()
    if which not in _LOADED:
        _LOADED[which] = IMPLEMENTATIONS[which]()
    return _LOADED[which]


def ndcg(labels, scores, topn: Optional[int] = None, mask=None):
    """Exact nDCG@topn per list, ``[B]``."""
    return implementation().exact_metric("ndcg", labels, scores, topn, mask)


def average_precision(labels, scores, topn: Optional[int] = None, mask=None):
    """Exact AP@topn per list, ``[B]`` (MAP is its mean over lists)."""
    return implementation().exact_metric("ap", labels, scores, topn, mask)


def average_precision_min(labels, scores, topn: Optional[int] = None, mask=None):
    """Exact AP@topn over ``min(topn, R)`` per list, ``[B]`` (LightGBM's ``map@k``)."""
    return implementation().exact_metric("ap_min", labels, scores, topn, mask)


def precision(labels, scores, topn: Optional[int] = None, mask=None):
    """Exact Precision@topn per list, ``[B]``."""
    return implementation().exact_metric("precision", labels, scores, topn, mask)


def nerr(labels, scores, topn: Optional[int] = None, mask=None):
    """Exact nERR@topn per list, ``[B]``."""
    return implementation().exact_metric("nerr", labels, scores, topn, mask)


def has_relevant(labels, mask=None):
    """Bool ``[B]``: the list has a valid document with label > 0."""
    return implementation().has_relevant(labels, mask)


def to_numpy(values) -> np.ndarray:
    """The values of a tensor these functions returned, as NumPy."""
    return implementation().to_numpy(values)


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


def per_list_weights(weights, relevance, valid):
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

    >>> w = per_list_weights(np.array([[1., 3.], [2., 2.]], np.float32),
    ...                      np.array([[1., 1.], [0., 0.]], np.float32), np.ones([2, 2], bool))
    >>> to_numpy(w).tolist()  # (1 + 3) / 2; the second list has no relevance: the mean, 2
    [2.0, 2.0]
    """
    return implementation().per_list_weights(weights, relevance, valid)


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

    Runs on every Keras backend with the implementation of
    :func:`tfr_extensions.backend.implementation`'s rule (the TensorFlow ops on
    Keras 2 and Keras 3's TensorFlow backend, their ``keras.ops`` counterparts on JAX and
    PyTorch): the same rules and the same values.

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
                 name: Optional[str] = None, dtype=None, *, no_relevant: str = "zero"):
        metric_function(metric)  # (a ValueError for an unknown name)
        validation.validate_choice(no_relevant, NO_RELEVANT_RULES, "no_relevant")
        self._metric = metric  # as given: it names the metric (``map_10``)
        self._canonical = vocabulary.canonical_metric(metric)
        self._topn = validation.validate_topn(topn)
        self._no_relevant = no_relevant
        default = f"{metric}_{topn}" if topn else metric
        if no_relevant != "zero":
            default += f"_{no_relevant}"
        super().__init__(name=name or default, dtype=dtype)

    def update_state(self, y_true, y_pred, sample_weight=None):
        values, weights = implementation().metric_values_and_weights(
            self._canonical, y_true, y_pred, self._topn, self._no_relevant, sample_weight)
        return super().update_state(values, sample_weight=weights)

    def get_config(self):
        config = super().get_config()
        config.update({"metric": self._metric, "topn": self._topn,
                       "no_relevant": self._no_relevant})
        return config

#: the public names, in the order a user meets them (the API reference documents these)
__all__ = [
    "ndcg",
    "average_precision",
    "average_precision_min",
    "precision",
    "nerr",
    "has_relevant",
    "RankingMetric",
    "metric_function",
    "to_numpy",
    "METRIC_FUNCTIONS",
    "NO_RELEVANT_RULES",
]
