r"""Pairwise losses: RankNet with tie targets, and the NDCG-beta weighted hinge.

Equation numbers refer to ``ranknet-and-ndcg-beta-report.txt`` (Burges et al.'s
RankNet, Eq. 1-4; Jin et al.'s RankSVM-ndcg, Eq. 12-20) and ``softrank.txt``
(Eq. 4-5). Pairs are unordered pairs of valid documents of one list.

Extreme scores: both losses grow linearly with score gaps (quadratically for
the squared hinge), so their exact value at gaps near float max is not
representable. They clip the scores to :math:`\pm b` first, :math:`b` =
``dtype.max / 4`` (``sqrt(dtype.max) / 4`` for the squared hinge): every
value then stays finite (about 8.5e37 at most in float32). Below
:math:`b` (scores of :math:`\pm 10^{30}` included, and :math:`\pm 4.6 \cdot
10^{18}` for the squared hinge) nothing changes; beyond it scores saturate:
distinct ones tie, and their gradient is 0, as ``tf.clip_by_value`` gives.
"""
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import validation


def ranknet_loss(labels, scores, *, mask=None, sigma=1.0):
    r"""RankNet: mean pairwise cross entropy with targets :math:`(1+S_{ij})/2`.

    Per list, :math:`\frac{1}{|P|}\sum_{(i,j) \in P} C_{ij}` over the unordered
    pairs P of valid documents (tied pairs included, with target 1/2), Eq. 1-4
    of the RankNet report and Eq. 4-5 of SoftRank
    (:func:`tfr_extensions.ops.losses.pairwise.ranknet_pair_losses`).
    ``sigma`` scales the score difference in
    :math:`P_{ij} = 1/(1+e^{-\sigma(s_i - s_j)})` (Eq. 1 has 1).

    Args:
      labels: float ``[batch, list_size]``, graded relevance; < 0 = padding.
      scores: float ``[batch, list_size]``.
      mask: optional bool ``[batch, list_size]``, True = valid.
      sigma: the scale :math:`\sigma > 0`.

    Returns:
      ``(losses, weights)``, ``[batch]`` each; weight 1 for lists with a
      relevant document.

    >>> losses, _ = ranknet_loss([[1., 0.]], [[0., 0.]])
    >>> float(losses[0])  # log 2
    0.6931471824645996
    """
    return RANKNET.apply(labels, scores, mask, sigma=sigma)


def ndcg_beta_hinge_loss(labels, scores, *, mask=None, margin=1.0, squared=False):
    r"""RankSVM-ndcg: the NDCG-beta weighted pairwise hinge, Eq. 19-20.

    Per list, :math:`\sum_{y_i > y_j} \tau_{ij}\,\phi(m - (s_i - s_j))` with
    :math:`\tau_{ij} = (y_i - y_j)/DCG_\beta(\pi)`
    (:func:`tfr_extensions.ops.losses.pairwise.ndcg_beta_pair_weights`),
    margin :math:`m` (1 in the paper) and :math:`\phi(x) = \max(0, x)`
    (L1-SVM) or :math:`\max(0, x)^2` (``squared=True``, L2-SVM). It
    upper-bounds :math:`1 - NDCG_\beta` (Eq. 15-18); the 1/K of Eq. 17 is the
    batch mean.

    Args:
      labels: float ``[batch, list_size]``, graded relevance; < 0 = padding.
      scores: float ``[batch, list_size]``.
      mask: optional bool ``[batch, list_size]``, True = valid.
      margin: :math:`m > 0`.
      squared: the squared hinge (L2-SVM).

    Returns:
      ``(losses, weights)``, ``[batch]`` each; weight 0 for lists whose ideal
      :math:`DCG_\beta` is 0.

    >>> losses, _ = ndcg_beta_hinge_loss([[1., 0.]], [[0., 0.]])
    >>> float(losses[0])
    1.0
    """
    return NDCG_BETA_HINGE.apply(labels, scores, mask, margin=margin, squared=squared)


RANKNET = base.LossSpec(ranknet_loss, {
    base.TENSORFLOW: "tfr_extensions.ops.losses.pairwise:ranknet_loss",
    base.KERAS_OPS: "tfr_extensions.keras_ops.losses.pairwise:ranknet_loss",
    base.TORCH: "tfr_extensions.torch_ops.pairwise:ranknet_loss"},
    {"sigma": validation.validate_positive})


@register
class RankNetLoss(base.RankingLoss):
    r"""Keras loss of :func:`ranknet_loss`: RankNet with tie targets 1/2.

    >>> float(RankNetLoss()([[1., 0.]], [[0., 0.]]))  # log 2
    0.6931471824645996
    """

    spec = RANKNET

    def __init__(self, sigma=1.0, ragged=False, reduction=base.DEFAULT_REDUCTION, name="ranknet"):
        super().__init__(dict(sigma=sigma), ragged=ragged, reduction=reduction, name=name)

    def get_config(self):
        config = super().get_config()  # ragged, reduction, name
        config.update(sigma=self.options["sigma"])
        return config


NDCG_BETA_HINGE = base.LossSpec(ndcg_beta_hinge_loss, {
    base.TENSORFLOW: "tfr_extensions.ops.losses.pairwise:ndcg_beta_hinge_loss",
    base.KERAS_OPS: "tfr_extensions.keras_ops.losses.pairwise:ndcg_beta_hinge_loss"},
    {"margin": validation.validate_positive, "squared": validation.validate_bool})


@register
class NDCGBetaHingeLoss(base.RankingLoss):
    r"""Keras loss of :func:`ndcg_beta_hinge_loss`: the RankSVM-ndcg hinge.

    >>> float(NDCGBetaHingeLoss()([[1., 0.]], [[0., 0.]]))
    1.0
    """

    spec = NDCG_BETA_HINGE

    def __init__(self, margin=1.0, squared=False, ragged=False,
                 reduction=base.DEFAULT_REDUCTION, name="ndcg_beta_hinge"):
        super().__init__(dict(margin=margin, squared=squared), ragged=ragged,
                         reduction=reduction, name=name)

    def get_config(self):
        config = super().get_config()  # ragged, reduction, name
        options = self.options
        config.update(margin=options["margin"], squared=options["squared"])
        return config
