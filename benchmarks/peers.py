"""The TF-Ranking peers of the benchmarks, on either stack.

Where TF-Ranking imports (tf215), :func:`peer_loss` is TF-Ranking's own Keras
loss and :func:`peer_elwc_dataset` its ``SimpleDatasetBuilder``. Where it does
not (tf221), each is a port of the same computation in the same TensorFlow ops,
so that every benchmark prints a ratio on both stacks:

* losses: ``tensorflow_ranking/python/losses_impl.py`` 0.5.5,
  ``ApproxNDCGLoss._compute_unreduced_loss_impl`` and ``SoftmaxLoss.precompute``
  / ``_compute_unreduced_loss_impl``. ``tests/test_benchmark_peers.py`` checks
  that each port gives TF-Ranking's values and gradients. The one difference:
  the ideal DCG sorts the labels with ``tf.sort`` where TF-Ranking shuffles
  ties, takes ``top_k`` and gathers (the same value, a little less work, so a
  port is if anything faster than TF-Ranking);
* the ELWC input path: ``tfr.data.build_ranking_dataset_with_parsing_fn`` as
  ``SimpleDatasetBuilder.build_train_dataset`` calls it (TFRecord reader,
  repeat, shuffle buffer 1000, batch, parse, prefetch), parsing with
  :func:`tfr_extensions.data.elwc.parse_elwc` (TF-Ranking's parser in ``tf.io``
  ops, checked against it in ``tests/test_compat.py``).
"""
from typing import Callable, Dict, Optional

import tensorflow as tf

from tfr_extensions import compat
from tfr_extensions.backend import keras
from tfr_extensions.data.elwc import elwc_feature_specs, parse_elwc
from tfr_extensions.ops.approx_ranks import approx_ranks

_EPSILON = 1e-10  # TF-Ranking's losses_impl._EPSILON


def _safe_gains(labels: tf.Tensor) -> tf.Tensor:
    """TF-Ranking's ``_safe_default_gain_fn``: ``(2^y - 1) / 2^max(y)``."""
    top = tf.reduce_max(labels, axis=-1, keepdims=True)
    return tf.pow(2.0, labels - top) - tf.pow(2.0, -top)


class PortedApproxNDCGLoss(keras.losses.Loss):
    """TF-Ranking's ``ApproxNDCGLoss`` (temperature 0.1 by default)."""

    def __init__(self, temperature: float = 0.1, name: str = "approx_ndcg_loss"):
        super().__init__(name=name)
        self._temperature = temperature

    def call(self, labels, logits):
        logits = logits / self._temperature
        mask = labels >= 0
        labels = tf.where(mask, labels, tf.zeros_like(labels))
        logits = tf.where(mask, logits, -1e3 * tf.ones_like(logits)
                          + tf.reduce_min(logits, axis=-1, keepdims=True))
        nonzero = tf.reduce_sum(labels, axis=1) > 0.0
        labels = tf.where(nonzero[:, None], labels, _EPSILON * tf.ones_like(labels))
        gains = _safe_gains(labels)
        dcg = tf.reduce_sum(gains / tf.math.log1p(approx_ranks(logits)), axis=-1)
        ideal_gains = _safe_gains(tf.sort(labels, axis=-1, direction="DESCENDING"))
        ranks = tf.cast(tf.range(tf.shape(labels)[1]) + 1, tf.float32)
        ideal = tf.reduce_sum(ideal_gains / tf.math.log1p(ranks), axis=-1)
        inverse_ideal = tf.where(ideal > 0.0, 1.0 / ideal, tf.zeros_like(ideal))
        return -dcg * inverse_ideal * tf.cast(nonzero, tf.float32)


class PortedSoftmaxLoss(keras.losses.Loss):
    """TF-Ranking's ``SoftmaxLoss`` (ListNet's softmax cross entropy)."""

    def __init__(self, name: str = "softmax_loss"):
        super().__init__(name=name)

    def call(self, labels, logits):
        mask = labels >= 0
        labels = tf.where(mask, labels, tf.zeros_like(labels))
        logits = tf.where(mask, logits, tf.math.log(_EPSILON) * tf.ones_like(logits))
        label_sum = tf.reduce_sum(labels, axis=1, keepdims=True)
        nonzero = label_sum[:, 0] > 0.0
        padded = tf.where(nonzero[:, None], labels, _EPSILON * tf.ones_like(labels))
        padded = tf.where(mask, padded, tf.zeros_like(padded))
        targets = tf.math.divide_no_nan(padded, tf.reduce_sum(padded, axis=1, keepdims=True))
        losses = tf.nn.softmax_cross_entropy_with_logits(targets, logits)
        return losses * label_sum[:, 0]


PORTS: Dict[str, Callable[[], keras.losses.Loss]] = {
    "ApproxNDCG": PortedApproxNDCGLoss,
    "Softmax": PortedSoftmaxLoss,
}
_TF_RANKING_NAMES = {"ApproxNDCG": "ApproxNDCGLoss", "Softmax": "SoftmaxLoss"}


def peer_source() -> str:
    """Where the peers come from here, for the benchmarks' first line."""
    tfr = compat.tf_ranking()
    return (f"TF-Ranking {tfr.__version__}" if tfr is not None
            else "ports of TF-Ranking 0.5.5's computation (TF-Ranking does not import here)")


def peer_loss(name: str, ported: bool = False) -> keras.losses.Loss:
    """TF-Ranking's loss ``name`` (``"ApproxNDCG"``, ``"Softmax"``), or its port
    where TF-Ranking does not import (or with ``ported=True``)."""
    tfr = compat.tf_ranking()
    if ported or tfr is None:
        return PORTS[name]()
    return getattr(tfr.keras.losses, _TF_RANKING_NAMES[name])()


def peer_elwc_dataset(elwc_path: str, num_features: int, batch_size: int,
                      list_size: Optional[int], mask_feature_name: str = "mask",
                      ported: bool = False) -> tf.data.Dataset:
    """Training batches ``({"features", mask_feature_name}, labels)`` from an ELWC file of
    :func:`tfr_extensions.data.to_elwc`: TF-Ranking's ``SimpleDatasetBuilder``,
    or its port where TF-Ranking does not import (or with ``ported=True``)."""
    context_spec, example_spec = elwc_feature_specs(num_features, qid_name=None)
    label_name = "relevance"
    tfr = compat.tf_ranking()
    if tfr is not None and not ported:
        label_spec = (label_name, example_spec.pop(label_name))
        hparams = tfr.keras.pipeline.DatasetHparams(
            train_input_pattern=elwc_path, valid_input_pattern=elwc_path,
            train_batch_size=batch_size, valid_batch_size=batch_size, list_size=list_size)
        return tfr.keras.pipeline.SimpleDatasetBuilder(
            context_spec, example_spec, mask_feature_name, label_spec,
            hparams).build_train_dataset()

    def parse(serialized):
        features = parse_elwc(serialized, context_spec, example_spec,
                              mask_feature_name=mask_feature_name, list_size=list_size)
        labels = tf.squeeze(features.pop(label_name), axis=-1)
        return features, labels

    dataset = tf.data.Dataset.list_files(elwc_path, shuffle=True).interleave(
        tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.repeat().shuffle(1000).batch(batch_size, drop_remainder=True)
    return dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
