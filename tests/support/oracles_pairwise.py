"""Independent NumPy oracles of the pairwise losses' gradients and of WassRank's ground
costs, one list at a time, written from the papers' definitions with plain loops
(float64). The pairwise losses' values are :func:`support.oracles.ranknet` and
:func:`support.oracles.ndcg_beta_hinge`; WassRank's Sinkhorn iterations are
:func:`support.oracles_softrank.sinkhorn_numpy`.

Lists are 1-D arrays; a label < 0 marks padding, whose gradient entry is 0.
"""
import math

import numpy as np
from scipy.special import expit

from support import oracles


def _valid(labels, scores):
    labels, scores = np.asarray(labels, np.float64), np.asarray(scores, np.float64)
    keep = labels >= 0
    return labels[keep], scores[keep], keep


def ranknet_gradient(labels, scores, sigma=1.0):
    r"""d/ds of RankNet's mean pair cost (Eq. 1-4 of the RankNet report):
    :math:`C_{ij} = -\bar P_{ij}\log P_{ij} - (1-\bar P_{ij})\log(1-P_{ij})`,
    :math:`P_{ij} = \sigma(o)`, :math:`o = \sigma_s(s_i - s_j)`, target
    :math:`\bar P_{ij} = (1 + \mathrm{sign}(y_i - y_j))/2`, so
    :math:`\partial C_{ij}/\partial s_i = \sigma_s(P_{ij} - \bar P_{ij})
    = -\partial C_{ij}/\partial s_j`;
    averaged over the unordered valid pairs. Zero without a relevant document."""
    y, s, keep = _valid(labels, scores)
    full = np.zeros(len(keep))
    if not (y > 0).any() or len(y) < 2:
        return full
    grad = np.zeros(len(y))
    pairs = 0
    for i in range(len(y)):
        for j in range(i + 1, len(y)):
            target = 0.5 * (1.0 + np.sign(y[i] - y[j]))
            slope = sigma * (oracles.sigmoid(sigma * (s[i] - s[j])) - target)
            grad[i] += slope
            grad[j] -= slope
            pairs += 1
    full[keep] = grad / pairs
    return full


def ndcg_beta_hinge_gradient(labels, scores, margin=1.0, squared=False):
    r"""d/ds of Eq. 20: :math:`\sum_{y_i > y_j} \tau_{ij}\,\phi(m - (s_i - s_j))`,
    :math:`\tau_{ij} = (y_i - y_j)/DCG_\beta(\pi^*)`, :math:`\phi(h) = \max(0, h)` (its
    derivative 1 for h > 0) or :math:`\max(0, h)^2` (derivative 2h); away from the kinks."""
    y, s, keep = _valid(labels, scores)
    full = np.zeros(len(keep))
    norm = oracles.dcg_beta(np.sort(y)[::-1])
    if norm == 0:
        return full
    grad = np.zeros(len(y))
    for i in range(len(y)):
        for j in range(len(y)):
            if y[i] > y[j]:
                h = margin - (s[i] - s[j])
                slope = (2.0 * h if squared else 1.0) if h > 0 else 0.0
                tau = (y[i] - y[j]) / norm
                grad[i] -= tau * slope
                grad[j] += tau * slope
    full[keep] = grad
    return full


def wassrank_cost(labels, cost_type="eg", gain_base=4.0, non_rele_gap=100.0,
                  var_penalty=math.e):
    r"""WassRank's ground cost between the valid documents of one list (every label
    >= 0), after PT-Ranking: with :math:`G_i = \beta^{y_i} - 1`,

    * ``"eg"``: :math:`|G'_i - G'_j|` for different labels, :math:`G'_i = G_i` for
      relevant documents and ``-non_rele_gap`` for the others; ``var_penalty``
      between distinct documents of one label; 0 on the diagonal;
    * ``"dg"``: :math:`|G_i - G_j|`.
    """
    y = np.asarray(labels, np.float64)
    gains = gain_base ** y - 1.0
    n = len(y)
    cost = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            if cost_type == "dg":
                cost[i, j] = abs(gains[i] - gains[j])
            elif cost_type == "eg":
                if y[i] == y[j]:
                    cost[i, j] = var_penalty
                else:
                    grouped = [gains[k] if y[k] > 0 else -non_rele_gap for k in (i, j)]
                    cost[i, j] = abs(grouped[0] - grouped[1])
            else:
                raise ValueError(f"no oracle for cost_type {cost_type!r}")
    return cost


def softmax(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


# --- extreme scores: the clipping the pairwise losses document --------------------------

F32_MAX = float(np.finfo(np.float32).max)


def clip_scores(scores, bound):
    """``(clip(scores, -bound, bound), active)``: the clipped scores and where the
    clip lets the gradient through (inside the closed interval)."""
    scores = np.asarray(scores, np.float64)
    return np.clip(scores, -bound, bound), np.abs(scores) <= bound


def ranknet_with_clipping(labels, scores, sigma=1.0, dtype_max=F32_MAX):
    r"""``(value, gradient)`` of RankNet's mean pair cost at any score: Eq. 4 in the form
    :math:`C_{ij} = -\bar P_{ij} o_{ij} + \log(1 + e^{o_{ij}})` (``logaddexp``: no
    overflow), on the scores clipped as the loss documents (to +-``dtype_max / 4``,
    times ``sigma``, clipped again; a clipped score has gradient 0). 0 without a
    relevant document or a pair."""
    y, s, keep = _valid(labels, scores)
    full = np.zeros(len(keep))
    clipped, inner = clip_scores(s, dtype_max / 4)
    scaled, outer = clip_scores(sigma * clipped, dtype_max / 4)
    active = inner & outer
    if not (y > 0).any() or len(y) < 2:
        return 0.0, full
    value, grad, pairs = 0.0, np.zeros(len(y)), 0
    for i in range(len(y)):
        for j in range(i + 1, len(y)):
            o = scaled[i] - scaled[j]
            target = 0.5 * (1.0 + np.sign(y[i] - y[j]))
            value += np.logaddexp(0.0, o) - target * o
            slope = sigma * (expit(o) - target)
            grad[i] += slope * active[i]
            grad[j] -= slope * active[j]
            pairs += 1
    full[keep] = grad / pairs
    return value / pairs, full


def ndcg_beta_hinge_with_clipping(labels, scores, margin=1.0, squared=False,
                                  dtype_max=F32_MAX):
    """``(value, gradient)`` of Eq. 20 on the scores clipped as the loss documents (to
    +-``dtype_max / 4``, +-``sqrt(dtype_max) / 4`` when ``squared``; a clipped score
    has gradient 0)."""
    bound = (np.sqrt(dtype_max) if squared else dtype_max) / 4
    y, s, keep = _valid(labels, scores)
    clipped, active = clip_scores(s, bound)
    value = oracles.ndcg_beta_hinge(y, clipped, margin, squared)
    grad = ndcg_beta_hinge_gradient(y, clipped, margin, squared) * active
    full = np.zeros(len(keep))
    full[keep] = grad
    return value, full
