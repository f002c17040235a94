"""The TensorFlow body of :mod:`tfr_extensions.losses.twin_sigmoid` (the math, the
public function and the Keras class are there; the ``keras.ops`` twin is
:mod:`tfr_extensions.keras_ops.losses.twin_sigmoid`)."""
import tensorflow as tf

from tfr_extensions.ops import screening
from tfr_extensions.ops.twin_sigmoid import twin_sigmoid_metric


def twin_sigmoid_loss(labels, scores, *, mask=None, metric="ndcg", topn=None, gradient="type1",
                      alpha_b=1.0, tie_break=True, seed=None):
    """The TensorFlow body of :func:`tfr_extensions.losses.twin_sigmoid_loss` (the math,
    the arguments and a doctest are there): inputs screened, options checked."""
    value = twin_sigmoid_metric(metric, labels, scores, mask, topn, gradient, alpha_b,
                                tie_break, seed if tie_break else None)
    return -value, tf.cast(screening.has_relevant(labels, mask), scores.dtype)
