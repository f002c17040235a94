r"""Float64 NumPy oracles of the policy-gradient losses on given rankings, one list at a
time, written from Yu et al., "Diagnostic Evaluation of Policy-Gradient-Based Ranking"
(``policy-gradient-ranking-diagnostic.txt``), Sections 4.1-4.4, with plain loops:

* the per-position terms of Eq. 12 (MDPRank's action log-probabilities, Eq. 7),
  :math:`\log P(a_t|s_t) = f_{\pi_t}/T - \log\sum_{b \in X_t} e^{f_b/T}` over the valid
  documents not yet placed (a top-n ranking's never-placed documents stay in every
  denominator), and their gradients :math:`(e_{\pi_t} - \mathrm{softmax}_{X_t}(f/T))/T`;
* the metric of a sampled (top-n) ranking at cutoff n, its documents at positions
  1..n (:func:`sampled_metric`), and its DCG rewards :math:`r_t = (2^{y_{\pi_t}} - 1) /
  \log_2(1 + t)`, over the ideal DCG@n when normalized;
* ExptUtility's REINFORCE surrogate (Eq. 4-5), :math:`-\frac1K\sum_k (M_k - b_k)\log
  P(\pi_k)` with :math:`b_k` the mean metric of the other samples (``baseline``), and
  MDPRank's, :math:`-\frac1K\sum_k\sum_t \gamma^t G_t^{(k)} \log P(a_t^{(k)}|s_t^{(k)})`,
  :math:`G_t = \sum_{i \ge t}\gamma^{i - t} r_i`; the rewards are constants, so the
  gradient is the score-function estimator.

A ranking is a sequence of document indices; positions holding a padded document
(``valid`` False) contribute nothing.
"""
import math

import numpy as np
from scipy.special import logsumexp

from support import oracles


def position_log_probs(scores, ranking, valid, temperature=1.0):
    """``(terms [n], d terms / d scores [n, L])`` of one ranking (0 at padded positions)."""
    x = np.asarray(scores, np.float64) / temperature
    valid = np.asarray(valid, bool)
    remaining = valid.copy()
    terms, grads = np.zeros(len(ranking)), np.zeros((len(ranking), len(x)))
    for t, doc in enumerate(ranking):
        if not valid[doc]:
            continue
        rest = np.flatnonzero(remaining)
        log_total = logsumexp(x[rest])
        terms[t] = x[doc] - log_total
        grads[t, rest] = -np.exp(x[rest] - log_total) / temperature
        grads[t, doc] += 1.0 / temperature
        remaining[doc] = False
    return terms, grads


def sampled_metric(metric, labels, ranking, valid):
    """The metric at cutoff n = len(ranking) of the ranking's documents at positions
    1..n, every other valid document after them (:data:`support.oracles.METRIC_ORACLES`)."""
    labels = np.where(valid, np.asarray(labels, np.float64), -1.0)
    placed = -np.full(len(labels), len(ranking) + 1.0)  # the others, tied after the ranking
    for position, doc in enumerate(ranking):
        placed[doc] = -float(position)
    return oracles.METRIC_ORACLES[metric](labels, placed, len(ranking))


def dcg_rewards(labels, ranking, valid, normalize=True):
    """``[n]``: the gain of each position's document over log2(1 + position), over the
    ideal DCG@n when ``normalize`` (then the sum is nDCG@n)."""
    y = np.where(valid, np.asarray(labels, np.float64), 0.0)
    rewards = np.array([(2.0 ** y[doc] - 1.0) / math.log2(2.0 + t) if valid[doc] else 0.0
                        for t, doc in enumerate(ranking)])
    if not normalize:
        return rewards
    gains = np.sort(2.0 ** y[np.asarray(valid, bool)] - 1.0)[::-1][:len(ranking)]
    ideal = np.sum(gains / np.log2(2.0 + np.arange(len(gains))))
    return rewards / ideal if ideal > 0 else np.zeros(len(ranking))


def expected_utility(labels, scores, rankings, valid, metric="ndcg", temperature=1.0,
                     baseline=False):
    """``(surrogate, gradient [L])`` of one list on its K sampled ``rankings``."""
    rewards = np.array([sampled_metric(metric, labels, r, valid) for r in rankings])
    advantages = rewards
    if baseline and len(rankings) > 1:
        advantages = rewards - (rewards.sum() - rewards) / (len(rankings) - 1)
    value, grad = 0.0, np.zeros(len(scores))
    for advantage, ranking in zip(advantages, rankings):
        terms, term_grads = position_log_probs(scores, ranking, valid, temperature)
        value -= advantage * terms.sum() / len(rankings)
        grad -= advantage * term_grads.sum(axis=0) / len(rankings)
    return value, grad


def mdprank(labels, scores, rankings, valid, gamma=1.0, temperature=1.0, normalize=True):
    """``(surrogate, gradient [L])`` of one list on its K sampled ``rankings``."""
    value, grad = 0.0, np.zeros(len(scores))
    for ranking in rankings:
        rewards = dcg_rewards(labels, ranking, valid, normalize)
        terms, term_grads = position_log_probs(scores, ranking, valid, temperature)
        for t in range(len(ranking)):
            discounted_return = sum(gamma ** i * rewards[i] for i in range(t, len(ranking)))
            value -= discounted_return * terms[t] / len(rankings)
            grad -= discounted_return * term_grads[t] / len(rankings)
    return value, grad
