r"""LambdaLoss: pairwise logistic losses weighted by the change of a ranking metric.

Wang, Li, Golbandi, Bendersky and Najork, "The LambdaLoss Framework for Ranking Metric
Optimization" (CIKM 2018; not in ``../shared/papers``, so the weighting schemes follow
allRank's ``allrank/models/losses/lambdaLoss.py``, which ``tests`` vendor and compare with).

Extreme scores: the loss sums up to :math:`L^2` terms linear in the score gaps, so scores are
clipped to :math:`\pm\sqrt{\text{dtype.max}}/4` (4.6e18 in float32; ``arrays.extremes.clip_scores``)
before and after the scaling by :math:`\sigma`: the sum stays finite; beyond that bound
distinct scores tie, with gradient 0. Shapes are static (XLA, ``jax.jit``, ``torch.compile``).

On PyTorch the math runs under the PyTorch screening (``base.TORCH_SCREENED_MATH``): the
generic screening's Python overhead is a tenth of a step at 64 lists of 32
(``KERAS_BACKEND=torch python -m benchmarks.allrank_losses --cases lambda_loss lambda_ranknet
--sizes 32 --threads 1 --clock cpu``: 1.09 / 1.01x allRank 1.4.3 with it, ``docs/speed.md``).
"""
import math

from tfr_extensions import arrays
from tfr_extensions.arrays.extremes import clip_scores
from tfr_extensions.losses import base
from tfr_extensions.losses.registry import register
from tfr_extensions.ops import validation

#: the weighting schemes :math:`w_{ij}` of :func:`lambda_loss` (allRank's
#: ``rankNet_scheme``, ``lambdaRank_scheme``, ``ndcgLoss1_scheme``,
#: ``ndcgLoss2_scheme`` and ``ndcgLoss2PP_scheme``)
WEIGHTINGS = ("ranknet", "lambdarank", "ndcg_loss1", "ndcg_loss2", "ndcg_loss2pp")


def _pairwise(values, op):
    """``op(values_i, values_j)``, ``[B, L, L]``."""
    return op(values[:, :, None], values[:, None, :])


def lambda_pair_weights(gains, ranks, weighting: str, mu: float):
    r"""The weights :math:`w_{ij}` of :func:`lambda_loss`, ``[B, L, L]`` (``[B, L, 1]`` for
    ``ndcg_loss1``, a scalar for ``ranknet``), from ``gains`` :math:`G_i` ``[B, L]`` and the
    1-based predicted ranks :math:`r_i`, float ``[B, L]`` or ``[1, L]`` (lists in that order)."""
    xp = arrays.namespace()
    if weighting == "ranknet":
        return xp.constant(1.0, xp.dtype_name(gains))
    discounts = xp.lists.log2_discount(ranks)  # 1 / D_i
    if weighting == "ndcg_loss1":
        return (gains * discounts)[:, :, None]
    gain_diffs = xp.abs(_pairwise(gains, xp.subtract))  # |G_i - G_j|
    discount_diffs = xp.abs(_pairwise(discounts, xp.subtract))  # |1/D_i - 1/D_j|
    if weighting == "lambdarank":
        return gain_diffs * discount_diffs
    distance = xp.abs(_pairwise(ranks, xp.subtract))  # |r_i - r_j|, 0 on the diagonal
    # delta_ij = 1/log2(1 + d) - 1/log2(2 + d) >= 0, and 0 at d = 0 (max(d, 1) = d + 1)
    deltas = (xp.lists.log2_discount(xp.maximum(distance, 1.0))
              - xp.lists.log2_discount(distance + 1.0))
    if weighting == "ndcg_loss2":
        return gain_diffs * deltas
    if weighting == "ndcg_loss2pp":
        return gain_diffs * (mu * deltas + discount_diffs)
    raise ValueError(f"Unknown LambdaLoss weighting {weighting!r}.")


@base.loss_function(torch=base.TORCH_SCREENED_MATH,
                    presets={f"lambda_{w}": {"weighting": w} for w in WEIGHTINGS},
                    examples=[dict(weighting="ndcg_loss1", sigma=1.5, mu=5.0, topn=3),
                              dict(weighting="ndcg_loss1", sigma=1.7, mu=3.0, topn=3)])
def lambda_loss(labels, scores, *, mask=None,
                weighting: validation.OneOf(WEIGHTINGS) = "ndcg_loss2pp",
                sigma: validation.Positive = 1.0, mu: validation.Number(minimum=0.0) = 10.0,
                topn: validation.TopN = None):
    r"""LambdaLoss: the metric-weighted pairwise logistic loss of the LambdaLoss paper.

    Per list, :math:`\ell = \sum_{(i,j) \in P} w_{ij}\,\log_2(1 + e^{-\sigma (s_i - s_j)})`
    over the ordered pairs P of valid documents with :math:`y_i > y_j` (``ndcg_loss1``: all,
    :math:`i = j` included, as allRank sums them) both ranked within ``topn`` (allRank's ``k``).
    With :math:`r_i` the rank of document i by score (ties to the lower index),
    :math:`D_i = \log_2(1 + r_i)`, :math:`G_i = (2^{y_i} - 1)/\mathrm{maxDCG@k}` and
    :math:`\delta_{ij} = |1/\log_2(1 + |r_i - r_j|) - 1/\log_2(2 + |r_i - r_j|)|`
    (0 for :math:`i = j`), the weights are (``weighting``):

    * ``"ranknet"``: :math:`w_{ij} = 1` (RankNet without tied pairs);
    * ``"lambdarank"``: :math:`|G_i - G_j|\,|1/D_i - 1/D_j|`;
    * ``"ndcg_loss1"``: :math:`G_i / D_i`;
    * ``"ndcg_loss2"``: :math:`|G_i - G_j|\,\delta_{ij}`;
    * ``"ndcg_loss2pp"``: :math:`|G_i - G_j|\,(\mu\,\delta_{ij} + |1/D_i - 1/D_j|)`
      (NDCG-Loss2++: :math:`\mu` times NDCG-Loss2 plus LambdaRank).

    The weights are constants of the backward pass (the ranks come from a sort): the gradient
    is LambdaRank's "lambdas". ``-log2(sigmoid(x)) = softplus(-x) / ln 2`` is exact for any
    gap of clipped scores (allRank clamps the sigmoid at 1e-10). Without ``topn``,
    TF-Ranking's ``PairwiseLogisticLoss`` (``temperature = 1/sigma``) with
    ``NDCGLambdaWeight(smooth_fraction=1/(1+mu))``, ``NDCGLambdaWeightV2()`` or
    ``NDCGLambdaWeight(smooth_fraction=1)`` is this loss (``ndcg_loss2pp``, ``ndcg_loss2``,
    ``lambdarank``) times :math:`L \ln 2` (over :math:`1 + \mu` for ``ndcg_loss2pp``); with
    ``topn`` its weights keep pairs this loss drops (``tests/losses/test_lambda_loss.py``).

    Args:
      weighting: one of :data:`WEIGHTINGS`.
      sigma: the scale :math:`\sigma > 0` of the score differences.
      mu: :math:`\mu \ge 0`, the weight of :math:`\delta_{ij}` in ``ndcg_loss2pp`` (only).
      topn: the cutoff k: None (the whole list) or an int >= 1.

    Returns:
      ``(losses, weights)``, ``[batch]`` each (losses 0 at weight 0).

    >>> losses, _ = lambda_loss([[1., 0.]], [[0., 0.]], weighting="ranknet")
    >>> float(losses[0])  # -log2(1/2)
    1.0
    """
    xp = arrays.namespace()
    dtype = xp.dtype_name(scores)
    # sigma * s, clipped before and after the scaling (which may overflow only for sigma > 1)
    scaled = clip_scores(scores, squared=True)
    if sigma != 1.0:
        scaled = sigma * scaled
    if sigma > 1.0:
        scaled = clip_scores(scaled, squared=True)
    # the lists in predicted order (ties to the lower index, padding last): ranks = positions
    order = xp.sorting.sort_order(xp.stop_gradient(scaled), mask)  # [B, L]
    sorted_scores = xp.take_along_axis(scaled, order, axis=-1)
    sorted_labels = xp.take_along_axis(labels, order, axis=-1)
    count = xp.sum(xp.cast(mask, "int32"), axis=-1, keepdims=True)  # [B, 1]
    positions = xp.arange(xp.shape(scores)[1], dtype="int32")[None, :]  # [1, L], 0-based
    sorted_mask = positions < count  # the valid documents come first
    ranks = xp.cast(positions + 1, dtype)  # [1, L]
    # the pairs summed: both valid and ranked within topn, with y_i > y_j (all for ndcg_loss1)
    valid = sorted_mask if topn is None else xp.logical_and(sorted_mask, ranks <= topn)
    pairs = _pairwise(valid, xp.logical_and)
    if weighting != "ndcg_loss1":
        pairs = xp.logical_and(pairs, _pairwise(sorted_labels, xp.greater))
    # -log2(sigmoid(s_i - s_j)) = softplus(s_j - s_i) / ln 2, finite for any |s_i - s_j| <= 2b
    pair_losses = xp.softplus(_pairwise(sorted_scores, lambda s_i, s_j: s_j - s_i))
    if weighting == "ranknet":  # no weights: only whether a list has a gain (its ideal DCG > 0)
        relevant = xp.any(xp.logical_and(mask, xp.lists.gains(labels) > 0), axis=-1)
    else:
        ideal = xp.rank_metrics.ideal_dcg(labels, mask, topn)  # [B]
        relevant = ideal > 0
        gains = xp.safe_divide(xp.lists.gains(sorted_labels), ideal[:, None])
        pair_losses = lambda_pair_weights(gains, ranks, weighting, mu) * pair_losses
    pair_losses = xp.where(pairs, pair_losses, xp.constant(0.0, dtype))
    losses = xp.sum(pair_losses, axis=(1, 2)) * (1.0 / math.log(2.0))
    return xp.where(relevant, losses, xp.zeros_like(losses)), xp.cast(relevant, dtype)


@register
class LambdaLoss(base.RankingLoss):
    r"""Keras loss of :func:`lambda_loss`, registered as ``lambda_loss`` (``lambda`` is a
    keyword) and as ``lambda_<weighting>`` for each of :data:`WEIGHTINGS`.

    >>> float(LambdaLoss(weighting="ranknet")([[1., 0.]], [[0., 0.]]))  # -log2(1/2)
    1.0
    """

    function = lambda_loss

    def __init__(self, weighting="ndcg_loss2pp", sigma=1.0, mu=10.0, topn=None, ragged=False,
                 reduction=base.DEFAULT_REDUCTION, name="lambda_loss"):
        super().__init__(locals())

