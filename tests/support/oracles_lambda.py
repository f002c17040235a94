r"""An independent NumPy oracle of LambdaLoss (Wang et al., "The LambdaLoss Framework
for Ranking Metric Optimization", CIKM 2018), one list at a time, float64, with
plain loops over the pairs, written from the paper's weighting schemes as allRank
states them (``allrank/models/losses/lambdaLoss.py``), not from the package's bodies.

A list's loss is :math:`\sum_{(i,j)} w_{ij}\,(-\log_2 \mathrm{sigmoid}(\sigma(s_i - s_j)))`
over the pairs (i, j) of valid documents with :math:`y_i > y_j` (every ordered pair,
i = j included, for ``ndcg_loss1``), both ranked within ``topn``; ranks sort the
scores descending, ties to the lower index; :math:`G_i = (2^{y_i} - 1)/maxDCG@k`,
:math:`D_i = \log_2(1 + r_i)`. 0 for a list without a relevant document.

Lists are 1-D arrays; a label < 0 marks padding (left out; its gradient entry is 0).
"""
import math

import numpy as np

WEIGHTINGS = ("ranknet", "lambdarank", "ndcg_loss1", "ndcg_loss2", "ndcg_loss2pp")


def _valid(labels, scores):
    labels, scores = np.asarray(labels, np.float64), np.asarray(scores, np.float64)
    keep = labels >= 0
    return labels[keep], scores[keep], keep


def predicted_ranks(scores):
    """1-based ranks by descending score, ties to the lower index."""
    ranks = np.zeros(len(scores), dtype=int)
    for position, doc in enumerate(np.argsort(-scores, kind="stable")):
        ranks[doc] = position + 1
    return ranks


def ideal_dcg(labels, topn=None):
    """DCG@k of the labels sorted descending."""
    gains = np.sort(2.0 ** labels - 1.0)[::-1]
    k = len(gains) if topn is None else min(topn, len(gains))
    return sum(gains[r - 1] / math.log2(1 + r) for r in range(1, k + 1))


def pair_weight(weighting, i, j, gains, ranks, mu):
    """w_ij of one pair; ``gains`` already divided by maxDCG@k."""
    def inv_d(rank):
        return 1.0 / math.log2(1.0 + rank)

    if weighting == "ranknet":
        return 1.0
    if weighting == "ndcg_loss1":
        return gains[i] * inv_d(ranks[i])
    gain_gap = abs(gains[i] - gains[j])
    lambdarank = abs(inv_d(ranks[i]) - inv_d(ranks[j]))
    if weighting == "lambdarank":
        return gain_gap * lambdarank
    d = abs(ranks[i] - ranks[j])
    delta = abs(inv_d(d) - inv_d(d + 1)) if d > 0 else 0.0
    if weighting == "ndcg_loss2":
        return gain_gap * delta
    if weighting == "ndcg_loss2pp":
        return gain_gap * (mu * delta + lambdarank)
    raise ValueError(weighting)


def summed_pairs(labels, ranks, weighting, topn):
    """The ordered pairs (i, j) the loss sums."""
    out = []
    for i in range(len(labels)):
        for j in range(len(labels)):
            if weighting != "ndcg_loss1" and not labels[i] > labels[j]:
                continue
            if topn is not None and (ranks[i] > topn or ranks[j] > topn):
                continue
            out.append((i, j))
    return out


def minus_log2_sigmoid(x):
    """-log2(1 / (1 + e^-x)), stable for any x."""
    return np.logaddexp(0.0, -x) / math.log(2.0)


def lambda_loss_and_gradient(labels, scores, weighting="ndcg_loss2pp", sigma=1.0, mu=10.0,
                             topn=None):
    r"""``(value, d value / d scores)`` of one list. The weights are constants (the
    ranks are piecewise constant in the scores), so
    :math:`\partial/\partial s_i = -\partial/\partial s_j =
    -w_{ij}\,\sigma\,\mathrm{sigmoid}(-\sigma(s_i - s_j)) / \ln 2` per pair."""
    y, s, keep = _valid(labels, scores)
    full = np.zeros(len(keep))
    norm = ideal_dcg(y, topn)
    if norm == 0:
        return 0.0, full
    gains = (2.0 ** y - 1.0) / norm
    ranks = predicted_ranks(s)
    value, grad = 0.0, np.zeros(len(y))
    for i, j in summed_pairs(y, ranks, weighting, topn):
        w = pair_weight(weighting, i, j, gains, ranks, mu)
        x = sigma * (s[i] - s[j])
        value += w * minus_log2_sigmoid(x)
        slope = -w * sigma / (1.0 + math.exp(min(x, 700.0))) / math.log(2.0)
        grad[i] += slope
        grad[j] -= slope
    full[keep] = grad
    return value, full


def lambda_loss(labels, scores, weighting="ndcg_loss2pp", sigma=1.0, mu=10.0, topn=None):
    """The value of one list's loss."""
    return lambda_loss_and_gradient(labels, scores, weighting, sigma, mu, topn)[0]
