"""The TensorFlow body of :mod:`tfr_extensions.losses.lambda_loss` (the math, the
public function and the Keras class are there); its ``keras.ops`` twin is
:mod:`tfr_extensions.keras_ops.losses.lambda_loss`.

Every shape is static (the weighting and ``topn`` are Python values, the pairs
one ``[B, L, L]`` computation), so the body runs under XLA as it is.
"""
import math

import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import numerics
from tfr_extensions.ops import rank_metrics
from tfr_extensions.ops import sorting
from tfr_extensions.ops.losses.pairwise import clip_scores


def _pairwise(values, op):
    """``op(values_i, values_j)``, ``[B, L, L]``."""
    return op(values[:, :, None], values[:, None, :])


def lambda_pair_weights(gains, ranks, weighting: str, mu: float):
    r"""The weights :math:`w_{ij}` of the LambdaLoss schemes, ``[B, L, L]`` (``[B, L, 1]``
    for ``ndcg_loss1``, a scalar for ``ranknet``).

    ``gains``: :math:`G_i`, the gains divided by the ideal DCG@k, ``[B, L]``;
    ``ranks``: the 1-based predicted ranks :math:`r_i`, float ``[B, L]``.
    """
    if weighting == "ranknet":
        return tf.constant(1, gains.dtype)
    discounts = lists.log2_discount(ranks)  # 1 / D_i
    if weighting == "ndcg_loss1":
        return (gains * discounts)[:, :, None]
    gain_diffs = tf.abs(_pairwise(gains, tf.subtract))  # |G_i - G_j|
    discount_diffs = tf.abs(_pairwise(discounts, tf.subtract))  # |1/D_i - 1/D_j|
    if weighting == "lambdarank":
        return gain_diffs * discount_diffs
    distance = tf.abs(_pairwise(ranks, tf.subtract))  # |r_i - r_j|, 0 on the diagonal
    one = tf.constant(1, ranks.dtype)
    # delta_ij = 1/log2(1 + d) - 1/log2(2 + d) (decreasing in d: >= 0), 0 at d = 0
    deltas = tf.where(distance > 0, lists.log2_discount(tf.maximum(distance, one))
                      - lists.log2_discount(distance + one), tf.zeros_like(distance))
    if weighting == "ndcg_loss2":
        return gain_diffs * deltas
    if weighting == "ndcg_loss2pp":
        return gain_diffs * (mu * deltas + discount_diffs)
    raise ValueError(f"Unknown LambdaLoss weighting {weighting!r}.")


def lambda_pair_mask(labels, ranks, mask, weighting: str, topn):
    """Bool ``[B, L, L]``: the pairs (i, j) that the loss sums: both valid, with
    ``y_i > y_j`` (every pair for ``ndcg_loss1``), both ranked within ``topn``."""
    valid = mask if topn is None else tf.logical_and(mask, ranks <= topn)
    pairs = _pairwise(valid, tf.logical_and)
    if weighting != "ndcg_loss1":
        pairs = tf.logical_and(pairs, _pairwise(labels, tf.greater))
    return pairs


def lambda_loss(labels, scores, *, mask=None, weighting="ndcg_loss2pp", sigma=1.0, mu=10.0,
                topn=None):
    """The TensorFlow body of :func:`tfr_extensions.losses.lambda_loss` (the math, the
    arguments and a doctest are there): inputs screened, options checked."""
    dtype = scores.dtype
    # sigma * s, clipped before and after the scaling (which may overflow)
    scaled = clip_scores(sigma * clip_scores(scores, squared=True), squared=True)
    ranks = tf.cast(sorting.exact_ranks(tf.stop_gradient(scaled), mask), dtype)
    ideal = rank_metrics.ideal_dcg(labels, mask, topn)  # [B]
    gains = numerics.safe_divide(lists.gains(labels), ideal[:, None])
    weights = lambda_pair_weights(gains, ranks, weighting, mu)
    pairs = lambda_pair_mask(labels, ranks, mask, weighting, topn)
    score_diffs = tf.where(pairs, _pairwise(scaled, tf.subtract), tf.zeros([], dtype))
    # -log2(sigmoid(x)) = softplus(-x) / ln 2, finite for any |x| <= 2b
    pair_losses = tf.where(pairs, weights * tf.math.softplus(-score_diffs), tf.zeros([], dtype))
    relevant = ideal > 0
    losses = tf.reduce_sum(pair_losses, axis=[1, 2]) * (1.0 / math.log(2.0))
    return tf.where(relevant, losses, tf.zeros_like(losses)), tf.cast(relevant, dtype)
