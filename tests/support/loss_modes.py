"""Runs a loss and its gradient in graph mode, under XLA and on float16 scores,
for the tests that compare the three."""
import tensorflow as tf


def value_and_grad(loss, labels, scores, sample_weight=None):
    """``(loss value, d loss / d scores)``."""
    scores = tf.convert_to_tensor(scores)
    with tf.GradientTape() as tape:
        tape.watch(scores)
        value = loss(labels, scores, sample_weight=sample_weight)
    return value, tape.gradient(value, scores)


def graph_xla_and_half(loss, labels, scores):
    """:func:`value_and_grad` three ways on the same float16-representable
    scores: graph mode and XLA on them in float32, and graph mode on float16."""
    half = tf.cast(scores, tf.float16)

    def run(s):
        return value_and_grad(loss, labels, s)

    single = tf.cast(half, tf.float32)
    return tf.function(run)(single), tf.function(run, jit_compile=True)(single), tf.function(run)(half)
