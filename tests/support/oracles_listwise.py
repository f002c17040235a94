"""Float64 NumPy oracles of ApproxNDCG and ListNet, value and gradient, one list of
valid documents at a time, written straight from the definitions
(``approxndcg-revisited.txt`` Eq. 3-6; ListNet's top-one cross entropy).

Extreme scores follow the losses' documented numerics: ApproxNDCG's sigmoids of
score differences saturate (no clipping); ListNet clips the scores to
+-``float32 max / 4`` before and after dividing by the temperature, and a clipped
score has gradient 0.
"""
import numpy as np
from scipy.special import expit, logsumexp

F32_BOUND = float(np.finfo(np.float32).max) / 4


def approx_ndcg(labels, scores, temperature=0.1):
    """``(-approxNDCG, d / d scores)`` of one list (every document valid); 0 and
    zero gradient without a relevant document."""
    y, s = np.asarray(labels, np.float64), np.asarray(scores, np.float64)
    n = len(s)
    gains = 2.0 ** y - 1.0
    ideal = np.sum(np.sort(gains)[::-1] / np.log2(np.arange(n) + 2.0))
    if not np.any(y > 0):
        return 0.0, np.zeros(n)
    with np.errstate(over="ignore", invalid="ignore"):
        diffs = (s[None, :] - s[:, None]) / temperature  # [i, j]: (s_j - s_i) / T
    beats = expit(diffs)
    slopes = beats * (1.0 - beats) / temperature  # d sigma / d s_j
    np.fill_diagonal(beats, 0.0)
    np.fill_diagonal(slopes, 0.0)
    ranks = 1.0 + beats.sum(axis=1)  # Eq. 5-6
    value = -np.sum(gains / np.log2(1.0 + ranks)) / ideal
    # d value / d rank_i = G_i ln 2 / ((1 + r_i) ln(1 + r_i)^2) / ideal
    d_rank = gains * np.log(2.0) / ((1.0 + ranks) * np.log1p(ranks) ** 2) / ideal
    # d rank_i / d s_j = slope_ij (j != i); d rank_i / d s_i = -sum_j slope_ij
    grad = d_rank @ slopes - d_rank * slopes.sum(axis=1)
    return value, grad


def listnet(labels, scores, temperature=1.0):
    """``(loss * weight, d / d scores)`` of one list (every document valid):
    :math:`-\\sum_i y_i \\log \\mathrm{softmax}(x)_i`, ``x = clip(clip(s) / T)``."""
    y, s = np.asarray(labels, np.float64), np.asarray(scores, np.float64)
    scaled = np.clip(s, -F32_BOUND, F32_BOUND) / temperature
    x = np.clip(scaled, -F32_BOUND, F32_BOUND)
    active = (np.abs(s) <= F32_BOUND) & (np.abs(scaled) <= F32_BOUND)
    if len(s) == 0:
        return 0.0, np.zeros(0)
    shifted = x - x.max()  # (exact for tied large scores: log softmax = shifted - log total)
    log_total = logsumexp(shifted)
    softmax = np.exp(shifted - log_total)
    value = float(np.sum(y * (log_total - shifted)))
    grad = (softmax * y.sum() - y) / temperature * active
    return value, grad
