"""Float64 NumPy oracles of every loss family on one list of valid documents, as the
bad-input suite (``tests/losses/test_bad_input.py``) needs them: each with the loss's
clipping at extreme scores (beyond the clip the gradient is 0), and for losses that
draw random rankings or break ties randomly, every (value, gradient) that one of the
possible rankings gives (:func:`oracle_candidates`).
"""
import importlib
import itertools
import math

import numpy as np
from scipy.special import expit, logsumexp

from support import oracles
from support import oracles_lambda
from support import oracles_listwise
from support import oracles_neural_ndcg
from support.oracles_softrank import soft_ndcg_and_gradient

#: the module (``tfr_extensions.ops.rank_distributions`` is also its function's name there)
rank_distributions = importlib.import_module("tfr_extensions.ops.rank_distributions")
F32_BOUND = float(np.finfo(np.float32).max) / 4  # where ranknet and the hinge clip


def _twin_candidates(config, y, s):
    """(value, gradient) of minus the metric for every ranking that breaks the
    ties of ``s`` (one when the scores are distinct): Eq. 13-16 and the closed
    form of Eq. 17-21 at the tie-broken positions."""
    metric, gradient = config["metric"], config["gradient"]
    out = []
    for order in itertools.permutations(range(len(s))):
        if np.any(np.diff(s[list(order)]) > 0):  # not a descending order
            continue
        placed = np.empty(len(s))
        placed[list(order)] = -np.arange(len(s), dtype=float)  # distinct, same order
        value = -oracles.METRIC_ORACLES[metric](y, placed, config["topn"])
        with np.errstate(over="ignore"):
            jacobian = oracles.rank_jacobian(y, s, config["alpha_b"], gradient)
        rank_grad = oracles.metric_rank_gradient(y, placed, metric, config["topn"])
        out.append((value, -(rank_grad @ jacobian)))
    return out


def _pair_terms(y, s):
    """Unordered pairs (i, j), i < j, of one list."""
    return [(i, j) for i in range(len(s)) for j in range(i + 1, len(s))]


def ranknet_oracle(y, s):
    """Mean over pairs of Eq. 4 with scores clipped to +-max/4 (stable forms)."""
    active = np.abs(s) <= F32_BOUND
    c = np.clip(s, -F32_BOUND, F32_BOUND)
    pairs = _pair_terms(y, s)
    value, grad = 0.0, np.zeros(len(s))
    if not pairs:
        return value, grad
    for i, j in pairs:
        o, t = c[i] - c[j], 0.5 * (1 + np.sign(y[i] - y[j]))
        value += np.logaddexp(0.0, -o) + (1 - t) * o
        d = (1 - t) - expit(-o)
        grad[i] += d * active[i]
        grad[j] -= d * active[j]
    return value / len(pairs), grad / len(pairs)


def hinge_oracle(y, s):
    """Eq. 20 (oracles.ndcg_beta_hinge) on scores clipped to +-max/4, and its
    subgradient."""
    active = np.abs(s) <= F32_BOUND
    c = np.clip(s, -F32_BOUND, F32_BOUND)
    norm = oracles.dcg_beta(np.sort(y)[::-1])
    grad = np.zeros(len(s))
    for i in range(len(s)):
        for j in range(len(s)):
            if y[i] > y[j] and 1.0 - (c[i] - c[j]) > 0:
                tau = (y[i] - y[j]) / norm
                grad[i] -= tau * active[i]
                grad[j] += tau * active[j]
    return oracles.ndcg_beta_hinge(y, c), grad


def lambda_oracle(config, y, s):
    """LambdaLoss (oracles_lambda) on scores clipped to +-sqrt(max)/4 before and
    after the scaling by sigma (ranks from the clipped scores), gradient 0 beyond."""
    bound, sigma = float(np.sqrt(np.finfo(np.float32).max)) / 4, config["sigma"]
    scaled = sigma * np.clip(s, -bound, bound)
    active = (np.abs(s) <= bound) & (np.abs(scaled) <= bound)
    value, grad = oracles_lambda.lambda_loss_and_gradient(
        y, np.clip(scaled, -bound, bound), config["weighting"], 1.0, config["mu"], config["topn"])
    return value, grad * sigma * active


def wassrank_oracle(y, s, regularization=0.1, iterations=20, gain_base=4.0, gap=100.0,
                    var_penalty=math.e):
    """WassRank's default: ``eg`` costs, gain target, log-space Sinkhorn with the
    epsilon scaling of the module docstring; value <P, C> and the dual gradient
    a (f - <a, f>)."""
    g_cost = gain_base ** y - 1.0
    shifted = np.where(y > 0, g_cost, -gap)
    cost = np.abs(shifted[:, None] - shifted[None, :])
    cost[y[:, None] == y[None, :]] = var_penalty
    np.fill_diagonal(cost, 0.0)
    gains = 2.0 ** y - 1.0
    target = gains > 0
    cost = cost[:, target]
    log_b = np.log(gains[target] / gains[target].sum())
    shift = s - s.max()
    log_a = np.maximum(shift, -1000.0) - np.log(np.exp(shift).sum())
    start = max(cost.max(), regularization)
    ratio = (regularization / start) ** (1.0 / max(iterations // 2, 1))
    f, g = np.zeros(len(s)), np.zeros(target.sum())
    for k in range(iterations):
        eps = max(regularization, start * ratio ** k)
        g = eps * (log_b - logsumexp((f[:, None] - cost) / eps, axis=0))
        f = eps * (log_a - logsumexp((g[None, :] - cost) / eps, axis=1))
    plan = np.exp((f[:, None] + g[None, :] - cost) / regularization)
    a = np.exp(log_a)
    return float(np.sum(plan * cost)), a * (f - a @ f)


def _pl_terms(s, order):
    """Per-position log P(a_t) of a full ranking and their gradients [t, doc],
    each shifted by the largest remaining score (exact at 1e30)."""
    terms, grads = [], []
    for t in range(len(order)):
        rest = list(order[t:])
        top = s[rest].max()
        weights = np.exp(s[rest] - top)
        terms.append((s[order[t]] - top) - np.log(weights.sum()))
        grad = np.zeros(len(s))
        grad[order[t]] += 1.0
        grad[rest] -= weights / weights.sum()
        grads.append(grad)
    return np.array(terms), np.array(grads)


def _pl_candidates(kind, y, s, topn=10):
    """(value, gradient) of one sampled full ranking, for every ranking of
    positive probability: ExptUtility -nDCG@n log P (Eq. 5), MDPRank
    -sum_t G_t log P(a_t) with gamma = 1 and normalized rewards (Eq. 7)."""
    n = len(s)
    discounts = 1.0 / np.log2(np.arange(n) + 2.0)
    ideal = np.sum(np.sort(2.0 ** y - 1.0)[::-1][:topn] * discounts[:topn])
    out = []
    for order in itertools.permutations(range(n)):
        terms, grads = _pl_terms(s, order)
        if not np.all(np.isfinite(terms)) or terms.sum() < -700:
            continue
        rewards = (2.0 ** y[list(order)] - 1.0) * discounts / ideal
        rewards[topn:] = 0.0
        if kind == "ExpectedUtilityLoss":
            out.append((-rewards.sum() * terms.sum(), -rewards.sum() * grads.sum(0)))
        else:
            returns = np.cumsum(rewards[::-1])[::-1]
            out.append((-(returns @ terms), -(returns @ grads)))
    return out


#: registry key -> ``oracle(config, y, s) -> [(value, gradient), ...]`` (the possible
#: per-list results), registered with :func:`support.oracles.per_list_oracle`
PER_LIST = oracles.PER_LIST_ORACLES


@oracles.per_list_oracle("twin_sigmoid")
def _twin(config, y, s):
    return _twin_candidates(config, y, s)


@oracles.per_list_oracle("softndcg")
def _softndcg(config, y, s):  # scaled scores s / 2 clipped to +-max/4: s to +-max/2
    del config
    bound = 2 * rank_distributions.scaled_score_bound("float32")
    value, grad = soft_ndcg_and_gradient(np.clip(s, -bound, bound), y, 1.0)
    return [(-value, -grad * (np.abs(s) <= bound))]


oracles.per_list_oracle("ranknet")(lambda config, y, s: [ranknet_oracle(y, s)])
oracles.per_list_oracle("ndcg_beta_hinge")(lambda config, y, s: [hinge_oracle(y, s)])
oracles.per_list_oracle("lambda_loss")(lambda config, y, s: [lambda_oracle(config, y, s)])
oracles.per_list_oracle("wassrank")(lambda config, y, s: [wassrank_oracle(y, s)])
oracles.per_list_oracle("approx_ndcg")(
    lambda config, y, s: [oracles_listwise.approx_ndcg(y, s, config["temperature"])])
# (the ListNet oracle gives loss * weight, the weight is the label sum)
oracles.per_list_oracle("listnet")(
    lambda config, y, s: [oracles_listwise.listnet(y, s, config["temperature"])])
oracles.per_list_oracle("neural_ndcg")(lambda config, y, s: [oracles_neural_ndcg.neural_ndcg(
    y, s, config["temperature"], config["topn"], config["transposed"],
    config["sinkhorn_iterations"], config["sinkhorn_tolerance"])])
oracles.per_list_oracle("expected_utility")(
    lambda config, y, s: _pl_candidates("ExpectedUtilityLoss", y, s))
oracles.per_list_oracle("mdprank")(lambda config, y, s: _pl_candidates("MDPRankLoss", y, s))


def oracle_candidates(key, config, y, s):
    """The possible (value, gradient) of one list's loss, gradient over its
    valid documents; one candidate for a deterministic loss. ``key``: the loss's
    registry key, ``config``: its ``get_config()``."""
    if not np.any(y > 0):
        return [(0.0, np.zeros(len(s)))]
    return oracles.load_per_list_oracles()[key](config, y, s)
