"""A float64 NumPy oracle of NeuralNDCG, value and gradient, one list of valid documents at
a time, written from the papers' definitions and independent of the loss bodies:

* NeuralSort (Grover, Wang, Zweig and Ermon, "Stochastic Optimization of Sorting Networks
  via Continuous Relaxations", ICLR 2019): the relaxed permutation matrix
  :math:`\\hat P[r, :] = \\mathrm{softmax}\\big(((n + 1 - 2r)\\, s - A_s \\mathbb{1}) /
  \\tau\\big)`, positions r = 1..n, :math:`A_s[i, j] = |s_i - s_j|`;
* Sinkhorn scaling (NeuralNDCG: Pobrotyn and Bialobrzeski, "NeuralNDCG: Direct
  Optimisation of a Ranking Metric via Differentiable Relaxation of Sorting", 2021, and
  its code in allRank): divide each column by its sum, then each row by its sum, until
  every row and column sum is within ``tolerance`` of 1 or ``iterations`` are done;
* NeuralNDCG@k: :math:`\\frac{1}{IDCG@k}\\sum_{r \\le k} D_r\\,(\\hat P g)_r` and the
  transposed :math:`\\frac{1}{IDCG@k}\\sum_i g_i\\,(\\hat P^T D)_i` with
  :math:`D_r = 1/\\log_2(1 + r)` for r <= k, 0 beyond; gains :math:`g = 2^y - 1`.

The gradient is reverse-mode differentiation written out by hand (the chain rule through
the Sinkhorn iterations, the row softmax and :math:`A_s`, with
:math:`\\partial|u|/\\partial u = \\mathrm{sign}(u)`, 0 at ties), checked against central
differences in ``tests/losses/test_neural_ndcg.py``.

Scores are clipped as the losses clip them: to +-``max / 4`` of float32, divided by
:math:`\\tau`, then to +-``max / (8 n)`` (a clipped score has gradient 0).
"""
import numpy as np

F32_MAX = float(np.finfo(np.float32).max)


def scaled_scores(scores, temperature, dtype_max=F32_MAX):
    """``(x, active)``: :math:`s/\\tau` clipped as the losses clip it, and where the clip
    lets the gradient through."""
    s = np.asarray(scores, np.float64)
    n = max(len(s), 1)
    clipped = np.clip(s, -dtype_max / 4, dtype_max / 4)
    scaled = clipped / temperature
    bound = dtype_max / (8 * n)
    x = np.clip(scaled, -bound, bound)
    active = (np.abs(s) <= dtype_max / 4) & (np.abs(scaled) <= bound)
    return x, active


def neural_sort_logits(x):
    """``[n, n]``: row r (0-based: position r + 1), column i: :math:`(n + 1 - 2(r+1))
    x_i - \\sum_j |x_i - x_j|`."""
    n = len(x)
    spread = np.abs(x[:, None] - x[None, :]).sum(axis=1)  # (A_s 1)_i
    coefficients = n + 1 - 2 * np.arange(1, n + 1)
    return coefficients[:, None] * x[None, :] - spread[None, :]


def softmax_rows(logits):
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def sinkhorn(p, iterations, tolerance):
    """``(p, trace)``: columns then rows normalized per iteration, stopping after the
    first iteration whose row and column sums are all within ``tolerance`` of 1 (as
    allRank's ``sinkhorn_scaling``); ``trace`` keeps each iteration's input and its
    column-normalized matrix for the backward pass."""
    trace = []
    for _ in range(iterations):
        q = p / p.sum(axis=0, keepdims=True)
        trace.append((p, q))
        p = q / q.sum(axis=1, keepdims=True)
        if (np.abs(p.sum(axis=1) - 1).max() < tolerance
                and np.abs(p.sum(axis=0) - 1).max() < tolerance):
            break
    return p, trace


def discounts(n, topn=None):
    """:math:`D_r = 1/\\log_2(1 + r)` for positions r = 1..n, 0 beyond ``topn``."""
    positions = np.arange(1, n + 1, dtype=np.float64)
    d = 1.0 / np.log2(1.0 + positions)
    if topn is not None:
        d[topn:] = 0.0
    return d


def ideal_dcg(labels, topn=None):
    gains = np.sort(2.0 ** np.asarray(labels, np.float64) - 1.0)[::-1]
    return float(np.sum(gains * discounts(len(gains), topn)))


def relaxed_permutation(scores, temperature=1.0, iterations=50, tolerance=1e-6):
    """NeuralSort's :math:`\\hat P` after Sinkhorn scaling, ``[n, n]`` (positions x
    documents)."""
    x, _ = scaled_scores(scores, temperature)
    p, _ = sinkhorn(softmax_rows(neural_sort_logits(x)), iterations, tolerance)
    return p


def neural_ndcg(labels, scores, temperature=1.0, topn=None, transposed=False,
                iterations=50, tolerance=1e-6):
    """``(-NeuralNDCG@topn, d / d scores)`` of one list (every document valid); 0 and
    zero gradient without a relevant document."""
    y = np.asarray(labels, np.float64)
    n = len(y)
    if not np.any(y > 0):
        return 0.0, np.zeros(n)
    x, active = scaled_scores(scores, temperature)
    logits = neural_sort_logits(x)
    p0 = softmax_rows(logits)
    p, trace = sinkhorn(p0, iterations, tolerance)
    g, d = 2.0 ** y - 1.0, discounts(n, topn)
    norm = ideal_dcg(y, topn)
    if transposed:  # each document's expected discount, times its gain
        dcg = np.sum(g * (p.T @ d))
    else:  # each position's expected gain, times its discount
        dcg = np.sum(d * (p @ g))
    value = -dcg / norm

    # backward: d value / d p[r, i] = -D_r g_i / IDCG (both variants)
    grad_p = -np.outer(d, g) / norm
    for p_in, q in reversed(trace):
        row_sums = q.sum(axis=1, keepdims=True)  # p_out = q / row_sums
        grad_q = grad_p / row_sums - (grad_p * q).sum(axis=1, keepdims=True) / row_sums ** 2
        col_sums = p_in.sum(axis=0, keepdims=True)  # q = p_in / col_sums
        grad_p = (grad_q / col_sums
                  - (grad_q * p_in).sum(axis=0, keepdims=True) / col_sums ** 2)
    grad_logits = p0 * (grad_p - (grad_p * p0).sum(axis=1, keepdims=True))
    coefficients = n + 1 - 2 * np.arange(1, n + 1)
    per_doc = grad_logits.sum(axis=0)  # d value / d (-spread_i) summed over rows
    signs = np.sign(x[:, None] - x[None, :])  # [i, m]: d|x_i - x_m| / d x_i
    grad_x = coefficients @ grad_logits  # from c_r x_i
    # spread_i = sum_m |x_i - x_m|: d spread_i / d x_i = sum_m sign_im,
    # d spread_i / d x_m = -sign_im (m != i)
    grad_x -= per_doc * signs.sum(axis=1)
    grad_x += per_doc @ signs
    return float(value), grad_x / temperature * active
