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

Bad input (the policy of every loss, applied here in :meth:`RankingLoss.call`):

* **Padding** (label < 0, or NaN): ignored whatever its score, NaN and
  infinite scores included; its gradient is exactly 0.
* **A non-finite score** (NaN, +inf or -inf) of a valid document, or a valid
  label above :attr:`RankingLoss.max_label` (31, :data:`~tfr_extensions.ops.lists.MAX_LABEL`,
  +inf included): that list's loss is NaN, so the reduced loss is NaN (Keras's
  ``TerminateOnNaN`` stops, whatever the list's weight or sample weight), and
  the list's gradient is exactly 0: the other lists of the batch train as if
  it were absent, and no NaN reaches the gradient from the loss (a NaN that the
  model itself produced may still reach its own weights through the chain rule).
  A loss is never finite over a non-finite gradient.
* **A batch of 0 lists** (``[0, L]``, also ``[0, 0]``) or lists of 0
  documents: loss 0 and a zero-size (resp. zero) gradient.
* **Labels**: graded relevance, fractional ones included (gain ``2^y - 1``,
  so 2.5 has gain ``2^2.5 - 1``); metrics with binary relevance count
  ``label > 0`` as relevant.

The screening costs O(B L) element-wise operations and no host sync.
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


def screen_lists(labels: tf.Tensor, scores: tf.Tensor, max_label: float):
    """The bad-input policy of the module docstring, as tensors.

    Args:
      labels, scores: ``[batch, list_size]`` in the compute dtype.
      max_label: the largest label a valid document may have.

    Returns:
      ``(labels, scores, mask, broken)``: ``mask`` bool ``[batch, list_size]``,
      True for valid documents (label >= 0; NaN labels are padding); labels 0
      at padded documents and capped at ``max_label``; scores with every NaN
      or infinite entry set to 0 by ``tf.where`` (so its gradient is exactly 0);
      ``broken`` bool ``[batch]``, the lists with a valid document whose score
      is not finite or whose label exceeds ``max_label``. What a loss computes
      for a broken list is discarded, but it is finite: no NaN or inf reaches
      a loss, so none reaches another list through a batch-wide reduction.

    Only the per-element selects feed the loss (so that XLA, which fuses them
    into the O(L^2) kernels that read the scores, repeats as little as
    possible there); ``broken`` is one reduction beside them.
    """
    lists.check_list_shapes(labels, scores)
    mask = tf.greater_equal(labels, 0.0)
    finite = tf.math.is_finite(scores)
    zero = tf.constant(0, scores.dtype)
    bad = tf.logical_and(mask, tf.logical_not(
        tf.logical_and(finite, tf.less_equal(labels, max_label))))
    broken = tf.reduce_any(bad, axis=-1)
    labels = tf.where(mask, tf.minimum(labels, max_label), zero)
    return labels, tf.where(finite, scores, zero), mask, broken


class RankingLoss(tf.keras.losses.Loss):
    """Base class: subclasses implement :meth:`per_list` and extend ``get_config``.

    :meth:`call` applies the bad-input policy of the module docstring before
    :meth:`per_list` sees the lists: a list with a non-finite valid score or
    an out-of-range label gets the value NaN and zero gradient; padded
    documents are ignored and get zero gradient.
    """

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
          labels: ``[batch, list_size]`` in the compute dtype, padded labels = 0;
            valid labels are in ``[0, max_label]``.
          scores: ``[batch, list_size]`` in the compute dtype, finite; padded
            scores = 0.
          mask: bool ``[batch, list_size]``, True for valid documents.
        """
        raise NotImplementedError

    @property
    def max_label(self) -> float:
        """The largest valid label this loss accepts (:data:`lists.MAX_LABEL`);
        a list with a larger one gets the loss NaN."""
        return lists.MAX_LABEL

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
        """Per-list weighted losses ``[batch, 1]``, NaN for broken lists."""
        scores = tf.convert_to_tensor(y_pred)
        dtype = lists.compute_dtype(scores)
        labels, scores, mask, broken = screen_lists(
            tf.cast(tf.convert_to_tensor(y_true), dtype), tf.cast(scores, dtype), self.max_label)
        losses, weights = self.per_list(labels, scores, mask)
        values = tf.where(broken, tf.constant(float("nan"), dtype), losses * weights)
        return values[:, None]

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
