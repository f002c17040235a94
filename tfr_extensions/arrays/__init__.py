"""The array namespace that the math of every loss is written against, once.

A loss's body asks for the namespace of the implementation that runs it::

    xp = arrays.namespace()
    pair_losses = xp.where(pairs, weights * xp.softplus(-score_diffs), 0.0)

and finds there the ``keras.ops`` names (``where``, ``sum``, ``cast``, ...), a few numerics
(``constant``, ``full``, ``maximum``, ``safe_divide``, ``dtype_name``) and the per-framework
helper modules (``lists``, ``rank_metrics``, ``sorting``, ``screening``, ...), filled by
:mod:`~tfr_extensions.arrays.tensorflow_namespace` (TensorFlow's own ops: Keras 2, TF-Ranking,
Keras 3's TensorFlow backend) or :mod:`~tfr_extensions.arrays.keras_namespace` (``keras.ops``:
Keras 3 on JAX and PyTorch), each imported on first use. Which one runs is
:func:`tfr_extensions.backend.implementation`'s rule; :func:`use` overrides it for a block.

>>> namespace().__name__.rsplit(".", 1)[-1] in ("tensorflow_namespace", "keras_namespace")
True
"""
import contextlib
from types import ModuleType
from typing import Dict, Iterator, Optional

from tfr_extensions import backend

#: implementation -> the module that fills the namespace for it
FILLINGS = {backend.TENSORFLOW: "tfr_extensions.arrays.tensorflow_namespace",
            backend.KERAS_OPS: "tfr_extensions.arrays.keras_namespace"}
_LOADED: Dict[str, ModuleType] = {}  # (a plain dict: torch.compile reads it without a break)
_FORCED: Optional[str] = None


def load(which: str) -> ModuleType:
    """The namespace module of implementation ``which``, imported on first use."""
    if which not in _LOADED:
        if which not in FILLINGS:
            raise ValueError(f"Unknown implementation {which!r}; known: {sorted(FILLINGS)}.")
        _LOADED[which] = import_module(FILLINGS[which])
    return _LOADED[which]


def import_module(name: str) -> ModuleType:
    """Module ``name`` by the builtin ``__import__``: AutoGraph cannot convert importlib's."""
    return __import__(name, fromlist=["*"])  # (a non-empty fromlist: the module, not its root)


def current() -> str:
    """The implementation that runs now: :func:`use`'s, else the package's rule."""
    return _FORCED if _FORCED is not None else backend.implementation()


def namespace(which: Optional[str] = None) -> ModuleType:
    """The namespace of implementation ``which`` (default: :func:`current`)."""
    return load(which or current())


@contextlib.contextmanager
def use(which: str) -> Iterator[ModuleType]:
    """Runs the block with implementation ``which``'s namespace (and yields it).

    >>> with use(backend.implementation()) as xp:
    ...     namespace() is xp
    True
    """
    global _FORCED  # pylint: disable=global-statement
    xp, previous = load(which), _FORCED
    _FORCED = which
    try:
        yield xp
    finally:
        _FORCED = previous
