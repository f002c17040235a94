r"""SoftRank's SoftNDCG: the expected nDCG under Gaussian-smoothed scores.

Taylor, Guiver, Robertson and Minka, "SoftRank: Optimizing Non-Smooth Rank
Metrics" (``softrank.txt``), Section 3.3-3.4 and 4.7. The rank distributions
:math:`p_j(r)` come from :func:`tfr_extensions.ops.rank_distributions`
(Eq. 8-12); the gradient is TensorFlow's derivative of that recursion, which
is the paper's Eq. 18-23 (the tests check it against an independent NumPy
implementation of Eq. 18-23).
"""
from typing import Optional

import tensorflow as tf

from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import lists
from tfr_extensions.ops.rank_distributions import METHODS, distributions_of, rank_distributions


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


@register
class SoftNDCGLoss(base.RankingLoss):
    r"""Minus SoftNDCG (Eq. 14-15), per list.

    .. math:: \ell = -\mathcal{G} = -\frac{1}{G_{max}} \sum_j g_j
              \sum_{r=0}^{R-1} D_\alpha(r)\, p_j(r)

    with gains :math:`g_j = 2^{y_j} - 1`, the rank distributions
    :math:`p_j(r)` of Eq. 12 (0-based ranks) at smoothing ``sigma``, the
    training discount :math:`D_\alpha` below, R = ``topn`` (all ranks if
    None), and :math:`G_{max} = \sum_{r<R} D_\alpha(r) g_{(r)}` the same sum
    for the labels sorted in decreasing order (the ideal DCG@R). Training
    discounts (Section 4.7, Figures 5-6), with :math:`u = r/n` and n the
    number of ranks that count (valid documents, at most ``topn``):

    * :math:`0 \le \alpha \le 1`: :math:`D_\alpha(r) = \frac{\alpha}{\log_2(2 + r)}
      + (1 - \alpha)(1 - u)`;
    * :math:`-1 \le \alpha < 0`: :math:`D_\alpha(r) = (1 - u) + |\alpha|\,u(1 - u)`.

    ``discount_alpha=1`` is nDCG's :math:`1/\log_2(2 + r)`, so as
    ``sigma -> 0`` the loss tends to minus the exact nDCG@topn; 0 is linear,
    -1 convex. The paper's Figure 5 shows the curves but gives no formula:
    this interpolating family is ours.

    Documents with gain 0 add nothing to the sum, so (without Sinkhorn, which
    needs every row, and outside XLA, whose shapes are static) the rank
    distributions are computed for the relevant documents only: the cost is
    :math:`O(B \cdot L \cdot K \cdot R)` with K the most relevant documents
    of any list in the batch.

    Args:
      sigma: standard deviation of the score smoothing :math:`\sigma_s` (Eq. 8), > 0.
      topn: the cutoff R; None uses all ranks.
      discount_alpha: :math:`\alpha \in [-1, 1]`, the training discount.
      method: ``"exact"``, ``"normal"`` or ``"auto"`` rank distributions
        (:func:`~tfr_extensions.ops.rank_distributions`).
      sinkhorn_iterations: Sinkhorn scaling of the rank distributions (Section 3.2).
      ragged: accept ``tf.RaggedTensor`` labels and scores.

    >>> loss = SoftNDCGLoss(sigma=1e-3)
    >>> round(float(loss([[0., 1., 2.]], [[3., 2., 1.]])), 4)  # -nDCG
    -0.5869
    """

    def __init__(self, sigma: float = 1.0, topn: Optional[int] = None,
                 discount_alpha: float = 1.0, method: str = "auto",
                 sinkhorn_iterations: int = 0, ragged: bool = False,
                 reduction: str = tf.keras.losses.Reduction.AUTO,
                 name: str = "softndcg"):
        super().__init__(reduction=reduction, name=name, ragged=ragged)
        self._sigma = lists.validate_positive(sigma, "sigma")
        self._topn = lists.validate_topn(topn)
        alpha = float(discount_alpha)
        if not -1.0 <= alpha <= 1.0:
            raise ValueError(f"`discount_alpha` must be in [-1, 1]; got {discount_alpha!r}.")
        self._discount_alpha = alpha
        self._method = lists.validate_choice(method, METHODS, "method")
        if (isinstance(sinkhorn_iterations, bool) or not isinstance(sinkhorn_iterations, int)
                or sinkhorn_iterations < 0):
            raise ValueError("`sinkhorn_iterations` must be a non-negative int; "
                             f"got {sinkhorn_iterations!r}.")
        self._sinkhorn_iterations = sinkhorn_iterations

    def per_list(self, labels, scores, mask):
        gains = tf.where(mask, lists.gains(labels), tf.zeros_like(labels))
        if self._sinkhorn_iterations:  # Sinkhorn needs every document's row
            columns = None
            probs = rank_distributions(
                scores, mask, sigma=self._sigma, topn=self._topn, method=self._method,
                sinkhorn_iterations=self._sinkhorn_iterations)  # [B, L, R]
        else:  # only relevant documents add to Eq. 15: compute their rows only
            columns = _relevant_first(gains)
            probs = distributions_of(scores, mask, self._sigma, self._topn, self._method,
                                     columns)  # [B, K, R]
        column_gains = gains if columns is None else tf.gather(gains, columns, batch_dims=1)
        num_ranks = tf.shape(probs)[2]
        count = tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1)
        if self._topn is not None:
            count = tf.minimum(count, self._topn)
        discount = training_discount(num_ranks, count, self._discount_alpha, scores.dtype)
        expected_discount = tf.einsum("bjr,br->bj", probs, discount)  # E[D(r_j)]
        dcg = tf.reduce_sum(column_gains * expected_discount, axis=-1)
        sorted_gains = tf.sort(gains, axis=-1, direction="DESCENDING")[:, :num_ranks]
        ideal = tf.reduce_sum(sorted_gains * discount, axis=-1)
        has_relevant = ideal > 0
        soft_ndcg = tf.where(has_relevant, dcg / tf.where(has_relevant, ideal, tf.ones_like(ideal)),
                             tf.zeros_like(dcg))
        return -soft_ndcg, tf.cast(lists.has_relevant(labels, mask), scores.dtype)

    def get_config(self):
        config = super().get_config()
        config.update({
            "sigma": self._sigma, "topn": self._topn,
            "discount_alpha": self._discount_alpha, "method": self._method,
            "sinkhorn_iterations": self._sinkhorn_iterations,
        })
        return config
