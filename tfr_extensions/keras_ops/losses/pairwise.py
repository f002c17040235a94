r"""RankNet with tie targets and the NDCG-beta weighted hinge in ``keras.ops``: the
keras.ops twin of :mod:`tfr_extensions.losses.pairwise` (the same bodies, names
and contracts; the math and the clipping of extreme scores are documented there).

Equation numbers refer to ``ranknet-and-ndcg-beta-report.txt`` (RankNet, Eq.
1-4; RankSVM-ndcg, Eq. 12-20).

>>> from keras import ops
>>> losses, _ = ranknet_loss(ops.array([[1., 0.]]), ops.array([[0., 0.]]),
...                          mask=ops.array([[True, True]]))
>>> round(float(ops.convert_to_numpy(losses)[0]), 6)  # log 2
0.693147
"""
import numpy as np
from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import screening


def dtype_max(x) -> float:
    """The largest finite value of ``x``'s floating dtype."""
    return float(np.finfo(lists.dtype_name(x)).max)


def _pairs(labels, scores, mask):
    """Score differences ``s_i - s_j``, label differences ``y_i - y_j`` and the
    bool mask of unordered valid pairs ``i < j``, each ``[B, L, L]``."""
    score_diffs = scores[:, :, None] - scores[:, None, :]
    label_diffs = labels[:, :, None] - labels[:, None, :]
    size = ops.shape(scores)[1]
    upper = ops.triu(ops.ones((size, size), dtype="int32"), k=1) > 0  # i < j
    pair_mask = ops.logical_and(ops.logical_and(mask[:, :, None], mask[:, None, :]),
                                upper[None])
    return score_diffs, label_diffs, pair_mask


def clip_scores(scores, squared: bool = False):
    """Scores clipped to +-``dtype.max / 4`` (+-``sqrt(dtype.max) / 4`` for
    ``squared``): differences of two, and their squares, stay finite. Gradient 1
    inside, 0 beyond (``tf.clip_by_value``'s)."""
    largest = dtype_max(scores)
    bound = (largest ** 0.5 if squared else largest) / 4.0
    dtype = lists.dtype_name(scores)
    return ops.clip(scores, numerics.constant(-bound, dtype), numerics.constant(bound, dtype))


def ranknet_pair_losses(labels, scores, mask, sigma: float = 1.0):
    r"""RankNet cross entropy per pair (Eq. 4), ``[B, L, L]`` (0 off the pairs):
    :math:`\tfrac12(1 - S_{ij})\,o_{ij} + \log(1 + e^{-o_{ij}})`,
    :math:`o_{ij} = \sigma(s_i - s_j)`, targets :math:`(1 + S_{ij})/2` (Eq. 3).
    The twin of :func:`tfr_extensions.losses.pairwise.ranknet_pair_losses`."""
    scaled = clip_scores(sigma * clip_scores(scores))  # (sigma * s may overflow)
    score_diffs, label_diffs, pair_mask = _pairs(labels, scaled, mask)
    o = ops.where(pair_mask, score_diffs, ops.zeros_like(score_diffs))
    target = 0.5 * (1.0 + ops.sign(label_diffs))
    pair_losses = (1.0 - target) * o + ops.softplus(-o)
    return ops.where(pair_mask, pair_losses, ops.zeros_like(pair_losses)), pair_mask


def ranknet_loss(labels, scores, *, mask=None, sigma=1.0):
    r"""RankNet: :math:`\frac{1}{|P|}\sum_{(i,j) \in P} C_{ij}` over the unordered
    pairs P of valid documents (Eq. 1-4, tie targets 1/2); the keras.ops twin of
    :func:`tfr_extensions.losses.pairwise.ranknet_loss`.

    Returns ``(losses, weights)`` ``[batch]``; weight 1 for lists with a relevant
    document.
    """
    pair_losses, pair_mask = ranknet_pair_losses(labels, scores, mask, sigma)
    num_pairs = ops.sum(ops.cast(pair_mask, scores.dtype), axis=(1, 2))
    # each pair's share before the sum, which could overflow at extreme gaps
    share = (1.0 / numerics.maximum(num_pairs, 1.0))[:, None, None]
    weights = ops.cast(screening.has_relevant(labels, mask), scores.dtype)
    return ops.sum(pair_losses * share, axis=(1, 2)), weights


def ideal_dcg_beta(labels, mask):
    r""":math:`DCG_\beta(\pi) = \sum_i y_{(i)} (n - i)` of the ideal order, Eq. 12,
    ``[B]``; the twin of :func:`tfr_extensions.losses.pairwise.ideal_dcg_beta`."""
    valid_labels = ops.where(mask, labels, ops.zeros_like(labels))
    sorted_labels = ops.flip(ops.sort(valid_labels, axis=-1), axis=-1)
    n = ops.sum(ops.cast(mask, labels.dtype), axis=-1, keepdims=True)
    positions = ops.cumsum(ops.ones_like(labels), axis=-1)  # 1..L
    return ops.sum(sorted_labels * numerics.maximum(n - positions, 0.0), axis=-1)


def ndcg_beta_pair_weights(labels, mask):
    r"""Pair weights :math:`\tau_{ij} = (y_i - y_j)/DCG_\beta(\pi)` where
    :math:`y_i > y_j`, else 0 (Eq. 17-19), ``[B, L, L]``; the twin of
    :func:`tfr_extensions.losses.pairwise.ndcg_beta_pair_weights`."""
    label_diffs = labels[:, :, None] - labels[:, None, :]
    pair_mask = ops.logical_and(ops.logical_and(mask[:, :, None], mask[:, None, :]),
                                label_diffs > 0)
    norm = ideal_dcg_beta(labels, mask)[:, None, None]
    return ops.where(pair_mask, numerics.safe_divide(label_diffs, norm),
                     ops.zeros_like(label_diffs))


def ndcg_beta_hinge_loss(labels, scores, *, mask=None, margin=1.0, squared=False):
    r"""RankSVM-ndcg: :math:`\sum_{y_i > y_j} \tau_{ij}\,\phi(m - (s_i - s_j))`,
    :math:`\phi(x) = \max(0, x)` or its square (Eq. 19-20); the keras.ops twin
    of :func:`tfr_extensions.losses.pairwise.ndcg_beta_hinge_loss`.

    Returns ``(losses, weights)`` ``[batch]``; weight 0 for lists whose ideal
    :math:`DCG_\beta` is 0.
    """
    weights = ndcg_beta_pair_weights(labels, mask)
    scores = clip_scores(scores, squared)
    score_diffs = scores[:, :, None] - scores[:, None, :]
    hinge = ops.relu(margin - score_diffs)
    if squared:
        hinge = ops.square(hinge)
    losses = ops.sum(ops.where(weights > 0, weights * hinge, ops.zeros_like(hinge)),
                     axis=(1, 2))
    list_weights = ops.cast(ideal_dcg_beta(labels, mask) > 0, scores.dtype)
    return losses, list_weights
