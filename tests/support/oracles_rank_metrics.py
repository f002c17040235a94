r"""A float64 NumPy oracle of the IR metrics as functions of (real-valued) ranks and their
rank derivatives, one list of valid documents at a time, written from Yu, "Optimize What
You Evaluate With" (``twin-sigmoid-direct-metric-optimization.txt``), Eq. 12-16 and
29-33, with plain loops.

Each document d has an integer *position* :math:`p_d` (its place in the sorted order:
the ``i`` of Eq. 13-14 and 30, the positions that the cutoff k and the ERR products
count) and a rank :math:`\bar r_d` (Eq. 12; equal to the position for exact ranks, the
mean of the tied positions at ties without tie breaking). The positions are constants;
the derivatives are with respect to the ranks:

* Precision@k (Eq. 13, 29): :math:`\frac1k\sum_{d: p_d \le k} b_d\,p_d/\bar r_d`, with
  k = min(topn, n);
* AP (Eq. 14 in the form of Eq. 30, 31): :math:`\frac{1}{Z}\sum_{d: p_d\le k} b_d
  \frac{p_d}{\bar r_d}\sum_{e: p_d \le p_e \le k} \frac{b_e}{p_e}`, Z = :math:`|Y^+|`
  (``"ap"``) or :math:`\min(k, |Y^+|)` (``"ap_min"``, with a cutoff);
* nDCG@k (Eq. 15, 32): :math:`\frac{1}{DCG^*@k}\sum_{d: p_d \le k}
  \frac{2^{y_d}-1}{\log_2(1 + \bar r_d)}`;
* nERR@k (Eq. 16, 33): :math:`\frac{1}{ERR^*@k}\sum_{d: p_d \le k}
  \frac{R_d \prod_{e: p_e < p_d}(1 - R_e)}{\bar r_d}`, :math:`R = (2^y - 1)/2^{\max y}`;

0 (and a zero derivative) for a list without a relevant document (label > 0).
"""
import math

import numpy as np

METRICS = ("ndcg", "ap", "ap_min", "precision", "nerr")


def positions_of(scores, tie_keys=None):
    """1-based positions by descending score; ties to the larger tie key, or without
    keys to the lower index."""
    scores = np.asarray(scores, np.float64)
    keys = np.zeros(len(scores)) if tie_keys is None else np.asarray(tie_keys, np.float64)
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], -keys[i], i))
    positions = np.zeros(len(scores), dtype=int)
    for place, doc in enumerate(order):
        positions[doc] = place + 1
    return positions


def midranks(scores):
    """Eq. 12 at exact scores: 1 + the documents scoring higher + half the other
    documents tied with it."""
    s = np.asarray(scores, np.float64)
    return np.array([1.0 + np.sum(s > x) + 0.5 * (np.sum(s == x) - 1) for x in s])


def _ideal_dcg(labels, k):
    gains = np.sort(2.0 ** labels - 1.0)[::-1]
    return sum(gains[i] / math.log2(i + 2.0) for i in range(k))


def _err_weights_by_position(stop):
    """R_p prod_{q < p} (1 - R_q) for stopping probabilities in position order."""
    out, survive = np.zeros(len(stop)), 1.0
    for p, r in enumerate(stop):
        out[p] = survive * r
        survive *= 1.0 - r
    return out


def metric_of_ranks(labels, ranks, positions, metric, topn=None):
    """``(value, d value / d ranks)`` of one list of valid documents (module docstring)."""
    y = np.asarray(labels, np.float64)
    r = np.asarray(ranks, np.float64)
    p = np.asarray(positions, int)
    n = len(y)
    grad = np.zeros(n)
    if n == 0 or not (y > 0).any():
        return 0.0, grad
    k = n if topn is None else min(topn, n)
    inside = p <= k
    b = (y > 0).astype(np.float64)
    if metric == "precision":
        weights, norm, transform = np.where(inside, b * p, 0.0), float(k), "reciprocal"
    elif metric in ("ap", "ap_min"):
        weights = np.zeros(n)
        for d in range(n):
            if inside[d] and b[d]:
                weights[d] = p[d] * sum(b[e] / p[e] for e in range(n)
                                        if p[d] <= p[e] <= k)
        norm = b.sum() if metric == "ap" or topn is None else min(topn, b.sum())
        transform = "reciprocal"
    elif metric == "ndcg":
        weights = np.where(inside, 2.0 ** y - 1.0, 0.0)
        norm, transform = _ideal_dcg(y, k), "log"
    elif metric == "nerr":
        stop = (2.0 ** y - 1.0) / 2.0 ** y.max()
        order = np.argsort(p)
        by_position = _err_weights_by_position(stop[order])
        weights = np.zeros(n)
        weights[order] = by_position
        weights = np.where(inside, weights, 0.0)
        ideal = _err_weights_by_position(np.sort(stop)[::-1])[:k]
        norm, transform = float(np.sum(ideal / np.arange(1, k + 1))), "reciprocal"
    else:
        raise ValueError(f"unknown metric {metric!r}")
    if transform == "reciprocal":
        value = np.sum(weights / r) / norm
        grad = -weights / r ** 2 / norm
    else:
        value = np.sum(weights / np.log2(1.0 + r)) / norm
        grad = -weights / np.log2(1.0 + r) ** 2 / ((1.0 + r) * math.log(2.0)) / norm
    return float(value), grad

