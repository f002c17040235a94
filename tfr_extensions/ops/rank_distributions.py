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
be taken in any order. A polynomial is a list of coefficient tensors, and two
are multiplied with element-wise products and one ``add_n`` per coefficient
(no gathers, so XLA and autodiff see plain arithmetic). With a cutoff
``topn`` = R only the coefficients of :math:`z^0..z^{R-1}` are kept: higher
coefficients never flow back into lower ones, so these R columns are exact,
and the mass beyond them is :math:`1 - \sum_{r<R} p_j(r)`.

* Static list size L <= ``MAX_TREE_LIST_SIZE`` (``XLA_MAX_TREE_LIST_SIZE``
  under XLA) and R <= ``MAX_TREE_RANKS`` (nDCG@k): one balanced product tree over all documents, ``ceil(log2 L)``
  levels and no loop: about 13 element-wise products per pair (i, j) forward
  for R = 10, and autodiff keeps each level's input, about 7 ``[B, L, L]``-sized
  tensors in all. Outside XLA, from ``COMPILED_LEVELS_MIN_LIST_SIZE``
  documents on, each level (and its gradient) runs as one XLA program,
  compiled once per shape, instead of up to 65 graph ops.
* Otherwise (unknown or longer L, or many ranks): documents in chunks of
  ``CHUNK_SIZE`` (``XLA_CHUNK_SIZE`` under XLA), a product tree per chunk, multiplied into the running
  ``[R, B, L]`` distribution inside a ``tf.foldl`` over the chunks (the graph
  does not grow with L); each step is wrapped in ``tf.recompute_grad``, so the
  backward pass keeps one state per chunk.

A caller that needs only some documents' distributions (SoftNDCG needs the
relevant ones) passes their indices to :func:`distributions_of` and pays for
those columns only.

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

Numerics: :math:`\pi = \tfrac12(1 + \operatorname{erf}(z))` with one
vectorized ``erf`` per pair, accurate to a unit of 1.0 (what sums of
products of probabilities need); the recursion only multiplies and adds
numbers in [0, 1], so it cannot overflow, and its gradient is bounded. The
scaled scores :math:`s / 2\sigma` are clamped to :math:`\pm b`, :math:`b` =
:func:`scaled_score_bound` (``dtype.max / 4`` in float32, :math:`2^{509}
\approx 1.7 \times 10^{153}` in float64); padded documents take no rank (their
row is 0) and the scaled score :math:`-2b`, so they beat nobody (:math:`\pi =
0`) and get exactly zero gradient; pairs ``i == j`` get ``NEUTRAL_Z``. Every
argument of ``erf`` is then below :math:`3b` in magnitude: finite, and in
float64 below :math:`2^{512} = \sqrt{\text{float64 max}}`, past which TF
2.21's float64 ``erf`` (which squares its argument) returns NaN. The clamp
changes nothing below :math:`b`: it only makes distinct valid scores beyond
:math:`\pm b` tie (:math:`\pi = 1/2` between them, where the exact value
is 0 or 1), and gives them zero gradient, as the exact one is. Infinite scores
clamp to :math:`\pm b` too.
"""
import math
from typing import List, Optional

import tensorflow as tf

from tfr_extensions.ops import conventions
from tfr_extensions.ops import lists
from tfr_extensions.ops import numerics
from tfr_extensions.ops import screening
from tfr_extensions.ops import validation

METHODS = conventions.RANK_DISTRIBUTION_METHODS

#: documents per step of the exact recursion's while loop (a power of 2);
#: XLA_CHUNK_SIZE under XLA
CHUNK_SIZE = 32
XLA_CHUNK_SIZE = 8

#: with a static list size of at most MAX_TREE_LIST_SIZE documents
#: (XLA_MAX_TREE_LIST_SIZE under XLA) and at most MAX_TREE_RANKS ranks, the
#: exact recursion is one product tree over all documents (no loop, fastest in
#: graph mode); otherwise a loop over chunks (least memory). XLA on CPU runs
#: the loop faster than the tree past 64 documents (XLA duplicates the tree's
#: cheap producers into their consumers), and the loop's first call needs far
#: less memory than the tree's (``benchmarks/loss_throughput.py`` measures both).
MAX_TREE_RANKS = 16
MAX_TREE_LIST_SIZE = 2048
XLA_MAX_TREE_LIST_SIZE = 64

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


def scaled_score_bound(dtype: tf.DType) -> float:
    r"""The bound :math:`b` of the scaled scores :math:`s / 2\sigma`:
    ``min(dtype.max / 4, 2 ** 509)``. Valid documents' scaled scores are clamped
    to :math:`[-b, b]` and padded ones take :math:`-2b`, so every difference
    stays below :math:`3b`: finite, and a valid argument of float64 ``erf``.

    >>> scaled_score_bound(tf.float64) == 2.0 ** 509, scaled_score_bound(tf.float32) > 8e37
    (True, True)
    """
    return min(float(dtype.max) / 4, _MAX_SCALED_SCORE_FLOAT64)


def win_probabilities(scores: tf.Tensor, mask: tf.Tensor, sigma: float,
                      columns: Optional[tf.Tensor] = None) -> tf.Tensor:
    r"""The pairwise win probabilities :math:`\pi_{ij}` of Eq. 9, ``[L_i, B, K]``.

    :math:`\pi_{ij} = \tfrac12(1 + \operatorname{erf}(z_{ij}))`, :math:`z_{ij} =
    (s_i - s_j) / 2\sigma`, for the documents j in ``columns`` (int ``[B, K]``;
    all L when None). The beating document i comes first, so the recursion
    walks the leading axis. One vectorized ``erf`` per pair (``erfc`` has no
    vectorized CPU kernel and costs ~7x more), accurate to a unit of 1.0,
    which is what sums of products of probabilities need.

    Pairs that do not count get :math:`\pi = 0` exactly, with exactly zero
    gradient, without any ``[L, B, L]`` mask: valid scaled scores are clamped
    to :math:`\pm b` (:func:`scaled_score_bound`) and padded documents take
    :math:`-2b` (so they beat nobody, and every :math:`|z_{ij}| < 3b`: no
    ``inf - inf``, no float64 ``erf`` argument past :math:`2^{512}`), and
    ``i == j`` takes ``NEUTRAL_Z`` (one select, where an addition would do
    as many passes). The bounds are taken on ``[B, L]``, not on ``[L, B, K]``.
    The gradient is
    written by hand, :math:`\partial\pi_{ij}/\partial z_{ij} = e^{-z_{ij}^2}/\sqrt\pi`
    reduced straight onto the two scores, and recomputes z instead of keeping
    it: this op then holds no ``[L, B, K]`` tensor for the backward pass.
    """
    dtype = scores.dtype
    bound = scaled_score_bound(dtype)
    scaled = tf.clip_by_value(scores * tf.constant(0.5 / sigma, dtype), -bound, bound)
    scaled = tf.where(mask, scaled, tf.fill(tf.shape(scores), tf.constant(-2.0 * bound, dtype)))
    size = tf.shape(scores)[1]
    losers = scaled if columns is None else lists.batch_gather(scaled, columns)

    @tf.custom_gradient
    def win(winners, losers):
        def differences():  # (built again in the backward pass, none of it kept)
            documents = tf.range(size)
            if columns is None:
                same = tf.equal(documents[:, None, None], documents[None, None, :])  # [L, 1, L]
            else:
                same = tf.equal(documents[:, None, None],
                                tf.cast(columns, documents.dtype)[None, :, :])  # [L, B, K]
            return tf.where(same, tf.constant(NEUTRAL_Z, dtype),
                            tf.transpose(winners)[:, :, None] - losers[None, :, :])

        def grad(upstream):
            with tf.control_dependencies([upstream]):  # recompute z only now
                z = differences()
            dz = upstream * tf.exp(-tf.square(z))
            scale = tf.constant(1.0 / math.sqrt(math.pi), dtype)
            return (scale * tf.transpose(tf.reduce_sum(dz, axis=2)),
                    -scale * tf.reduce_sum(dz, axis=0))

        return 0.5 + 0.5 * tf.math.erf(differences()), grad

    return win(scaled, losers)


def _multiply(a: List[tf.Tensor], b: List[tf.Tensor], max_len: Optional[int]) -> List[tf.Tensor]:
    """Product of two polynomials given as lists of coefficient tensors,
    truncated to ``max_len`` coefficients: ``c_r = sum_{t + u = r} a_t b_u``.

    Element-wise multiplies and one ``add_n`` per coefficient: no gathers or
    scatters, and autodiff keeps only the inputs.
    """
    size = len(a) + len(b) - 1 if max_len is None else min(len(a) + len(b) - 1, max_len)
    return [tf.add_n([a[t] * b[r - t] for t in range(max(0, r - len(b) + 1), min(r, len(a) - 1) + 1)])
            for r in range(size)]


def _first_level(win: tf.Tensor, max_len: Optional[int]) -> List[tf.Tensor]:
    r"""The products of the factors of ``win``'s two halves, written in w alone:
    :math:`(1-a)(1-b) = 1 - (a+b) + ab` and :math:`a(1-b) + b(1-a) = (a+b) -
    2ab`: one product, whose gradient keeps only w."""
    first, second = tf.split(win, 2, axis=0)
    both, either = first * second, first + second
    return [(1.0 - either) + both, either - 2.0 * both, both][:max_len]


def _next_level(polys: List[tf.Tensor], max_len: Optional[int]) -> List[tf.Tensor]:
    """The products of the polynomials' two halves along the leading axis."""
    halves = [tf.split(p, 2, axis=0) for p in polys]  # (gradient: one concat)
    return _multiply([a for a, _ in halves], [b for _, b in halves], max_len)


#: Outside XLA, trees over at least this many documents run each level (and
#: its gradient) as one XLA program: it reads its input coefficients once and
#: writes the products once, where graph mode runs up to 65 products and
#: add_n's, each a pass over memory. Shorter trees stay graph ops: there the
#: launches of the programs cost more than they save (``benchmarks/loss_throughput.py``
#: measures both sides of this threshold). Inside a caller's XLA program the
#: levels are inlined.
COMPILED_LEVELS_MIN_LIST_SIZE = 128
_compiled_first_level = tf.function(_first_level, jit_compile=True, reduce_retracing=True)
_compiled_next_level = tf.function(_next_level, jit_compile=True, reduce_retracing=True)


def _product_tree(win: tf.Tensor, max_len: Optional[int]) -> List[tf.Tensor]:
    r""":math:`\prod_i ((1 - w_i) + w_i\,x)` over the leading axis of ``win``
    (a static power of 2) by a balanced tree of pairwise products: the
    coefficients, ``min(n + 1, max_len)`` tensors of the trailing shape.
    """
    first_level, next_level = _first_level, _next_level
    if win.shape[0] >= COMPILED_LEVELS_MIN_LIST_SIZE and not lists.compiling_with_xla():
        first_level, next_level = _compiled_first_level, _compiled_next_level
    polys = first_level(win, max_len)
    for _ in range(int(win.shape[0]).bit_length() - 2):
        polys = next_level(polys, max_len)
    return [p[0] for p in polys]


def _pad_to_power_of_two(win: tf.Tensor) -> tf.Tensor:
    """Pads the leading axis with neutral factors (win 0) to a power of 2."""
    size = int(win.shape[0])
    padded = max(2, 1 << (size - 1).bit_length())
    return tf.pad(win, [[0, padded - size], [0, 0], [0, 0]])


def _stack(coefficients: List[tf.Tensor], num: int) -> tf.Tensor:
    """``[num, ...]``: the coefficients, zero beyond the last one."""
    out = tf.stack(coefficients)
    if len(coefficients) < num:
        out = tf.pad(out, [[0, num - len(coefficients)]] + [[0, 0]] * (out.shape.rank - 1))
    return out


def _shift_product(state: tf.Tensor, poly: List[tf.Tensor]) -> tf.Tensor:
    """``state * poly`` along axis 0, truncated to the (possibly dynamic)
    length of ``state``: one shifted copy of ``state`` per coefficient of
    ``poly`` (used when the number of ranks is large or unknown)."""
    length = tf.shape(state)[0]
    out = poly[0] * state
    for t in range(1, len(poly)):
        shifted = tf.pad(state, [[t, 0]] + [[0, 0]] * (state.shape.rank - 1))[:length]
        out += poly[t] * shifted
    return out


def _exact(win: tf.Tensor, num_ranks, static_ranks: Optional[int]):
    """The Rank-Binomial recursion (Eq. 11-12), ``[R, B, L_j]``, R = ``num_ranks``."""
    xla = lists.compiling_with_xla()
    max_tree = XLA_MAX_TREE_LIST_SIZE if xla else MAX_TREE_LIST_SIZE
    if (win.shape[0] is not None and win.shape[0] <= max_tree
            and static_ranks is not None and static_ranks <= MAX_TREE_RANKS):
        return _stack(_product_tree(_pad_to_power_of_two(win), static_ranks), static_ranks)
    size, batch = tf.shape(win)[0], tf.shape(win)[1]
    chunk = XLA_CHUNK_SIZE if xla else CHUNK_SIZE
    if win.shape[0] is not None:  # short static lists: a smaller tree suffices
        chunk = min(chunk, max(2, 1 << (int(win.shape[0]) - 1).bit_length()))
    num_chunks = (size + chunk - 1) // chunk
    # Neutral factors fill the last chunk.
    win = tf.pad(win, [[0, num_chunks * chunk - size], [0, 0], [0, 0]])
    win = tf.reshape(win, [num_chunks, chunk, batch, -1])
    delta = tf.one_hot(tf.zeros(tf.shape(win)[2:], tf.int32), num_ranks, axis=0,
                       dtype=win.dtype)  # [R, B, L]
    if static_ranks is not None:
        delta = tf.ensure_shape(delta, [static_ranks] + delta.shape[1:])
    small = static_ranks is not None and static_ranks <= MAX_TREE_RANKS
    tree_ranks = static_ranks if small else None  # (large R: the chunk's full product)

    @tf.recompute_grad
    def step(state, chunk_win):
        # (recompute_grad drops static shapes, which the products need)
        chunk_win = tf.ensure_shape(chunk_win, [chunk, None, None])
        state = tf.ensure_shape(state, delta.shape)
        poly = _product_tree(chunk_win, tree_ranks)
        if small:
            return _stack(_multiply(poly, tf.unstack(state), static_ranks), static_ranks)
        return tf.ensure_shape(_shift_product(state, poly), state.shape)

    return tf.foldl(step, win, initializer=delta)


def _ndtr(x: tf.Tensor) -> tf.Tensor:
    """The standard normal CDF, as an ``erfc`` (accurate in the lower tail)."""
    return 0.5 * tf.math.erfc(-x / tf.constant(2.0 ** 0.5, x.dtype))


def _normal_cdf_difference(lower: tf.Tensor, upper: tf.Tensor) -> tf.Tensor:
    """Phi(upper) - Phi(lower) for lower <= upper, without cancellation in
    either tail (reflects both bounds when lower > 0)."""
    reflect = lower > 0
    return tf.where(reflect, _ndtr(-lower) - _ndtr(-upper), _ndtr(upper) - _ndtr(lower))


def _normal(win: tf.Tensor, mask: tf.Tensor, num_ranks) -> tf.Tensor:
    """The discretized normal approximation of Section 3.6, ``[B, L, R]``."""
    dtype = win.dtype
    mean = tf.reduce_sum(win, axis=0)[:, :, None]  # Eq. 10, [B, L, 1]
    variance = tf.reduce_sum(win * (1.0 - win), axis=0)[:, :, None]
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

    for _ in range(iterations):
        column_sums = tf.reduce_sum(matrix, axis=1, keepdims=True)  # [B, 1, R + 1]
        matrix = matrix * numerics.safe_divide(targets[:, None, :], column_sums)
        row_sums = tf.reduce_sum(matrix, axis=-1, keepdims=True)
        matrix = numerics.safe_divide(matrix, row_sums)
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


def distributions_of(scores: tf.Tensor, valid: tf.Tensor, sigma: float, topn: Optional[int],
                     method: str, columns: Optional[tf.Tensor] = None) -> tf.Tensor:
    """:func:`rank_distributions` without Sinkhorn or argument checks, for the
    documents ``columns`` (int ``[B, K]``; all L when None): ``[B, K, R]``.

    A loss that only needs some documents' distributions (SoftNDCG: the
    relevant ones) passes their indices and pays for K columns instead of L.
    Entries of ``columns`` that point at padded documents get a zero row.
    """
    size = tf.shape(scores)[1]
    static_size = scores.shape[1]
    num_ranks = size if topn is None else tf.minimum(size, topn)
    static_ranks = topn
    if static_size is not None:
        static_ranks = static_size if topn is None else min(topn, static_size)
    if static_size == 0:  # lists of no document: no rank to take (a reshape of
        # the empty scores, so that their zero-size gradient is not None)
        num_columns = 0 if columns is None else tf.shape(columns)[1]
        return tf.reshape(scores, tf.stack([tf.shape(scores)[0], num_columns, 0]))

    win = win_probabilities(scores, valid, sigma, columns)
    column_valid = valid if columns is None else tf.gather(valid, columns, batch_dims=1)

    def exact():
        return tf.transpose(_exact(win, num_ranks, static_ranks), [1, 2, 0])

    def normal():
        return _normal(win, valid, num_ranks)

    if method == "exact":
        probs = exact()
    elif method == "normal":
        probs = normal()
    elif static_size is not None:
        probs = exact() if static_size <= AUTO_EXACT_MAX_LIST_SIZE else normal()
    else:
        probs = tf.cond(size <= AUTO_EXACT_MAX_LIST_SIZE, exact, normal)
    probs = tf.where(column_valid[:, :, None], probs, tf.zeros_like(probs))
    if static_ranks is not None:
        probs = tf.ensure_shape(probs, [None, None if columns is not None else static_size,
                                        static_ranks])
    return probs
