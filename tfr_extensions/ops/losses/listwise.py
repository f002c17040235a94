"""The TensorFlow bodies of :mod:`tfr_extensions.losses.listwise` (the math, the
public functions and the Keras classes are there); their ``keras.ops`` twins are
:mod:`tfr_extensions.keras_ops.losses.listwise`."""
import tensorflow as tf

from tfr_extensions.ops.approx_ranks import approx_ranks
from tfr_extensions.ops.losses.pairwise import clip_scores
from tfr_extensions.ops import lists
from tfr_extensions.ops import numerics
from tfr_extensions.ops import rank_metrics


def approx_ndcg_loss(labels, scores, *, mask=None, temperature=0.1):
    """The TensorFlow body of :func:`tfr_extensions.losses.approx_ndcg_loss` (the math,
    the arguments and a doctest are there): inputs screened, options checked; the smooth
    ranks are :func:`tfr_extensions.ops.approx_ranks.approx_ranks`."""
    ranks = approx_ranks(scores, mask, temperature)
    dcg = tf.reduce_sum(lists.gains(labels) * lists.log2_discount(ranks), axis=-1)
    ndcg = numerics.safe_divide(dcg, rank_metrics.ideal_dcg(labels, mask))
    return -ndcg, tf.cast(lists.has_relevant(labels, mask), scores.dtype)


def listnet_loss(labels, scores, *, mask=None, temperature=1.0):
    """The TensorFlow body of :func:`tfr_extensions.losses.listnet_loss` (the math,
    the arguments and a doctest are there): inputs screened, options checked."""
    logits = clip_scores(clip_scores(scores) / temperature)  # (s / T may overflow)
    floor = tf.constant(-scores.dtype.max / 4.0, scores.dtype)  # the lowest clipped logit
    top = tf.reduce_max(tf.where(mask, logits, tf.fill(tf.shape(logits), floor)), axis=-1,
                        keepdims=True)
    top = tf.stop_gradient(tf.maximum(top, floor))  # (a list of 0 documents: floor)
    shifted = tf.where(mask, logits - top, tf.zeros_like(logits))  # in [-max/2, 0]
    total = tf.reduce_sum(tf.where(mask, tf.exp(shifted), tf.zeros_like(shifted)), axis=-1,
                          keepdims=True)  # >= 1 where the list has a valid document
    log_total = tf.math.log(tf.where(total > 0, total, tf.ones_like(total)))
    label_sum = tf.reduce_sum(labels, axis=-1)  # padded labels are 0
    targets = numerics.safe_divide(labels, label_sum[:, None])
    # -log softmax = log(total) - (x - top), exact where x - top is (tied scores of 1e30)
    terms = tf.where(mask, targets * (log_total - shifted), tf.zeros_like(logits))
    return tf.reduce_sum(terms, axis=-1), label_sum


