r"""LambdaLoss in ``keras.ops``: the keras.ops twin of
:mod:`tfr_extensions.ops.losses.lambda_loss` (the same body, names and contracts;
the math and the clipping of extreme scores are documented in
:mod:`tfr_extensions.losses.lambda_loss`). Static shapes, no data-dependent Python
branch: it runs under ``jax.jit`` and ``torch.compile``.

>>> from keras import ops
>>> losses, _ = lambda_loss(ops.array([[1., 0.]]), ops.array([[0., 0.]]),
...                         mask=ops.array([[True, True]]), weighting="ranknet")
>>> float(ops.convert_to_numpy(losses)[0])  # -log2(1/2)
1.0
"""
import math

from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import rank_metrics
from tfr_extensions.keras_ops import sorting
from tfr_extensions.keras_ops.losses.pairwise import clip_scores


def _pairwise(values, op):
    """``op(values_i, values_j)``, ``[B, L, L]``."""
    return op(values[:, :, None], values[:, None, :])


def lambda_pair_weights(gains, ranks, weighting: str, mu: float):
    r"""The weights :math:`w_{ij}`, ``[B, L, L]`` (``[B, L, 1]`` for ``ndcg_loss1``, a
    scalar for ``ranknet``); the twin of
    :func:`tfr_extensions.ops.losses.lambda_loss.lambda_pair_weights`."""
    if weighting == "ranknet":
        return numerics.constant(1.0, lists.dtype_name(gains))
    discounts = lists.log2_discount(ranks)  # 1 / D_i
    if weighting == "ndcg_loss1":
        return (gains * discounts)[:, :, None]
    gain_diffs = ops.abs(_pairwise(gains, ops.subtract))  # |G_i - G_j|
    discount_diffs = ops.abs(_pairwise(discounts, ops.subtract))  # |1/D_i - 1/D_j|
    if weighting == "lambdarank":
        return gain_diffs * discount_diffs
    distance = ops.abs(_pairwise(ranks, ops.subtract))  # |r_i - r_j|, 0 on the diagonal
    # delta_ij = 1/log2(1 + d) - 1/log2(2 + d) (decreasing in d: >= 0), 0 at d = 0
    deltas = ops.where(distance > 0, lists.log2_discount(numerics.maximum(distance, 1.0))
                       - lists.log2_discount(distance + 1.0), ops.zeros_like(distance))
    if weighting == "ndcg_loss2":
        return gain_diffs * deltas
    if weighting == "ndcg_loss2pp":
        return gain_diffs * (mu * deltas + discount_diffs)
    raise ValueError(f"Unknown LambdaLoss weighting {weighting!r}.")


def lambda_pair_mask(labels, ranks, mask, weighting: str, topn):
    """Bool ``[B, L, L]``: the summed pairs; the twin of
    :func:`tfr_extensions.ops.losses.lambda_loss.lambda_pair_mask`."""
    valid = mask if topn is None else ops.logical_and(mask, ranks <= topn)
    pairs = _pairwise(valid, ops.logical_and)
    if weighting != "ndcg_loss1":
        pairs = ops.logical_and(pairs, _pairwise(labels, ops.greater))
    return pairs


def lambda_loss(labels, scores, *, mask=None, weighting="ndcg_loss2pp", sigma=1.0, mu=10.0,
                topn=None):
    r"""LambdaLoss, :math:`\sum_{(i,j) \in P} w_{ij}\log_2(1 + e^{-\sigma(s_i - s_j)})`;
    the keras.ops twin of :func:`tfr_extensions.losses.lambda_loss`.

    Returns ``(losses, weights)`` ``[batch]``; weight 1 for lists with a relevant
    document, 0 (and loss 0) otherwise.
    """
    dtype = lists.dtype_name(scores)
    # sigma * s, clipped before and after the scaling (which may overflow)
    scaled = clip_scores(sigma * clip_scores(scores, squared=True), squared=True)
    ranks = ops.cast(sorting.exact_ranks(ops.stop_gradient(scaled), mask), dtype)
    ideal = rank_metrics.ideal_dcg(labels, mask, topn)  # [B]
    gains = numerics.safe_divide(lists.gains(labels), ideal[:, None])
    weights = lambda_pair_weights(gains, ranks, weighting, mu)
    pairs = lambda_pair_mask(labels, ranks, mask, weighting, topn)
    zero = numerics.constant(0.0, dtype)
    score_diffs = ops.where(pairs, _pairwise(scaled, ops.subtract), zero)
    # -log2(sigmoid(x)) = softplus(-x) / ln 2, finite for any |x| <= 2b
    pair_losses = ops.where(pairs, weights * ops.softplus(-score_diffs), zero)
    relevant = ideal > 0
    losses = ops.sum(pair_losses, axis=(1, 2)) * (1.0 / math.log(2.0))
    return ops.where(relevant, losses, ops.zeros_like(losses)), ops.cast(relevant, dtype)
