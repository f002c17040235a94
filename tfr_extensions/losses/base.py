"""The Keras base class every ``tfrx`` loss derives from.

Conventions shared by all losses (written once here, not in each class):

* ``y_true`` = labels ``[batch, list_size]``, a label < 0 marks padding;
  ``y_pred`` = scores ``[batch, list_size]``. With ``ragged=True`` both may be
  ``tf.RaggedTensor`` and are padded as TF-Ranking does (label -1).
* A subclass implements :meth:`RankingLoss.per_list`, returning per-list losses
  ``[batch]`` and per-list weights ``[batch]``. Lists without relevant documents
  (or that cannot be ranked at all) get weight 0, a finite loss and zero gradient.
* ``sample_weight``: ``[batch, 1]`` per list, or ``[batch, list_size]`` per item,
  turned into a per-list weight by TF-Ranking's listwise rule (the
  label-weighted mean of the item weights).
* Reduction is Keras's (``SUM_OVER_BATCH_SIZE`` by default: the weighted sum
  over lists divided by the batch size), including distribution scaling.
* Computation is float32 (float64 for float64 scores), also under
  ``mixed_float16``; the returned loss has that dtype.
* Randomized losses draw from stateless ops; with a fixed ``seed`` they fold a
  per-instance call counter into it, so each training step sees fresh samples
  and two runs with one seed are identical.
"""
from typing import Any, Dict, Optional, Tuple

import tensorflow as tf
from tfr_extensions import compat
from tfr_extensions.ops import lists


def listwise_sample_weights(labels: tf.Tensor, sample_weight) -> tf.Tensor:
    """Per-list weights ``[batch, 1]`` from per-list or per-item sample weights.

    Per-item weights follow TF-Ranking's ``_ListwiseLoss``: the mean of the item
    weights weighted by the (valid, non-negative) labels.
    """
    weights = tf.cast(tf.convert_to_tensor(sample_weight), labels.dtype)
    if weights.shape.rank == 0:
        return tf.fill([tf.shape(labels)[0], 1], weights)
    if weights.shape.rank == 1:
        return weights[:, None]
    if weights.shape.rank == 2 and weights.shape[1] == 1:
        return weights
    relevance = tf.where(labels >= 0, labels, tf.constant(0, labels.dtype))
    total = tf.reduce_sum(relevance, axis=1, keepdims=True)
    weighted = tf.reduce_sum(weights * relevance, axis=1, keepdims=True)
    return tf.where(total > 0, weighted / tf.where(total > 0, total, tf.ones_like(total)),
                    tf.constant(0, total.dtype))


class RankingLoss(tf.keras.losses.Loss):
    """Base class: subclasses implement :meth:`per_list` and extend ``get_config``."""

    #: registry keys of presets -> constructor kwargs; filled by subclasses
    PRESETS: Dict[str, Dict[str, Any]] = {}

    def __init__(self, reduction: str = tf.keras.losses.Reduction.AUTO,
                 name: Optional[str] = None, ragged: bool = False):
        super().__init__(reduction=reduction, name=name)
        self._ragged = bool(ragged)

    def per_list(self, labels: tf.Tensor, scores: tf.Tensor,
                 mask: tf.Tensor) -> Tuple[tf.Tensor, tf.Tensor]:
        """Per-list ``(losses, weights)``, both ``[batch]``.

        Args:
          labels: ``[batch, list_size]`` in the compute dtype, padded labels = 0.
          scores: ``[batch, list_size]`` in the compute dtype.
          mask: bool ``[batch, list_size]``, True for valid documents.
        """
        raise NotImplementedError

    def _to_dense(self, y_true, y_pred, sample_weight):
        if self._ragged or isinstance(y_true, tf.RaggedTensor):
            y_true, y_pred, sample_weight, _ = compat.ragged_to_dense(
                y_true, y_pred, sample_weight)
        return y_true, y_pred, sample_weight

    def __call__(self, y_true, y_pred, sample_weight=None):
        y_true, y_pred, sample_weight = self._to_dense(y_true, y_pred, sample_weight)
        y_pred = tf.convert_to_tensor(y_pred)
        dtype = lists.compute_dtype(y_pred)
        y_pred = tf.cast(y_pred, dtype)
        y_true = tf.cast(tf.convert_to_tensor(y_true), dtype)
        if sample_weight is not None:
            sample_weight = listwise_sample_weights(y_true, sample_weight)
        return super().__call__(y_true, y_pred, sample_weight)

    def call(self, y_true, y_pred):
        labels, scores, mask = lists.prepare_lists(y_true, y_pred)
        losses, weights = self.per_list(labels, scores, mask)
        return (losses * weights)[:, None]

    def get_config(self) -> Dict[str, Any]:
        config = super().get_config()
        config["ragged"] = self._ragged
        return config


class StepSeeded:
    """Mixin for randomized losses: a seed that changes at every call.

    With ``seed`` set, call ``k`` of this loss instance uses
    ``fold_in(seed, k)``; the counter is a non-trainable variable of the loss,
    so it works inside ``tf.function``, XLA and distribution strategies.
    With ``seed=None`` every call draws a fresh seed.
    """

    def _init_seed(self, seed: lists.Seed, salt: int = 0) -> None:
        if seed is not None and not isinstance(seed, int):
            seed = [int(s) for s in seed]
        self._seed = seed
        self._seed_salt = salt
        self._calls = None
        if seed is not None:
            with tf.init_scope():
                self._calls = tf.Variable(
                    0, dtype=tf.int64, trainable=False, name="seed_step",
                    synchronization=tf.VariableSynchronization.ON_WRITE,
                    aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    def next_seed(self) -> tf.Tensor:
        """The stateless seed ``int32 [2]`` for this call."""
        if self._seed is None:
            return lists.fresh_seed()
        step = self._calls.assign_add(1) - 1
        return lists.fold_in(lists.seed_tensor(self._seed, self._seed_salt), step)
