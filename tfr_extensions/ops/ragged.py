"""Ragged ``[batch, (list_size)]`` labels, scores, masks and weights padded as TF-Ranking pads
them: the namespace's ``ragged`` of :mod:`tfr_extensions.ops.screening` (TensorFlow only).

>>> labels = tf.ragged.constant([[1.0, 0.0], [2.0]])
>>> dense, scores, _, mask = ragged_to_dense(labels, tf.ragged.constant([[0.5, 0.25], [0.75]]))
>>> dense.numpy().tolist(), scores.numpy().tolist(), mask.numpy().tolist()
([[1.0, 0.0], [2.0, -1.0]], [[0.5, 0.25], [0.75, -1000000.0]], [[True, True], [True, False]])
"""
from typing import Optional, Tuple

import tensorflow as tf

from tfr_extensions.ops.conventions import PADDING_LABEL
from tfr_extensions.ops.screening import PADDING_PREDICTION, PADDING_WEIGHT


def ragged_to_dense(labels: tf.RaggedTensor, predictions: Optional[tf.RaggedTensor],
                    weights=None) -> Tuple[tf.Tensor, Optional[tf.Tensor], object, tf.Tensor]:
    """Pads as TF-Ranking's ``utils.ragged_to_dense``: ragged ``[batch, (list_size)]`` labels
    with -1, predictions (same row lengths, or None) with -1e6, ragged per-item weights with 0
    (dense ones and None pass). Returns ``(labels, predictions, weights, mask)``, dense
    ``[batch, list_size]``, ``mask`` bool, True for the entries that were present."""
    if not isinstance(labels, tf.RaggedTensor):
        raise TypeError(f"`labels` must be a tf.RaggedTensor; got {type(labels).__name__}.")
    if predictions is not None and not isinstance(predictions, tf.RaggedTensor):
        raise TypeError("`predictions` must be a tf.RaggedTensor like `labels`; got "
                        f"{type(predictions).__name__}.")
    mask = tf.cast(tf.ones_like(labels).to_tensor(0.0), tf.bool)
    labels = labels.to_tensor(PADDING_LABEL)
    if predictions is not None:
        predictions = predictions.to_tensor(PADDING_PREDICTION)
    return labels, predictions, _dense(weights, PADDING_WEIGHT), mask


def _dense(x, fill):
    """``x`` padded with ``fill`` if it is ragged, else ``x``."""
    return x.to_tensor(fill) if isinstance(x, tf.RaggedTensor) else x


def dense_labels_and_mask(labels, mask):
    """keras-rs's ``labels`` and ``mask`` with ragged ones padded (label -1, mask False)."""
    return _dense(labels, PADDING_LABEL), _dense(mask, False)


def dense_lists(labels, scores, mask):
    """A loss function's inputs, ragged ones padded (:func:`ragged_to_dense`)."""
    if isinstance(labels, tf.RaggedTensor) or isinstance(scores, tf.RaggedTensor):
        labels, scores, _, _ = ragged_to_dense(labels, scores)
        mask = _dense(mask, False)
    return labels, scores, mask


def dense_loss_inputs(y_true, y_pred, sample_weight, ragged: bool):
    """A Keras loss class's inputs, with ``ragged`` (or ragged labels) padded (weights too)."""
    if ragged or isinstance(y_true, tf.RaggedTensor):
        y_true, y_pred, sample_weight, _ = ragged_to_dense(y_true, y_pred, sample_weight)
    return y_true, y_pred, sample_weight


def dense_metric_inputs(y_true, y_pred):
    """A Keras metric's inputs: ragged labels padded with -1, ragged scores with 0."""
    return _dense(y_true, PADDING_LABEL), _dense(y_pred, 0.0)
