"""The ``keras.ops`` bodies of the losses: the twin of the TensorFlow bodies in
:mod:`tfr_extensions.ops.losses`, module by module and name by name
(``twin_sigmoid.py::twin_sigmoid_loss`` here and there).

A body takes labels and scores already through the bad-input screening
(:mod:`tfr_extensions.keras_ops.screening`: compute dtype, labels 0 at padding, finite
scores), ``mask`` a bool tensor and every option checked, and returns ``(losses,
weights)`` ``[batch]`` each, or ``(losses, weights, aux)``. Each loss's spec
(:class:`tfr_extensions.losses.base.LossSpec`) names its two bodies; on Keras 3's JAX
and PyTorch backends the public functions and the Keras classes compute with these.
"""
