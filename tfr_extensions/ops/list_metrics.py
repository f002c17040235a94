r"""Exact metrics of scored lists and the per-list values of the Keras metric: the
functions behind :mod:`tfr_extensions.metrics`.

>>> round(float(exact_metric("ndcg", [[0., 1., 2.]], [[3., 2., 1.]])[0]), 4)
0.5869
"""
from typing import Optional

import numpy as np

from tfr_extensions import arrays
from tfr_extensions.ops import vocabulary
from tfr_extensions.ops.rank_metrics import exact_metric  # noqa: F401  (a function of this module)


def has_relevant(labels, mask=None):
    """Bool ``[B]``: the list has a valid document with label > 0.

    >>> [bool(v) for v in has_relevant([[0., 1.], [0., -1.]])]
    [True, False]
    """
    xp = arrays.namespace()
    labels = xp.convert_to_tensor(labels)
    labels, _, valid = xp.screening.prepare_lists(
        labels, xp.zeros_like(labels, dtype="float32"), mask)
    return xp.screening.has_relevant(labels, valid)


def per_list_weights(weights, relevance, valid):
    """Per-item ``[B, L]`` -> per-list weights ``[B]`` (:func:`metrics.per_list_weights`)."""
    xp = arrays.namespace()
    weights, valid = xp.convert_to_tensor(weights), xp.convert_to_tensor(valid)
    zero = xp.zeros_like(weights)
    weights = xp.where(valid, weights, zero)
    relevance = xp.where(valid, xp.cast(relevance, weights.dtype), zero)
    has_weight = xp.sum(weights, axis=-1) > 0
    total_relevance = xp.sum(relevance, axis=-1)
    has_relevance = total_relevance > 0
    weighted = xp.safe_divide(xp.sum(weights * relevance, axis=-1), total_relevance)
    counted = xp.cast(xp.logical_and(has_weight, has_relevance), weights.dtype)
    count = xp.sum(counted)
    mean = xp.where(count > 0, xp.safe_divide(xp.sum(weighted * counted), count),
                    xp.ones_like(count))
    return xp.where(has_weight, xp.where(has_relevance, weighted, mean), xp.zeros_like(weighted))


def _list_weights(metric: str, sample_weight, labels, valid):
    """Per-list weights ``[B]`` from a scalar, ``[B]``, ``[B, 1]`` or ``[B, L]`` weight."""
    xp = arrays.namespace()
    rank = len(sample_weight.shape)
    if rank == 0:
        return xp.broadcast_to(sample_weight, xp.shape(labels)[:1])
    if rank == 1 or (rank == 2 and sample_weight.shape[1] == 1):
        return xp.reshape(sample_weight, (-1,))
    if rank != 2:
        raise ValueError("`sample_weight` must be a scalar, [batch], [batch, 1] or "
                         f"[batch, list_size]; got shape {tuple(sample_weight.shape)}.")
    weights = xp.broadcast_to(sample_weight, xp.shape(labels))
    labels = xp.maximum(labels, 0.0)  # the relevance that weighs items into lists:
    relevance = (xp.lists.gains(labels) if metric in ("ndcg", "nerr")
                 else xp.cast(labels > 0, labels.dtype))
    return per_list_weights(weights, relevance, valid)


def metric_values_and_weights(metric: str, y_true, y_pred, topn: Optional[int],
                              no_relevant: str, sample_weight=None):
    """What :class:`tfr_extensions.metrics.RankingMetric` averages: per-list values and weights
    ``[B]`` (0 for empty lists; lists without a relevant document per ``no_relevant``;
    ``sample_weight`` per list or item; ``y_true`` as :func:`screening.metric_inputs` takes)."""
    xp = arrays.namespace()
    labels, scores, valid = xp.screening.metric_inputs(y_true, y_pred)
    values = exact_metric(metric, labels, scores, topn)
    dtype = xp.dtype_name(values)
    weights = xp.cast(xp.any(valid, axis=-1), dtype)
    if no_relevant != "zero":
        relevant = xp.screening.has_relevant(xp.where(valid, labels, xp.zeros_like(labels)),
                                             valid)
        if no_relevant == "exclude":
            weights = weights * xp.cast(relevant, dtype)
        else:
            values = xp.where(relevant, values, xp.ones_like(values))
    if sample_weight is not None:
        weights = weights * _list_weights(
            vocabulary.canonical_metric(metric),
            xp.cast(xp.convert_to_tensor(sample_weight), dtype), labels, valid)
    return values, weights


def to_numpy(values) -> np.ndarray:
    """A tensor's values as NumPy."""
    return np.asarray(arrays.namespace().convert_to_numpy(values))
