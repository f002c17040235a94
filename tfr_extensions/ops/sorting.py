"""Exact ranks by sorting: the O(L log L) forward pass of every rank-based op.

Sorting uses ``tf.argsort``, which is stable (TF implements it with ``top_k``,
which returns the lower index first among equal values, on CPU, GPU and XLA).
"""
from typing import Optional

import tensorflow as tf


def sort_order(scores: tf.Tensor, mask: tf.Tensor,
               tie_keys: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Indices that sort each list by descending score, padded documents last.

    Args:
      scores: float ``[batch, list_size]``.
      mask: bool ``[batch, list_size]``, True for valid documents.
      tie_keys: optional ``[batch, list_size]`` keys that break ties in score
        (larger key first). Without them ties keep their original order.

    Returns:
      int32 ``[batch, list_size]``: ``order[b, k]`` is the index of the document
      at 0-based position ``k`` of list ``b``.
    """
    # -inf is only a sort key here (never used in arithmetic): padded last.
    keys = tf.where(mask, scores, tf.constant(-float("inf"), scores.dtype))
    if tie_keys is None:
        return tf.argsort(keys, axis=-1, direction="DESCENDING", stable=True)
    # Two stable sorts: by the tie keys first, then by score.
    by_tie_key = tf.argsort(tie_keys, axis=-1, direction="DESCENDING", stable=True)
    permuted = tf.gather(keys, by_tie_key, batch_dims=1)
    by_score = tf.argsort(permuted, axis=-1, direction="DESCENDING", stable=True)
    return tf.gather(by_tie_key, by_score, batch_dims=1)


def inverse_order(order: tf.Tensor) -> tf.Tensor:
    """1-based positions from a sort order: ``positions[b, order[b, k]] = k + 1``."""
    return tf.argsort(order, axis=-1, direction="ASCENDING", stable=True) + 1


def exact_ranks(scores: tf.Tensor, mask: tf.Tensor,
                tie_keys: Optional[tf.Tensor] = None) -> tf.Tensor:
    """1-based int32 ranks by descending score; ties go to the lower index
    (or the larger ``tie_keys``); padded documents take the last positions."""
    return inverse_order(sort_order(scores, mask, tie_keys))


def midranks(scores: tf.Tensor, mask: tf.Tensor) -> tf.Tensor:
    """Ranks with ties sharing the mean of their positions (Eq. 12 without tie
    breaking): ``1 + #{j: s_j > s_i} + #{j != i: s_j = s_i} / 2``, valid j only.

    Computed in O(L log L) with one sort and two binary searches.
    """
    inf = tf.constant(float("inf"), scores.dtype)
    ascending = tf.sort(tf.where(mask, scores, inf), axis=-1)
    num_valid = tf.reduce_sum(tf.cast(mask, tf.int32), axis=-1, keepdims=True)
    queries = tf.where(mask, scores, tf.zeros_like(scores))
    left = tf.searchsorted(ascending, queries, side="left")
    right = tf.minimum(tf.searchsorted(ascending, queries, side="right"), num_valid)
    greater = tf.cast(num_valid - right, scores.dtype)
    ties = tf.cast(right - left - 1, scores.dtype)
    return tf.where(mask, 1.0 + greater + 0.5 * ties, tf.zeros_like(scores))
