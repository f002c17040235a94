r"""Exact metrics of scored lists and the per-list values of the Keras metric, in
``keras.ops``: the twin of :mod:`tfr_extensions.ops.list_metrics` (the same
functions), behind :mod:`tfr_extensions.metrics` on Keras 3's JAX and PyTorch
backends.

>>> from keras import ops
>>> labels, scores = ops.array([[0., 1., 2.]]), ops.array([[3., 2., 1.]])
>>> round(float(exact_metric("ndcg", labels, scores)[0]), 4)
0.5869
"""
from typing import Optional

import numpy as np
from keras import ops

from tfr_extensions.keras_ops import lists
from tfr_extensions.keras_ops import numerics
from tfr_extensions.keras_ops import screening
from tfr_extensions.keras_ops.rank_metrics import exact_metric  # noqa: F401  (the twin's name)
from tfr_extensions.ops import vocabulary


def has_relevant(labels, mask=None):
    """Bool ``[B]``: the list has a valid document with label > 0."""
    labels = ops.convert_to_tensor(labels)
    labels, _, valid = screening.prepare_lists(labels, ops.zeros_like(labels, dtype="float32"),
                                               mask)
    return screening.has_relevant(labels, valid)


def per_list_weights(weights, relevance, valid):
    """Per-item weights ``[B, L]`` -> per-list weights ``[B]``
    (:func:`tfr_extensions.metrics.per_list_weights` states the rule)."""
    weights, valid = ops.convert_to_tensor(weights), ops.convert_to_tensor(valid)
    zero = ops.zeros_like(weights)
    weights = ops.where(valid, weights, zero)
    relevance = ops.where(valid, ops.cast(relevance, weights.dtype), zero)
    has_weight = ops.sum(weights, axis=-1) > 0
    total_relevance = ops.sum(relevance, axis=-1)
    has_relevance = total_relevance > 0
    weighted = numerics.safe_divide(ops.sum(weights * relevance, axis=-1), total_relevance)
    counted = ops.cast(ops.logical_and(has_weight, has_relevance), weights.dtype)
    count = ops.sum(counted)
    mean = ops.where(count > 0, numerics.safe_divide(ops.sum(weighted * counted), count),
                     ops.ones_like(count))
    return ops.where(has_weight, ops.where(has_relevance, weighted, mean),
                     ops.zeros_like(weighted))


def _relevance(metric: str, labels):
    """The relevance that weighs items into lists for ``metric`` (canonical name)."""
    labels = ops.maximum(labels, 0.0)
    if metric in ("ndcg", "nerr"):
        return ops.power(2.0, labels) - 1.0
    return ops.cast(labels > 0, labels.dtype)


def _list_weights(metric: str, sample_weight, labels, valid):
    """Per-list weights ``[B]`` from a scalar, ``[B]``, ``[B, 1]`` or ``[B, L]`` weight."""
    rank = len(sample_weight.shape)
    if rank == 0:
        return ops.ones((ops.shape(labels)[0],), dtype=sample_weight.dtype) * sample_weight
    if rank == 1 or (rank == 2 and sample_weight.shape[1] == 1):
        return ops.reshape(sample_weight, (-1,))
    if rank != 2:
        raise ValueError("`sample_weight` must be a scalar, [batch], [batch, 1] or "
                         f"[batch, list_size]; got shape {tuple(sample_weight.shape)}.")
    weights = ops.broadcast_to(sample_weight, ops.shape(labels))
    return per_list_weights(weights, _relevance(metric, labels), valid)


def metric_values_and_weights(metric: str, y_true, y_pred, topn: Optional[int],
                              no_relevant: str, sample_weight=None):
    """What :class:`tfr_extensions.metrics.RankingMetric` averages: per-list values
    and weights ``[B]``, as :func:`tfr_extensions.ops.list_metrics.metric_values_and_weights`."""
    labels, scores, valid = screening.metric_inputs(y_true, y_pred)
    values = exact_metric(metric, labels, scores, topn)
    dtype = lists.dtype_name(values)
    weights = ops.cast(ops.any(valid, axis=-1), dtype)
    if no_relevant != "zero":
        relevant = screening.has_relevant(ops.where(valid, labels, ops.zeros_like(labels)), valid)
        if no_relevant == "exclude":
            weights = weights * ops.cast(relevant, dtype)
        else:
            values = ops.where(relevant, values, ops.ones_like(values))
    if sample_weight is not None:
        weights = weights * _list_weights(
            vocabulary.canonical_metric(metric),
            ops.cast(ops.convert_to_tensor(sample_weight), dtype), labels, valid)
    return values, weights


def to_numpy(values) -> np.ndarray:
    """A tensor's values as NumPy."""
    return np.asarray(ops.convert_to_numpy(values))
