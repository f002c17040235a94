r"""SoftRank's SoftNDCG: the expected nDCG under Gaussian-smoothed scores.

Taylor, Guiver, Robertson and Minka, "SoftRank: Optimizing Non-Smooth Rank Metrics"
(``softrank.txt``), Section 3.3-3.4 and 4.7, on the rank distributions :math:`p_j(r)` of
:func:`tfr_extensions.ops.rank_distributions` (Eq. 8-12).
"""
from tfr_extensions import arrays
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import conventions
from tfr_extensions.ops import validation


@base.loss_function(examples=[dict(sigma=0.3, topn=5, discount_alpha=-0.2, method="normal",
                                   sinkhorn_iterations=2),
                              dict(sigma=0.5, topn=4, discount_alpha=-0.5, method="exact",
                                   sinkhorn_iterations=3)])
def softndcg_loss(labels, scores, *, mask=None,
                  sigma: validation.Positive = 1.0, topn: validation.TopN = None,
                  discount_alpha: validation.Number(-1.0, 1.0) = 1.0,
                  method: validation.OneOf(conventions.RANK_DISTRIBUTION_METHODS) = "auto",
                  sinkhorn_iterations: validation.Integer(minimum=0) = 0):
    r"""Minus SoftNDCG (Eq. 14-15), per list.

    .. math:: \ell = -\mathcal{G} = -\frac{1}{G_{max}} \sum_j g_j
              \sum_{r=0}^{R-1} D_\alpha(r)\, p_j(r)

    with gains :math:`g_j = 2^{y_j} - 1`, the rank distributions :math:`p_j(r)` of Eq. 12
    (0-based ranks) at smoothing ``sigma``, R = ``topn`` (all if None), and
    :math:`G_{max} = \sum_{r<R} D_\alpha(r) g_{(r)}` the ideal DCG@R. The training discounts
    (Section 4.7, Figures 5-6, which give no formula: this family is ours), with
    :math:`u = r/n`, n the valid documents (at most ``topn``):

    * :math:`0 \le \alpha \le 1`:
      :math:`D_\alpha(r) = \frac{\alpha}{\log_2(2 + r)} + (1 - \alpha)(1 - u)`;
    * :math:`-1 \le \alpha < 0`: :math:`D_\alpha(r) = (1 - u) + |\alpha|\,u(1 - u)`.

    ``discount_alpha=1`` is nDCG's (as ``sigma -> 0`` the loss tends to minus nDCG@topn); 0 is
    linear, -1 the convex :math:`1 - u^2`. Without Sinkhorn and outside XLA only relevant
    documents' rank distributions are computed. The gradient is the backend's derivative of
    the recursion (the paper's Eq. 18-23); scores are bounded where the smoothing would
    overflow (:func:`~tfr_extensions.ops.rank_distributions.scaled_score_bound`).

    Args:
      sigma: standard deviation of the score smoothing :math:`\sigma_s` (Eq. 8), > 0.
      topn: the cutoff R; None uses all ranks.
      discount_alpha: :math:`\alpha \in [-1, 1]`, the training discount.
      method: ``"exact"``, ``"normal"`` or ``"auto"`` rank distributions
        (:func:`~tfr_extensions.ops.rank_distributions`).
      sinkhorn_iterations: Sinkhorn scaling of the rank distributions (Section 3.2), >= 0.

    Returns:
      ``(losses, weights)``, ``[batch]`` each: minus SoftNDCG.

    >>> losses, _ = softndcg_loss([[0., 1., 2.]], [[3., 2., 1.]], sigma=1e-3)
    >>> round(float(losses[0]), 4)  # minus the exact nDCG
    -0.5869
    """
    xp = arrays.namespace()
    dtype = xp.dtype_name(scores)
    weights = xp.cast(xp.screening.has_relevant(labels, mask), dtype)
    if scores.shape[1] == 0:  # no rank (and Keras's TensorFlow backend fails on arange(0))
        return xp.sum(scores, axis=-1) * 0.0, weights
    gains = xp.where(mask, xp.lists.gains(labels), xp.zeros_like(labels))
    columns = None  # every document's row (Sinkhorn needs them)
    if sinkhorn_iterations:
        probs = xp.rank_distributions.rank_distributions(
            scores, mask, sigma=sigma, topn=topn, method=method,
            sinkhorn_iterations=sinkhorn_iterations)  # [B, L, R]
    else:  # only relevant documents add to Eq. 15: their rows, [B, K] (K: the most of any
        # list, >= 1), unless shapes must be static (XLA, jax.jit, torch.compile)
        if not xp.lists.compiling_with_xla():
            relevant = xp.cast(gains > 0, "int32")
            most = xp.maximum(xp.max(xp.sum(relevant, axis=-1)), 1)
            columns = xp.argsort(-relevant, axis=-1)[:, :most]  # (stable: in index order)
        probs = xp.rank_distributions.distributions_of(scores, mask, sigma, topn, method,
                                                       columns)  # [B, K, R]
    column_gains = gains if columns is None else xp.take_along_axis(gains, columns, axis=-1)
    num_ranks = xp.shape(probs)[2]
    count = xp.sum(xp.cast(mask, "int32"), axis=-1)
    if topn is not None:
        count = xp.minimum(count, topn)
    discount = training_discount(num_ranks, count, discount_alpha, dtype)
    expected_discount = xp.einsum("bjr,br->bj", probs, discount)  # E[D(r_j)]
    dcg = xp.sum(column_gains * expected_discount, axis=-1)
    sorted_gains = xp.sorting.sort_descending(gains, mask)[:, :num_ranks]
    return -xp.safe_divide(dcg, xp.sum(sorted_gains * discount, axis=-1)), weights


def training_discount(num_ranks, count, alpha: float, dtype):
    r"""The training discounts :math:`D_\alpha(r)` of :func:`softndcg_loss`,
    ``r = 0..num_ranks-1``, ``[B, R]``; ``count`` ``[B]`` is n, and ranks r >= n get 0."""
    xp = arrays.namespace()
    ranks = xp.arange(num_ranks, dtype=dtype)[None, :]  # [1, R]
    count = xp.cast(count, dtype)[:, None]  # [B, 1]
    u = ranks / xp.maximum(count, 1.0)
    linear = 1.0 - u
    if alpha >= 0:
        discount = alpha * xp.lists.log2_discount(ranks + 1.0) + (1.0 - alpha) * linear
    else:
        discount = linear + (-alpha) * u * linear
    return xp.where(ranks < count, discount, xp.zeros_like(discount))


@register
class SoftNDCGLoss(base.RankingLoss):
    r"""Keras loss of :func:`softndcg_loss`.

    >>> loss = SoftNDCGLoss(sigma=1e-3)
    >>> round(float(loss([[0., 1., 2.]], [[3., 2., 1.]])), 4)  # -nDCG
    -0.5869
    """

    function = softndcg_loss

    def __init__(self, sigma=1.0, topn=None, discount_alpha=1.0, method="auto",
                 sinkhorn_iterations=0, ragged=False, reduction=base.DEFAULT_REDUCTION,
                 name="softndcg"):
        super().__init__(locals())

