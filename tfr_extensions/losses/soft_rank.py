r"""SoftRank's SoftNDCG: the expected nDCG under Gaussian-smoothed scores.

Taylor, Guiver, Robertson and Minka, "SoftRank: Optimizing Non-Smooth Rank
Metrics" (``softrank.txt``), Section 3.3-3.4 and 4.7. The rank distributions
:math:`p_j(r)` come from :func:`tfr_extensions.ops.rank_distributions`
(Eq. 8-12); the gradient is TensorFlow's derivative of that recursion, which
is the paper's Eq. 18-23 (the tests check it against an independent NumPy
implementation of Eq. 18-23).
"""
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import conventions
from tfr_extensions.ops import validation


def softndcg_loss(labels, scores, *, mask=None, sigma=1.0, topn=None, discount_alpha=1.0,
                  method="auto", sinkhorn_iterations=0):
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
    of any list in the batch. The gradient is TensorFlow's derivative of the
    recursion, the paper's Eq. 18-23; scores are bounded where the smoothing
    would overflow (:func:`~tfr_extensions.ops.rank_distributions.scaled_score_bound`).

    Args:
      labels: float ``[batch, list_size]``, graded relevance; < 0 = padding.
      scores: float ``[batch, list_size]``.
      mask: optional bool ``[batch, list_size]``, True = valid.
      sigma: standard deviation of the score smoothing :math:`\sigma_s` (Eq. 8), > 0.
      topn: the cutoff R; None uses all ranks.
      discount_alpha: :math:`\alpha \in [-1, 1]`, the training discount.
      method: ``"exact"``, ``"normal"`` or ``"auto"`` rank distributions
        (:func:`~tfr_extensions.ops.rank_distributions`).
      sinkhorn_iterations: Sinkhorn scaling of the rank distributions (Section 3.2), >= 0.

    Returns:
      ``(losses, weights)``, ``[batch]`` each: minus SoftNDCG, and 1 for lists
      with a relevant document (0 otherwise).

    >>> losses, _ = softndcg_loss([[0., 1., 2.]], [[3., 2., 1.]], sigma=1e-3)
    >>> round(float(losses[0]), 4)  # minus the exact nDCG
    -0.5869
    """
    return SOFTNDCG.apply(labels, scores, mask, sigma=sigma, topn=topn,
                          discount_alpha=discount_alpha, method=method,
                          sinkhorn_iterations=sinkhorn_iterations)


SOFTNDCG = base.LossSpec(softndcg_loss, {
    base.TENSORFLOW: "tfr_extensions.ops.losses.soft_rank:softndcg_loss",
    base.KERAS_OPS: "tfr_extensions.keras_ops.losses.soft_rank:softndcg_loss"}, {
    "sigma": validation.validate_positive,
    "topn": validation.validate_topn,
    "discount_alpha": validation.number(-1.0, 1.0),
    "method": validation.choice(conventions.RANK_DISTRIBUTION_METHODS),
    "sinkhorn_iterations": validation.integer(minimum=0),
})


@register
class SoftNDCGLoss(base.RankingLoss):
    r"""Keras loss of :func:`softndcg_loss`: minus SoftNDCG (Eq. 14-15), per list.

    The options are :func:`softndcg_loss`'s; ``ragged`` accepts
    ``tf.RaggedTensor`` labels and scores.

    >>> loss = SoftNDCGLoss(sigma=1e-3)
    >>> round(float(loss([[0., 1., 2.]], [[3., 2., 1.]])), 4)  # -nDCG
    -0.5869
    """

    spec = SOFTNDCG

    def __init__(self, sigma=1.0, topn=None, discount_alpha=1.0, method="auto",
                 sinkhorn_iterations=0, ragged=False, reduction=base.DEFAULT_REDUCTION,
                 name="softndcg"):
        super().__init__(dict(sigma=sigma, topn=topn, discount_alpha=discount_alpha,
                              method=method, sinkhorn_iterations=sinkhorn_iterations),
                         ragged=ragged, reduction=reduction, name=name)

    def get_config(self):
        config = super().get_config()  # ragged, reduction, name
        options = self.options
        config.update(sigma=options["sigma"], topn=options["topn"],
                      discount_alpha=options["discount_alpha"], method=options["method"],
                      sinkhorn_iterations=options["sinkhorn_iterations"])
        return config
