"""TensorFlow's ``run_over_lists`` (a namespace primitive): a function of ``[B, L]`` lists
padded to :func:`bucket_size` (zero gradient, no value changed), in a graph one XLA program per
bucket (its own, or traced into the caller's), eagerly op by op (no program held per shape).
Kept per framework by ``python benchmarks/loss_throughput.py --stack tf``: the twin-sigmoid
loss at 1.2-8.9x the broadcast ApproxNDCG on Keras 3's TensorFlow (graph and XLA, L = 32-512,
2-vCPU EPYC, ``docs/speed.md``); JAX and PyTorch compile it with their caller
(:mod:`tfr_extensions.keras_ops.list_programs`).
"""
import math

import tensorflow as tf

from tfr_extensions.ops import lists
from tfr_extensions.ops import sorting


def bucket_size(size):
    """The length lists of ``size`` documents are padded to: a multiple of ``lists.PAIR_BLOCK``
    (32) up to 128, then the smallest ``m * 2^e >= size``, ``m`` in 4..7 (four programs per
    doubling, at most 25% more documents).

    >>> [bucket_size(n) for n in (1, 32, 33, 100, 128, 129, 700, 1024, 1251)]
    [32, 32, 64, 128, 128, 160, 768, 1024, 1280]
    >>> int(bucket_size(tf.constant(1251)))  # a tensor (unknown static size) too
    1280
    """
    if isinstance(size, int):  # a static size: no graph ops
        step = max(1 << max(size.bit_length() - 3, 0), lists.PAIR_BLOCK)
        return -(-max(size, 1) // step) * step
    size = tf.maximum(tf.cast(size, tf.int32), 1)
    octave = tf.cast(tf.math.floor(tf.math.log(tf.cast(size, tf.float32)) / math.log(2.0)),
                     tf.int32)
    step = tf.maximum(tf.bitwise.left_shift(1, tf.maximum(octave - 2, 0)), lists.PAIR_BLOCK)
    return (size + step - 1) // step * step


def _program(function, statics, tie_seed, key_size, *tensors):
    """``function(*tensors, *statics)``, with ``tie_keys=`` from ``tie_seed`` unless it is None."""
    if tie_seed is None:
        return function(*tensors, *statics)
    return function(*tensors, *statics,
                    tie_keys=sorting.tie_key_draw(tensors[0], tie_seed, key_size))


#: ``_program`` as an XLA program of its own (one per function, shapes and Python values)
_COMPILED_PROGRAM = tf.function(_program, jit_compile=True, reduce_retracing=True,
                                autograph=False)


def run_over_lists(function, tensors, statics=(), tie_break: bool = False, seed=None):
    """``function(*tensors, *statics[, tie_keys=])`` over ``[B, L]`` lists (``tensors``, None
    allowed past the first) padded to :func:`bucket_size` (0, False) and compiled (module
    docstring); outputs of rank 2 are cut back to ``L``. ``tie_break``: ``tie_keys`` of
    ``seed`` (None: fresh, drawn here) for the unpadded lists, the padding's below them
    (:func:`sorting.tie_key_draw`; of the bucket where the length is unknown outside XLA)."""
    first = tensors[0]
    size = first.shape[1] if first.shape[1] is not None else tf.shape(first)[1]
    padding = bucket_size(size) - size
    padded = list(tensors) if isinstance(padding, int) and padding == 0 else [
        None if t is None else tf.pad(t, [[0, 0], [0, padding]]) for t in tensors]
    tie_seed = key_size = None
    if tie_break:
        tie_seed = sorting.tie_seed(seed)
        grown = padded[0].shape[1] is None or padded[0].shape[1] != first.shape[1]
        key_size = size if grown and (isinstance(size, int) or lists.compiling_with_xla()) else None
    run = (_program if lists.compiling_with_xla() or tf.executing_eagerly()
           else _COMPILED_PROGRAM)
    outputs = run(function, tuple(statics), tie_seed, key_size, *padded)
    if isinstance(outputs, (tuple, list)):
        return type(outputs)(out[:, :size] if out.shape.rank == 2 else out for out in outputs)
    return outputs[:, :size]
