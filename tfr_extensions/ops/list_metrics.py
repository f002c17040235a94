r"""Exact metrics of scored lists and the per-list values of the Keras metric, in
TensorFlow: the implementation behind :mod:`tfr_extensions.metrics` on Keras 2 and
on Keras 3's TensorFlow backend (its ``keras.ops`` twin, the same functions, is
:mod:`tfr_extensions.keras_ops.list_metrics`).

>>> labels, scores = tf.constant([[0., 1., 2.]]), tf.constant([[3., 2., 1.]])
>>> round(float(exact_metric("ndcg", labels, scores)[0]), 4)
0.5869
"""
from typing import Optional

import tensorflow as tf

from tfr_extensions.ops import numerics
from tfr_extensions.ops import rank_metrics
from tfr_extensions.ops import screening
from tfr_extensions.ops import sorting
from tfr_extensions.ops import validation
from tfr_extensions.ops import vocabulary


def exact_metric(metric: str, labels, scores, topn: Optional[int] = None, mask=None) -> tf.Tensor:
    """The exact per-list metric ``[B]`` of ``scores`` (any name of the vocabulary):
    the metric of :mod:`~tfr_extensions.ops.rank_metrics` at the ranks of a sort
    (ties to the lower index, padded documents last)."""
    function = rank_metrics.rank_metric_function(metric)
    topn = validation.validate_topn(topn)
    labels, scores, valid = screening.prepare_lists(labels, scores, mask)
    positions = sorting.exact_ranks(scores, valid)
    return function(labels, tf.cast(positions, scores.dtype), valid, topn, positions)


def has_relevant(labels, mask=None) -> tf.Tensor:
    """Bool ``[B]``: the list has a valid document with label > 0."""
    labels, _, valid = screening.prepare_lists(labels, tf.zeros_like(labels, tf.float32), mask)
    return screening.has_relevant(labels, valid)


def per_list_weights(weights, relevance, valid) -> tf.Tensor:
    """Per-item weights ``[B, L]`` -> per-list weights ``[B]``
    (:func:`tfr_extensions.metrics.per_list_weights` states the rule)."""
    zero = tf.zeros_like(weights)
    weights = tf.where(valid, weights, zero)
    relevance = tf.where(valid, tf.cast(relevance, weights.dtype), zero)
    has_weight = tf.reduce_sum(weights, axis=-1) > 0
    total_relevance = tf.reduce_sum(relevance, axis=-1)
    has_relevance = total_relevance > 0
    weighted = numerics.safe_divide(tf.reduce_sum(weights * relevance, axis=-1), total_relevance)
    counted = tf.cast(tf.logical_and(has_weight, has_relevance), weights.dtype)
    count = tf.reduce_sum(counted)
    mean = tf.where(count > 0, numerics.safe_divide(tf.reduce_sum(weighted * counted), count),
                    tf.ones_like(count))
    return tf.where(has_weight, tf.where(has_relevance, weighted, mean), tf.zeros_like(weighted))


def _relevance(metric: str, labels: tf.Tensor) -> tf.Tensor:
    """The relevance that weighs items into lists for ``metric`` (canonical name)."""
    labels = tf.maximum(labels, 0.0)
    if metric in ("ndcg", "nerr"):
        return tf.pow(2.0, labels) - 1.0
    return tf.cast(labels > 0, labels.dtype)


def _list_weights(metric: str, sample_weight, labels, valid) -> tf.Tensor:
    """Per-list weights ``[B]`` from a scalar, ``[B]``, ``[B, 1]`` or ``[B, L]`` weight."""
    rank = sample_weight.shape.rank
    if rank == 0:
        return tf.fill(tf.shape(labels)[:1], sample_weight)
    if rank == 1 or (rank == 2 and sample_weight.shape[1] == 1):
        return tf.reshape(sample_weight, [-1])
    if rank != 2:
        raise ValueError("`sample_weight` must be a scalar, [batch], [batch, 1] or "
                         f"[batch, list_size]; got shape {sample_weight.shape}.")
    weights = tf.broadcast_to(sample_weight, tf.shape(labels))
    return per_list_weights(weights, _relevance(metric, labels), valid)


def metric_values_and_weights(metric: str, y_true, y_pred, topn: Optional[int],
                              no_relevant: str, sample_weight=None):
    """What :class:`tfr_extensions.metrics.RankingMetric` averages: per-list values
    and weights ``[B]`` (lists with no valid document weigh 0; lists without a
    relevant document per ``no_relevant``; ``sample_weight`` per list or per item).
    ``y_true`` may be keras-rs's dict or ragged; ``metric`` a canonical name."""
    labels, scores, valid = screening.metric_inputs(y_true, y_pred)
    values = exact_metric(metric, labels, scores, topn)
    weights = tf.cast(tf.reduce_any(valid, axis=-1), values.dtype)
    if no_relevant != "zero":
        relevant = has_relevant(labels)
        if no_relevant == "exclude":
            weights *= tf.cast(relevant, values.dtype)
        else:
            values = tf.where(relevant, values, tf.ones_like(values))
    if sample_weight is not None:
        weights *= _list_weights(vocabulary.canonical_metric(metric),
                                 tf.cast(sample_weight, values.dtype), labels, valid)
    return values, weights


def to_numpy(values):
    """A tensor's values as NumPy."""
    return values.numpy()
