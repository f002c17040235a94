r"""A float64 NumPy oracle of WassRank, value and gradient, one list of valid documents at
a time, written from the definitions (Yu, Jatowt, Joho, Jose, Yang and Chen, "WassRank:
Listwise Document Ranking Using Optimal Transport Theory", WSDM 2019; the ground costs
after PT-Ranking, ``ltr_adhoc/listwise/wassrank``) with plain loops, independent of the
loss bodies:

* predicted distribution :math:`a = \mathrm{softmax}(s)`; target :math:`b_j = (2^{y_j} -
  1)/\sum_k (2^{y_k} - 1)` over the documents with a gain (``"gain"``) or
  :math:`\mathrm{softmax}(y)` (``"softmax"``);
* ground costs (:func:`ground_cost`) with :math:`G_i = \beta^{y_i} - 1` and the ideal
  1-based positions :math:`\rho_i` (labels sorted descending, ties by index);
* log-space Sinkhorn from :math:`f = g = 0`, g first: :math:`g_j = \epsilon_k(\log b_j -
  \mathrm{LSE}_i((f_i - C_{ij})/\epsilon_k))`, :math:`f_i = \epsilon_k(\log a_i -
  \mathrm{LSE}_j((g_j - C_{ij})/\epsilon_k))`, with :math:`\epsilon_k = \lambda`, or with
  epsilon scaling (Schmitzer 2019) :math:`\epsilon_k = \max(\lambda, c\,q^k)`, c the
  list's largest cost (at least :math:`\lambda`) and :math:`q = (\lambda/c)^{1/\max(1,
  \lfloor K/2 \rfloor)}` (from c down to :math:`\lambda` over the first half of the K
  iterations);
* the loss :math:`\langle P, C\rangle`, :math:`P_{ij} = e^{(f_i + g_j - C_{ij})/\lambda}`,
  and the dual-potential gradient of the paper (after Frogner et al. 2015) through the
  softmax: :math:`a_i (f_i - \sum_k a_k f_k)`.
"""
import math

import numpy as np
from scipy.special import logsumexp

from support import oracles_pairwise


def ideal_positions(labels):
    """1-based positions of the documents sorted by descending label, ties by index."""
    labels = np.asarray(labels, np.float64)
    positions = np.zeros(len(labels), dtype=int)
    for place, doc in enumerate(sorted(range(len(labels)), key=lambda i: (-labels[i], i))):
        positions[doc] = place + 1
    return positions


def ground_cost(labels, cost_type="eg", gain_base=4.0, non_rele_gap=100.0, var_penalty=math.e):
    r"""``[n, n]``: ``"eg"`` and ``"dg"`` as :func:`support.oracles_pairwise.wassrank_cost`;
    ``"ddg"`` :math:`|G_i - G_j|\,|D_i - D_j|`, :math:`D_i = 1/\log_2(1 + \rho_i)`;
    ``"p1"`` :math:`|\rho_i - \rho_j|`; ``"p2"`` its square; 0 on the diagonal."""
    if cost_type in ("eg", "dg"):
        return oracles_pairwise.wassrank_cost(labels, cost_type, gain_base, non_rele_gap,
                                              var_penalty)
    y = np.asarray(labels, np.float64)
    gains = gain_base ** y - 1.0
    rho = ideal_positions(y)
    n = len(y)
    cost = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            if cost_type == "ddg":
                cost[i, j] = (abs(gains[i] - gains[j])
                              * abs(1.0 / math.log2(1 + rho[i]) - 1.0 / math.log2(1 + rho[j])))
            elif cost_type == "p1":
                cost[i, j] = abs(rho[i] - rho[j])
            elif cost_type == "p2":
                cost[i, j] = (rho[i] - rho[j]) ** 2
            else:
                raise ValueError(f"unknown cost_type {cost_type!r}")
    return cost


def sinkhorn_potentials(a, b, cost, regularization, iterations, epsilon_scaling):
    """``(f, g)`` after ``iterations`` log-space Sinkhorn iterations (module docstring)."""
    f, g = np.zeros(len(a)), np.zeros(len(b))
    start = max(float(cost.max()), regularization) if epsilon_scaling else regularization
    ratio = (regularization / start) ** (1.0 / max(iterations // 2, 1))
    for k in range(iterations):
        eps = max(regularization, start * ratio ** k)
        g = eps * (np.log(b) - logsumexp((f[:, None] - cost) / eps, axis=0))
        f = eps * (np.log(a) - logsumexp((g[None, :] - cost) / eps, axis=1))
    return f, g


def softmax(x):
    x = np.asarray(x, np.float64)
    return np.exp(x - logsumexp(x))


def wassrank(labels, scores, regularization=0.1, sinkhorn_iterations=20, cost_type="eg",
             target="gain", gain_base=4.0, non_rele_gap=100.0, var_penalty=math.e,
             epsilon_scaling=True):
    """``(<P, C>, dual-potential gradient)`` of one list (every document valid); 0 and
    zero gradient without a relevant document."""
    y, s = np.asarray(labels, np.float64), np.asarray(scores, np.float64)
    if not (y > 0).any():
        return 0.0, np.zeros(len(y))
    cost = ground_cost(y, cost_type, gain_base, non_rele_gap, var_penalty)
    a = softmax(s)
    if target == "softmax":
        columns, b = np.ones(len(y), bool), softmax(y)
    else:
        gains = 2.0 ** y - 1.0
        columns = gains > 0
        b = gains[columns] / gains.sum()
    cost = cost[:, columns]
    f, g = sinkhorn_potentials(a, b, cost, regularization, sinkhorn_iterations,
                               epsilon_scaling)
    plan = np.exp((f[:, None] + g[None, :] - cost) / regularization)
    return float(np.sum(plan * cost)), a * (f - a @ f)
