"""tfr_extensions: learning-to-rank research methods as TF-Ranking components.

    import tfr_extensions as tfrx
    loss = tfrx.losses.get("twin_ndcg_type3", topn=10)

Runs on Keras 2 (TensorFlow 2.15, or TensorFlow 2.16+ with ``tf-keras`` and
``TF_USE_LEGACY_KERAS=1``) and on Keras 3 (TensorFlow 2.16+ as it comes): whichever
``tf.keras`` is (:mod:`tfr_extensions.backend`). TF-Ranking is optional: only
``tfrx.pipeline`` (its pipeline classes, imported on first use) and the fallback to
its loss names need it.
"""
import importlib

from tfr_extensions import backend  # first: decides which Keras every module uses
from tfr_extensions import adversarial, data, losses, metrics, ops
from tfr_extensions import evaluation, gbdt, models, serving

__version__ = "0.1.0"

_ON_FIRST_USE = ("pipeline",)  # needs TF-Ranking: imported when first named


def __getattr__(name):
    if name in _ON_FIRST_USE:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
