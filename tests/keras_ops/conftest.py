"""The ``keras.ops`` implementation's suite: each file holds it to the NumPy oracles of
``tests/support`` by itself, and ``test_cross_implementation.py`` alone compares it with
the TensorFlow implementation. It runs on the Keras 3 backends that compute with it, JAX
and PyTorch (``make test-backends``; :func:`tfr_extensions.backend.implementation`).
Nothing here is collected on Keras 2, which has no ``keras.ops``, nor on Keras 3's
TensorFlow backend, where the losses and metrics compute with TensorFlow's ops
(``--doctest-modules`` would import ``harness.py`` too)."""
from tfr_extensions import backend

if not backend.IS_KERAS_3 or backend.uses_tensorflow_ops():
    collect_ignore_glob = ["*.py"]
