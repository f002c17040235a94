r"""SoftRank's SoftNDCG, the expected nDCG under Gaussian-smoothed scores: the
``keras.ops`` twin of :mod:`tfr_extensions.losses.soft_rank` (the same body,
the same options).

Taylor, Guiver, Robertson and Minka, "SoftRank: Optimizing Non-Smooth Rank
Metrics" (``softrank.txt``), Section 3.3-3.4 and 4.7. The rank distributions
:math:`p_j(r)` come from :func:`tfr_extensions.keras_ops.rank_distributions`
(Eq. 8-12); the gradient is the backend's derivative of that recursion, the
paper's Eq. 18-23.
"""
from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import screening
from tfr_extensions.keras_ops.rank_distributions import (
    distributions_of, rank_distributions)


def training_discount(num_ranks: int, count, alpha: float, dtype):
    r"""The discounts :math:`D_\alpha(r)`, ``r = 0..num_ranks-1``, ``[B, R]``.

    With :math:`u = r / n` (``n`` = ``count``, the ranks that count in the list:
    its valid documents, capped at ``topn``):

    * :math:`0 \le \alpha \le 1`: :math:`D_\alpha(r) = \alpha\,\frac{1}{\log_2(2 + r)}
      + (1 - \alpha)(1 - u)`;
    * :math:`-1 \le \alpha < 0`: :math:`D_\alpha(r) = (1 - u) + |\alpha|\,u(1 - u)`.

    Ranks r >= n get 0.
    """
    ranks = ops.arange(num_ranks, dtype=dtype)[None, :]  # [1, R]
    count = ops.cast(count, dtype)[:, None]  # [B, 1]
    u = ranks / numerics.maximum(count, 1.0)
    linear = 1.0 - u
    if alpha >= 0:
        log_discount = lists.log2_discount(ranks + 1.0)  # 1/log2(2 + r)
        discount = alpha * log_discount + (1.0 - alpha) * linear
    else:
        discount = linear + (-alpha) * u * linear
    return ops.where(ranks < count, discount, ops.zeros_like(discount))


def softndcg_loss(labels, scores, *, mask=None, sigma=1.0, topn=None, discount_alpha=1.0,
                  method="auto", sinkhorn_iterations=0):
    r"""Minus SoftNDCG (Eq. 14-15), per list: the twin of
    :func:`tfr_extensions.losses.soft_rank.softndcg_loss`.

    .. math:: \ell = -\mathcal{G} = -\frac{1}{G_{max}} \sum_j g_j
              \sum_{r=0}^{R-1} D_\alpha(r)\, p_j(r)

    with gains :math:`g_j = 2^{y_j} - 1`, the rank distributions of Eq. 12
    at smoothing ``sigma``, the training discount :math:`D_\alpha`
    (:func:`training_discount`, Section 4.7), R = ``topn`` (all ranks if
    None) and :math:`G_{max}` the same sum for the labels sorted in
    decreasing order (the ideal DCG@R).

    The TF body computes the rank distributions of the relevant documents
    only (outside XLA); shapes must be static here (``jax.jit``), so every
    document's row is computed, as the TF body does under XLA: the same
    value, at cost :math:`O(B L^2 R)`.

    Returns:
      ``(losses, weights)``, ``[batch]`` each: minus SoftNDCG, and 1 for lists
      with a relevant document (0 otherwise).
    """
    dtype = lists.dtype_name(scores)
    weights = ops.cast(screening.has_relevant(labels, mask), dtype)
    if scores.shape[1] == 0:  # lists of no document: no rank (and Keras's TensorFlow
        # backend fails on ops.arange(0) below)
        return ops.sum(scores, axis=-1) * 0.0, weights
    gains = ops.where(mask, lists.gains(labels), ops.zeros_like(labels))
    if sinkhorn_iterations:  # Sinkhorn needs every document's row
        probs = rank_distributions(scores, mask, sigma=sigma, topn=topn, method=method,
                                   sinkhorn_iterations=sinkhorn_iterations)  # [B, L, R]
    else:
        probs = distributions_of(scores, mask, sigma, topn, method)  # [B, L, R]
    num_ranks = probs.shape[2]
    count = ops.sum(ops.cast(mask, "int32"), axis=-1)
    if topn is not None:
        count = ops.where(count > topn, topn, count)  # (ints: no dtype issue)
    discount = training_discount(num_ranks, count, discount_alpha, dtype)
    expected_discount = ops.einsum("bjr,br->bj", probs, discount)  # E[D(r_j)]
    dcg = ops.sum(gains * expected_discount, axis=-1)
    sorted_gains = ops.flip(ops.sort(gains, axis=-1), axis=-1)[:, :num_ranks]
    ideal = ops.sum(sorted_gains * discount, axis=-1)
    soft_ndcg = numerics.safe_divide(dcg, ideal)
    return -soft_ndcg, weights
