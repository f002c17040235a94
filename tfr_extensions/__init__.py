"""tfr_extensions: learning-to-rank research methods as TF-Ranking components.

    import tfr_extensions as tfrx
    loss = tfrx.losses.get("twin_ndcg_type3", topn=10)

Runs on Keras 2 (TensorFlow 2.15, or TensorFlow 2.16+ with ``tf-keras`` and
``TF_USE_LEGACY_KERAS=1``) and on Keras 3 (TensorFlow 2.16+ as it comes): whichever
``tf.keras`` is (:mod:`tfr_extensions.backend`). TF-Ranking is optional: only
``tfrx.pipeline`` (its pipeline classes, imported on first use) and the fallback to
its loss names need it.

On Keras 3's JAX and PyTorch backends the losses and ``tfrx.metrics.RankingMetric``
compute with :mod:`tfr_extensions.keras_ops` (the ``keras.ops`` twin of
:mod:`tfr_extensions.ops`). Without TensorFlow installed, the package holds
``keras_ops``, the NumPy data path (``tfrx.data.read_libsvm``, ``to_dense``,
``RankingPyDataset``) and the shared vocabulary and checks (``tfrx.ops``); naming
anything else raises an ``ImportError`` that says so.
"""
import importlib

from tfr_extensions import backend  # first: decides which Keras every module uses
from tfr_extensions import data, keras_ops, ops

if backend.HAS_TENSORFLOW:
    from tfr_extensions import adversarial, losses, metrics
    from tfr_extensions import evaluation, gbdt, models, serving

__version__ = "0.1.0"

_ON_FIRST_USE = ("pipeline",)  # needs TF-Ranking: imported when first named


_NEED_TENSORFLOW = ("adversarial", "losses", "metrics", "evaluation", "gbdt", "models",
                    "serving", "pipeline")


def __getattr__(name):
    if name in _NEED_TENSORFLOW and not backend.HAS_TENSORFLOW:
        raise ImportError(
            f"tfr_extensions.{name} needs TensorFlow, which does not import here ({backend.describe()}). "
            "Without it: tfrx.keras_ops (every op and loss body in keras.ops) and "
            "tfrx.data.read_libsvm / to_dense / RankingPyDataset.")
    if name in _ON_FIRST_USE:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
