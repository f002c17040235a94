r"""A float64 NumPy oracle of the twin-sigmoid loss for lists of any length, one list of
valid documents at a time: the ranks of Eq. 12 (exact forward; tied scores share their
mean position, or take the order of random tie keys), a metric of them
(:func:`support.oracles_rank_metrics.metric_of_ranks`, Eq. 13-16 and 29-33) and the
paper's rank Jacobian (Eq. 17-18, 27-28) with the derivatives of Eq. 11 (type1), 20
(type2) and 21 (type3), as :func:`support.oracles.rank_jacobian` writes them with loops,
here as ``[n, n]`` arrays (lists of a thousand documents).

``J[i, m] = d r_i / d s_m``: :math:`g_{im}` for m != i and :math:`-\sum_{j} g_{ij}` on
the diagonal, :math:`g_{ij} = \sigma^{+\prime}(s_i - s_j)` with
:math:`u_{ij} = \mathrm{sign}(y_i - y_j)`.
"""
import numpy as np
from scipy.special import expit

from support import oracles_rank_metrics


def twin_derivatives(z, u, alpha, gradient):
    """d sigma+ / dz elementwise: Eq. 11 (type1), Eq. 20 (type2), Eq. 21 (type3)."""
    z, u = np.asarray(z, np.float64), np.asarray(u, np.float64)
    sb = expit(alpha * z)
    if gradient == "type1":
        return alpha * sb * (1.0 - sb)
    if gradient == "type2":
        return u * alpha * sb * (1.0 - sb)
    return np.where(u > 0, 2.0 * alpha * (1.0 - sb), np.where(u < 0, -2.0 * alpha * sb, 0.0))


def rank_jacobian(labels, scores, alpha=1.0, gradient="type1"):
    """``[n, n]``: d r_i / d s_m (module docstring)."""
    y, s = np.asarray(labels, np.float64), np.asarray(scores, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        g = twin_derivatives(s[:, None] - s[None, :], np.sign(y[:, None] - y[None, :]), alpha,
                             gradient)
    np.fill_diagonal(g, 0.0)
    return g - np.diag(g.sum(axis=1))


def ranks_and_positions(scores, tie_break=False, tie_keys=None):
    """``(ranks, positions)`` of the exact forward: the positions of the sort (ties to
    the larger tie key, or to the lower index), and as ranks the positions with tie
    breaking, else the midranks (Eq. 12 at ties)."""
    positions = oracles_rank_metrics.positions_of(scores, tie_keys if tie_break else None)
    ranks = positions.astype(np.float64) if tie_break else oracles_rank_metrics.midranks(scores)
    return ranks, positions


def twin_sigmoid_loss(labels, scores, metric="ndcg", topn=None, gradient="type1", alpha_b=1.0,
                      tie_break=False, tie_keys=None):
    """``(-metric, d(-metric) / d scores)`` of one list (every document valid): the value
    at the exact ranks, the gradient the paper's chain rule; 0 without a relevant
    document."""
    y, s = np.asarray(labels, np.float64), np.asarray(scores, np.float64)
    ranks, positions = ranks_and_positions(s, tie_break, tie_keys)
    value, rank_gradient = oracles_rank_metrics.metric_of_ranks(y, ranks, positions, metric,
                                                                 topn)
    if not (y > 0).any():
        return 0.0, np.zeros(len(y))
    return -value, -(rank_gradient @ rank_jacobian(y, s, alpha_b, gradient))
