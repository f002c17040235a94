r"""Qin et al.'s smooth ranks, the ranks that ApproxNDCG differentiates.

Equation numbers refer to ``approxndcg-revisited.txt`` (Bruch et al., Eq. 5-6).
The one TensorFlow definition: our ApproxNDCG
(:func:`tfr_extensions.losses.approx_ndcg_loss`), the rank-accuracy experiment
(``pipelines/rank_accuracy.py``, Table 2 of the twin-sigmoid paper) and the ported
ApproxNDCG peer of the benchmarks (``benchmarks/peers.py``) use it;
``tests/test_compat.py`` checks it against TF-Ranking's ``losses_impl.approx_ranks``.
Its ``keras.ops`` twin is :func:`tfr_extensions.keras_ops.approx_ranks.approx_ranks`.
"""
import tensorflow as tf


def approx_ranks(scores, mask=None, temperature: float = 1.0) -> tf.Tensor:
    r"""Smooth ranks, Eq. 5-6: :math:`\hat\pi(i) = 1 + \sum_{j \ne i}
    \sigma\big((s_j - s_i)/T\big)` over the valid documents j (:math:`\alpha = 1/T`
    in Eq. 6).

    Without ``mask``, TF-Ranking's ``losses_impl.approx_ranks`` of ``scores / T``.
    TF-Ranking pushes padded logits 1000/T below the others instead of masking
    them; here padded documents j are left out of every sum, and a padded
    document's own rank is 1/2 (its gain is 0). The difference is taken before
    the division, so two finite scores never give ``inf - inf``.

    Args:
      scores: float ``[batch, list_size]``.
      mask: optional bool ``[batch, list_size]``, True = valid; None = all valid.
      temperature: :math:`T > 0`; smaller is closer to the true ranks.

    Returns:
      float ``[batch, list_size]``.

    >>> approx_ranks(tf.constant([[0.0, 0.0, 100.0]])).numpy().tolist()
    [[2.5, 2.5, 1.0]]
    >>> approx_ranks(tf.constant([[0.0, 0.0, 100.0]]),
    ...              tf.constant([[True, False, True]])).numpy().tolist()
    [[2.0, 0.5, 1.0]]
    """
    scores = tf.convert_to_tensor(scores)
    diffs = (scores[:, None, :] - scores[:, :, None]) / temperature  # [B, i, j]: (s_j - s_i)/T
    beats = tf.sigmoid(diffs)
    if mask is not None:
        mask = tf.convert_to_tensor(mask)
        pair_mask = tf.logical_and(mask[:, :, None], mask[:, None, :])
        beats = tf.where(pair_mask, beats, tf.zeros_like(beats))
    return tf.reduce_sum(beats, axis=-1) + 0.5  # sigma(0) = 1/2 on the diagonal: + 1/2
