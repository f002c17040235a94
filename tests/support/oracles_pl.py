"""Independent NumPy oracles for the Plackett-Luce model and its policy gradients.

Written straight from Eq. 12 of the policy-gradient diagnostic paper (sequential
softmax over the remaining documents), with plain loops: no TensorFlow.
"""
import itertools

import numpy as np


def pl_log_prob(scores, ranking, valid=None, temperature=1.0):
    """log P(ranking) for one list: the product over positions of
    exp(s_i/T) / sum_{remaining valid j} exp(s_j/T); padded positions skipped."""
    scores = np.asarray(scores, np.float64) / temperature
    valid = np.ones(len(scores), bool) if valid is None else np.asarray(valid, bool)
    remaining = set(np.flatnonzero(valid).tolist())
    total = 0.0
    for doc in ranking:
        if not valid[doc]:
            continue
        rest = np.array(sorted(remaining))
        top = scores[rest].max()
        total += scores[doc] - (top + np.log(np.exp(scores[rest] - top).sum()))
        remaining.remove(doc)
    return total


def dcg_at(labels, ranking):
    """DCG of the documents in ``ranking`` (1-based positions), gain 2^y - 1."""
    labels = np.asarray(labels, np.float64)
    return sum((2.0 ** labels[d] - 1.0) / np.log2(2.0 + i) for i, d in enumerate(ranking))


def ndcg_at(labels, ranking, n):
    """nDCG@n of a (prefix) ranking; 0 for a list without relevant documents."""
    labels = np.asarray(labels, np.float64)
    ideal = dcg_at(labels, np.argsort(-labels, kind="stable")[:n])
    return dcg_at(labels, ranking[:n]) / ideal if ideal > 0 else 0.0


def expected_ndcg(scores, labels, n, temperature=1.0):
    """E_{pi ~ PL}[nDCG@n(pi)] by enumerating every ordered n-prefix."""
    size = len(scores)
    return sum(np.exp(pl_log_prob(scores, prefix, temperature=temperature))
               * ndcg_at(labels, list(prefix), n)
               for prefix in itertools.permutations(range(size), n))


def expected_ndcg_gradient(scores, labels, n, temperature=1.0, step=1e-6):
    """d E[nDCG@n] / d scores by central finite differences of the enumeration."""
    scores = np.asarray(scores, np.float64)
    grad = np.zeros_like(scores)
    for i in range(len(scores)):
        up, down = scores.copy(), scores.copy()
        up[i] += step
        down[i] -= step
        grad[i] = (expected_ndcg(up, labels, n, temperature)
                   - expected_ndcg(down, labels, n, temperature)) / (2 * step)
    return grad


def softmax(scores, temperature=1.0):
    z = np.asarray(scores, np.float64) / temperature
    z = np.exp(z - z.max())
    return z / z.sum()
