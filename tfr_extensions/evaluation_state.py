"""The checkpointable state of :class:`tfr_extensions.evaluation.BestEpochCallback`,
for TensorFlow checkpoints (``tf.train.Checkpoint``): the one part of the
evaluation protocol that is TensorFlow by nature. Other backends checkpoint the
callback's :meth:`~tfr_extensions.evaluation.BestEpochCallback.snapshot`.
"""
from typing import Sequence

import numpy as np
import tensorflow as tf


class BestEpochState(tf.Module):
    """A :class:`~tfr_extensions.evaluation.BestEpochCallback`'s state as variables,
    so that a checkpoint can hold it.

    ``num_epochs`` values are recorded, in ``values[:num_epochs]`` (NaN beyond);
    ``best_epoch`` is 1-based (0: none yet);
    ``best_weights`` are the scorer's weights of that epoch. ``capacity`` bounds
    the number of epochs.
    """

    def __init__(self, weights: Sequence[np.ndarray], capacity: int):
        super().__init__(name="best_epoch_state")
        self.capacity = int(capacity)
        self.num_epochs = tf.Variable(0, dtype=tf.int64, trainable=False, name="num_epochs")
        self.best_epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="best_epoch")
        self.best_value = tf.Variable(-np.inf, dtype=tf.float64, trainable=False,
                                      name="best_value")
        self.values = tf.Variable(np.full([self.capacity], np.nan), dtype=tf.float64,
                                  trainable=False, name="values")
        self.best_weights = [tf.Variable(w, trainable=False, name=f"best_weight_{i}")
                             for i, w in enumerate(weights)]
