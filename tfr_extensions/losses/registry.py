"""Loss names: derived from the losses' specs, never a hand-kept list.

A loss's key (:attr:`~tfr_extensions.losses.base.LossSpec.key`) is its function's name
without ``_loss`` (``twin_sigmoid``; whole where the stem is a keyword: ``lambda_loss``), and
its class's default ``name``; the class is the key's CamelCase with ``Loss`` (the literature's
spelling kept: ``SoftNDCGLoss``). Names of an earlier release (:data:`DEPRECATED`) still
build their loss, with a ``DeprecationWarning``; :func:`names` does not list them.

:func:`register` makes a class Keras-serializable and known under its key, its class name and
each preset of its spec (``twin_ndcg_type3`` -> ``TwinSigmoidLoss(metric="ndcg",
gradient="type3")``). :func:`get` falls back to TF-Ranking's names where it imports.
"""
import warnings
from typing import Any, Dict, Tuple, Type

from tfr_extensions import compat
from tfr_extensions.backend import keras

# every name -> (class, preset kwargs, kind: "key", "class" or "preset")
_NAMES: Dict[str, Tuple[type, Dict[str, Any], str]] = {}
#: names of an earlier release -> the name to use now (they work until the next release)
DEPRECATED: Dict[str, str] = {"lambda": "lambda_loss"}


def register(cls: Type) -> Type:
    """Class decorator: Keras-serializable, and known to :func:`get`."""
    if "__init__" not in vars(cls) or cls.spec is None:
        raise TypeError(f"{cls.__name__} must name its loss function (`function = my_loss`) "
                        "and define its own constructor with the loss's options, ragged, "
                        "reduction and name (see RankingLoss).")
    cls = keras.utils.register_keras_serializable(package="tfr_extensions")(cls)
    entries = [(cls.spec.key, {}, "key"), (cls.__name__, {}, "class")]
    entries += [(preset, dict(kwargs), "preset") for preset, kwargs in cls.spec.presets.items()]
    for name, kwargs, kind in entries:
        if name in _NAMES and _NAMES[name][0] is not cls:
            raise ValueError(f"Loss name {name!r} is registered twice.")
        _NAMES[name] = (cls, kwargs, kind)
    return cls


def classes() -> Dict[str, type]:
    """Registry key -> Keras class, one entry per loss."""
    return {name: cls for name, (cls, _, kind) in _NAMES.items() if kind == "key"}


def tfr_loss_names() -> Tuple[str, ...]:
    """TF-Ranking's loss keys (``tfr.keras.losses.RankingLossKey``); empty without it."""
    tfr = compat.tf_ranking()
    if tfr is None:
        return ()
    keys = tfr.keras.losses.RankingLossKey
    return tuple(sorted(v for k, v in vars(keys).items()
                        if k.isupper() and isinstance(v, str)))


#: TF-Ranking lambda weights by a JSON-able name, for ``get(..., lambda_weight=name)``
LAMBDA_WEIGHTS = {
    "ndcg": "NDCGLambdaWeight", "ndcg_v2": "NDCGLambdaWeightV2", "dcg": "DCGLambdaWeight",
    "label_diff": "LabelDiffLambdaWeight", "precision": "PrecisionLambdaWeight",
    "list_mle": "ListMLELambdaWeight", "yeti_dcg": "YetiDCGLambdaWeight"}


def tfrx_loss_names() -> Tuple[str, ...]:
    """Our loss names (keys, class names, presets), sorted."""
    return tuple(sorted(_NAMES))


def names(*, classes: bool = True, presets: bool = True,
          tf_ranking: bool = True) -> Tuple[str, ...]:
    """Names :func:`get` accepts: ours (sorted), then TF-Ranking's (where it imports). A False
    flag leaves out our class names, presets or TF-Ranking's names; all three False leave one
    key per loss of ours:

    >>> names(classes=False, presets=False, tf_ranking=False)[:3]
    ('approx_ndcg', 'expected_utility', 'lambda_loss')
    """
    left_out = {kind for kind, keep in (("class", classes), ("preset", presets)) if not keep}
    ours = tuple(name for name in tfrx_loss_names() if _NAMES[name][2] not in left_out)
    return ours + (tfr_loss_names() if tf_ranking else ())


def get(name: str, **kwargs) -> keras.losses.Loss:
    """A loss instance by name: ours (keys, class names, presets such as ``twin_ap_type2``;
    ``kwargs`` override the preset) or, where TF-Ranking imports, its names through
    ``tfr.keras.losses.get(name, **kwargs)``, ``lambda_weight`` maybe a name in
    :data:`LAMBDA_WEIGHTS` (LambdaRank: ``get("pairwise_logistic_loss", lambda_weight="ndcg_v2")``).

    >>> get("twin_ndcg_type3", topn=10).get_config()["gradient"]
    'type3'

    Raises:
      ValueError: an unknown name, listing the known ones (and why TF-Ranking's are missing).
    """
    if name in DEPRECATED:
        warnings.warn(f"The loss name {name!r} is deprecated and goes in the next release: "
                      f"use {DEPRECATED[name]!r}.", DeprecationWarning, stacklevel=2)
        name = DEPRECATED[name]
    if name in _NAMES:
        cls, preset, _ = _NAMES[name]
        return cls(**{**preset, **kwargs})
    if name in tfr_loss_names():
        weight = kwargs.get("lambda_weight")  # a name (JSON configs) -> the object
        if isinstance(weight, str):
            if weight not in LAMBDA_WEIGHTS:
                raise ValueError(f"`lambda_weight` must be one of {sorted(LAMBDA_WEIGHTS)} or a "
                                 f"TF-Ranking lambda weight; got {weight!r}.")
            weight = getattr(compat.tf_ranking().keras.losses, LAMBDA_WEIGHTS[weight])()
            kwargs = {**kwargs, "lambda_weight": weight}
        return compat.tf_ranking().keras.losses.get(name, **kwargs)
    missing = "" if compat.has_tf_ranking() else (
        " TF-Ranking's loss names (approx_ndcg_loss, softmax_loss, ...) need tensorflow-ranking, "
        "which does not import here (ours, approx_ndcg and listnet, equal TF-Ranking's "
        "approx_ndcg_loss and softmax_loss).")
    if name.endswith("_loss") and name[:-len("_loss")] in classes():
        missing += (f" Our keys never end in `_loss` (that is the function's name): "
                    f"use {name[:-len('_loss')]!r}.")
    raise ValueError(f"Unknown loss {name!r}. Known losses: {', '.join(names())}.{missing}")
