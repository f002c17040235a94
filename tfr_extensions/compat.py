"""The stack check: whether TF-Ranking imports here (on the tf215 stack only).

Three stacks are supported (``stacks/*.txt``, ``make test STACK=...``):

* ``tf215``: TensorFlow 2.15 with TF-Ranking 0.5.5 (its last release, which pins
  TF < 2.16 and imports ``tf.estimator``), Keras 2;
* ``tf221``: TensorFlow 2.21 with Keras 2 as ``tf_keras`` 2.21, selected by the
  environment variable ``TF_USE_LEGACY_KERAS=1``, and no TF-Ranking;
* ``keras3``: TensorFlow 2.21 with its default Keras 3 and keras-rs, no TF-Ranking.

Which Keras is active is :mod:`tfr_extensions.backend`'s business. This module
says whether TF-Ranking is there: :func:`tf_ranking` imports it lazily (None
when it is missing or cannot import); :func:`has_tf_ranking`, and
:func:`require_tf_ranking` for code that cannot work without it.

Our own versions of the few TF-Ranking pieces the package cannot do without
live with what they belong to (``tests/test_compat.py`` checks each against
TF-Ranking where it imports), and their old names here still import:

* ragged padding, :func:`tfr_extensions.ops.ragged.ragged_to_dense`;
* ELWC parsing, :func:`tfr_extensions.data.elwc.parse_elwc`, and its predict
  signature, :func:`tfr_extensions.serving.elwc_predict_function`;
* the strategy helpers, :mod:`tfr_extensions.strategies`;
* the sigmoid rank approximation, :func:`tfr_extensions.ops.approx_ranks.approx_ranks`.
"""
import functools
import importlib
import types
from typing import Optional, Tuple

# ----------------------------------------------------------------------------- TF-Ranking

@functools.lru_cache(maxsize=None)
def _import_tf_ranking() -> Tuple[Optional[types.ModuleType], str]:
    try:
        return importlib.import_module("tensorflow_ranking"), ""
    except ImportError as error:  # missing, or TF >= 2.16 (no tf.estimator)
        return None, f"{type(error).__name__}: {error}"


def tf_ranking() -> Optional[types.ModuleType]:
    """The ``tensorflow_ranking`` module, imported on first use; None when it is
    not installed or cannot be imported (TF >= 2.16 has no ``tf.estimator``)."""
    return _import_tf_ranking()[0]


def has_tf_ranking() -> bool:
    """Whether TF-Ranking imports in this process."""
    return tf_ranking() is not None


def require_tf_ranking(feature: str, instead: str = "") -> types.ModuleType:
    """TF-Ranking's module, or an ``ImportError`` saying that ``feature`` needs it.

    Args:
      feature: what needs TF-Ranking, e.g. ``"tfr_extensions.tfranking"``.
      instead: what to use without it (appended to the message).
    """
    module, reason = _import_tf_ranking()
    if module is None:
        tf = importlib.import_module("tfr_extensions.backend").tf
        version = f"TensorFlow {tf.__version__}" if tf is not None else "no TensorFlow"
        raise ImportError(
            f"{feature} needs tensorflow-ranking (TF-Ranking 0.5.5, which requires TensorFlow "
            f"< 2.16; this is {version}), which does not import here ({reason}). "
            f"Install the tf215 stack: pip install 'tfr_extensions[tf215]'. {instead}".rstrip())
    return module


# ----------------------------------------------------------------------------- old names

#: Names that lived here before they moved to their own modules (name -> module);
#: imported on first use, so this module imports nothing of the package.
_MOVED = {
    **dict.fromkeys(("PADDING_PREDICTION", "PADDING_WEIGHT"), "tfr_extensions.ops.screening"),
    "ragged_to_dense": "tfr_extensions.ops.ragged",
    "PADDING_LABEL": "tfr_extensions.ops.conventions",
    "approx_ranks": "tfr_extensions.ops.approx_ranks",
    **dict.fromkeys(("FeatureSpec", "split_elwc", "parse_elwc"), "tfr_extensions.data.elwc"),
    "elwc_predict_function": "tfr_extensions.serving",
    **dict.fromkeys(("MIRRORED_STRATEGY", "MWMS_STRATEGY", "STRATEGIES", "get_strategy",
                     "strategy_scope", "get_output_filepath"), "tfr_extensions.strategies"),
}


def __getattr__(name):
    if name in _MOVED:
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_MOVED))
