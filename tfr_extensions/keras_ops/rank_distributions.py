r"""Distributions over ranks from Gaussian-smoothed scores (SoftRank): the
``keras.ops`` twin of :mod:`tfr_extensions.ops.rank_distributions` (the same
functions, the same contracts).

Taylor, Guiver, Robertson and Minka, "SoftRank: Optimizing Non-Smooth Rank
Metrics" (``softrank.txt``), Section 3.1-3.2 and 3.6.

Each score is the mean of a Gaussian with a shared standard deviation
:math:`\sigma` (Eq. 8), document i beats document j with probability (Eq. 9)

.. math:: \pi_{ij} = \Pr(S_i > S_j) = \Phi\Big(\frac{s_i - s_j}{\sqrt{2}\,\sigma}\Big)
          = \tfrac12 \operatorname{erfc}\Big(\frac{s_j - s_i}{2\sigma}\Big),

and the 0-based rank :math:`r_j` of j is the number of documents that beat it,
the *Rank-Binomial* distribution of the recursion of Eq. 11-12,

.. math:: p^{(1)}_j(r) = \delta(r), \qquad
          p^{(i)}_j(r) = p^{(i-1)}_j(r-1)\,\pi_{ij} + p^{(i-1)}_j(r)\,(1-\pi_{ij}),

the coefficients of :math:`\prod_{i \ne j} \big((1-\pi_{ij}) + \pi_{ij} z\big)`,
whose mean is the expected rank of Eq. 10, :math:`\sum_{i\ne j}\pi_{ij}`.

Implementation (``method="exact"``): the recursion of Eq. 12 itself, one
step per document i over the ``[R, B, K]`` coefficients of all documents j
at once, in a ``keras.ops.scan`` under JAX (``lax.scan``: one compiled step
whatever L, which compiles and, on CPU, runs faster than the TF op's
balanced product tree written in ``keras.ops``), a Python loop elsewhere.
The factors commute, so the result is the TF op's up to rounding. With a
cutoff ``topn`` = R only the coefficients of :math:`z^0..z^{R-1}` are kept
(higher ones never flow back into lower ones, so these R columns are exact).
Cost :math:`O(B L K R)` time, and as much memory for autodiff (one state per
step); ``method="auto"`` takes it up to ``AUTO_EXACT_MAX_LIST_SIZE`` documents.

``method="normal"`` (Section 3.6): :math:`r_j` approximated by a normal with
mean :math:`\mu_j = \sum_{i\ne j}\pi_{ij}` and variance
:math:`v_j = \sum_{i\ne j}\pi_{ij}(1-\pi_{ij})`, discretized with a continuity
correction over the ranks :math:`0..n-1`, the outer bounds at :math:`\mp\infty`
(rows sum to 1). ``method="auto"``: ``exact`` up to ``AUTO_EXACT_MAX_LIST_SIZE``
documents (the padded list size), ``normal`` beyond.

``sinkhorn_iterations > 0`` (end of Section 3.2): alternate column and row
normalizations, with a last "beyond" column of target sum n - R when R < n.

Numerics (as the TF op): :math:`\pi = \tfrac12(1 + \operatorname{erf}(z))`;
the scaled scores :math:`s / 2\sigma` are clamped to :math:`\pm b`
(:func:`scaled_score_bound`), padded documents take :math:`-2b` (they beat
nobody, :math:`\pi = 0`, and get exactly zero gradient), pairs ``i == j``
take ``NEUTRAL_Z`` (:math:`\pi = 0` exactly). Every argument of ``erf`` is
below :math:`3b` in magnitude; infinite scores clamp to :math:`\pm b`.
"""
from typing import Optional

import keras
import numpy as np
from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import screening
from tfr_extensions.ops import conventions
from tfr_extensions.ops import validation

METHODS = conventions.RANK_DISTRIBUTION_METHODS

#: ``method="auto"`` uses the exact recursion up to this (padded) list size
AUTO_EXACT_MAX_LIST_SIZE = 128

# z of the pairs i == j: erf(-100) is -1, so the factor is exactly (1, 0).
NEUTRAL_Z = -100.0

# Largest float64 scaled score: 3 * 2^509 < 2^512 = sqrt(float64 max).
_MAX_SCALED_SCORE_FLOAT64 = 2.0 ** 509

# Variance floor (in squared ranks) of the normal approximation.
_MIN_RANK_VARIANCE = 1e-6


def scaled_score_bound(dtype) -> float:
    r"""The bound :math:`b` of the scaled scores :math:`s / 2\sigma`:
    ``min(dtype.max / 4, 2 ** 509)`` (``dtype`` a dtype name or anything
    ``numpy.dtype`` takes). Valid scaled scores are clamped to :math:`[-b, b]`,
    padded ones take :math:`-2b`, so every difference stays below :math:`3b`.

    >>> scaled_score_bound("float64") == 2.0 ** 509, scaled_score_bound("float32") > 8e37
    (True, True)
    """
    return min(float(np.finfo(np.dtype(str(dtype))).max) / 4, _MAX_SCALED_SCORE_FLOAT64)


def _clamp(x, bound: float):
    """``x`` clamped to ``[-bound, bound]``; the gradient passes inside the
    closed interval and is 0 beyond it (as ``tf.clip_by_value``: selects,
    where ``jnp.clip`` would halve the gradient at the bounds)."""
    bound = numerics.constant(bound, lists.dtype_name(x))
    return ops.where(x > bound, bound, ops.where(x < -bound, -bound, x))


def win_probabilities(scores, mask, sigma: float, columns=None):
    r"""The pairwise win probabilities :math:`\pi_{ij}` of Eq. 9, ``[L_i, B, K]``.

    :math:`\pi_{ij} = \tfrac12(1 + \operatorname{erf}(z_{ij}))`, :math:`z_{ij} =
    (s_i - s_j) / 2\sigma`, for the documents j in ``columns`` (int ``[B, K]``;
    all L when None); the beating document i comes first. Pairs that do not
    count get :math:`\pi = 0` exactly, with exactly zero gradient: valid scaled
    scores are clamped to :math:`\pm b` (:func:`scaled_score_bound`), padded
    documents take :math:`-2b`, and ``i == j`` takes ``NEUTRAL_Z``. (The TF
    op writes the gradient by hand to keep no ``[L, B, K]`` tensor; here the
    backend's autodiff of ``erf`` gives the same :math:`e^{-z^2}/\sqrt\pi`.)
    """
    dtype = lists.dtype_name(scores)
    bound = scaled_score_bound(dtype)
    scaled = _clamp(scores * numerics.constant(0.5 / sigma, dtype), bound)
    scaled = ops.where(mask, scaled, numerics.constant(-2.0 * bound, dtype))
    size = scores.shape[1]
    documents = ops.arange(size, dtype="int32")  # (not NumPy: torch.compile traces this)
    if columns is None:
        losers = scaled
        same = ops.equal(documents[:, None, None], documents[None, None, :])  # [L, 1, L]
    else:
        columns = ops.cast(columns, "int32")
        losers = ops.take_along_axis(scaled, columns, axis=1)
        same = ops.equal(documents[:, None, None], columns[None, :, :])  # [L, B, K]
    z = ops.where(same, numerics.constant(NEUTRAL_Z, dtype),
                  ops.transpose(scaled)[:, :, None] - losers[None, :, :])
    return 0.5 + 0.5 * ops.erf(z)


def _exact(win, num_ranks: int):
    """The Rank-Binomial recursion (Eq. 11-12), ``[R, B, K]``, R = ``num_ranks``:
    one step per beating document i (along the leading axis of ``win``),
    ``p <- p (1 - w_i) + shift(p) w_i`` truncated to R coefficients.
    Padded documents and the pairs i == j have w = 0 and leave p unchanged."""
    delta = ops.pad(ops.ones_like(win[:1]), [[0, num_ranks - 1], [0, 0], [0, 0]])  # Eq. 11

    def step(state, w):  # Eq. 12
        shifted = ops.concatenate([ops.zeros_like(state[:1]), state[:-1]], axis=0)
        return state * (1.0 - w) + shifted * w

    if keras.backend.backend() == "jax":  # lax.scan: one compiled step whatever L
        probs, _ = ops.scan(lambda state, w: (step(state, w), None), delta, win)
        return probs
    # PyTorch, TensorFlow: a Python loop (Keras's scan there stacks an output of
    # the state's size per step, where JAX's takes None)
    probs = delta
    for w in ops.unstack(win, axis=0):
        probs = step(probs, w)
    return probs


def _ndtr(x):
    """The standard normal CDF, as an ``erfc`` (accurate in the lower tail)."""
    return 0.5 * ops.erfc(-x / numerics.constant(2.0 ** 0.5, lists.dtype_name(x)))


def _normal_cdf_difference(lower, upper):
    """Phi(upper) - Phi(lower) for lower <= upper, without cancellation in
    either tail (reflects both bounds when lower > 0)."""
    reflect = lower > 0
    return ops.where(reflect, _ndtr(-lower) - _ndtr(-upper), _ndtr(upper) - _ndtr(lower))


def _normal(win, mask, num_ranks: int):
    """The discretized normal approximation of Section 3.6, ``[B, K, R]``."""
    dtype = lists.dtype_name(win)
    mean = ops.sum(win, axis=0)[:, :, None]  # Eq. 10, [B, K, 1]
    variance = ops.sum(win * (1.0 - win), axis=0)[:, :, None]
    std = ops.sqrt(numerics.maximum(variance, _MIN_RANK_VARIANCE))
    num_valid = ops.sum(ops.cast(mask, dtype), axis=-1)[:, None, None]
    ranks = ops.arange(num_ranks, dtype=dtype)[None, None, :]  # [1, 1, R]
    inf = numerics.constant(float("inf"), dtype)
    lower = ops.where(ranks > 0, (ranks - 0.5 - mean) / std, -inf)
    upper = ops.where(ranks + 1 < num_valid, (ranks + 0.5 - mean) / std, inf)
    probs = _normal_cdf_difference(lower, upper)
    return ops.where(ranks < num_valid, probs, ops.zeros_like(probs))


def _sinkhorn(probs, mask, iterations: int):
    """Sinkhorn scaling of ``[B, L, R]`` rank distributions (Section 3.2),
    with a "beyond" column of target sum n - R when R < n."""
    dtype = lists.dtype_name(probs)
    num_ranks = probs.shape[2]
    num_valid = ops.sum(ops.cast(mask, dtype), axis=-1)[:, None]  # [B, 1]
    ranks = ops.arange(num_ranks, dtype=dtype)[None, :]
    beyond = numerics.maximum(1.0 - ops.sum(probs, axis=-1, keepdims=True), 0.0)
    beyond = ops.where(mask[:, :, None], beyond, ops.zeros_like(beyond))
    matrix = ops.concatenate([probs, beyond], axis=-1)  # [B, L, R + 1]
    targets = ops.concatenate([ops.cast(ranks < num_valid, dtype),
                               numerics.maximum(num_valid - float(num_ranks), 0.0)], axis=-1)
    for _ in range(iterations):
        column_sums = ops.sum(matrix, axis=1, keepdims=True)  # [B, 1, R + 1]
        matrix = matrix * numerics.safe_divide(targets[:, None, :], column_sums)
        row_sums = ops.sum(matrix, axis=-1, keepdims=True)
        matrix = numerics.safe_divide(matrix, row_sums)
    return matrix[..., :-1]


def rank_distributions(scores, mask=None, sigma: float = 1.0, topn: Optional[int] = None,
                       method: str = "exact", sinkhorn_iterations: int = 0):
    r"""Rank-Binomial rank distributions of SoftRank (Eq. 8-12), ``[B, L, R]``.

    ``p[b, j, r]`` is the probability that document j of list b ends at the
    0-based rank r when every score is smoothed into :math:`\mathcal{N}(s_j,
    \sigma^2)` (Eq. 8), the win probabilities of Eq. 9 combined by Eq. 11-12
    (``"exact"``) or the normal approximation of Section 3.6 (``"normal"``).

    Args:
      scores: float ``[B, L]`` (float64 is kept; other dtypes compute in float32).
      mask: optional bool ``[B, L]``, True for valid documents.
      sigma: :math:`\sigma_s` of the score smoothing, > 0.
      topn: keep only the first R = min(topn, L) ranks; None keeps all L.
      method: ``"exact"``, ``"normal"`` or ``"auto"``.
      sinkhorn_iterations: number of Sinkhorn column/row normalizations.

    Returns:
      ``[B, L, R]``: rows of valid documents sum to 1 (to 1 minus the mass
      beyond rank R - 1 with ``topn``); padded rows and ranks >= the number of
      valid documents are 0.

    >>> p = rank_distributions([[2., 0.]], sigma=1e-3)
    >>> ops.convert_to_numpy(p).round(3).tolist()
    [[[1.0, 0.0], [0.0, 1.0]]]
    """
    sigma = validation.validate_positive(sigma, "sigma")
    topn = validation.validate_topn(topn)
    validation.validate_choice(method, METHODS, "method")
    sinkhorn_iterations = validation.validate_int(sinkhorn_iterations, "sinkhorn_iterations",
                                                  minimum=0)
    scores, valid = screening.prepare_scores(scores, mask)
    probs = distributions_of(scores, valid, sigma, topn, method)
    if sinkhorn_iterations:
        probs = _sinkhorn(probs, valid, sinkhorn_iterations)
    return probs


def distributions_of(scores, valid, sigma: float, topn: Optional[int], method: str,
                     columns=None):
    """:func:`rank_distributions` without Sinkhorn or argument checks, for the
    documents ``columns`` (int ``[B, K]``; all L when None): ``[B, K, R]``.
    Entries of ``columns`` that point at padded documents get a zero row.
    (Shapes are static here: the list size L must be known.)"""
    size = int(scores.shape[1])
    num_ranks = size if topn is None else min(size, topn)
    num_columns = size if columns is None else columns.shape[1]
    if size == 0:  # lists of no document: no rank to take (a reshape of the
        # empty scores, so that their zero-size gradient is defined)
        return ops.reshape(scores, (ops.shape(scores)[0], num_columns, 0))

    win = win_probabilities(scores, valid, sigma, columns)
    column_valid = valid if columns is None else ops.take_along_axis(
        valid, ops.cast(columns, "int32"), axis=1)
    use_exact = method == "exact" or (method == "auto" and size <= AUTO_EXACT_MAX_LIST_SIZE)
    if use_exact:
        probs = ops.transpose(_exact(win, num_ranks), [1, 2, 0])
    else:
        probs = _normal(win, valid, num_ranks)
    return ops.where(column_valid[:, :, None], probs, ops.zeros_like(probs))

