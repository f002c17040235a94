"""tfr_extensions: learning-to-rank research methods for Keras 3 (TensorFlow, JAX,
PyTorch), Keras 2 and TF-Ranking.

    import tfr_extensions as tfrx
    loss = tfrx.losses.get("twin_ndcg_type3", topn=10)

Keras 3 is the spine, on any of its backends; TensorFlow is one backend, and
Keras 2 (TensorFlow 2.15, or tf-keras with ``TF_USE_LEGACY_KERAS=1``) is served
too (:mod:`tfr_extensions.backend`). Without TensorFlow installed (Keras 3 on JAX
or PyTorch) the package imports whole but for what is TensorFlow by nature:
:mod:`~tfr_extensions.losses`, :mod:`~tfr_extensions.metrics`,
:mod:`~tfr_extensions.models`, :mod:`~tfr_extensions.evaluation`,
:mod:`~tfr_extensions.data` (the reader, ``to_dense``, ``RankingPyDataset``,
``synthetic``), :mod:`~tfr_extensions.gbdt` and :mod:`~tfr_extensions.keras_ops`
work there; ``tfrx.serving`` (SavedModel export for TF Serving),
``tfrx.adversarial`` (IRGAN), ``tfrx.tfranking`` (TF-Ranking's pipelines),
``tfrx.data.ranking_dataset`` (tf.data) and ELWC raise an ``ImportError`` that
names them and what to use instead. TF-Ranking is optional: only
``tfrx.tfranking`` (imported on first use) and the fallback to its loss names need it.
Its old name ``tfrx.pipeline`` still works, with a ``DeprecationWarning``.
"""
import importlib
import warnings

from tfr_extensions import backend  # first: decides which Keras every module uses
from tfr_extensions import data, keras_ops, ops
from tfr_extensions import evaluation, gbdt, losses, metrics, models

if backend.HAS_TENSORFLOW:
    from tfr_extensions import adversarial, serving

__version__ = "0.1.0"

_ON_FIRST_USE = ("tfranking",)  # needs TF-Ranking: imported when first named
#: old module name -> new: the old name gives the new module, with a DeprecationWarning
_RENAMED = {"pipeline": "tfranking"}

#: the parts that are TensorFlow programs by nature -> what to use without TensorFlow
TENSORFLOW_ONLY = {
    "adversarial": "IRGAN is a TensorFlow program; the other losses of tfrx.losses run on "
                   "every backend",
    "serving": "train on any backend and save the model as a .keras file, then export it "
               "in a TensorFlow environment with `tfrx-export model.keras "
               "saved_models/<name>/1`",
    "tfranking": "TF-Ranking's pipelines need TF-Ranking (tf215 stack); the tfrx-train and "
                 "tfrx-cv jobs run on every backend",
}


def __getattr__(name):
    new_name = _RENAMED.get(name, name)
    if new_name in TENSORFLOW_ONLY and not backend.HAS_TENSORFLOW:
        called = name if new_name == name else f"{name} (now tfr_extensions.{new_name})"
        raise ImportError(
            f"tfr_extensions.{called} needs TensorFlow, which is not installed here "
            f"({backend.describe()}). Instead: {TENSORFLOW_ONLY[new_name]}.")
    if name in _RENAMED:  # ``tfrx.pipeline``, ``from tfr_extensions import pipeline``
        module = importlib.import_module(f"{__name__}.{new_name}")
        warnings.warn(_renamed_message(name), DeprecationWarning, stacklevel=2)
        globals()[name] = module  # warned once, as an import warns
        return module
    if name in _ON_FIRST_USE:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _renamed_message(old: str) -> str:
    """The DeprecationWarning of the old module name ``old`` (see :data:`_RENAMED`)."""
    return (f"tfr_extensions.{old} is deprecated: it is now tfr_extensions.{_RENAMED[old]} "
            "(the same module); import that instead.")
