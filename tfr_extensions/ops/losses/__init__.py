"""The TensorFlow bodies of the losses, one module per family (the same modules and names
as their ``keras.ops`` twins in :mod:`tfr_extensions.keras_ops.losses`).

A body takes labels and scores already through the bad-input screening
(:mod:`tfr_extensions.ops.screening`: compute dtype, labels 0 at padding, finite
scores), ``mask`` a bool tensor and every option checked, and returns ``(losses,
weights)`` ``[batch]`` each, or ``(losses, weights, aux)``. The public functions, their
specs (which name each body) and the Keras classes are :mod:`tfr_extensions.losses`.
"""
