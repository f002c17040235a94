"""tfr_extensions: learning-to-rank research methods as TF-Ranking components.

    import tfr_extensions as tfrx
    loss = tfrx.losses.get("twin_ndcg_type3", topn=10)

Needs Keras 2 as ``tf.keras``: TensorFlow 2.15, or TensorFlow 2.16+ with
``tf-keras`` and ``TF_USE_LEGACY_KERAS=1`` (see :mod:`tfr_extensions.compat`).
TF-Ranking is optional: only ``tfrx.pipeline`` (its pipeline classes, imported
on first use) and the fallback to its loss names need it.
"""
import importlib

from tfr_extensions import compat

compat.check_keras()  # before any module touches tf.keras: a clear error under Keras 3

from tfr_extensions import adversarial, data, losses, metrics, ops  # noqa: E402
from tfr_extensions import evaluation, gbdt, models, serving  # noqa: E402

__version__ = "0.1.0"

_ON_FIRST_USE = ("pipeline",)  # needs TF-Ranking: imported when first named


def __getattr__(name):
    if name in _ON_FIRST_USE:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
