r"""Distributions over ranks from Gaussian-smoothed scores (SoftRank).

Taylor, Guiver, Robertson and Minka, "SoftRank: Optimizing Non-Smooth Rank
Metrics" (``softrank.txt``), Section 3.1-3.2 and 3.6.

Each score is the mean of a Gaussian with a shared standard deviation
:math:`\sigma` (``sigma``), Eq. 8: :math:`S_j \sim \mathcal{N}(s_j, \sigma^2)`.
Document i beats document j with probability (Eq. 9)

.. math:: \pi_{ij} = \Pr(S_i > S_j) = \Phi\Big(\frac{s_i - s_j}{\sqrt{2}\,\sigma}\Big)
          = \tfrac12 \operatorname{erfc}\Big(\frac{s_j - s_i}{2\sigma}\Big),

and the 0-based rank :math:`r_j` of j is the number of documents that beat it,
a sum of independent Bernoulli(:math:`\pi_{ij}`) variables, :math:`i \ne j`: the
*Rank-Binomial* distribution, computed by the recursion of Eq. 11-12,

.. math:: p^{(1)}_j(r) = \delta(r), \qquad
          p^{(i)}_j(r) = p^{(i-1)}_j(r-1)\,\pi_{ij} + p^{(i-1)}_j(r)\,(1-\pi_{ij}),

i.e. :math:`p_j` holds the coefficients of the polynomial
:math:`\prod_{i \ne j} \big((1-\pi_{ij}) + \pi_{ij} z\big)`. Its mean is the
expected rank of Eq. 10, :math:`\sum_{i\ne j}\pi_{ij}`.

The math is written once against the array namespace (:mod:`tfr_extensions.arrays`):
TensorFlow's own ops on Keras 2, TF-Ranking and Keras 3's TensorFlow backend,
``keras.ops`` on JAX and PyTorch. Two pieces run per framework, as ``xp.rank_binomial``
(:mod:`tfr_extensions.ops.rank_binomial`, :mod:`tfr_extensions.keras_ops.rank_binomial`):
the exact recursion (``method="exact"``) and the win probabilities' ``erf``.

``method="exact"``: the factors commute, so the product can be taken in any order, and
with a cutoff ``topn`` = R only the coefficients of :math:`z^0..z^{R-1}` are kept:
higher coefficients never flow back into lower ones, so these R columns are exact, and
the mass beyond them is :math:`1 - \sum_{r<R} p_j(r)`. TensorFlow multiplies the factors
in a balanced product tree (over all documents for short static lists and few ranks,
else over chunks in a ``tf.foldl``); ``keras.ops`` runs the recursion one document at a
time (``lax.scan`` on JAX). Their results differ by rounding only.

A caller that needs only some documents' distributions (SoftNDCG needs the
relevant ones) passes their indices to :func:`distributions_of` and pays for
those columns only.

Cost :math:`O(B L^2 R)` time either way (:math:`O(B L^3)` for the full
distribution).

``method="normal"`` (Section 3.6): :math:`r_j` is approximated by a normal with mean
:math:`\mu_j = \sum_{i\ne j}\pi_{ij}` and variance
:math:`v_j = \sum_{i\ne j}\pi_{ij}(1-\pi_{ij})`, discretized with a continuity correction
over the ranks :math:`0..n-1` of a list of n valid documents:
:math:`p_j(r) = \Phi(\frac{r + 1/2 - \mu_j}{\sqrt{v_j}}) - \Phi(\frac{r - 1/2 - \mu_j}{\sqrt{v_j}})`
with the outer bounds at :math:`\mp\infty`, so each row sums to 1. Cost
:math:`O(B L^2 + B L R)`. ``method="auto"`` uses ``exact`` for lists of at most
``AUTO_EXACT_MAX_LIST_SIZE`` documents (the padded list size) and ``normal`` beyond.

``sinkhorn_iterations > 0`` (end of Section 3.2): alternately divide each
column of :math:`[p_j(r)]` by its sum and each row by its sum. With a cutoff R
< n the matrix has a last "beyond" column whose target sum is n - R (the other
columns' targets are 1), so the result approaches a matrix whose rows sum to 1
and whose rank columns sum to 1.

Numerics: :math:`\pi = \tfrac12(1 + \operatorname{erf}(z))` with one vectorized ``erf`` per
pair, accurate to a unit of 1.0 (what sums of products of probabilities need); the recursion
only multiplies and adds numbers in [0, 1], so it cannot overflow, and its gradient is
bounded. The scaled scores :math:`s / 2\sigma` are clamped to :math:`\pm b`, :math:`b` =
:func:`scaled_score_bound` (``dtype.max / 4`` in float32,
:math:`2^{509} \approx 1.7 \times 10^{153}` in float64); padded documents take no rank
(their row is 0) and the scaled score :math:`-2b`, so they beat nobody (:math:`\pi = 0`) and
get exactly zero gradient; pairs ``i == j`` get ``NEUTRAL_Z``. Every argument of ``erf`` is
then below :math:`3b` in magnitude: finite, and in float64 below
:math:`2^{512} = \sqrt{\text{float64 max}}`, past which TF 2.21's float64 ``erf`` (which
squares its argument) returns NaN. The clamp changes nothing below :math:`b`: it only makes
distinct valid scores beyond :math:`\pm b` tie (:math:`\pi = 1/2` between them, where the
exact value is 0 or 1), and gives them zero gradient, as the exact one is. Infinite scores
clamp to :math:`\pm b` too.
"""
from typing import Optional

import numpy as np

from tfr_extensions import arrays
from tfr_extensions.ops import conventions
from tfr_extensions.ops import validation

METHODS = conventions.RANK_DISTRIBUTION_METHODS

#: ``method="auto"`` uses the exact recursion up to this (padded) list size
AUTO_EXACT_MAX_LIST_SIZE = 128

# z of the pairs i == j: erf(-100) is -1, so the factor is exactly
# (lose, win) = (1, 0) and its gradient exactly 0. Padding of the product
# tree is a factor with win = 0. It is selected, not added to s_i - s_i = 0:
# graph optimizers may reassociate (s_i - s_j) + z0 into s_i - (s_j - z0),
# which loses z0 once |s| passes about 1e9 (float32) or 1e18 (float64).
NEUTRAL_Z = -100.0

# Largest float64 scaled score: 3 * 2^509 < 2^512 = sqrt(float64 max), the
# largest argument TF 2.21's float64 erf takes without returning NaN.
_MAX_SCALED_SCORE_FLOAT64 = 2.0 ** 509

# Variance floor (in squared ranks) of the normal approximation: below it the
# Rank-Binomial is a point mass to within 1e-3 ranks (|mu - round(mu)| <= 2 v),
# and the floor keeps d sqrt(v) / dv finite.
_MIN_RANK_VARIANCE = 1e-6


def scaled_score_bound(dtype) -> float:
    r"""The bound :math:`b` of the scaled scores :math:`s / 2\sigma`:
    ``min(dtype.max / 4, 2 ** 509)`` (``dtype``: a dtype name, a ``tf.DType`` or a
    NumPy dtype). Valid documents' scaled scores are clamped to :math:`[-b, b]` and
    padded ones take :math:`-2b`, so every difference stays below :math:`3b`: finite,
    and a valid argument of float64 ``erf``.

    >>> scaled_score_bound("float64") == 2.0 ** 509, scaled_score_bound("float32") > 8e37
    (True, True)
    """
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None) or str(dtype)
    return min(float(np.finfo(np.dtype(name)).max) / 4, _MAX_SCALED_SCORE_FLOAT64)


def _clamp(xp, x, bound: float):
    """``x`` clamped to ``[-bound, bound]``; the gradient passes inside the
    closed interval and is 0 beyond it (as ``tf.clip_by_value``: selects,
    where ``jnp.clip`` would halve the gradient at the bounds)."""
    bound = xp.constant(bound, xp.dtype_name(x))
    return xp.where(x > bound, bound, xp.where(x < -bound, -bound, x))


def win_probabilities(scores, mask, sigma: float, columns=None):
    r"""The pairwise win probabilities :math:`\pi_{ij}` of Eq. 9, ``[L_i, B, K]``.

    :math:`\pi_{ij} = \tfrac12(1 + \operatorname{erf}(z_{ij}))`,
    :math:`z_{ij} = (s_i - s_j) / 2\sigma`, for the documents j in ``columns`` (int ``[B,
    K]``; all L when None). The beating document i comes first, so the recursion walks the
    leading axis.

    Pairs that do not count get :math:`\pi = 0` exactly, with exactly zero
    gradient, without any ``[L, B, L]`` mask: valid scaled scores are clamped
    to :math:`\pm b` (:func:`scaled_score_bound`) and padded documents take
    :math:`-2b` (so they beat nobody, and every :math:`|z_{ij}| < 3b`: no
    ``inf - inf``, no float64 ``erf`` argument past :math:`2^{512}`), and
    ``i == j`` takes ``NEUTRAL_Z`` (one select, where an addition would do
    as many passes). The bounds are taken on ``[B, L]``, not on ``[L, B, K]``.
    The pairs themselves are ``xp.rank_binomial.win_probabilities``: on TensorFlow
    with a hand-written gradient that keeps no ``[L, B, K]`` tensor for the backward
    pass, elsewhere the backend's autodiff of ``erf``.
    """
    xp = arrays.namespace()
    dtype = xp.dtype_name(scores)
    bound = scaled_score_bound(dtype)
    scaled = _clamp(xp, scores * xp.constant(0.5 / sigma, dtype), bound)
    scaled = xp.where(mask, scaled, xp.constant(-2.0 * bound, dtype))
    if columns is not None:
        columns = xp.cast(columns, "int32")
    losers = scaled if columns is None else xp.lists.batch_gather(scaled, columns)
    return xp.rank_binomial.win_probabilities(scaled, losers, columns, NEUTRAL_Z)


def _ndtr(xp, x):
    """The standard normal CDF, as an ``erfc`` (accurate in the lower tail)."""
    return 0.5 * xp.erfc(-x / xp.constant(2.0 ** 0.5, xp.dtype_name(x)))


def _normal_cdf_difference(xp, lower, upper):
    """Phi(upper) - Phi(lower) for lower <= upper, without cancellation in
    either tail (reflects both bounds when lower > 0)."""
    reflect = lower > 0
    return xp.where(reflect, _ndtr(xp, -lower) - _ndtr(xp, -upper),
                    _ndtr(xp, upper) - _ndtr(xp, lower))


def _normal(xp, win, mask, num_ranks):
    """The discretized normal approximation of Section 3.6, ``[B, K, R]``."""
    dtype = xp.dtype_name(win)
    mean = xp.sum(win, axis=0)[:, :, None]  # Eq. 10, [B, K, 1]
    variance = xp.sum(win * (1.0 - win), axis=0)[:, :, None]
    std = xp.sqrt(xp.maximum(variance, _MIN_RANK_VARIANCE))
    num_valid = xp.sum(xp.cast(mask, dtype), axis=-1)[:, None, None]
    ranks = xp.arange(num_ranks, dtype=dtype)[None, None, :]  # [1, 1, R]
    inf = xp.constant(float("inf"), dtype)
    lower = xp.where(ranks > 0, (ranks - 0.5 - mean) / std, -inf)
    upper = xp.where(ranks + 1 < num_valid, (ranks + 0.5 - mean) / std, inf)
    probs = _normal_cdf_difference(xp, lower, upper)
    return xp.where(ranks < num_valid, probs, xp.zeros_like(probs))


def _sinkhorn(xp, probs, mask, iterations: int):
    """Sinkhorn scaling of ``[B, L, R]`` rank distributions (Section 3.2),
    with a "beyond" column of target sum n - R when R < n."""
    dtype = xp.dtype_name(probs)
    num_ranks = xp.shape(probs)[2]  # (TensorFlow, unknown: a tensor)
    num_valid = xp.sum(xp.cast(mask, dtype), axis=-1)[:, None]  # [B, 1]
    ranks = xp.arange(num_ranks, dtype=dtype)[None, :]
    beyond = xp.maximum(1.0 - xp.sum(probs, axis=-1, keepdims=True), 0.0)
    beyond = xp.where(mask[:, :, None], beyond, xp.zeros_like(beyond))
    matrix = xp.concatenate([probs, beyond], axis=-1)  # [B, L, R + 1]
    ranks_taken = (float(num_ranks) if isinstance(num_ranks, int)
                   else xp.cast(num_ranks, dtype))
    targets = xp.concatenate([xp.cast(ranks < num_valid, dtype),
                              xp.maximum(num_valid - ranks_taken, 0.0)], axis=-1)
    for _ in range(iterations):
        column_sums = xp.sum(matrix, axis=1, keepdims=True)  # [B, 1, R + 1]
        matrix = matrix * xp.safe_divide(targets[:, None, :], column_sums)
        row_sums = xp.sum(matrix, axis=-1, keepdims=True)
        matrix = xp.safe_divide(matrix, row_sums)
    return matrix[..., :-1]


def rank_distributions(scores, mask=None, sigma: float = 1.0, topn: Optional[int] = None,
                       method: str = "exact", sinkhorn_iterations: int = 0):
    r"""Rank-Binomial rank distributions of SoftRank (Eq. 8-12), ``[B, L, R]``.

    ``p[b, j, r]`` is the probability that document j of list b ends at the
    0-based rank r (0 = top) when every score :math:`s_j` is smoothed into
    :math:`\mathcal{N}(s_j, \sigma^2)` (Eq. 8), with the pairwise win
    probabilities :math:`\pi_{ij}` of Eq. 9 combined by the recursion of Eq.
    11-12 (``"exact"``) or the normal approximation of Section 3.6
    (``"normal"``). See the module docstring for the algorithms and their cost.

    Args:
      scores: float ``[B, L]`` (float64 is kept; other dtypes compute in float32).
      mask: optional bool ``[B, L]``, True for valid documents.
      sigma: :math:`\sigma_s`, the standard deviation of the score smoothing, > 0.
      topn: keep only the first R = min(topn, L) ranks (exactly the first R
        columns of the full distribution); None keeps all L ranks.
      method: ``"exact"``, ``"normal"`` or ``"auto"`` (exact up to
        ``AUTO_EXACT_MAX_LIST_SIZE`` documents, normal beyond).
      sinkhorn_iterations: number of Sinkhorn column/row normalizations.

    Returns:
      ``[B, L, R]`` in the compute dtype. Rows of valid documents sum to 1
      (without ``topn``; with it, to 1 minus the mass beyond rank R - 1); rows
      of padded documents and columns of ranks >= the number of valid
      documents are 0.

    >>> p = rank_distributions([[2., 0.]], sigma=1e-3)
    >>> [[round(float(p[0, j, r]), 3) for r in range(2)] for j in range(2)]
    [[1.0, 0.0], [0.0, 1.0]]
    """
    sigma = validation.validate_positive(sigma, "sigma")
    topn = validation.validate_topn(topn)
    validation.validate_choice(method, METHODS, "method")
    sinkhorn_iterations = validation.validate_int(sinkhorn_iterations, "sinkhorn_iterations",
                                                  minimum=0)
    xp = arrays.namespace()
    scores, valid = xp.screening.prepare_scores(scores, mask)
    probs = distributions_of(scores, valid, sigma, topn, method)
    if sinkhorn_iterations:
        probs = _sinkhorn(xp, probs, valid, sinkhorn_iterations)
    return probs


def distributions_of(scores, valid, sigma: float, topn: Optional[int], method: str,
                     columns=None):
    """:func:`rank_distributions` without Sinkhorn or argument checks, for the
    documents ``columns`` (int ``[B, K]``; all L when None): ``[B, K, R]``.

    A loss that only needs some documents' distributions (SoftNDCG: the
    relevant ones) passes their indices and pays for K columns instead of L.
    Entries of ``columns`` that point at padded documents get a zero row.
    """
    xp = arrays.namespace()
    size = xp.shape(scores)[1]  # (TensorFlow, unknown: a tensor)
    static_size = scores.shape[1]
    static_ranks = topn
    if static_size is not None:
        static_ranks = static_size if topn is None else min(topn, static_size)
        num_ranks = static_ranks
    else:
        num_ranks = size if topn is None else xp.minimum(size, topn)
    if static_size == 0:  # lists of no document: no rank to take (a reshape of
        # the empty scores, so that their zero-size gradient is not None)
        num_columns = 0 if columns is None else xp.shape(columns)[1]
        return xp.reshape(scores, (xp.shape(scores)[0], num_columns, 0))

    win = win_probabilities(scores, valid, sigma, columns)
    column_valid = valid if columns is None else xp.lists.batch_gather(
        valid, xp.cast(columns, "int32"))

    def exact():
        return xp.transpose(xp.rank_binomial.exact(win, num_ranks, static_ranks), [1, 2, 0])

    def normal():
        return _normal(xp, win, valid, num_ranks)

    if method == "exact":
        probs = exact()
    elif method == "normal":
        probs = normal()
    elif static_size is not None:
        probs = exact() if static_size <= AUTO_EXACT_MAX_LIST_SIZE else normal()
    else:  # (TensorFlow only: keras.ops shapes are static)
        probs = xp.cond(size <= AUTO_EXACT_MAX_LIST_SIZE, exact, normal)
    probs = xp.where(column_valid[:, :, None], probs, xp.zeros_like(probs))
    if static_ranks is not None:
        probs = xp.ensure_shape(probs, [None, None if columns is not None else static_size,
                                        static_ranks])
    return probs
