"""Independent NumPy oracles for SoftRank (softrank.txt, Eq. 8-23) and WassRank,
and a small training check shared by their tests.

The oracles are written from the papers' equations with plain loops, for small
lists only.
"""
import itertools
import math

import numpy as np
from tfr_extensions.backend import keras
from scipy.special import erfc, logsumexp

import tfr_extensions as tfrx


def win_probability(s_i, s_j, sigma):
    """Eq. 9: pi_ij = P(S_i > S_j) with S ~ N(s, sigma^2)."""
    return 0.5 * erfc(-(s_i - s_j) / (2.0 * sigma))


def rank_binomial(scores, sigma, valid=None):
    """Eq. 11-12 for one list: [L, L] with p[j, r] (0-based rank r); padded rows 0."""
    scores = np.asarray(scores, np.float64)
    n = len(scores)
    valid = np.ones(n, bool) if valid is None else np.asarray(valid, bool)
    out = np.zeros((n, n))
    for j in range(n):
        if not valid[j]:
            continue
        p = np.zeros(n)
        p[0] = 1.0  # Eq. 11
        for i in range(n):
            if i == j or not valid[i]:
                continue
            pi = win_probability(scores[i], scores[j], sigma)
            new = p * (1.0 - pi)
            new[1:] += p[:-1] * pi  # Eq. 12
            p = new
        out[j] = p
    return out


def rank_binomial_by_enumeration(scores, sigma):
    """Rank-Binomial by enumerating every win/lose outcome of the n-1 contests."""
    n = len(scores)
    out = np.zeros((n, n))
    for j in range(n):
        others = [i for i in range(n) if i != j]
        pis = [win_probability(scores[i], scores[j], sigma) for i in others]
        for outcome in itertools.product([0, 1], repeat=len(others)):
            prob = np.prod([pi if won else 1.0 - pi for pi, won in zip(pis, outcome)])
            out[j, sum(outcome)] += prob
    return out


def monte_carlo_ranks(scores, sigma, num_samples, rng):
    """The exact generative process of Section 3.2: sample, sort, histogram."""
    n = len(scores)
    samples = np.asarray(scores)[None, :] + sigma * rng.standard_normal((num_samples, n))
    ranks = np.argsort(np.argsort(-samples, axis=1), axis=1)  # 0-based
    out = np.zeros((n, n))
    for j in range(n):
        out[j] = np.bincount(ranks[:, j], minlength=n) / num_samples
    return out


def normal_pdf_zero(mean, variance):
    """N(0 | mean, variance)."""
    return math.exp(-mean * mean / (2.0 * variance)) / math.sqrt(2.0 * math.pi * variance)


def soft_ndcg_and_gradient(scores, labels, sigma):
    """SoftNDCG (Eq. 15, full list, D(r) = 1/log2(2 + r)) and its gradient by the
    derivative recursion of Eq. 18-23.

    Eq. 18 as printed has psi^{(i)} on the right where psi^{(i-1)} is meant
    (the derivative of Eq. 12); this oracle uses psi^{(i-1)}.
    """
    scores = np.asarray(scores, np.float64)
    n = len(scores)
    gains = 2.0 ** np.asarray(labels, np.float64) - 1.0
    discount = 1.0 / np.log2(2.0 + np.arange(n))
    g_max = np.sum(np.sort(gains)[::-1] * discount)
    probs = rank_binomial(scores, sigma)
    value = gains @ probs @ discount / g_max  # Eq. 15
    gradient = np.zeros(n)
    for m in range(n):
        psi_rows = np.zeros((n, n))  # Psi_m of Eq. 23: rows j, columns r
        for j in range(n):
            p = np.zeros(n)
            p[0] = 1.0
            psi = np.zeros(n)  # Eq. 18: psi^{(1)} = 0
            for i in range(n):
                if i == j:
                    continue
                pi = win_probability(scores[i], scores[j], sigma)
                if m == i:  # Eq. 20
                    dpi = normal_pdf_zero(scores[m] - scores[j], 2 * sigma ** 2)
                elif m == j:
                    dpi = -normal_pdf_zero(scores[i] - scores[m], 2 * sigma ** 2)
                else:
                    dpi = 0.0
                shifted_p = np.concatenate([[0.0], p[:-1]])
                shifted_psi = np.concatenate([[0.0], psi[:-1]])
                psi = shifted_psi * pi + psi * (1 - pi) + (shifted_p - p) * dpi
                p = p * (1 - pi) + shifted_p * pi
            psi_rows[j] = psi
        gradient[m] = gains @ psi_rows @ discount / g_max  # Eq. 23
    return value, gradient


def sinkhorn_numpy(a, b, cost, regularization, iterations):
    """Log-space Sinkhorn for one pair of histograms (all entries > 0):
    returns (plan, f, g)."""
    log_a, log_b = np.log(a), np.log(b)
    f = np.zeros(len(a))
    g = np.zeros(len(b))
    for _ in range(iterations):
        g = regularization * (log_b - logsumexp((f[:, None] - cost) / regularization, axis=0))
        f = regularization * (log_a - logsumexp((g[None, :] - cost) / regularization, axis=1))
    plan = np.exp((f[:, None] + g[None, :] - cost) / regularization)
    return plan, f, g


def entropic_ot(a, b, cost, regularization, iterations):
    """OT_lambda(a, b) = <P, C> - lambda H(P), H(P) = -sum P (log P - 1)."""
    plan, _, _ = sinkhorn_numpy(a, b, cost, regularization, iterations)
    return np.sum(plan * cost) + regularization * np.sum(plan * (np.log(plan) - 1.0))


def synthetic_ranking_data(seed, num_lists=96, size=12, features=6):
    """Lists with a known linear signal: label = quantized (x . w + noise)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_lists, size, features)).astype(np.float32)
    w = rng.normal(size=features)
    signal = x @ w + 0.5 * rng.normal(size=(num_lists, size))
    labels = np.digitize(signal, [0.5, 1.5, 2.5]).astype(np.float32)
    return x, labels


def train_and_validate(loss, seed=0, epochs=12):
    """Validation nDCG@5 of a Dense scorer before and after training with ``loss``."""
    x, labels = synthetic_ranking_data(seed)
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.layers.Dense(1), keras.layers.Reshape([-1])])
    model.build([None, x.shape[1], x.shape[2]])
    train, valid = slice(0, 64), slice(64, None)

    def ndcg():
        return float(np.mean(tfrx.metrics.to_numpy(
            tfrx.metrics.ndcg(labels[valid], model(x[valid]), topn=5))))

    before = ndcg()
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=loss)
    model.fit(x[train], labels[train], batch_size=16, epochs=epochs, verbose=0)
    return before, ndcg()
