r"""Pairwise losses: RankNet with tie targets, and the NDCG-beta weighted hinge.

Equation numbers refer to ``ranknet-and-ndcg-beta-report.txt`` (Burges et al.'s RankNet,
Eq. 1-4; Jin et al.'s RankSVM-ndcg, Eq. 12-20) and ``softrank.txt`` (Eq. 4-5).

Extreme scores: both losses grow linearly with score gaps (the squared hinge quadratically),
so they clip scores to ``dtype.max / 4`` (``sqrt(dtype.max) / 4`` for the squared hinge;
:func:`tfr_extensions.arrays.extremes.clip_scores`): values stay finite, and beyond that
bound distinct scores tie, with gradient 0.
"""
from tfr_extensions import arrays
from tfr_extensions.arrays.extremes import clip_scores
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import validation


def ideal_dcg_beta(labels, mask):
    r""":math:`DCG_\beta(\pi) = \sum_i y_{(i)} (n - i)` of the ideal order, Eq. 12
    (labels sorted descending, i 1-based, n valid documents). ``[B]``."""
    xp = arrays.namespace()
    sorted_labels = xp.sorting.sort_descending(labels, mask)
    n = xp.sum(xp.cast(mask, xp.dtype_name(labels)), axis=-1, keepdims=True)
    positions = xp.cumsum(xp.ones_like(labels), axis=-1)  # 1..L
    return xp.sum(sorted_labels * xp.maximum(n - positions, 0.0), axis=-1)


def ndcg_beta_pair_weights(labels, mask):
    r"""Pair weights :math:`\tau_{ij} = (y_i - y_j)/DCG_\beta(\pi)` if :math:`y_i > y_j`, else 0,
    ``[B, L, L]`` (Eq. 17-19): :math:`1 - NDCG_\beta(g) = \sum_{i,j} \tau_{ij}\,[s_i \le s_j]`
    (Eq. 15-17)."""
    xp = arrays.namespace()
    label_diffs = labels[:, :, None] - labels[:, None, :]
    pair_mask = xp.logical_and(xp.logical_and(mask[:, :, None], mask[:, None, :]),
                               label_diffs > 0)
    norm = ideal_dcg_beta(labels, mask)[:, None, None]
    return xp.where(pair_mask, xp.safe_divide(label_diffs, norm), xp.zeros_like(label_diffs))


@base.loss_function(torch="tfr_extensions.torch_ops.pairwise:ranknet_loss",
                    examples=[dict(sigma=2.0), dict(sigma=0.5)])
def ranknet_loss(labels, scores, *, mask=None,
                 sigma: validation.Positive = 1.0):
    r"""RankNet: mean pairwise cross entropy with targets :math:`(1+S_{ij})/2`.

    Per list, :math:`\frac{1}{|P|}\sum_{(i,j) \in P} C_{ij}` over the unordered pairs P of
    valid documents, with (Eq. 4 of the RankNet report, Eq. 4-5 of SoftRank)
    :math:`C_{ij} = \tfrac12(1 - S_{ij})\,\sigma(s_i - s_j) + \log(1 + e^{-\sigma(s_i - s_j)})`,
    :math:`S_{ij} = \mathrm{sign}(y_i - y_j)`: the cross entropy of
    :math:`P_{ij} = 1/(1+e^{-\sigma(s_i - s_j)})` (Eq. 1: :math:`\sigma = 1`) against
    :math:`\bar P_{ij} = (1 + S_{ij})/2` (Eq. 3; ties 1/2). ``softplus`` on clipped
    :math:`\sigma s`, each pair's share taken before the sum: finite for any score gap.

    Args:
      sigma: the scale :math:`\sigma > 0`.

    Returns:
      ``(losses, weights)``, ``[batch]`` each.

    >>> losses, _ = ranknet_loss([[1., 0.]], [[0., 0.]])
    >>> float(losses[0])  # log 2
    0.6931471824645996
    """
    xp = arrays.namespace()
    dtype = xp.dtype_name(scores)
    scaled = clip_scores(sigma * clip_scores(scores))  # (sigma * s may overflow)
    score_diffs = scaled[:, :, None] - scaled[:, None, :]  # s_i - s_j, [B, L, L]
    index = xp.arange(xp.shape(scores)[1])
    upper = index[:, None] < index[None, :]  # i < j
    pair_mask = xp.logical_and(xp.logical_and(mask[:, :, None], mask[:, None, :]), upper[None])
    o = xp.where(pair_mask, score_diffs, xp.zeros_like(score_diffs))
    target = 0.5 * (1.0 + xp.sign(labels[:, :, None] - labels[:, None, :]))
    pair_losses = (1.0 - target) * o + xp.softplus(-o)
    pair_losses = xp.where(pair_mask, pair_losses, xp.zeros_like(pair_losses))
    num_pairs = xp.sum(xp.cast(pair_mask, dtype), axis=(1, 2))
    share = (1.0 / xp.maximum(num_pairs, 1.0))[:, None, None]  # (the sum could overflow)
    weights = xp.cast(xp.screening.has_relevant(labels, mask), dtype)
    return xp.sum(pair_losses * share, axis=(1, 2)), weights


@base.loss_function(examples=[dict(margin=0.5, squared=True), dict(margin=2.0)])
def ndcg_beta_hinge_loss(labels, scores, *, mask=None,
                         margin: validation.Positive = 1.0,
                         squared: validation.Flag = False):
    r"""RankSVM-ndcg: the NDCG-beta weighted pairwise hinge, Eq. 19-20.

    Per list, :math:`\sum_{y_i > y_j} \tau_{ij}\,\phi(m - (s_i - s_j))` with
    :math:`\tau_{ij} = (y_i - y_j)/DCG_\beta(\pi)` (:func:`ndcg_beta_pair_weights`), margin
    :math:`m` (1 in the paper), :math:`\phi(x) = \max(0, x)` (L1-SVM) or :math:`\max(0, x)^2`
    (``squared=True``, L2-SVM); an upper bound of :math:`1 - NDCG_\beta` (Eq. 15-18), the 1/K
    of Eq. 17 being the batch mean.

    Args:
      margin: :math:`m > 0`.
      squared: the squared hinge (L2-SVM).

    Returns:
      ``(losses, weights)``, ``[batch]`` each (weight 0 where the ideal :math:`DCG_\beta` is 0).

    >>> losses, _ = ndcg_beta_hinge_loss([[1., 0.]], [[0., 0.]])
    >>> float(losses[0])
    1.0
    """
    xp = arrays.namespace()
    weights = ndcg_beta_pair_weights(labels, mask)
    scores = clip_scores(scores, squared)
    score_diffs = scores[:, :, None] - scores[:, None, :]
    hinge = xp.relu(margin - score_diffs)
    if squared:
        hinge = xp.square(hinge)
    losses = xp.sum(xp.where(weights > 0, weights * hinge, xp.zeros_like(hinge)), axis=(1, 2))
    return losses, xp.cast(ideal_dcg_beta(labels, mask) > 0, xp.dtype_name(scores))


@register
class RankNetLoss(base.RankingLoss):
    r"""Keras loss of :func:`ranknet_loss`: RankNet with tie targets 1/2.

    >>> float(RankNetLoss()([[1., 0.]], [[0., 0.]]))  # log 2
    0.6931471824645996
    """

    function = ranknet_loss

    def __init__(self, sigma=1.0, ragged=False, reduction=base.DEFAULT_REDUCTION, name="ranknet"):
        super().__init__(locals())


@register
class NDCGBetaHingeLoss(base.RankingLoss):
    r"""Keras loss of :func:`ndcg_beta_hinge_loss`: the RankSVM-ndcg hinge.

    >>> float(NDCGBetaHingeLoss()([[1., 0.]], [[0., 0.]]))
    1.0
    """

    function = ndcg_beta_hinge_loss

    def __init__(self, margin=1.0, squared=False, ragged=False,
                 reduction=base.DEFAULT_REDUCTION, name="ndcg_beta_hinge"):
        super().__init__(locals())

