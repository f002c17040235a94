r"""IR metrics as functions of (possibly differentiable) document ranks, one formula per
metric for the exact metrics (:mod:`tfr_extensions.metrics`, ranks from a sort) and the
twin-sigmoid losses (the same ranks with a gradient). Equation numbers: Yu, "Optimize What
You Evaluate With" (``twin-sigmoid-direct-metric-optimization.txt``).

Every function takes ``labels`` ``[B, L]`` (padded entries 0), ``ranks`` ``[B, L]`` (1-based,
float), ``mask`` bool ``[B, L]``, an optional cutoff ``topn`` and optionally the ranks' int
``positions``, and returns ``[B]``. A document's position ``p_d`` is its place in the list
sorted by rank (ties to the lower index); the cutoff keeps ``p_d <= topn``.

Every metric is :math:`M = \frac{1}{Z}\sum_d w_d f(r_d)`, :math:`f(r) = 1/r` (Precision,
AP, ERR) or :math:`f(r) = 1/\log_2(1 + r)` (DCG), with weights :math:`w_d` and norm :math:`Z`
(all that Eq. 13-16 index by position) constant in the backward pass, so Eq. 29 and 31-33
are :math:`\partial M / \partial r_d = w_d f'(r_d) / Z` (:func:`value_and_rank_gradient`).

Numerics: padded ranks are read as 1 (``1/r``, ``log(1+r)`` finite), norms divided safely:
a list without relevant documents (label > 0) scores 0 with zero gradient. Metric names:
any of :mod:`tfr_extensions.ops.vocabulary` (``"map"`` for ``"ap"``).
"""
import functools
from typing import Optional

from tfr_extensions import arrays
from tfr_extensions.ops import validation
from tfr_extensions.ops import vocabulary


def _transform(ranks, mask, log: bool, derivative: bool = False):
    """f(r) = 1/r or, with ``log``, 1/log2(1 + r); with ``derivative`` f'(r): -1/r^2, resp.
    -(1/log2(1 + r))^2 / (ln 2 (1 + r)); padded ranks read as 1."""
    xp = arrays.namespace()
    ranks = xp.where(mask, ranks, xp.ones_like(ranks))
    if not log:
        return -1.0 / xp.square(ranks) if derivative else 1.0 / ranks
    discount = xp.lists.log2_discount(ranks)
    if not derivative:
        return discount
    return -xp.square(discount) / (xp.log(xp.constant(2.0, xp.dtype_name(ranks))) * (1.0 + ranks))


def _positions(ranks, mask, positions=None):
    """1-based int32 positions of the documents by ascending rank (``positions`` if given)."""
    if positions is not None:
        return positions
    xp = arrays.namespace()
    return xp.sorting.exact_ranks(-xp.stop_gradient(xp.convert_to_tensor(ranks)), mask)


def _cutoff(positions, mask, topn: Optional[int]):
    """Bool [B, L]: valid and within the first ``topn`` positions."""
    return mask if topn is None else arrays.namespace().logical_and(mask, positions <= topn)


def _where(condition, values):
    xp = arrays.namespace()
    return xp.where(condition, values, xp.zeros_like(values))


def _position_ranks(values):
    """1, 2, ..., K along the last axis, in the dtype and shape of ``values``."""
    return arrays.namespace().cumsum(arrays.namespace().ones_like(values), axis=-1)


def _sums_by_position(values, positions, later: bool):
    """The namespace's fused sums over positions (TensorFlow, XLA), or None (sort and gather)."""
    sums = getattr(arrays.namespace().sorting, "sums_by_position", None)
    return None if sums is None else sums(values, positions, later=later)


def _precision_form(labels, ranks, mask, topn, positions):
    """Eq. 13: w_d = b_d p_d, normalized by k."""
    xp = arrays.namespace()
    positions = _positions(ranks, mask, positions)
    relevant = xp.logical_and(_cutoff(positions, mask, topn), labels > 0)
    num_valid = xp.sum(xp.cast(mask, ranks.dtype), axis=-1)
    k = num_valid if topn is None else xp.minimum(num_valid, float(topn))
    return _where(relevant, xp.cast(positions, ranks.dtype)), k, False


def _average_precision_form(labels, ranks, mask, topn, positions, min_norm: bool = False):
    """Eq. 30: w_d = b_d p_d sum_{e: p_d <= p_e <= k} b_e / p_e, over R (``min_norm``: min(k,R))."""
    xp = arrays.namespace()
    positions = _positions(ranks, mask, positions)
    relevant = xp.logical_and(_cutoff(positions, mask, topn), labels > 0)
    pos = xp.cast(positions, ranks.dtype)
    contrib = _where(relevant, 1.0 / pos)  # b_e / p_e
    # S_d = sum_{e: p_e >= p_d} b_e / p_e
    suffix_per_doc = _sums_by_position(contrib, positions, later=True)
    if suffix_per_doc is None:  # suffix sums in position order, gathered back
        order = xp.sorting.order_from_positions(positions)
        suffix = xp.cumsum(xp.take_along_axis(contrib, order, axis=-1), axis=-1, reverse=True)
        suffix_per_doc = xp.take_along_axis(suffix, positions - 1, axis=-1)
    norm = xp.sum(xp.cast(xp.logical_and(mask, labels > 0), ranks.dtype), axis=-1)
    if min_norm and topn is not None:
        norm = xp.minimum(norm, float(topn))
    return _where(relevant, pos * suffix_per_doc), norm, False


def _ndcg_form(labels, ranks, mask, topn, positions):
    """Eq. 15: w_d = 2^y_d - 1 within the cutoff, normalized by DCG*@k."""
    gains = arrays.namespace().lists.gains(labels)
    cutoff = mask if topn is None else _cutoff(_positions(ranks, mask, positions), mask, topn)
    return _where(cutoff, gains), _ideal_dcg_of_gains(gains, mask, topn), True


def _nerr_form(labels, ranks, mask, topn, positions):
    """Eq. 16: w_d = R_d prod_{e: p_e < p_d} (1 - R_e) within the cutoff, R = (2^y - 1) /
    2^{max y}, over the ideal ERR@k."""
    xp = arrays.namespace()
    max_label = xp.max(_where(mask, labels), axis=-1, keepdims=True)
    two = xp.constant(2.0, xp.dtype_name(labels))
    stop_prob = _where(mask, xp.lists.gains(labels) / xp.power(two, max_label))
    positions = _positions(ranks, mask, positions)
    # prod_{e: p_e < p_d} (1 - R_e) = exp(sum_{e: p_e < p_d} log(1 - R_e))
    log_reach = _sums_by_position(xp.log1p(-stop_prob), positions, later=False)
    if log_reach is not None:
        weights = stop_prob * xp.exp(log_reach)
    else:
        order = xp.sorting.order_from_positions(positions)
        weights = xp.take_along_axis(
            _err_by_position(xp.take_along_axis(stop_prob, order, axis=-1)), positions - 1,
            axis=-1)
    ideal = xp.sorting.sort_descending(stop_prob, mask, topn)  # sorting R sorts the labels
    ideal_err = xp.sum(_err_by_position(ideal) / _position_ranks(ideal), axis=-1)
    return _where(_cutoff(positions, mask, topn), weights), ideal_err, False


def _evaluate(form, ranks, mask):
    """sum_d w_d f(r_d) / norm for a form ``(w, norm, log)`` (0 where norm is 0)."""
    xp = arrays.namespace()
    weights, norm, log = form
    return xp.safe_divide(xp.sum(weights * _transform(ranks, mask, log), axis=-1), norm)


def precision(labels, ranks, mask, topn: Optional[int] = None, positions=None):
    r"""Precision@k, Eq. 13: :math:`\frac{1}{k}\sum_{d: p_d \le k} b_d \, p_d / r_d`,
    ``b_d = [label_d > 0]``, ``k = min(topn, #valid)`` (TF-Ranking's). Gradient: Eq. 29."""
    return _evaluate(_precision_form(labels, ranks, mask, topn, positions), ranks, mask)


def average_precision(labels, ranks, mask, topn: Optional[int] = None, positions=None):
    r"""AP@k, Eq. 14 in the form of Eq. 30 (gradient: Eq. 31):
    :math:`\frac{1}{|Y^+|}\sum_{d: p_d\le k} b_d \frac{p_d}{r_d} \sum_{e:\, p_d \le p_e \le k} \frac{b_e}{p_e}`,
    :math:`|Y^+|` all relevant documents of the list, also beyond the cutoff (TF-Ranking's
    ``MeanAveragePrecisionMetric``)."""
    return _evaluate(_average_precision_form(labels, ranks, mask, topn, positions), ranks, mask)


def average_precision_min(labels, ranks, mask, topn: Optional[int] = None, positions=None):
    r""":func:`average_precision` over :math:`\min(k, |Y^+|)` (LightGBM's ``map@k``). Gradient:
    Eq. 31 with that norm."""
    return _evaluate(_average_precision_form(labels, ranks, mask, topn, positions, True),
                     ranks, mask)


def _ideal_dcg_of_gains(gains, mask, topn: Optional[int]):
    """DCG@k of the gains sorted descending (the labels' order: one ``pow``); where positions
    come from counting (XLA, JAX on a CPU), summed at the ideal positions: no gather."""
    xp = arrays.namespace()
    positions = xp.sorting.counting_positions(gains, mask)
    if positions is not None:
        discounts = xp.lists.log2_discount(xp.cast(positions, gains.dtype))
        return xp.sum(_where(_cutoff(positions, mask, topn), gains * discounts), axis=-1)
    ideal = xp.sorting.sort_descending(gains, mask, topn)
    return xp.sum(ideal * xp.lists.log2_discount(_position_ranks(ideal)), axis=-1)


def ideal_dcg(labels, mask, topn: Optional[int] = None):
    """DCG@k of the ideal ranking (labels sorted descending), ``[B]``."""
    return _ideal_dcg_of_gains(arrays.namespace().lists.gains(labels), mask, topn)


def ndcg(labels, ranks, mask, topn: Optional[int] = None, positions=None):
    r"""nDCG@k, Eq. 15:
    :math:`\frac{1}{DCG^*@k}\sum_{d: p_d\le k} \frac{2^{y_d}-1}{\log_2(r_d+1)}`.
    Gradient: Eq. 32."""
    return _evaluate(_ndcg_form(labels, ranks, mask, topn, positions), ranks, mask)


def _err_by_position(stop_prob_by_position):
    """R_p * prod_{q < p} (1 - R_q) for a list in position order."""
    reach = arrays.namespace().cumprod(1.0 - stop_prob_by_position, axis=-1, exclusive=True)
    return reach * stop_prob_by_position


def nerr(labels, ranks, mask, topn: Optional[int] = None, positions=None):
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
    "ap_min": functools.partial(_average_precision_form, min_norm=True),
    "precision": _precision_form,
    "nerr": _nerr_form,
}


def rank_metric_function(name: str):
    """The per-list metric of ranks of a metric name (``"map"``: :func:`average_precision`)."""
    return RANK_METRICS[vocabulary.canonical_metric(name)]


def value_and_rank_gradient(metric: str, labels, ranks, mask, topn: Optional[int] = None,
                            positions=None):
    r"""A metric :math:`M` ``[B]`` and, Eq. 29, 31-33, ``[B, L]``
    :math:`\partial M / \partial r_d = w_d f'(r_d) / Z` (0 at padded documents and beyond the
    cutoff), both without gradient.

    >>> xp = arrays.namespace()
    >>> labels, ranks = xp.convert_to_tensor([[0., 1.]]), xp.convert_to_tensor([[1., 2.]])
    >>> value, grad = value_and_rank_gradient("precision", labels, ranks, labels >= 0)
    >>> float(value[0]), float(grad[0, 1])  # (1/2) 2/r and -(1/2) 2/r^2 at r = 2
    (0.5, -0.25)
    """
    xp = arrays.namespace()
    ranks = xp.stop_gradient(xp.convert_to_tensor(ranks))
    form = _FORMS[vocabulary.canonical_metric(metric)](labels, ranks, mask, topn, positions)
    weights, norm, log = form
    rank_gradient = xp.safe_divide(
        weights * _transform(ranks, mask, log, derivative=True), norm[:, None])
    return _evaluate(form, ranks, mask), rank_gradient


def exact_metric(metric: str, labels, scores, topn: Optional[int] = None, mask=None):
    """The exact per-list metric ``[B]`` of ``scores`` at the ranks of a sort (ties to the lower
    index); ``labels`` < 0 mark padding, ``mask`` narrows validity.

    >>> round(float(exact_metric("ndcg", [[0., 1., 2.]], [[3., 2., 1.]])[0]), 4)
    0.5869
    """
    xp = arrays.namespace()
    function = rank_metric_function(metric)
    topn = validation.validate_topn(topn)
    labels, scores, valid = xp.screening.prepare_lists(labels, scores, mask)
    positions = xp.sorting.exact_ranks(scores, valid)
    return function(labels, xp.cast(positions, scores.dtype), valid, topn, positions)

