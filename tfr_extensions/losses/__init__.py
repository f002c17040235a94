"""Ranking losses: a pure function per loss, its Keras class, and :func:`get` by name.

    loss = tfrx.losses.get("twin_ndcg_type3", topn=10)       # by name, with options
    loss = tfrx.losses.TwinSigmoidLoss(metric="ndcg", topn=10) # the same class
    losses, weights = tfrx.losses.twin_sigmoid_loss(labels, scores, topn=10)  # per list

(Conventions and bad-input policy: :mod:`tfr_extensions.losses.base`.) Every module but
:data:`INFRASTRUCTURE` is one family of losses, imported here whole: its registered classes
and their functions are this package's names. No module is named like a function
(``lambda_loss`` is the function, :mod:`~tfr_extensions.losses.lambda_framework` its module).
Module paths of an earlier release (:data:`RENAMED_MODULES`) import with a ``DeprecationWarning``.
"""
import importlib
import pkgutil
import sys
import types
import warnings

from tfr_extensions.losses import registry
from tfr_extensions.losses.base import RankingLoss
from tfr_extensions.losses.registry import get, names

#: the modules of this package that hold no loss
INFRASTRUCTURE = ("base", "registry")
#: the families this package is for, in the order the API reference shows them
LEADING_MODULES = ("twin_sigmoid", "listwise", "soft_rank", "policy_gradient", "pairwise")
#: the loss modules in import order (that of ``__all__``): the leading ones, then by name
LOSS_MODULES = LEADING_MODULES + tuple(sorted(
    info.name for info in pkgutil.iter_modules(__path__)
    if info.name not in INFRASTRUCTURE + LEADING_MODULES))
for _module in LOSS_MODULES:
    importlib.import_module(f"{__name__}.{_module}")
globals().update({cls.__name__: cls for cls in registry.classes().values()})
globals().update({cls.spec.function.__name__: cls.spec.function
                  for cls in registry.classes().values()})
from tfr_extensions.losses.policy_gradient import SampledRankingMetric  # noqa: E402

#: module names of an earlier release -> the module holding their names now (until the next)
RENAMED_MODULES = {"lambda_loss": "lambda_framework", "neural_ndcg": "relaxed_sorting"}


class _RenamedModule(types.ModuleType):
    """A module path of an earlier release: each name read from it is the new module's,
    with a ``DeprecationWarning`` that names that module."""

    def __init__(self, old: str, new: str):
        super().__init__(f"{__name__}.{old}", f"Deprecated: use {__name__}.{new}.")
        self._new = f"{__name__}.{new}"

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        warnings.warn(f"{self.__name__} is deprecated and goes in the next release: its "
                      f"names are in {self._new}.", DeprecationWarning, stacklevel=2)
        return getattr(sys.modules[self._new], name)


for _old, _new in RENAMED_MODULES.items():
    # in sys.modules before any import of the old path, so that importing it never sets
    # this package's attribute: ``lambda_loss`` stays the function
    sys.modules.setdefault(f"{__name__}.{_old}", _RenamedModule(_old, _new))
    if _old not in globals():  # no function of that name: the old module, deprecated
        globals()[_old] = sys.modules[f"{__name__}.{_old}"]

#: the public names in the API reference's order: ``get``, ``names``, each loss's class beside
#: its function, then the base classes
__all__ = (["get", "names"]
           + [name for cls in registry.classes().values()
              for name in (cls.__name__, cls.spec.function.__name__)]
           + ["RankingLoss", "SampledRankingMetric"])
