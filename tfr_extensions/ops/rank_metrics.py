r"""IR metrics as functions of (possibly differentiable) document ranks.

One formula per metric, shared by the exact evaluation metrics
(:mod:`tfr_extensions.metrics`, ranks from a sort) and by the twin-sigmoid
losses (ranks from :func:`twin_sigmoid_ranks`, whose forward values are the
same integers but which carry a gradient). Equation numbers refer to Yu,
"Optimize What You Evaluate With" (``twin-sigmoid-direct-metric-optimization.txt``).

Every function takes ``labels`` ``[B, L]`` (padded entries already 0), ``ranks``
``[B, L]`` (1-based, float; values at padded entries are ignored), ``mask``
bool ``[B, L]``, an optional cutoff ``topn`` and optionally the integer
``positions`` of the ranks when the caller already has them, and returns ``[B]``. A
document's *position* ``p_d`` is its place in the list sorted by rank (ties,
which only occur without tie breaking, go to the lower index); the cutoff
keeps documents with ``p_d <= topn``. Positions and everything that Eq. 13-16
index by position (``i`` in Eq. 13, the inner sum of Eq. 30, the products of
Eq. 16) are constants of the backward pass; the gradient flows through the
ranks ``r_d`` only, which gives exactly the derivatives of Eq. 29 and 31-33.

Every metric here is a normalized weighted sum :math:`M = \frac{1}{Z}\sum_d w_d
f(r_d)`, with weights :math:`w_d` and norm :math:`Z` that are constants of the
backward pass and :math:`f(r) = 1/r` (Precision, AP, ERR) or
:math:`f(r) = 1/\log_2(1 + r)` (DCG), so :math:`\partial M / \partial r_d =
w_d f'(r_d) / Z`: Eq. 29 and 31-33 in one line.
:func:`value_and_rank_gradient` returns that derivative directly, for the
twin-sigmoid losses, which then need no autodiff through the metric.

A list without relevant documents (label > 0) scores 0 with zero gradient.
Relevance for Precision and AP is binary: label > 0. :data:`RANK_METRICS` is keyed
by the canonical names of :mod:`tfr_extensions.ops.vocabulary`; every function
that takes a metric name also takes its aliases (``"map"`` for ``"ap"``).
"""
from typing import Callable, NamedTuple, Optional, Tuple

import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import numerics
from tfr_extensions.ops import sorting
from tfr_extensions.ops import vocabulary


class RankTransform(NamedTuple):
    """The function ``f`` of the ranks that a metric sums, and its derivative."""

    value: Callable[[tf.Tensor], tf.Tensor]
    derivative: Callable[[tf.Tensor], tf.Tensor]


def _log_discount_derivative(ranks: tf.Tensor) -> tf.Tensor:
    """d/dr 1/log2(1 + r) = -(1/log2(1 + r))^2 / (ln 2 (1 + r))."""
    ln2 = tf.math.log(tf.constant(2.0, ranks.dtype))
    return -tf.square(lists.log2_discount(ranks)) / (ln2 * (1.0 + ranks))


def _reciprocal(ranks):
    """1 / r."""
    return 1.0 / ranks


def _reciprocal_derivative(ranks):
    """d/dr 1 / r = -1 / r^2."""
    return -1.0 / tf.square(ranks)


#: f(r) = 1 / r: Precision, AP and ERR (named functions: AutoGraph cannot read the
#: source of two lambdas on one line, and warned at every trace).
RECIPROCAL = RankTransform(_reciprocal, _reciprocal_derivative)
#: f(r) = 1 / log2(1 + r): DCG.
LOG_DISCOUNT = RankTransform(lists.log2_discount, _log_discount_derivative)


def _positions(ranks, mask, positions=None):
    """1-based int32 positions of the documents sorted by ascending rank.

    ``positions`` may be passed in when the caller already has them (the
    twin-sigmoid forward pass and the exact metrics do), which saves a sort.
    """
    if positions is None:
        positions = sorting.exact_ranks(-tf.stop_gradient(ranks), mask)
    return positions


def _cutoff(positions: tf.Tensor, mask: tf.Tensor, topn: Optional[int]) -> tf.Tensor:
    """Bool [B, L]: valid and within the first ``topn`` positions."""
    if topn is None:
        return mask
    return tf.logical_and(mask, positions <= topn)


def _safe_ranks(ranks: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Ranks with padded entries set to 1, so 1/r and log(1+r) stay finite there."""
    return tf.where(mask, ranks, tf.constant(1, ranks.dtype))


def _where(condition, values):
    return tf.where(condition, values, tf.constant(0, values.dtype))


def _position_ranks(values: tf.Tensor) -> tf.Tensor:
    """1, 2, ..., K along the last axis, in the dtype and shape of ``values``."""
    return tf.cumsum(tf.ones_like(values), axis=-1)


def _precision_form(labels, ranks, mask, topn, positions):
    """Eq. 13: w_d = b_d p_d, normalized by k."""
    positions = _positions(ranks, mask, positions)
    relevant = tf.logical_and(_cutoff(positions, mask, topn), labels > 0)
    num_valid = tf.reduce_sum(tf.cast(mask, ranks.dtype), axis=-1)
    k = num_valid if topn is None else tf.minimum(num_valid, float(topn))
    return _where(relevant, tf.cast(positions, ranks.dtype)), k, RECIPROCAL


def _average_precision_weights(labels, ranks, mask, topn, positions):
    """Eq. 30's w_d = b_d p_d sum_{e: p_d <= p_e <= k} (b_e / p_e), and the
    number R of relevant documents of each list."""
    positions = _positions(ranks, mask, positions)
    relevant = tf.logical_and(_cutoff(positions, mask, topn), labels > 0)
    pos = tf.cast(positions, ranks.dtype)
    contrib = _where(relevant, 1.0 / pos)  # b_e / p_e
    # S_d = sum_{e: p_e >= p_d} b_e / p_e
    suffix_per_doc = sorting.sums_by_position(contrib, positions, later=True)
    if suffix_per_doc is None:  # suffix sums in position order, gathered back
        order = sorting.order_from_positions(positions)
        suffix = tf.cumsum(tf.gather(contrib, order, batch_dims=1), axis=-1, reverse=True)
        suffix_per_doc = tf.gather(suffix, positions - 1, batch_dims=1)
    num_relevant = tf.reduce_sum(
        tf.cast(tf.logical_and(mask, labels > 0), ranks.dtype), axis=-1)
    return _where(relevant, pos * suffix_per_doc), num_relevant


def _average_precision_form(labels, ranks, mask, topn, positions):
    """Eq. 30, normalized by |Y+| = R."""
    weights, num_relevant = _average_precision_weights(labels, ranks, mask, topn, positions)
    return weights, num_relevant, RECIPROCAL


def _average_precision_min_form(labels, ranks, mask, topn, positions):
    """Eq. 30, normalized by min(k, R) (LightGBM's map@k)."""
    weights, num_relevant = _average_precision_weights(labels, ranks, mask, topn, positions)
    norm = num_relevant if topn is None else tf.minimum(num_relevant, float(topn))
    return weights, norm, RECIPROCAL


def _dcg_weights(gains, ranks, mask, topn, positions):
    """w_d = 2^y_d - 1 for documents within the cutoff."""
    if topn is None:
        return _where(mask, gains)
    return _where(_cutoff(_positions(ranks, mask, positions), mask, topn), gains)


def _ndcg_form(labels, ranks, mask, topn, positions):
    """Eq. 15: w_d = 2^y_d - 1 within the cutoff, normalized by DCG*@k."""
    gains = lists.gains(labels)
    weights = _dcg_weights(gains, ranks, mask, topn, positions)
    return weights, _ideal_dcg_of_gains(gains, mask, topn), LOG_DISCOUNT


def _err_weights(stop_prob, ranks, mask, topn, positions):
    """w_d = R_d prod_{e: p_e < p_d} (1 - R_e) for documents within the cutoff."""
    positions = _positions(ranks, mask, positions)
    # prod_{e: p_e < p_d} (1 - R_e) = exp(sum_{e: p_e < p_d} log(1 - R_e))
    log_reach = sorting.sums_by_position(tf.math.log1p(-stop_prob), positions, later=False)
    if log_reach is not None:
        weights = stop_prob * tf.exp(log_reach)
    else:
        order = sorting.order_from_positions(positions)
        weights = tf.gather(_err_by_position(tf.gather(stop_prob, order, batch_dims=1)),
                            positions - 1, batch_dims=1)
    return _where(_cutoff(positions, mask, topn), weights)


def _nerr_form(labels, ranks, mask, topn, positions):
    """Eq. 16: the ERR weights, normalized by the ideal ERR@k."""
    stop_prob = _stop_probabilities(labels, mask)
    weights = _err_weights(stop_prob, ranks, mask, topn, positions)
    return weights, _ideal_err_of(stop_prob, mask, topn), RECIPROCAL


def _evaluate(form, ranks, mask) -> tf.Tensor:
    """sum_d w_d f(r_d) / norm for a form ``(w, norm, f)`` (0 where norm is 0)."""
    weights, norm, transform = form
    value = tf.reduce_sum(weights * transform.value(_safe_ranks(ranks, mask)), axis=-1)
    return numerics.safe_divide(value, norm)


def precision(labels, ranks, mask, topn: Optional[int] = None, positions=None) -> tf.Tensor:
    r"""Precision@k, Eq. 13: :math:`\frac{1}{k}\sum_{d: p_d \le k} b_d \, p_d / r_d`.

    ``b_d = [label_d > 0]``; ``k = min(topn, #valid)`` as in TF-Ranking's
    ``PrecisionMetric`` (``#valid`` without a cutoff). Gradient: Eq. 29.
    """
    return _evaluate(_precision_form(labels, ranks, mask, topn, positions), ranks, mask)


def average_precision(labels, ranks, mask, topn: Optional[int] = None,
                      positions=None) -> tf.Tensor:
    r"""AP@k, Eq. 14 in the form of Eq. 30:
    :math:`\frac{1}{|Y^+|}\sum_{d: p_d\le k} b_d \frac{p_d}{r_d}
    \sum_{e:\, p_d \le p_e \le k} \frac{b_e}{p_e}`.

    ``|Y^+|`` counts all relevant documents of the list, also beyond the cutoff,
    as TF-Ranking's ``MeanAveragePrecisionMetric`` does. Gradient: Eq. 31.
    """
    return _evaluate(_average_precision_form(labels, ranks, mask, topn, positions), ranks, mask)


def average_precision_min(labels, ranks, mask, topn: Optional[int] = None,
                          positions=None) -> tf.Tensor:
    r"""AP@k normalized by :math:`\min(k, |Y^+|)` instead of :math:`|Y^+|`
    (LightGBM's ``map@k``): :math:`\frac{1}{\min(k, |Y^+|)}\sum_{d: p_d\le k}
    b_d \frac{p_d}{r_d} \sum_{e:\, p_d \le p_e \le k} \frac{b_e}{p_e}`.

    Equal to :func:`average_precision` without a cutoff or when the list has
    at most k relevant documents. Gradient: Eq. 31 with that norm.
    """
    return _evaluate(_average_precision_min_form(labels, ranks, mask, topn, positions),
                     ranks, mask)


def _ideal_dcg_of_gains(gains, mask, topn: Optional[int]) -> tf.Tensor:
    """DCG@k of the gains sorted descending (the labels' order: one ``pow``).

    Where positions come from counting (short lists under XLA), the sum runs
    over the documents at their ideal positions: no gather."""
    positions = sorting.counting_positions(gains, mask)
    if positions is not None:
        discounts = lists.log2_discount(tf.cast(positions, gains.dtype))
        return tf.reduce_sum(_where(_cutoff(positions, mask, topn), gains * discounts), axis=-1)
    ideal = sorting.sort_descending(gains, mask, topn)
    return tf.reduce_sum(ideal * lists.log2_discount(_position_ranks(ideal)), axis=-1)


def ideal_dcg(labels, mask, topn: Optional[int] = None) -> tf.Tensor:
    """DCG@k of the ideal ranking (labels sorted descending), ``[B]``."""
    return _ideal_dcg_of_gains(lists.gains(labels), mask, topn)


def ndcg(labels, ranks, mask, topn: Optional[int] = None, positions=None) -> tf.Tensor:
    r"""nDCG@k, Eq. 15: :math:`\frac{1}{DCG^*@k}\sum_{d: p_d\le k}
    \frac{2^{y_d}-1}{\log_2(r_d+1)}`. Gradient: Eq. 32."""
    return _evaluate(_ndcg_form(labels, ranks, mask, topn, positions), ranks, mask)


def _stop_probabilities(labels, mask):
    """R = (2^y - 1) / 2^{max y}, with the list's maximum label (Eq. 16)."""
    max_label = tf.reduce_max(tf.where(mask, labels, tf.constant(0, labels.dtype)),
                              axis=-1, keepdims=True)
    stop_prob = lists.gains(labels) / tf.pow(tf.constant(2.0, labels.dtype), max_label)
    return _where(mask, stop_prob)


def _err_by_position(stop_prob_by_position):
    """R_p * prod_{q < p} (1 - R_q) for a list in position order."""
    reach = tf.math.cumprod(1.0 - stop_prob_by_position, axis=-1, exclusive=True)
    return reach * stop_prob_by_position


def _ideal_err_of(stop_prob, mask, topn: Optional[int]) -> tf.Tensor:
    ideal = sorting.sort_descending(stop_prob, mask, topn)  # sorting R sorts the labels
    return tf.reduce_sum(_err_by_position(ideal) / _position_ranks(ideal), axis=-1)


def nerr(labels, ranks, mask, topn: Optional[int] = None, positions=None) -> tf.Tensor:
    r"""nERR@k, Eq. 16: ERR@k over the ideal ranking's ERR@k. Gradient: Eq. 33."""
    return _evaluate(_nerr_form(labels, ranks, mask, topn, positions), ranks, mask)


#: canonical metric name (:mod:`~tfr_extensions.ops.vocabulary`) -> per-list metric of ranks
RANK_METRICS = {
    "ndcg": ndcg,
    "ap": average_precision,
    "ap_min": average_precision_min,
    "precision": precision,
    "nerr": nerr,
}

_FORMS = {
    "ndcg": _ndcg_form,
    "ap": _average_precision_form,
    "ap_min": _average_precision_min_form,
    "precision": _precision_form,
    "nerr": _nerr_form,
}


def rank_metric_function(name: str):
    """The per-list metric of ranks for any name of the vocabulary (``"map"``
    gives :func:`average_precision`)."""
    return RANK_METRICS[vocabulary.canonical_metric(name)]


def value_and_rank_gradient(metric: str, labels, ranks, mask, topn: Optional[int] = None,
                            positions=None) -> Tuple[tf.Tensor, tf.Tensor]:
    r"""A metric (any name of :mod:`~tfr_extensions.ops.vocabulary`) and its
    derivative with respect to the ranks.

    With :math:`M = \frac{1}{Z}\sum_d w_d f(r_d)`, returns :math:`M` ``[B]`` and
    :math:`\partial M / \partial r_d = w_d f'(r_d) / Z` ``[B, L]`` (0 at padded
    documents and beyond the cutoff): Eq. 29 (Precision), 31 (AP), 32 (nDCG)
    and 33 (nERR), with positions held constant. No gradient flows through
    either output: they are the values a hand-written backward pass needs.

    >>> labels, ranks = tf.constant([[0., 1.]]), tf.constant([[1., 2.]])
    >>> value, grad = value_and_rank_gradient("precision", labels, ranks, labels >= 0)
    >>> float(value[0]), float(grad[0, 1])  # (1/2) 2/r and -(1/2) 2/r^2 at r = 2
    (0.5, -0.25)
    """
    ranks = tf.stop_gradient(ranks)
    form = _FORMS[vocabulary.canonical_metric(metric)](labels, ranks, mask, topn, positions)
    weights, norm, transform = form
    rank_gradient = numerics.safe_divide(
        weights * transform.derivative(_safe_ranks(ranks, mask)), norm[:, None])
    return _evaluate(form, ranks, mask), rank_gradient
