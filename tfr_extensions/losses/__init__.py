"""Ranking losses: a pure function per loss, its Keras class, and :func:`get` by name.

Each loss is a function ``fn(labels, scores, *, mask=None, <options>) ->
(losses, weights)`` (per list, ``[batch]`` each; see
:mod:`tfr_extensions.losses.base` for the conventions and the bad-input
policy) and a Keras class over it with the same options, which
:func:`get` builds by name (ours or TF-Ranking's).

Every module of this package but its infrastructure (:data:`INFRASTRUCTURE`) is one
family of losses, imported here whole: a loss module's registered classes and their
functions are this package's names, with no list to keep by hand.
"""
import importlib
import pkgutil

from tfr_extensions.losses import registry
from tfr_extensions.losses.base import RankingLoss
from tfr_extensions.losses.registry import get, names

#: the modules of this package that hold no loss
INFRASTRUCTURE = ("base", "registry")
#: the loss modules, in import order
LOSS_MODULES = tuple(sorted(info.name for info in pkgutil.iter_modules(__path__)
                            if info.name not in INFRASTRUCTURE))
for _module in LOSS_MODULES:
    importlib.import_module(f"{__name__}.{_module}")
globals().update({cls.__name__: cls for cls in registry.classes().values()})
globals().update({cls.spec.function.__name__: cls.spec.function
                  for cls in registry.classes().values()})
from tfr_extensions.losses.policy_gradient import SampledRankingMetric  # noqa: E402

__all__ = sorted(["RankingLoss", "SampledRankingMetric", "get", "names"]
                 + [cls.__name__ for cls in registry.classes().values()]
                 + [cls.spec.function.__name__ for cls in registry.classes().values()])
