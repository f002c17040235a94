"""Independent NumPy oracles: exact IR metrics and the twin-sigmoid paper's
closed-form gradients (Eq. 17-21, 27-33), written per list with plain loops and
sorts, sharing no code with the package.

Lists are 1-D arrays; a label < 0 marks padding. Scores are assumed distinct.
"""
import importlib
import math
import pkgutil
from typing import Callable, Dict

import numpy as np

#: registry key -> the loss's per-list oracle for the bad-input suite,
#: ``oracle(config, y, s) -> [(value, gradient), ...]`` over one list's valid documents
#: (every candidate a random tie break or sampled ranking may give); filled by
#: :func:`per_list_oracle` in the ``oracles_*`` modules of this package
PER_LIST_ORACLES: Dict[str, Callable] = {}


def per_list_oracle(key: str):
    """Decorator: registers the per-list oracle of loss ``key``."""
    def register(oracle: Callable) -> Callable:
        if key in PER_LIST_ORACLES:
            raise ValueError(f"Two per-list oracles for loss {key!r}.")
        PER_LIST_ORACLES[key] = oracle
        return oracle
    return register


def load_per_list_oracles() -> Dict[str, Callable]:
    """Imports every ``support/oracles_*`` module (each registers its oracles) and
    returns :data:`PER_LIST_ORACLES`."""
    import support  # pylint: disable=import-outside-toplevel
    for info in pkgutil.iter_modules(support.__path__):
        if info.name.startswith("oracles_"):
            importlib.import_module(f"support.{info.name}")
    return PER_LIST_ORACLES


def _valid(labels, scores):
    keep = labels >= 0
    return labels[keep].astype(np.float64), scores[keep].astype(np.float64), keep


def ranking(scores):
    """Indices by descending score (ties: lower index first)."""
    return np.argsort(-scores, kind="stable")


def dcg_at(sorted_labels, k):
    k = len(sorted_labels) if k is None else min(k, len(sorted_labels))
    return sum((2.0 ** sorted_labels[i] - 1.0) / math.log2(i + 2.0) for i in range(k))


def ndcg(labels, scores, k=None):
    y, s, _ = _valid(labels, scores)
    ideal = dcg_at(np.sort(y)[::-1], k)
    return 0.0 if ideal == 0 else dcg_at(y[ranking(s)], k) / ideal


def _average_precision(labels, scores, k, normalizer):
    """sum over relevant d in the top k of Precision@rank(d), over normalizer(R, k)."""
    y, s, _ = _valid(labels, scores)
    rel = (y[ranking(s)] > 0).astype(float)
    total = normalizer(rel.sum(), k)
    if total == 0:
        return 0.0
    k = len(rel) if k is None else min(k, len(rel))
    return sum(rel[i] * rel[: i + 1].sum() / (i + 1) for i in range(k)) / total


def average_precision(labels, scores, k=None):
    """AP@k normalized by all relevant documents (TF-Ranking's convention)."""
    return _average_precision(labels, scores, k, lambda relevant, k: relevant)


def average_precision_min(labels, scores, k=None):
    """AP@k normalized by min(k, |relevant|) (LightGBM's map@k)."""
    return _average_precision(labels, scores, k,
                              lambda relevant, k: relevant if k is None else min(k, relevant))


def precision(labels, scores, k=None):
    """Relevant in the top k over min(k, n) (TF-Ranking's convention)."""
    y, s, _ = _valid(labels, scores)
    rel = (y[ranking(s)] > 0).astype(float)
    k = len(rel) if k is None else min(k, len(rel))
    return rel[:k].sum() / k if k else 0.0


def err_at(sorted_labels, k, max_label):
    k = len(sorted_labels) if k is None else min(k, len(sorted_labels))
    total, not_stopped = 0.0, 1.0
    for i in range(k):
        r = (2.0 ** sorted_labels[i] - 1.0) / 2.0 ** max_label
        total += not_stopped * r / (i + 1)
        not_stopped *= 1.0 - r
    return total


def nerr(labels, scores, k=None):
    """nERR@k with R = (2^y - 1) / 2^max(y) (Eq. 16)."""
    y, s, _ = _valid(labels, scores)
    max_label = y.max() if len(y) else 0.0
    ideal = err_at(np.sort(y)[::-1], k, max_label)
    return 0.0 if ideal == 0 else err_at(y[ranking(s)], k, max_label) / ideal


METRIC_ORACLES = {"ndcg": ndcg, "ap": average_precision, "ap_min": average_precision_min,
           "precision": precision, "nerr": nerr}


# --- twin-sigmoid closed-form gradients -------------------------------------------

def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def twin_derivative(z, u, alpha, gradient):
    """d sigma+ / dz: Eq. 11 (type1), Eq. 20 (type2), Eq. 21 (type3)."""
    sb = sigmoid(alpha * z)
    if gradient == "type1":
        return alpha * sb * (1 - sb)
    if gradient == "type2":
        return u * alpha * sb * (1 - sb)
    if u > 0:
        return 2 * alpha * (1 - sb)
    if u < 0:
        return -2 * alpha * sb
    return 0.0


def rank_jacobian(y, s, alpha, gradient):
    """J[i, m] = d r_i / d s_m from Eq. 17-18 (27-28)."""
    n = len(s)
    jac = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            g = twin_derivative(s[i] - s[j], np.sign(y[i] - y[j]), alpha, gradient)
            jac[i, i] -= g
            jac[i, j] += g
    return jac


def metric_rank_gradient(y, s, metric, k):
    """d metric / d r_d at the exact ranks, from Eq. 29, 31, 32 and 33.

    Eq. 32 as printed omits the factor 1/ln 2 of d/dr log2(r + 1); the value
    here includes it (it is the true derivative of Eq. 15).
    """
    n = len(s)
    order = ranking(s)
    rank = np.empty(n)
    rank[order] = np.arange(1, n + 1)
    k_eff = n if k is None else min(k, n)
    b = (y > 0).astype(float)
    grad = np.zeros(n)
    if metric == "precision":  # Eq. 29: -b_i / (k r_i)
        for d in range(n):
            if rank[d] <= k_eff:
                grad[d] = -b[d] / (k_eff * rank[d])
    elif metric in ("ap", "ap_min"):  # Eq. 31: -b_i S_i / (|Y+| r_i); ap_min: min(k, |Y+|)
        total = b.sum() if metric == "ap" or k is None else min(k, b.sum())
        b_sorted = b[order]
        for d in range(n):
            p = int(rank[d])
            if p <= k_eff and total > 0:
                suffix = sum(b_sorted[q - 1] / q for q in range(p, k_eff + 1))
                grad[d] = -b[d] * suffix / (total * rank[d])
    elif metric == "ndcg":  # Eq. 32 (with 1/ln 2)
        ideal = dcg_at(np.sort(y)[::-1], k)
        for d in range(n):
            if rank[d] <= k_eff and ideal > 0:
                grad[d] = ((2 ** y[d] - 1) / ideal * -1 / math.log2(rank[d] + 1) ** 2
                           / (rank[d] + 1) / math.log(2))
    elif metric == "nerr":  # Eq. 33
        max_label = y.max()
        ideal = err_at(np.sort(y)[::-1], k, max_label)
        stop = (2.0 ** y[order] - 1) / 2.0 ** max_label
        for d in range(n):
            p = int(rank[d])
            if p <= k_eff and ideal > 0:
                reach = np.prod(1 - stop[: p - 1])
                grad[d] = -reach * stop[p - 1] / ideal / rank[d] ** 2
    return grad


def twin_loss_gradient(labels, scores, metric, k=None, alpha=1.0, gradient="type1"):
    """d(-metric)/d scores for one list, padded entries 0 (paper's closed form)."""
    y, s, keep = _valid(labels, scores)
    full = np.zeros(len(labels))
    if len(y) == 0 or not (y > 0).any():
        return full
    dm_dr = metric_rank_gradient(y, s, metric, k)
    full[keep] = -(dm_dr @ rank_jacobian(y, s, alpha, gradient))
    return full


# --- pairwise losses ----------------------------------------------------------------

def ranknet(labels, scores, sigma=1.0):
    """Mean over unordered valid pairs of Eq. 4, 0 without a relevant document."""
    y, s, _ = _valid(labels, scores)
    if not (y > 0).any():
        return 0.0
    costs = []
    for i in range(len(y)):
        for j in range(i + 1, len(y)):
            o = sigma * (s[i] - s[j])
            target = 0.5 * (1 + np.sign(y[i] - y[j]))
            p = sigmoid(o)
            costs.append(-target * math.log(p) - (1 - target) * math.log(1 - p))
    return float(np.mean(costs))


def dcg_beta(labels_in_order):
    """DCG_beta(g) = sum_i y_i (n - i), i 1-based (Eq. 12)."""
    n = len(labels_in_order)
    return sum(labels_in_order[i] * (n - (i + 1)) for i in range(n))


def ndcg_beta_hinge(labels, scores, margin=1.0, squared=False):
    """Eq. 20 per list: sum over y_i > y_j of (y_i - y_j)/DCG_beta(pi) * hinge."""
    y, s, _ = _valid(labels, scores)
    norm = dcg_beta(np.sort(y)[::-1])
    if norm == 0:
        return 0.0
    total = 0.0
    for i in range(len(y)):
        for j in range(len(y)):
            if y[i] > y[j]:
                h = max(0.0, margin - (s[i] - s[j]))
                total += (y[i] - y[j]) / norm * (h * h if squared else h)
    return total
