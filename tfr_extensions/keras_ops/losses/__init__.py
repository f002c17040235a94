"""The ``keras.ops`` bodies of the losses: the twin of the TensorFlow bodies in
:mod:`tfr_extensions.losses`, module by module and name by name
(``losses/twin_sigmoid.py::twin_sigmoid_loss`` here and there).

A body takes what the loss's spec
(:meth:`tfr_extensions.losses.base.LossSpec.compute`) hands the TensorFlow body:
labels and scores already screened by the bad-input policy (compute dtype,
labels 0 at padding, finite scores), ``mask`` a bool tensor and every option
checked, and returns ``(losses, weights)`` ``[batch]`` each, or
``(losses, weights, aux)``. The Keras classes call it on Keras's JAX and PyTorch
backends (:func:`tfr_extensions.losses.base.neutral_body` finds it by name).
"""
