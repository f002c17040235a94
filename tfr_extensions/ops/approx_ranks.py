r"""TF-Ranking's sigmoid approximation of ranks (Qin et al.), as its ApproxNDCG computes it.

Used by the rank-accuracy experiment (``pipelines/rank_accuracy.py``, Table 2
of the twin-sigmoid paper) and by the ported ApproxNDCG peer of the benchmarks
(``benchmarks/peers.py``); ``tests/test_compat.py`` checks it against
TF-Ranking's ``losses_impl.approx_ranks``. The masked version that our own
ApproxNDCG loss uses is :func:`tfr_extensions.losses.listwise.approx_ranks`.
"""
import tensorflow as tf


def approx_ranks(logits: tf.Tensor) -> tf.Tensor:
    r"""TF-Ranking's ``losses_impl.approx_ranks``: :math:`\hat\pi_i = 1 +
    \sum_{j \ne i} \sigma(s_j - s_i)` (Qin et al.'s approximation, which
    ApproxNDCG differentiates), ``[B, L] -> [B, L]``; scale the logits for a
    steeper sigmoid.

    >>> approx_ranks(tf.constant([[0.0, 0.0, 100.0]])).numpy().tolist()
    [[2.5, 2.5, 1.0]]
    """
    logits = tf.convert_to_tensor(logits)
    pairs = tf.sigmoid(logits[:, None, :] - logits[:, :, None])  # [B, i, j]: sigma(s_j - s_i)
    return tf.reduce_sum(pairs, axis=-1) + 0.5  # sigma(0) = 1/2 on the diagonal, so + 1/2
