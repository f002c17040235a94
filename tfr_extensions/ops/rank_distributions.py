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

Implementation (``method="exact"``): the factors commute, so the product can
be taken in any order. Polynomials are multiplied pairwise, each product being
one gather of the coefficient pairs, one multiply and one segment sum (with a
matching custom gradient, the correlation, so no sparse gradients arise).
With a cutoff ``topn`` = R only the coefficients of :math:`z^0..z^{R-1}` are
kept: higher coefficients never flow back into lower ones, so these R columns
are exact, and the mass beyond them is :math:`1 - \sum_{r<R} p_j(r)`.

* Static list size L <= ``MAX_TREE_LIST_SIZE`` and R <= ``MAX_TREE_RANKS``
  (short lists, nDCG@k): one balanced product tree over all documents,
  ``ceil(log2 L)`` levels and no loop; autodiff keeps each level's input
  (about 7 ``[B, L, L]``-sized tensors for R = 10) and the largest level's
  gathered pairs are transient ``[B, L, L]``-sized tensors times ~5.
* Otherwise (longer or unknown L, or many ranks): documents in chunks of
  ``CHUNK_SIZE``, a product tree per chunk, multiplied into the running
  ``[R, B, L]`` distribution inside a ``tf.foldl`` over the chunks (the graph
  does not grow with L); each step is wrapped in ``tf.recompute_grad``, so the
  backward pass keeps one state per chunk.

Cost :math:`O(B L^2 R)` time either way (:math:`O(B L^3)` for the full
distribution).

``method="normal"`` (Section 3.6): :math:`r_j` is approximated by a normal with
mean :math:`\mu_j = \sum_{i\ne j}\pi_{ij}` and variance
:math:`v_j = \sum_{i\ne j}\pi_{ij}(1-\pi_{ij})`, discretized with a continuity
correction over the ranks :math:`0..n-1` of a list of n valid documents:
:math:`p_j(r) = \Phi(\frac{r + 1/2 - \mu_j}{\sqrt{v_j}}) -
\Phi(\frac{r - 1/2 - \mu_j}{\sqrt{v_j}})` with the outer bounds at
:math:`\mp\infty`, so each row sums to 1. Cost :math:`O(B L^2 + B L R)`.
``method="auto"`` uses ``exact`` for lists of at most
``AUTO_EXACT_MAX_LIST_SIZE`` documents (the padded list size) and ``normal``
beyond.

``sinkhorn_iterations > 0`` (end of Section 3.2): alternately divide each
column of :math:`[p_j(r)]` by its sum and each row by its sum. With a cutoff R
< n the matrix has a last "beyond" column whose target sum is n - R (the other
columns' targets are 1), so the result approaches a matrix whose rows sum to 1
and whose rank columns sum to 1.

Numerics: the smaller of :math:`\pi` and :math:`1-\pi` is computed as an
``erfc`` of :math:`|s_i - s_j| / 2\sigma` (no cancellation in the tail); the recursion only multiplies and adds numbers in
[0, 1], so it cannot overflow, and its gradient is bounded. Padded documents
take no rank (their row is 0), beat nobody (:math:`\pi = 0`), and get exactly
zero gradient; their score differences are replaced by ``NEUTRAL_Z`` before
``erfc``.
"""
from typing import Optional

import tensorflow as tf

from tfr_extensions.ops import lists

METHODS = ("exact", "normal", "auto")

#: documents per step of the exact recursion's while loop (a power of 2)
CHUNK_SIZE = 32

#: with a static list size of at most MAX_TREE_LIST_SIZE documents and at most
#: MAX_TREE_RANKS ranks, the exact recursion is one product tree over all
#: documents (no loop, fastest); otherwise a loop over chunks (least memory)
MAX_TREE_RANKS = 16
MAX_TREE_LIST_SIZE = 256

#: ``method="auto"`` uses the exact recursion up to this (padded) list size
AUTO_EXACT_MAX_LIST_SIZE = 128

# z of a pair that does not count (i == j, padding): erfc(100) underflows to 0,
# so its factor is exactly (lose, win) = (1, 0) and its gradient exactly 0.
NEUTRAL_Z = -100.0

# Variance floor (in squared ranks) of the normal approximation: below it the
# Rank-Binomial is a point mass to within 1e-3 ranks (|mu - round(mu)| <= 2 v),
# and the floor keeps d sqrt(v) / dv finite.
_MIN_RANK_VARIANCE = 1e-6


def scaled_differences(scores: tf.Tensor, mask: tf.Tensor, sigma: float) -> tf.Tensor:
    r""":math:`z_{ij} = (s_i - s_j) / (2\sigma)`, ``[L_i, B, L_j]``, so that
    :math:`\pi_{ij} = \tfrac12\operatorname{erfc}(-z_{ij})` (Eq. 9).

    Pairs with ``i == j`` or a padded document get ``NEUTRAL_Z``, whose factor
    is exactly neutral (:math:`\pi = 0`) with exactly zero gradient. The
    beating document i comes first, so the recursion walks the leading axis.
    """
    size = tf.shape(scores)[1]
    pair_valid = tf.logical_and(tf.transpose(mask)[:, :, None], mask[None, :, :])
    pair_valid = tf.logical_and(
        pair_valid, tf.logical_not(tf.eye(size, dtype=tf.bool))[:, None, :])
    diffs = tf.transpose(scores)[:, :, None] - scores[None, :, :]  # s_i - s_j
    z = tf.where(pair_valid, diffs, tf.zeros_like(diffs)) / tf.constant(2.0 * sigma, scores.dtype)
    return tf.where(pair_valid, z, tf.fill(tf.shape(z), tf.constant(NEUTRAL_Z, z.dtype)))


def win_probabilities(z: tf.Tensor):
    r"""``(lose, win)`` = :math:`(1 - \pi_{ij}, \pi_{ij})` from :math:`z_{ij}`.

    The smaller of the two is :math:`\tfrac12\operatorname{erfc}(|z|)`,
    accurate in the tail; the larger is 1 minus it.
    """
    tail = 0.5 * tf.math.erfc(tf.abs(z))  # min(pi, 1 - pi)
    positive = z > 0
    return tf.where(positive, tail, 1.0 - tail), tf.where(positive, 1.0 - tail, tail)


def _pair_table(len_a: int, len_b: int, len_out: int):
    """Static indices of the coefficient pairs (t, u) with t + u < len_out."""
    pairs = [(t, u) for t in range(len_a) for u in range(len_b) if t + u < len_out]
    return [t for t, _ in pairs], [u for _, u in pairs], [t + u for t, u in pairs]


def _gather_sum(x: tf.Tensor, y: tf.Tensor, x_index, y_index, out_index, out_len: int):
    """``out[k] = sum_{p: out_index[p] = k} x[x_index[p]] * y[y_index[p]]`` along
    axis 0, for static index lists."""
    terms = tf.gather(x, x_index) * tf.gather(y, y_index)
    out = tf.math.unsorted_segment_sum(terms, tf.constant(out_index, tf.int32), out_len)
    return tf.ensure_shape(out, [out_len] + x.shape[1:])


def _poly_product(a: tf.Tensor, b: tf.Tensor, max_len: Optional[int]) -> tf.Tensor:
    """Polynomial product along axis 0, truncated to ``max_len`` coefficients.

    ``a``: ``[m_a, ...]``, ``b``: ``[m_b, ...]`` (static m), same trailing
    shape: ``c_r = sum_{t + u = r} a_t b_u``, by gathering the coefficient
    pairs, multiplying and summing per r (four ops whatever m). The gradient
    is the matching correlation, ``da_t = sum_u dc_{t+u} b_u`` (and the same
    for b), computed the same way, so no sparse gradients arise.
    """
    len_a, len_b = a.shape[0], b.shape[0]
    len_out = len_a + len_b - 1 if max_len is None else min(len_a + len_b - 1, max_len)
    t_index, u_index, r_index = _pair_table(len_a, len_b, len_out)

    @tf.custom_gradient
    def product(a, b):
        def grad(upstream):
            return (_gather_sum(upstream, b, r_index, u_index, t_index, len_a),
                    _gather_sum(upstream, a, r_index, t_index, u_index, len_b))
        return _gather_sum(a, b, t_index, u_index, r_index, len_out), grad

    return product(a, b)


def _shift_product(state: tf.Tensor, poly: tf.Tensor) -> tf.Tensor:
    """``state * poly`` along axis 0, truncated to the (possibly dynamic)
    length of ``state``: one shifted copy of ``state`` per coefficient of
    ``poly`` (used when the number of ranks is large or unknown)."""
    length = tf.shape(state)[0]
    out = poly[0] * state
    for t in range(1, poly.shape[0]):
        shifted = tf.pad(state, [[t, 0]] + [[0, 0]] * (state.shape.rank - 1))[:length]
        out += poly[t] * shifted
    return out


def _chunk_polynomial(z: tf.Tensor, max_len: Optional[int]) -> tf.Tensor:
    r""":math:`\prod_{i \in chunk} ((1-\pi_{ij}) + \pi_{ij} x)` by a binary tree
    of products. ``z``: ``[C, B, L]``, C a (static) power of 2. Returns
    ``[m, B, L]``, ``m = min(C + 1, max_len)``."""
    polys = tf.stack(win_probabilities(z))  # [2, P, B, L]: coefficient, factor, ...
    for _ in range(int(polys.shape[1]).bit_length() - 1):
        half = polys.shape[1] // 2
        polys = _poly_product(polys[:, :half], polys[:, half:], max_len)
    return polys[:, 0]


def _tree_exact(z: tf.Tensor, static_ranks: int) -> tf.Tensor:
    """Eq. 11-12 as one product tree over all (static) L documents, ``[R, B, L]``."""
    size = int(z.shape[0])
    padded = max(2, 1 << (size - 1).bit_length())
    z = tf.pad(z, [[0, padded - size], [0, 0], [0, 0]], constant_values=NEUTRAL_Z)
    poly = _chunk_polynomial(z, static_ranks)
    length = poly.shape[0]
    if length < static_ranks:  # fewer documents than ranks: the rest is 0
        poly = tf.pad(poly, [[0, static_ranks - length], [0, 0], [0, 0]])
    return poly


def _exact(z: tf.Tensor, num_ranks, static_ranks: Optional[int]):
    """The Rank-Binomial recursion (Eq. 11-12), ``[R, B, L]``, R = ``num_ranks``."""
    if (z.shape[0] is not None and z.shape[0] <= MAX_TREE_LIST_SIZE
            and static_ranks is not None and static_ranks <= MAX_TREE_RANKS):
        return _tree_exact(z, static_ranks)
    size, batch = tf.shape(z)[0], tf.shape(z)[1]
    chunk = CHUNK_SIZE
    if z.shape[0] is not None:  # short static lists: a smaller tree suffices
        chunk = min(chunk, max(2, 1 << (int(z.shape[0]) - 1).bit_length()))
    num_chunks = (size + chunk - 1) // chunk
    # Neutral factors fill the last chunk.
    z = tf.pad(z, [[0, num_chunks * chunk - size], [0, 0], [0, 0]], constant_values=NEUTRAL_Z)
    z = tf.reshape(z, [num_chunks, chunk, batch, -1])
    small = static_ranks is not None and static_ranks <= MAX_TREE_RANKS
    delta = tf.one_hot(tf.zeros(tf.shape(z)[2:], tf.int32), num_ranks, axis=0,
                       dtype=z.dtype)  # [R, B, L]
    if static_ranks is not None:
        delta = tf.ensure_shape(delta, [static_ranks] + delta.shape[1:])

    @tf.recompute_grad
    def step(state, chunk_z):
        # (recompute_grad drops static shapes, which the products need)
        chunk_z = tf.ensure_shape(chunk_z, [chunk, None, None])
        state = tf.ensure_shape(state, delta.shape)
        poly = _chunk_polynomial(chunk_z, static_ranks)
        if small:
            return _poly_product(poly, state, static_ranks)
        return tf.ensure_shape(_shift_product(state, poly), state.shape)

    return tf.foldl(step, z, initializer=delta)


def _ndtr(x: tf.Tensor) -> tf.Tensor:
    """The standard normal CDF, as an ``erfc`` (accurate in the lower tail)."""
    return 0.5 * tf.math.erfc(-x / tf.constant(2.0 ** 0.5, x.dtype))


def _normal_cdf_difference(lower: tf.Tensor, upper: tf.Tensor) -> tf.Tensor:
    """Phi(upper) - Phi(lower) for lower <= upper, without cancellation in
    either tail (reflects both bounds when lower > 0)."""
    reflect = lower > 0
    return tf.where(reflect, _ndtr(-lower) - _ndtr(-upper), _ndtr(upper) - _ndtr(lower))


def _normal(z: tf.Tensor, mask: tf.Tensor, num_ranks) -> tf.Tensor:
    """The discretized normal approximation of Section 3.6, ``[B, L, R]``."""
    dtype = z.dtype
    lose, win = win_probabilities(z)
    mean = tf.reduce_sum(win, axis=0)[:, :, None]  # Eq. 10, [B, L, 1]
    variance = tf.reduce_sum(win * lose, axis=0)[:, :, None]
    std = tf.sqrt(tf.maximum(variance, tf.constant(_MIN_RANK_VARIANCE, dtype)))
    num_valid = tf.reduce_sum(tf.cast(mask, dtype), axis=-1)[:, None, None]
    ranks = tf.range(num_ranks, dtype=dtype)[None, None, :]  # [1, 1, R]
    inf = tf.constant(float("inf"), dtype)
    lower = tf.where(ranks > 0, (ranks - 0.5 - mean) / std, -inf)
    upper = tf.where(ranks + 1 < num_valid, (ranks + 0.5 - mean) / std, inf)
    probs = _normal_cdf_difference(lower, upper)
    return tf.where(ranks < num_valid, probs, tf.zeros_like(probs))


def _sinkhorn(probs: tf.Tensor, mask: tf.Tensor, iterations: int) -> tf.Tensor:
    """Sinkhorn scaling of ``[B, L, R]`` rank distributions (Section 3.2),
    with a "beyond" column of target sum n - R when R < n."""
    dtype = probs.dtype
    num_ranks = tf.shape(probs)[2]
    num_valid = tf.reduce_sum(tf.cast(mask, dtype), axis=-1)[:, None]  # [B, 1]
    ranks = tf.range(num_ranks, dtype=dtype)[None, :]
    beyond = tf.maximum(1.0 - tf.reduce_sum(probs, axis=-1, keepdims=True), 0.0)
    beyond = tf.where(mask[:, :, None], beyond, tf.zeros_like(beyond))
    matrix = tf.concat([probs, beyond], axis=-1)  # [B, L, R + 1]
    targets = tf.concat([tf.cast(ranks < num_valid, dtype),
                         tf.maximum(num_valid - tf.cast(num_ranks, dtype), 0.0)], axis=-1)

    def safe_divide(x, total):
        positive = total > 0
        return tf.where(positive, x / tf.where(positive, total, tf.ones_like(total)),
                        tf.zeros_like(x))

    for _ in range(iterations):
        column_sums = tf.reduce_sum(matrix, axis=1, keepdims=True)  # [B, 1, R + 1]
        matrix = matrix * safe_divide(targets[:, None, :], column_sums)
        row_sums = tf.reduce_sum(matrix, axis=-1, keepdims=True)
        matrix = safe_divide(matrix, row_sums)
    return matrix[..., :-1]


def rank_distributions(scores, mask=None, sigma: float = 1.0, topn: Optional[int] = None,
                       method: str = "exact", sinkhorn_iterations: int = 0) -> tf.Tensor:
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
    >>> p.numpy().round(3).tolist()
    [[[1.0, 0.0], [0.0, 1.0]]]
    """
    lists.validate_positive(sigma, "sigma")
    topn = lists.validate_topn(topn)
    lists.validate_choice(method, METHODS, "method")
    if (isinstance(sinkhorn_iterations, bool) or not isinstance(sinkhorn_iterations, int)
            or sinkhorn_iterations < 0):
        raise ValueError("`sinkhorn_iterations` must be a non-negative int; "
                         f"got {sinkhorn_iterations!r}.")
    scores, valid = lists.prepare_scores(scores, mask)

    size = tf.shape(scores)[1]
    static_size = scores.shape[1]
    num_ranks = size if topn is None else tf.minimum(size, topn)
    static_ranks = topn
    if static_size is not None:
        static_ranks = static_size if topn is None else min(topn, static_size)

    z = scaled_differences(scores, valid, sigma)

    def exact():
        return tf.transpose(_exact(z, num_ranks, static_ranks), [1, 2, 0])

    def normal():
        return _normal(z, valid, num_ranks)

    if method == "exact":
        probs = exact()
    elif method == "normal":
        probs = normal()
    elif static_size is not None:
        probs = exact() if static_size <= AUTO_EXACT_MAX_LIST_SIZE else normal()
    else:
        probs = tf.cond(size <= AUTO_EXACT_MAX_LIST_SIZE, exact, normal)
    probs = tf.where(valid[:, :, None], probs, tf.zeros_like(probs))
    if sinkhorn_iterations:
        probs = _sinkhorn(probs, valid, sinkhorn_iterations)
    if static_ranks is not None:
        probs = tf.ensure_shape(probs, [None, static_size, static_ranks])
    return probs
