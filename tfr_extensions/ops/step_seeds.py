"""Seeds that change at every call, in TensorFlow: a seeded loss's or model's step counter and
each call's stateless seed (:class:`tfr_extensions.losses.base.StepSeeded`; JAX and PyTorch:
:mod:`tfr_extensions.keras_ops.random`).

>>> counter = step_counter()
>>> first, second = seed_at_step([1, 2], 0, counter), seed_at_step([1, 2], 0, counter)
>>> bool((first.numpy() != second.numpy()).any()), int(counter.numpy())
(True, 2)
"""
import tensorflow as tf

from tfr_extensions import backend
from tfr_extensions.arrays import tie_keys
from tfr_extensions.backend import keras
from tfr_extensions.ops import lists
from tfr_extensions.ops.conventions import SEED_STEP


def step_counter(layer=None):
    """The call counter, 0 at first: a non-trainable int64 weight of ``layer`` (saved with
    the model's weights) or a ``tf.Variable`` (a loss), updated by the first replica only."""
    if isinstance(layer, keras.layers.Layer):
        replicas = ({"aggregation": "only_first_replica"} if backend.IS_KERAS_3 else
                    {"synchronization": tf.VariableSynchronization.ON_WRITE,
                     "aggregation": tf.VariableAggregation.ONLY_FIRST_REPLICA})
        return layer.add_weight(name=SEED_STEP, shape=(), dtype="int64",
                                initializer="zeros", trainable=False, **replicas)
    with tf.init_scope():
        return tf.Variable(0, dtype=tf.int64, trainable=False, name=SEED_STEP,
                           synchronization=tf.VariableSynchronization.ON_WRITE,
                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)


def seed_at_step(seed, salt: int, counter) -> tf.Tensor:
    """This call's stateless seed ``int32 [2]``, ``[stream_seed(seed, salt), step]`` (the counter
    before this call, which it advances), as Keras's ``SeedGenerator`` on JAX and PyTorch; a
    seed tensor folds the step in, and each of several replicas its replica id."""
    step = counter.assign_add(1) - 1
    if tf.is_tensor(seed):
        folded = lists.fold_in(lists.seed_tensor(seed, salt), step)
    else:
        folded = tf.stack([tf.constant(tie_keys.stream_seed(seed, salt), tf.int32),
                           tf.cast(tf.math.floormod(step, tie_keys.SEED_MODULUS), tf.int32)])
    replica = tf.distribute.get_replica_context()
    if replica is not None and replica.num_replicas_in_sync > 1:
        folded = lists.fold_in(folded, replica.replica_id_in_sync_group)
    return folded


#: a random stateless seed, for ``seed=None`` (:func:`tfr_extensions.ops.lists.fresh_seed`)
fresh_seed = lists.fresh_seed
