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

A list without relevant documents (label > 0) scores 0 with zero gradient.
Relevance for Precision and AP is binary: label > 0.
"""
from typing import Optional

import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import sorting


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


def _normalize(value: tf.Tensor, norm: tf.Tensor) -> tf.Tensor:
    """value / norm, and 0 (with zero gradient) where norm == 0."""
    positive = norm > 0
    return tf.where(positive, value / tf.where(positive, norm, tf.constant(1, norm.dtype)),
                    tf.constant(0, value.dtype))


def _ideal_labels(labels, mask, topn: Optional[int]) -> tf.Tensor:
    """Labels sorted descending (the ideal ranking), first ``topn`` only, ``[B, K]``;
    padded entries are 0, so they add no gain."""
    return sorting.sort_descending(labels, mask, topn)


def _position_ranks(values: tf.Tensor) -> tf.Tensor:
    """1, 2, ..., K along the last axis, in the dtype and shape of ``values``."""
    return tf.cumsum(tf.ones_like(values), axis=-1)


def precision(labels, ranks, mask, topn: Optional[int] = None, positions=None) -> tf.Tensor:
    r"""Precision@k, Eq. 13: :math:`\frac{1}{k}\sum_{d: p_d \le k} b_d \, p_d / r_d`.

    ``b_d = [label_d > 0]``; ``k = min(topn, #valid)`` as in TF-Ranking's
    ``PrecisionMetric`` (``#valid`` without a cutoff). Gradient: Eq. 29.
    """
    positions = _positions(ranks, mask, positions)
    in_top = _cutoff(positions, mask, topn)
    relevant = tf.cast(tf.logical_and(in_top, labels > 0), ranks.dtype)
    pos = tf.cast(positions, ranks.dtype)
    hits = tf.reduce_sum(relevant * pos / _safe_ranks(ranks, mask), axis=-1)
    num_valid = tf.reduce_sum(tf.cast(mask, ranks.dtype), axis=-1)
    k = num_valid if topn is None else tf.minimum(num_valid, float(topn))
    return _normalize(hits, k)


def average_precision(labels, ranks, mask, topn: Optional[int] = None,
                      positions=None) -> tf.Tensor:
    r"""AP@k, Eq. 14 in the form of Eq. 30:
    :math:`\frac{1}{|Y^+|}\sum_{d: p_d\le k} b_d \frac{p_d}{r_d}
    \sum_{e:\, p_d \le p_e \le k} \frac{b_e}{p_e}`.

    ``|Y^+|`` counts all relevant documents of the list, also beyond the cutoff,
    as TF-Ranking's ``MeanAveragePrecisionMetric`` does. Gradient: Eq. 31.
    """
    positions = _positions(ranks, mask, positions)
    order = sorting.order_from_positions(positions)
    in_top = _cutoff(positions, mask, topn)
    relevant = tf.logical_and(in_top, labels > 0)
    pos = tf.cast(positions, ranks.dtype)
    # b_e / p_e in position order, then its suffix sums: S_p = sum_{q >= p}.
    contrib = tf.where(relevant, 1.0 / pos, tf.constant(0, pos.dtype))
    contrib_by_position = tf.gather(contrib, order, batch_dims=1)
    suffix = tf.cumsum(contrib_by_position, axis=-1, reverse=True)
    suffix_per_doc = tf.gather(suffix, positions - 1, batch_dims=1)
    terms = tf.where(relevant, pos / _safe_ranks(ranks, mask) * suffix_per_doc,
                     tf.constant(0, pos.dtype))
    num_relevant = tf.reduce_sum(
        tf.cast(tf.logical_and(mask, labels > 0), ranks.dtype), axis=-1)
    return _normalize(tf.reduce_sum(terms, axis=-1), num_relevant)


def ideal_dcg(labels, mask, topn: Optional[int] = None) -> tf.Tensor:
    """DCG@k of the ideal ranking (labels sorted descending), ``[B]``."""
    ideal = _ideal_labels(labels, mask, topn)
    return tf.reduce_sum(lists.gains(ideal) * lists.log2_discount(_position_ranks(ideal)),
                         axis=-1)


def dcg(labels, ranks, mask, topn: Optional[int] = None, positions=None) -> tf.Tensor:
    r"""DCG@k: :math:`\sum_{d: p_d \le k} (2^{y_d}-1) / \log_2(1 + r_d)`."""
    in_top = mask
    if topn is not None:
        positions = _positions(ranks, mask, positions)
        in_top = _cutoff(positions, mask, topn)
    terms = lists.gains(labels) * lists.log2_discount(_safe_ranks(ranks, mask))
    return tf.reduce_sum(tf.where(in_top, terms, tf.constant(0, terms.dtype)), axis=-1)


def ndcg(labels, ranks, mask, topn: Optional[int] = None, positions=None) -> tf.Tensor:
    r"""nDCG@k, Eq. 15: :math:`\frac{1}{DCG^*@k}\sum_{d: p_d\le k}
    \frac{2^{y_d}-1}{\log_2(r_d+1)}`. Gradient: Eq. 32."""
    return _normalize(dcg(labels, ranks, mask, topn, positions), ideal_dcg(labels, mask, topn))


def _stop_probabilities(labels, mask):
    """R = (2^y - 1) / 2^{max y}, with the list's maximum label (Eq. 16)."""
    max_label = tf.reduce_max(tf.where(mask, labels, tf.constant(0, labels.dtype)),
                              axis=-1, keepdims=True)
    stop_prob = lists.gains(labels) / tf.pow(tf.constant(2.0, labels.dtype), max_label)
    return tf.where(mask, stop_prob, tf.constant(0, stop_prob.dtype))


def _err_by_position(stop_prob_by_position):
    """R_p * prod_{q < p} (1 - R_q) for a list in position order."""
    reach = tf.math.cumprod(1.0 - stop_prob_by_position, axis=-1, exclusive=True)
    return reach * stop_prob_by_position


def err(labels, ranks, mask, topn: Optional[int] = None, positions=None) -> tf.Tensor:
    r"""ERR@k, Eq. 9 with ranks: :math:`\sum_{d: p_d\le k}
    \frac{R_d\prod_{e: p_e<p_d}(1-R_e)}{r_d}`, :math:`R=\frac{2^y-1}{2^{\max y}}`."""
    positions = _positions(ranks, mask, positions)
    order = sorting.order_from_positions(positions)
    in_top = _cutoff(positions, mask, topn)
    stop_prob = _stop_probabilities(labels, mask)
    weights = tf.gather(_err_by_position(tf.gather(stop_prob, order, batch_dims=1)),
                        positions - 1, batch_dims=1)
    terms = weights / _safe_ranks(ranks, mask)
    return tf.reduce_sum(tf.where(in_top, terms, tf.constant(0, terms.dtype)), axis=-1)


def ideal_err(labels, mask, topn: Optional[int] = None) -> tf.Tensor:
    """ERR@k of the ideal ranking, ``[B]``."""
    ideal = _stop_probabilities(labels, mask)  # sorting R sorts the labels
    ideal = _ideal_labels(ideal, mask, topn)
    return tf.reduce_sum(_err_by_position(ideal) / _position_ranks(ideal), axis=-1)


def nerr(labels, ranks, mask, topn: Optional[int] = None, positions=None) -> tf.Tensor:
    r"""nERR@k, Eq. 16: ERR@k over the ideal ranking's ERR@k. Gradient: Eq. 33."""
    return _normalize(err(labels, ranks, mask, topn, positions), ideal_err(labels, mask, topn))


METRICS = {
    "precision": precision,
    "ap": average_precision,
    "ndcg": ndcg,
    "nerr": nerr,
}
