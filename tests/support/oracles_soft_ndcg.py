r"""A float64 NumPy oracle of SoftRank's rank distributions and SoftNDCG with every option
of the loss (cutoff, training discount, normal approximation, Sinkhorn scaling), one list
of valid documents at a time, written from Taylor, Guiver, Robertson and Minka,
"SoftRank: Optimizing Non-Smooth Rank Metrics" (``softrank.txt``) and the loss's
documented definitions, independent of the bodies; gradients by central differences
(:func:`numerical_gradient`).

* Eq. 9: :math:`\pi_{ij} = \Phi((s_i - s_j)/(\sqrt2\sigma)) = \tfrac12\operatorname{erfc}(
  -(x_i - x_j))` with :math:`x = s/2\sigma`, clamped to :math:`\pm b` when ``bound`` is
  given (the bound the implementations document; a clamped score has no gradient);
* ``"exact"``: the Rank-Binomial recursion of Eq. 11-12, all documents j at once;
* ``"normal"`` (Section 3.6): rank :math:`r_j \sim \mathcal{N}(\mu_j, v_j)`,
  :math:`\mu_j = \sum_{i\ne j}\pi_{ij}`, :math:`v_j = \max(\sum_{i \ne j}\pi_{ij}(1 -
  \pi_{ij}), 10^{-6})`, discretized with a continuity correction over the ranks 0..n-1,
  the outer bounds at :math:`\mp\infty`;
* Sinkhorn (end of Section 3.2): alternate column normalization (to 1 for the ranks
  0..n-1, 0 beyond, and :math:`n - R` for a last "beyond" column holding each row's mass
  past rank R - 1) and row normalization (to 1);
* the training discount of Section 4.7 (Figure 5) as the loss defines it, with
  :math:`u = r/n` (n: valid documents, capped at the cutoff): :math:`\alpha/\log_2(2 + r)
  + (1 - \alpha)(1 - u)` for :math:`0 \le \alpha \le 1`, :math:`(1 - u) + |\alpha|\,u(1 -
  u)` for :math:`\alpha < 0`, 0 for r >= n;
* SoftNDCG (Eq. 14-15): :math:`\frac{1}{G_{max}}\sum_j g_j \sum_r D(r) p_j(r)`,
  :math:`g = 2^y - 1`, :math:`G_{max}` the same discount on the sorted gains.
"""
import numpy as np
from scipy.special import erfc, ndtr


def win_probabilities(scores, sigma, bound=None):
    """``[n, n]``: ``pi[i, j]`` = P(S_i > S_j) (Eq. 9), 0 on the diagonal."""
    x = np.asarray(scores, np.float64) / (2.0 * sigma)
    if bound is not None:
        x = np.clip(x, -bound, bound)
    pi = 0.5 * erfc(-(x[:, None] - x[None, :]))
    np.fill_diagonal(pi, 0.0)
    return pi


def _exact(pi):
    """Eq. 11-12 for every document j at once: ``[n, n]``, rows j, 0-based ranks r."""
    n = len(pi)
    probs = np.zeros((n, n))
    probs[:, 0] = 1.0  # Eq. 11
    for i in range(n):  # Eq. 12: document i contests every j (pi[i, i] = 0: no change)
        win = pi[i][:, None]
        shifted = np.concatenate([np.zeros((n, 1)), probs[:, :-1]], axis=1)
        probs = probs * (1.0 - win) + shifted * win
    return probs


def _normal(pi):
    """Section 3.6's discretized normal: ``[n, n]``."""
    n = len(pi)
    mean = pi.sum(axis=0)
    std = np.sqrt(np.maximum((pi * (1.0 - pi)).sum(axis=0), 1e-6))
    probs = np.zeros((n, n))
    for j in range(n):
        for r in range(n):
            lower = -np.inf if r == 0 else (r - 0.5 - mean[j]) / std[j]
            upper = np.inf if r == n - 1 else (r + 0.5 - mean[j]) / std[j]
            # (the upper tail by reflection: no cancellation)
            probs[j, r] = (ndtr(-lower) - ndtr(-upper) if lower > 0
                           else ndtr(upper) - ndtr(lower))
    return probs


def _sinkhorn(probs, iterations):
    """Sinkhorn scaling of ``[n, R]`` distributions with a "beyond" column."""
    n, num_ranks = probs.shape
    beyond = np.maximum(1.0 - probs.sum(axis=1, keepdims=True), 0.0)
    matrix = np.concatenate([probs, beyond], axis=1)
    targets = np.append((np.arange(num_ranks) < n).astype(np.float64), max(n - num_ranks, 0))
    for _ in range(iterations):
        sums = matrix.sum(axis=0)
        matrix = matrix * np.divide(targets, sums, out=np.zeros_like(sums), where=sums > 0)
        rows = matrix.sum(axis=1, keepdims=True)
        matrix = np.divide(matrix, rows, out=np.zeros_like(matrix), where=rows > 0)
    return matrix[:, :-1]


def rank_distributions(scores, sigma=1.0, topn=None, method="exact", sinkhorn_iterations=0,
                       bound=None):
    """``[n, R]``, R = min(topn, n): ``p[j, r]``, the probability that document j has the
    0-based rank r (``method`` ``"exact"`` or ``"normal"``), then ``sinkhorn_iterations``
    Sinkhorn normalizations."""
    pi = win_probabilities(scores, sigma, bound)
    n = len(pi)
    num_ranks = n if topn is None else min(topn, n)
    probs = (_exact(pi) if method == "exact" else _normal(pi))[:, :num_ranks]
    if sinkhorn_iterations:
        probs = _sinkhorn(probs, sinkhorn_iterations)
    return probs


def training_discount(num_ranks, count, alpha):
    """The discounts of ranks 0..num_ranks-1 (module docstring), ``[num_ranks]``."""
    ranks = np.arange(num_ranks, dtype=np.float64)
    u = ranks / max(count, 1)
    if alpha >= 0:
        discount = alpha / np.log2(2.0 + ranks) + (1.0 - alpha) * (1.0 - u)
    else:
        discount = (1.0 - u) + abs(alpha) * u * (1.0 - u)
    return np.where(ranks < count, discount, 0.0)


def soft_ndcg_loss(labels, scores, sigma=1.0, topn=None, discount_alpha=1.0, method="exact",
                   sinkhorn_iterations=0, bound=None):
    """Minus SoftNDCG of one list (every document valid); 0 without a relevant document.
    ``method="auto"`` is ``"exact"`` (the lists here are short)."""
    y = np.asarray(labels, np.float64)
    if not (y > 0).any():
        return 0.0
    method = "exact" if method == "auto" else method
    probs = rank_distributions(scores, sigma, topn, method, sinkhorn_iterations, bound)
    count = len(y) if topn is None else min(topn, len(y))
    discount = training_discount(probs.shape[1], count, discount_alpha)
    gains = 2.0 ** y - 1.0
    ideal = np.sort(gains)[::-1][:probs.shape[1]] @ discount
    return -float(gains @ probs @ discount / ideal)


def numerical_gradient(fn, x, step=1e-3):
    """d fn / d x by fourth-order central differences (Richardson), float64; the step is
    relative for |x| > 1 (a score clamped at a bound then has gradient 0)."""
    x = np.asarray(x, np.float64)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        h = step * max(1.0, abs(x[i]))

        def at(offset, i=i, h=h):
            moved = x.copy()
            moved[i] += offset * h
            return fn(moved)

        grad[i] = (8.0 * (at(1) - at(-1)) - (at(2) - at(-2))) / (12.0 * h)
    return grad


def soft_ndcg_loss_and_gradient(labels, scores, step=None, **options):
    """``(minus SoftNDCG, its gradient by central differences)`` of one list; the step
    defaults to ``1e-3 sigma``."""
    step = 1e-3 * options.get("sigma", 1.0) if step is None else step
    value = soft_ndcg_loss(labels, scores, **options)
    if value == 0.0 and not (np.asarray(labels) > 0).any():
        return value, np.zeros(len(scores))
    return value, numerical_gradient(lambda s: soft_ndcg_loss(labels, s, **options), scores,
                                     step)
