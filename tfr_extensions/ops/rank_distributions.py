r"""Distributions over ranks from Gaussian-smoothed scores (SoftRank).

Taylor, Guiver, Robertson and Minka, "SoftRank: Optimizing Non-Smooth Rank Metrics"
(``softrank.txt``), Sections 3.1-3.2 and 3.6. Each score is the mean of a Gaussian, Eq. 8:
:math:`S_j \sim \mathcal{N}(s_j, \sigma^2)` (``sigma``). Document i beats j with probability (Eq. 9)

.. math:: \pi_{ij} = \Pr(S_i > S_j) = \Phi\Big(\frac{s_i - s_j}{\sqrt{2}\,\sigma}\Big)
          = \tfrac12 \operatorname{erfc}\Big(\frac{s_j - s_i}{2\sigma}\Big),

and the 0-based rank :math:`r_j` (the number of documents that beat j) is Rank-Binomial, the
coefficients of :math:`\prod_{i \ne j} \big((1-\pi_{ij}) + \pi_{ij} z\big)` (recursion Eq. 11-12)

.. math:: p^{(1)}_j(r) = \delta(r), \qquad
          p^{(i)}_j(r) = p^{(i-1)}_j(r-1)\,\pi_{ij} + p^{(i-1)}_j(r)\,(1-\pi_{ij}),

with mean the expected rank of Eq. 10, :math:`\sum_{i\ne j}\pi_{ij}`.

* ``method="exact"``: the recursion, per framework as ``xp.rank_binomial`` (which cites its
  benchmark); a cutoff ``topn`` = R keeps :math:`z^0..z^{R-1}` (exact: higher coefficients
  never flow back). :math:`O(B L^2 R)` time.
* ``method="normal"`` (Section 3.6): a normal of mean :math:`\mu_j = \sum_{i\ne j}\pi_{ij}` and
  variance :math:`v_j = \sum_{i\ne j}\pi_{ij}(1-\pi_{ij})`, with a continuity correction over
  the ranks :math:`0..n-1` of n valid documents (outer bounds at :math:`\mp\infty`):
  :math:`p_j(r) = \Phi(\frac{r + 1/2 - \mu_j}{\sqrt{v_j}}) - \Phi(\frac{r - 1/2 - \mu_j}{\sqrt{v_j}})`.
  :math:`O(B L^2 + B L R)` time.
* ``method="auto"``: ``exact`` up to ``AUTO_EXACT_MAX_LIST_SIZE`` (padded) documents.
* ``sinkhorn_iterations > 0`` (end of Section 3.2): alternately divide each column of
  :math:`[p_j(r)]` and each row by its sum; with R < n a last column has the sum n - R.

Numerics: one vectorized ``erf`` per pair; the recursion only multiplies and adds numbers in
[0, 1] (bounded gradient). Scaled scores :math:`s / 2\sigma` are clamped to :math:`\pm b`
(:func:`scaled_score_bound`; the clamp only ties valid scores beyond it), padded ones take
:math:`-2b` (:math:`\pi = 0`, zero gradient), pairs ``i == j`` ``NEUTRAL_Z``: every ``erf``
argument is below :math:`3b`, in float64 below :math:`2^{512}`, past which TF 2.21's float64
``erf`` returns NaN.
"""
from typing import Optional

import numpy as np

from tfr_extensions import arrays
from tfr_extensions.ops import conventions
from tfr_extensions.ops import validation

METHODS = conventions.RANK_DISTRIBUTION_METHODS

#: ``method="auto"`` uses the exact recursion up to this (padded) list size
AUTO_EXACT_MAX_LIST_SIZE = 128

# z of the pairs i == j: erf(-100) = -1, the factor exactly (lose, win) = (1, 0), gradient 0;
# selected, not added to s_i - s_i (a reassociation would lose it once |s| passes ~1e9).
NEUTRAL_Z = -100.0
# Largest float64 scaled score: 3 * 2^509 < 2^512 (module docstring).
_MAX_SCALED_SCORE_FLOAT64 = 2.0 ** 509
# Variance floor (squared ranks) of the normal approximation: keeps d sqrt(v) / dv finite.
_MIN_RANK_VARIANCE = 1e-6


def scaled_score_bound(dtype) -> float:
    r"""The bound :math:`b` of the scaled scores :math:`s / 2\sigma`: ``min(max / 4, 2**509)``.

    >>> scaled_score_bound("float64") == 2.0 ** 509, scaled_score_bound("float32") > 8e37
    (True, True)
    """
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None) or str(dtype)
    return min(float(np.finfo(np.dtype(name)).max) / 4, _MAX_SCALED_SCORE_FLOAT64)


def win_probabilities(scores, mask, sigma: float, columns=None):
    r"""The win probabilities :math:`\pi_{ij}` of Eq. 9, ``[L_i, B, K]``, for the documents j in
    ``columns`` (int ``[B, K]``; all L when None), of the scores clamped and padded on
    ``[B, L]`` (module docstring: no ``[L, B, L]`` mask)."""
    xp = arrays.namespace()
    dtype = xp.dtype_name(scores)
    bound = scaled_score_bound(dtype)
    scaled, limit = scores * xp.constant(0.5 / sigma, dtype), xp.constant(bound, dtype)
    # clamped by selects, as tf.clip_by_value (jnp.clip would halve the gradient at +-b)
    scaled = xp.where(scaled > limit, limit, xp.where(scaled < -limit, -limit, scaled))
    scaled = xp.where(mask, scaled, xp.constant(-2.0 * bound, dtype))
    if columns is not None:
        columns = xp.cast(columns, "int32")
    losers = scaled if columns is None else xp.lists.batch_gather(scaled, columns)
    return xp.rank_binomial.win_probabilities(scaled, losers, columns, NEUTRAL_Z)


def _ndtr(xp, x):
    """The standard normal CDF, as an ``erfc`` (accurate in the lower tail)."""
    return 0.5 * xp.erfc(-x / xp.constant(2.0 ** 0.5, xp.dtype_name(x)))


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
    # Phi(upper) - Phi(lower), both bounds reflected when lower > 0 (no cancellation)
    probs = xp.where(lower > 0, _ndtr(xp, -lower) - _ndtr(xp, -upper),
                     _ndtr(xp, upper) - _ndtr(xp, lower))
    return xp.where(ranks < num_valid, probs, xp.zeros_like(probs))


def _sinkhorn(xp, probs, mask, iterations: int):
    """Sinkhorn scaling of ``[B, L, R]`` rank distributions (module docstring)."""
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
    r"""Rank-Binomial rank distributions of SoftRank (Eq. 8-12), ``[B, L, R]``: ``p[b, j, r]``
    is the probability that document j of list b ends at the 0-based rank r (0 = top).

    Args:
      scores: float ``[B, L]`` (float64 is kept; other dtypes compute in float32).
      mask: optional bool ``[B, L]``, True for valid documents.
      sigma: :math:`\sigma`, the standard deviation of the score smoothing, > 0.
      topn: keep only the first R = min(topn, L) ranks (the first R columns of the full
        distribution); None keeps all L.
      method: ``"exact"``, ``"normal"`` or ``"auto"``.
      sinkhorn_iterations: number of Sinkhorn column/row normalizations.

    Returns:
      ``[B, L, R]`` in the compute dtype. Rows of valid documents sum to 1 (with ``topn``,
      1 minus the mass beyond R); rows of padded documents and columns of ranks >= the
      number of valid documents are 0.

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
    """:func:`rank_distributions` without Sinkhorn or checks, ``[B, K, R]``, for the documents
    ``columns`` (int ``[B, K]``; all L when None) at the cost of K; padded ones get zeros."""
    xp = arrays.namespace()
    size, static_size = xp.shape(scores)[1], scores.shape[1]  # (TensorFlow, unknown: a tensor)
    if static_size is not None:
        num_ranks = static_ranks = static_size if topn is None else min(topn, static_size)
    else:
        static_ranks, num_ranks = topn, size if topn is None else xp.minimum(size, topn)
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

    if method == "auto" and static_size is None:  # (TensorFlow only: keras.ops shapes are static)
        probs = xp.cond(size <= AUTO_EXACT_MAX_LIST_SIZE, exact, normal)
    else:
        use_exact = method == "exact" or (
            method == "auto" and static_size <= AUTO_EXACT_MAX_LIST_SIZE)
        probs = exact() if use_exact else normal()
    probs = xp.where(column_valid[:, :, None], probs, xp.zeros_like(probs))
    if static_ranks is not None:
        probs = xp.ensure_shape(probs, [None, None if columns is not None else static_size,
                                        static_ranks])
    return probs
