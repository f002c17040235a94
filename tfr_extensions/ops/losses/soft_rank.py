"""The TensorFlow bodies of :mod:`tfr_extensions.losses.soft_rank` (the math, the
public functions and the Keras classes are there); their ``keras.ops`` twins are
:mod:`tfr_extensions.keras_ops.losses.soft_rank`."""
from typing import Optional

import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import numerics
from tfr_extensions.ops import screening
from tfr_extensions.ops.rank_distributions import distributions_of, rank_distributions


def training_discount(num_ranks, count: tf.Tensor, alpha: float, dtype) -> tf.Tensor:
    r"""The discounts :math:`D_\alpha(r)`, ``r = 0..num_ranks-1``, ``[B, R]``.

    With :math:`u = r / n` (``n`` = ``count``, the ranks that count in the list:
    its valid documents, capped at ``topn``):

    * :math:`0 \le \alpha \le 1`: :math:`D_\alpha(r) = \alpha\,\frac{1}{\log_2(2 + r)}
      + (1 - \alpha)(1 - u)`;
    * :math:`-1 \le \alpha < 0`: :math:`D_\alpha(r) = (1 - u) + |\alpha|\,u(1 - u)`.

    :math:`\alpha = 1` is nDCG's discount, 0 the linear one, -1 the convex
    (super-linear) :math:`1 - u^2`; all start at :math:`D(0) = 1`, decrease in
    r and are positive for r < n. Ranks r >= n get 0.
    """
    ranks = tf.range(num_ranks, dtype=dtype)[None, :]  # [1, R]
    count = tf.cast(count, dtype)[:, None]  # [B, 1]
    u = ranks / tf.maximum(count, 1.0)
    linear = 1.0 - u
    if alpha >= 0:
        log_discount = lists.log2_discount(ranks + 1.0)  # 1/log2(2 + r)
        discount = alpha * log_discount + (1.0 - alpha) * linear
    else:
        discount = linear + (-alpha) * u * linear
    return tf.where(ranks < count, discount, tf.zeros_like(discount))


def _relevant_first(gains: tf.Tensor) -> Optional[tf.Tensor]:
    """Indices ``[B, K]`` of each list's documents with a positive gain first,
    K = the most any list has (at least 1). None (all documents) under XLA,
    whose shapes must be static."""
    if lists.compiling_with_xla():
        return None
    relevant = tf.cast(gains > 0, tf.int32)
    order = tf.argsort(relevant, axis=-1, direction="DESCENDING", stable=True)
    most = tf.maximum(tf.reduce_max(tf.reduce_sum(relevant, axis=-1)), 1)
    return order[:, :most]


def softndcg_loss(labels, scores, *, mask=None, sigma=1.0, topn=None, discount_alpha=1.0,
                  method="auto", sinkhorn_iterations=0):
    """The TensorFlow body of :func:`tfr_extensions.losses.softndcg_loss` (the math,
    the arguments and a doctest are there): inputs screened, options checked."""
    gains = tf.where(mask, lists.gains(labels), tf.zeros_like(labels))
    if sinkhorn_iterations:  # Sinkhorn needs every document's row
        columns = None
        probs = rank_distributions(
            scores, mask, sigma=sigma, topn=topn, method=method,
            sinkhorn_iterations=sinkhorn_iterations)  # [B, L, R]
    else:  # only relevant documents add to Eq. 15: compute their rows only
        columns = _relevant_first(gains)
        probs = distributions_of(scores, mask, sigma, topn, method, columns)  # [B, K, R]
    column_gains = gains if columns is None else tf.gather(gains, columns, batch_dims=1)
    num_ranks = tf.shape(probs)[2]
    count = tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1)
    if topn is not None:
        count = tf.minimum(count, topn)
    discount = training_discount(num_ranks, count, discount_alpha, scores.dtype)
    expected_discount = tf.einsum("bjr,br->bj", probs, discount)  # E[D(r_j)]
    dcg = tf.reduce_sum(column_gains * expected_discount, axis=-1)
    sorted_gains = tf.sort(gains, axis=-1, direction="DESCENDING")[:, :num_ranks]
    ideal = tf.reduce_sum(sorted_gains * discount, axis=-1)
    soft_ndcg = numerics.safe_divide(dcg, ideal)
    return -soft_ndcg, tf.cast(screening.has_relevant(labels, mask), scores.dtype)


