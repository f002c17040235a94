"""The cross-implementation suite (``keras.ops`` against the TensorFlow ops) runs on
every Keras 3 backend (``make test-backends``); on Keras 2 stacks there is no
``keras.ops`` and nothing here is collected (``--doctest-modules`` would import
``harness.py`` too)."""
from tfr_extensions import backend

if not backend.IS_KERAS_3:
    collect_ignore_glob = ["*.py"]
