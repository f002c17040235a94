"""The TensorFlow bodies of :mod:`tfr_extensions.losses.pairwise` (the math, the
public functions and the Keras classes are there); their ``keras.ops`` twins are
:mod:`tfr_extensions.keras_ops.losses.pairwise`."""
import tensorflow as tf

from tfr_extensions.ops import numerics
from tfr_extensions.ops import screening


def _pairs(labels, scores, mask):
    """Score differences ``s_i - s_j``, label differences ``y_i - y_j`` and the
    bool mask of unordered valid pairs ``i < j``, each ``[B, L, L]``."""
    score_diffs = scores[:, :, None] - scores[:, None, :]
    label_diffs = labels[:, :, None] - labels[:, None, :]
    size = tf.shape(scores)[1]
    upper = tf.linalg.band_part(tf.ones([size, size], tf.bool), 0, -1)
    upper = tf.logical_and(upper, tf.logical_not(tf.eye(size, dtype=tf.bool)))
    pair_mask = tf.logical_and(tf.logical_and(mask[:, :, None], mask[:, None, :]), upper[None])
    return score_diffs, label_diffs, pair_mask


def clip_scores(scores, squared: bool = False):
    """Scores clipped to +-``dtype.max / 4`` (+-``sqrt(dtype.max) / 4`` for
    ``squared``): differences of two, and their squares, stay finite."""
    dtype_max = scores.dtype.max
    bound = (dtype_max ** 0.5 if squared else dtype_max) / 4.0
    return tf.clip_by_value(scores, -bound, bound)


def ranknet_pair_losses(labels, scores, mask, sigma: float = 1.0):
    r"""RankNet cross entropy per pair (Eq. 4), ``[B, L, L]`` (0 off the pairs).

    :math:`C_{ij} = \tfrac12(1 - S_{ij})\,\sigma(s_i - s_j) +
    \log(1 + e^{-\sigma(s_i - s_j)})` with :math:`S_{ij} = \mathrm{sign}(y_i - y_j)`,
    i.e. cross entropy against the target :math:`\bar P_{ij} = (1 + S_{ij})/2`
    (Eq. 3), so tied labels have target 1/2. Symmetric in (i, j). Computed with
    ``softplus`` on :math:`\sigma s` clipped to +-``dtype.max / 4``
    (:func:`clip_scores`), finite for any score gap.
    """
    scaled = clip_scores(sigma * clip_scores(scores))  # (sigma * s may overflow)
    score_diffs, label_diffs, pair_mask = _pairs(labels, scaled, mask)
    o = tf.where(pair_mask, score_diffs, tf.zeros_like(score_diffs))
    target = 0.5 * (1.0 + tf.sign(label_diffs))
    pair_losses = (1.0 - target) * o + tf.math.softplus(-o)
    return tf.where(pair_mask, pair_losses, tf.zeros_like(pair_losses)), pair_mask


def ranknet_loss(labels, scores, *, mask=None, sigma=1.0):
    """The TensorFlow body of :func:`tfr_extensions.losses.ranknet_loss` (the math,
    the arguments and a doctest are there): inputs screened, options checked."""
    pair_losses, pair_mask = ranknet_pair_losses(labels, scores, mask, sigma)
    num_pairs = tf.reduce_sum(tf.cast(pair_mask, scores.dtype), axis=[1, 2])
    # each pair's share before the sum, which could overflow at extreme gaps
    share = (1.0 / tf.maximum(num_pairs, 1.0))[:, None, None]
    weights = tf.cast(screening.has_relevant(labels, mask), scores.dtype)
    return tf.reduce_sum(pair_losses * share, axis=[1, 2]), weights


def ideal_dcg_beta(labels, mask):
    r""":math:`DCG_\beta(\pi) = \sum_i y_{(i)} (n - i)` of the ideal order, Eq. 12
    (labels sorted descending, i 1-based, n valid documents). ``[B]``."""
    sorted_labels = tf.sort(tf.where(mask, labels, tf.zeros_like(labels)),
                            axis=-1, direction="DESCENDING")
    n = tf.reduce_sum(tf.cast(mask, labels.dtype), axis=-1, keepdims=True)
    positions = tf.cumsum(tf.ones_like(labels), axis=-1)  # 1..L
    return tf.reduce_sum(sorted_labels * tf.maximum(n - positions, 0.0), axis=-1)


def ndcg_beta_pair_weights(labels, mask):
    r"""Pair weights :math:`\tau = (b - a)/DCG_\beta(\pi)` of Eq. 17-19.

    ``[B, L, L]``: entry (i, j) is :math:`(y_i - y_j)/DCG_\beta(\pi)` when
    :math:`y_i > y_j` (i should rank above j), else 0. With them,
    :math:`1 - NDCG_\beta(g) = \sum_{i,j} \tau_{ij}\,[s_i \le s_j]` (Eq. 15-17).
    """
    label_diffs = labels[:, :, None] - labels[:, None, :]
    pair_mask = tf.logical_and(tf.logical_and(mask[:, :, None], mask[:, None, :]),
                               label_diffs > 0)
    norm = ideal_dcg_beta(labels, mask)[:, None, None]
    return tf.where(pair_mask, numerics.safe_divide(label_diffs, norm), tf.zeros_like(label_diffs))


def ndcg_beta_hinge_loss(labels, scores, *, mask=None, margin=1.0, squared=False):
    """The TensorFlow body of :func:`tfr_extensions.losses.ndcg_beta_hinge_loss` (the math,
    the arguments and a doctest are there): inputs screened, options checked."""
    weights = ndcg_beta_pair_weights(labels, mask)
    scores = clip_scores(scores, squared)
    score_diffs = scores[:, :, None] - scores[:, None, :]
    hinge = tf.nn.relu(margin - score_diffs)
    if squared:
        hinge = tf.square(hinge)
    losses = tf.reduce_sum(tf.where(weights > 0, weights * hinge, tf.zeros_like(hinge)),
                           axis=[1, 2])
    list_weights = tf.cast(ideal_dcg_beta(labels, mask) > 0, scores.dtype)
    return losses, list_weights


