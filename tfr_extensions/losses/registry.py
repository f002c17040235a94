"""Loss names: derived from the loss classes, never a hand-kept list.

A class decorated with :func:`register` is known under its class name, under its
default ``name`` (the snake_case key users type), and under each key of its
``PRESETS`` (e.g. ``twin_ndcg_type3`` -> ``TwinSigmoidLoss(metric="ndcg",
gradient="type3")``). It is also registered as Keras-serializable.
:func:`get` falls back to ``tfr.keras.losses.get`` for TF-Ranking's names where
TF-Ranking imports (the ``tf215`` stack); without it only our names exist.
"""
import inspect
from typing import Any, Dict, Tuple, Type

import tensorflow as tf

from tfr_extensions import compat

_CLASSES: Dict[str, type] = {}
_NAMES: Dict[str, Tuple[type, Dict[str, Any]]] = {}


def register(cls: Type) -> Type:
    """Class decorator: Keras-serializable, and known to :func:`get`."""
    cls = tf.keras.utils.register_keras_serializable(package="tfr_extensions")(cls)
    default_name = inspect.signature(cls.__init__).parameters["name"].default
    entries = {cls.__name__: {}, default_name: {}}
    for key, kwargs in getattr(cls, "PRESETS", {}).items():
        entries[key] = dict(kwargs)
    for key, kwargs in entries.items():
        if key in _NAMES and _NAMES[key][0] is not cls:
            raise ValueError(f"Loss name {key!r} is registered twice.")
        _NAMES[key] = (cls, kwargs)
    _CLASSES[cls.__name__] = cls
    return cls


def tfr_loss_names() -> Tuple[str, ...]:
    """TF-Ranking's loss keys (``tfr.keras.losses.RankingLossKey``); empty
    without TF-Ranking."""
    tfr = compat.tf_ranking()
    if tfr is None:
        return ()
    keys = tfr.keras.losses.RankingLossKey
    return tuple(sorted(v for k, v in vars(keys).items()
                        if k.isupper() and isinstance(v, str)))


#: TF-Ranking lambda weights by a JSON-able name, for ``get(..., lambda_weight=name)``
LAMBDA_WEIGHTS = {
    "ndcg": "NDCGLambdaWeight",
    "ndcg_v2": "NDCGLambdaWeightV2",
    "dcg": "DCGLambdaWeight",
    "label_diff": "LabelDiffLambdaWeight",
    "precision": "PrecisionLambdaWeight",
    "list_mle": "ListMLELambdaWeight",
    "yeti_dcg": "YetiDCGLambdaWeight",
}


def _lambda_weight(value):
    """A TF-Ranking lambda weight from its name in :data:`LAMBDA_WEIGHTS` (so loss
    arguments can live in JSON configs); objects pass through."""
    if not isinstance(value, str):
        return value
    if value not in LAMBDA_WEIGHTS:
        raise ValueError(f"`lambda_weight` must be one of {sorted(LAMBDA_WEIGHTS)} or a "
                         f"TF-Ranking lambda weight; got {value!r}.")
    return getattr(compat.tf_ranking().keras.losses, LAMBDA_WEIGHTS[value])()


def tfrx_loss_names() -> Tuple[str, ...]:
    """Our loss names (class names, default names, presets), sorted."""
    return tuple(sorted(_NAMES))


def names() -> Tuple[str, ...]:
    """Every name :func:`get` accepts: ours, then TF-Ranking's (where it imports)."""
    return tfrx_loss_names() + tfr_loss_names()


def get(name: str, **kwargs) -> tf.keras.losses.Loss:
    """A loss instance by name.

    Our names (class names, default names, presets such as ``twin_ap_type2``)
    build our classes, with ``kwargs`` overriding the preset. Where TF-Ranking
    imports, its names go to ``tfr.keras.losses.get(name, **kwargs)``, where
    ``lambda_weight`` may be a name from :data:`LAMBDA_WEIGHTS` (LambdaRank is
    ``get("pairwise_logistic_loss", lambda_weight="ndcg_v2")``).

    >>> get("twin_ndcg_type3", topn=10).get_config()["gradient"]
    'type3'

    Raises:
      ValueError: for an unknown name, listing the known names (and saying
        when TF-Ranking's names are missing because it does not import).
    """
    if name in _NAMES:
        cls, preset = _NAMES[name]
        return cls(**{**preset, **kwargs})
    if name in tfr_loss_names():
        if "lambda_weight" in kwargs:
            kwargs = {**kwargs, "lambda_weight": _lambda_weight(kwargs["lambda_weight"])}
        return compat.tf_ranking().keras.losses.get(name, **kwargs)
    missing = "" if compat.has_tf_ranking() else (
        " TF-Ranking's loss names (approx_ndcg_loss, softmax_loss, ...) need tensorflow-ranking, "
        "which does not import here.")
    raise ValueError(f"Unknown loss {name!r}. Known losses: {', '.join(names())}.{missing}")
