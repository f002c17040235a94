"""The ``keras.ops`` implementation's suite: each file holds it to the NumPy oracles of
``tests/support`` by itself, and ``test_cross_implementation.py`` alone compares it with
the TensorFlow implementation. It runs on every Keras 3 backend (``make
test-backends``); on Keras 2 stacks there is no ``keras.ops`` and nothing here is
collected (``--doctest-modules`` would import ``harness.py`` too)."""
from tfr_extensions import backend

if not backend.IS_KERAS_3:
    collect_ignore_glob = ["*.py"]
