r"""IR metrics as functions of (possibly differentiable) document ranks: the
``keras.ops`` twin of :mod:`tfr_extensions.ops.rank_metrics` (the same
functions, names and contracts). Equation numbers refer to Yu, "Optimize What
You Evaluate With" (``twin-sigmoid-direct-metric-optimization.txt``).

Every function takes ``labels`` ``[B, L]`` (padded entries already 0), ``ranks``
``[B, L]`` (1-based, float; values at padded entries are ignored), ``mask``
bool ``[B, L]``, an optional cutoff ``topn`` and optionally the integer
``positions`` of the ranks, and returns ``[B]``. A document's *position*
``p_d`` is its place in the list sorted by rank (ties go to the lower index);
the cutoff keeps documents with ``p_d <= topn``. Positions and everything
indexed by them are constants of the backward pass; the gradient flows
through the ranks ``r_d`` only (Eq. 29 and 31-33).

Every metric is :math:`M = \frac{1}{Z}\sum_d w_d f(r_d)` with constant
:math:`w_d, Z` and :math:`f(r) = 1/r` (Precision, AP, ERR) or :math:`f(r) =
1/\log_2(1 + r)` (DCG), so :math:`\partial M / \partial r_d = w_d f'(r_d) / Z`
(:func:`value_and_rank_gradient`). A list without relevant documents (label >
0) scores 0 with zero gradient; relevance for Precision and AP is label > 0.
:data:`RANK_METRICS` is keyed by the canonical names of
:mod:`tfr_extensions.ops.vocabulary`; every function that takes a metric name
also takes its aliases.
"""
from typing import Callable, NamedTuple, Optional

import keras
from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import sorting
from tfr_extensions.ops import validation
from tfr_extensions.ops import vocabulary


class RankTransform(NamedTuple):
    """The function ``f`` of the ranks that a metric sums, and its derivative."""

    value: Callable
    derivative: Callable


def _log_discount_derivative(ranks):
    """d/dr 1/log2(1 + r) = -(1/log2(1 + r))^2 / (ln 2 (1 + r))."""
    ln2 = ops.log(numerics.constant(2.0, ranks.dtype))
    return -ops.square(lists.log2_discount(ranks)) / (ln2 * (1.0 + ranks))


def _reciprocal(ranks):
    """1 / r."""
    return 1.0 / ranks


def _reciprocal_derivative(ranks):
    """d/dr 1 / r = -1 / r^2."""
    return -1.0 / ops.square(ranks)


#: f(r) = 1 / r: Precision, AP and ERR (named functions: AutoGraph cannot read the
#: source of two lambdas on one line, and warned at every trace).
RECIPROCAL = RankTransform(_reciprocal, _reciprocal_derivative)
#: f(r) = 1 / log2(1 + r): DCG.
LOG_DISCOUNT = RankTransform(lists.log2_discount, _log_discount_derivative)


def _positions(ranks, mask, positions=None):
    """1-based int32 positions of the documents sorted by ascending rank."""
    if positions is None:
        positions = sorting.exact_ranks(-ops.stop_gradient(ops.convert_to_tensor(ranks)), mask)
    return positions


def _cutoff(positions, mask, topn: Optional[int]):
    """Bool [B, L]: valid and within the first ``topn`` positions."""
    if topn is None:
        return mask
    return ops.logical_and(mask, positions <= topn)


def _safe_ranks(ranks, mask):
    """Ranks with padded entries set to 1, so 1/r and log(1+r) stay finite there."""
    return ops.where(mask, ranks, ops.ones_like(ranks))


def _where(condition, values):
    return ops.where(condition, values, ops.zeros_like(values))


def _cumulative(values, product: bool = False):
    """Cumulative sums (or products) along the last axis, in the dtype of ``values``.

    Keras 3.15's PyTorch ``cumsum`` and ``cumprod`` compute in
    ``keras.backend.result_type``, which maps float64 to float32; there torch's
    own keep float64."""
    if keras.backend.backend() == "torch":
        import torch  # pylint: disable=import-outside-toplevel
        return (torch.cumprod if product else torch.cumsum)(values, dim=-1)
    return (ops.cumprod if product else ops.cumsum)(values, axis=-1)


def _position_ranks(values):
    """1, 2, ..., K along the last axis, in the dtype and shape of ``values``."""
    return _cumulative(ops.ones_like(values))


def _precision_form(labels, ranks, mask, topn, positions):
    """Eq. 13: w_d = b_d p_d, normalized by k."""
    positions = _positions(ranks, mask, positions)
    relevant = ops.logical_and(_cutoff(positions, mask, topn), labels > 0)
    num_valid = ops.sum(ops.cast(mask, ranks.dtype), axis=-1)
    k = num_valid if topn is None else numerics.minimum(num_valid, topn)
    return _where(relevant, ops.cast(positions, ranks.dtype)), k, RECIPROCAL


def _average_precision_weights(labels, ranks, mask, topn, positions):
    """Eq. 30's w_d = b_d p_d sum_{e: p_d <= p_e <= k} (b_e / p_e), and the
    number R of relevant documents of each list."""
    positions = _positions(ranks, mask, positions)
    order = sorting.order_from_positions(positions)
    relevant = ops.logical_and(_cutoff(positions, mask, topn), labels > 0)
    pos = ops.cast(positions, ranks.dtype)
    # b_e / p_e in position order, then its suffix sums: S_p = sum_{q >= p}.
    contrib_by_position = lists.batch_gather(_where(relevant, 1.0 / pos), order)
    suffix = ops.flip(_cumulative(ops.flip(contrib_by_position, axis=-1)), axis=-1)
    suffix_per_doc = lists.batch_gather(suffix, positions - 1)
    num_relevant = ops.sum(ops.cast(ops.logical_and(mask, labels > 0), ranks.dtype), axis=-1)
    return _where(relevant, pos * suffix_per_doc), num_relevant


def _average_precision_form(labels, ranks, mask, topn, positions):
    """Eq. 30, normalized by |Y+| = R."""
    weights, num_relevant = _average_precision_weights(labels, ranks, mask, topn, positions)
    return weights, num_relevant, RECIPROCAL


def _average_precision_min_form(labels, ranks, mask, topn, positions):
    """Eq. 30, normalized by min(k, R) (LightGBM's map@k)."""
    weights, num_relevant = _average_precision_weights(labels, ranks, mask, topn, positions)
    norm = num_relevant if topn is None else numerics.minimum(num_relevant, topn)
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
    order = sorting.order_from_positions(positions)
    by_position = _err_by_position(lists.batch_gather(stop_prob, order))
    weights = lists.batch_gather(by_position, positions - 1)
    return _where(_cutoff(positions, mask, topn), weights)


def _nerr_form(labels, ranks, mask, topn, positions):
    """Eq. 16: the ERR weights, normalized by the ideal ERR@k."""
    stop_prob = _stop_probabilities(labels, mask)
    weights = _err_weights(stop_prob, ranks, mask, topn, positions)
    return weights, _ideal_err_of(stop_prob, mask, topn), RECIPROCAL


def _evaluate(form, ranks, mask):
    """sum_d w_d f(r_d) / norm for a form ``(w, norm, f)`` (0 where norm is 0)."""
    weights, norm, transform = form
    value = ops.sum(weights * transform.value(_safe_ranks(ranks, mask)), axis=-1)
    return numerics.safe_divide(value, norm)


def precision(labels, ranks, mask, topn: Optional[int] = None, positions=None):
    r"""Precision@k, Eq. 13: :math:`\frac{1}{k}\sum_{d: p_d \le k} b_d \, p_d / r_d`,
    ``k = min(topn, #valid)``. Gradient: Eq. 29."""
    return _evaluate(_precision_form(labels, ranks, mask, topn, positions), ranks, mask)


def average_precision(labels, ranks, mask, topn: Optional[int] = None, positions=None):
    r"""AP@k, Eq. 14 in the form of Eq. 30: :math:`\frac{1}{|Y^+|}\sum_{d: p_d\le k}
    b_d \frac{p_d}{r_d} \sum_{e:\, p_d \le p_e \le k} \frac{b_e}{p_e}` (``|Y^+|``:
    all relevant documents of the list). Gradient: Eq. 31."""
    return _evaluate(_average_precision_form(labels, ranks, mask, topn, positions), ranks, mask)


def average_precision_min(labels, ranks, mask, topn: Optional[int] = None, positions=None):
    r"""AP@k normalized by :math:`\min(k, |Y^+|)` (LightGBM's ``map@k``). Gradient:
    Eq. 31 with that norm."""
    return _evaluate(_average_precision_min_form(labels, ranks, mask, topn, positions),
                     ranks, mask)


def _ideal_dcg_of_gains(gains, mask, topn: Optional[int]):
    """DCG@k of the gains sorted descending.

    Where positions come from counting (JAX), the sum runs over the documents
    at their ideal positions: no inverse, no gather."""
    positions = sorting.counting_positions(gains, mask)
    if positions is not None:
        discounts = lists.log2_discount(ops.cast(positions, gains.dtype))
        return ops.sum(_where(_cutoff(positions, mask, topn), gains * discounts), axis=-1)
    ideal = sorting.sort_descending(gains, mask, topn)
    return ops.sum(ideal * lists.log2_discount(_position_ranks(ideal)), axis=-1)


def ideal_dcg(labels, mask, topn: Optional[int] = None):
    """DCG@k of the ideal ranking (labels sorted descending), ``[B]``."""
    return _ideal_dcg_of_gains(lists.gains(labels), mask, topn)


def ndcg(labels, ranks, mask, topn: Optional[int] = None, positions=None):
    r"""nDCG@k, Eq. 15: :math:`\frac{1}{DCG^*@k}\sum_{d: p_d\le k}
    \frac{2^{y_d}-1}{\log_2(r_d+1)}`. Gradient: Eq. 32."""
    return _evaluate(_ndcg_form(labels, ranks, mask, topn, positions), ranks, mask)


def _stop_probabilities(labels, mask):
    """R = (2^y - 1) / 2^{max y}, with the list's maximum label (Eq. 16)."""
    max_label = ops.max(_where(mask, labels), axis=-1, keepdims=True)
    stop_prob = lists.gains(labels) / ops.power(numerics.constant(2.0, labels.dtype), max_label)
    return _where(mask, stop_prob)


def _err_by_position(stop_prob_by_position):
    """R_p * prod_{q < p} (1 - R_q) for a list in position order."""
    survive = 1.0 - stop_prob_by_position
    # exclusive cumprod: the products of the first p - 1 factors
    shifted = ops.concatenate([ops.ones_like(survive[:, :1]), survive[:, :-1]], axis=-1)
    return _cumulative(shifted, product=True) * stop_prob_by_position


def _ideal_err_of(stop_prob, mask, topn: Optional[int]):
    ideal = sorting.sort_descending(stop_prob, mask, topn)  # sorting R sorts the labels
    return ops.sum(_err_by_position(ideal) / _position_ranks(ideal), axis=-1)


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
    "ap_min": _average_precision_min_form,
    "precision": _precision_form,
    "nerr": _nerr_form,
}


def rank_metric_function(name: str):
    """The per-list metric of ranks for any name of the vocabulary (``"map"``
    gives :func:`average_precision`)."""
    return RANK_METRICS[vocabulary.canonical_metric(name)]


def value_and_rank_gradient(metric: str, labels, ranks, mask, topn: Optional[int] = None,
                            positions=None):
    r"""A metric (any name of the vocabulary) ``[B]`` and its derivative with
    respect to the ranks ``[B, L]``: :math:`\partial M / \partial r_d = w_d
    f'(r_d) / Z` (0 at padded documents and beyond the cutoff): Eq. 29
    (Precision), 31 (AP), 32 (nDCG) and 33 (nERR), positions held constant.
    No gradient flows through either output.

    >>> labels, ranks = ops.array([[0., 1.]]), ops.array([[1., 2.]])
    >>> value, grad = value_and_rank_gradient("precision", labels, ranks, labels >= 0)
    >>> float(value[0]), float(grad[0, 1])  # (1/2) 2/r and -(1/2) 2/r^2 at r = 2
    (0.5, -0.25)
    """
    ranks = ops.stop_gradient(ops.convert_to_tensor(ranks))
    form = _FORMS[vocabulary.canonical_metric(metric)](labels, ranks, mask, topn, positions)
    weights, norm, transform = form
    rank_gradient = numerics.safe_divide(
        weights * transform.derivative(_safe_ranks(ranks, mask)), norm[:, None])
    return _evaluate(form, ranks, mask), rank_gradient


def exact_metric(metric: str, labels, scores, topn: Optional[int] = None, mask=None):
    """The exact per-list metric ``[B]`` of ``scores`` (any name of the
    vocabulary): the metric of this module at the ranks of a sort (ties to the
    lower index, padded documents last), as :func:`tfr_extensions.metrics.ndcg`
    and its siblings compute it with TensorFlow. ``labels`` < 0 mark padding;
    ``mask`` narrows validity."""
    function = rank_metric_function(metric)
    topn = validation.validate_topn(topn)
    labels, scores, valid = lists.prepare_lists(labels, scores, mask)
    positions = sorting.exact_ranks(scores, valid)
    return function(labels, ops.cast(positions, scores.dtype), valid, topn, positions)


def exact_metric_function(name: str) -> Callable:
    """The exact per-list metric of scores, ``f(labels, scores, topn=None,
    mask=None) -> [B]``, for any name of the vocabulary: the twin of
    :func:`tfr_extensions.metrics.metric_function` (what
    :class:`tfr_extensions.metrics.RankingMetric` computes on JAX and PyTorch).
    ``ValueError`` for an unknown name."""
    metric = vocabulary.canonical_metric(name)

    def exact(labels, scores, topn: Optional[int] = None, mask=None):
        return exact_metric(metric, labels, scores, topn, mask)

    exact.__name__ = f"exact_{metric}"
    return exact
