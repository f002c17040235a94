"""Argument checks shared by every op, loss, metric, model and data reader.

Each check returns the value in its canonical Python type, or raises a ``ValueError`` that
names the argument and the value received: **integers** (:func:`validate_int`,
:func:`validate_topn`): Python and NumPy ints as ``int``, not ``bool`` nor any float (``2.0``);
**numbers** (:func:`validate_number`, :func:`validate_positive`): what ``float()`` takes but
strings, ``bool``, NaN and infinities, as ``float``; **choices** (:func:`validate_choice`);
**seeds** (:func:`validate_seed`): None, ``int`` or ``[int, int]`` (JSON-able), or a tensor.

>>> validate_int(np.int64(3), "batch_size", minimum=1)
3
>>> validate_topn(None) is None
True
>>> validate_int(2.0, "batch_size", minimum=1)
Traceback (most recent call last):
...
ValueError: `batch_size` must be an int >= 1; got 2.0.

A loss's option carries its check in its annotation, ``Annotated[<type>, Check(...)]``
(:func:`check_of` reads it back): :data:`Positive`, :data:`Flag`, :data:`TopN`,
:data:`Seed`, :func:`OneOf`, :func:`Number`, :func:`Integer`.

>>> check_of(Positive)(2, "sigma")
2.0
"""
import math
import sys
from typing import Annotated, Any, Callable, Optional, Sequence, get_args, get_origin

import numpy as np


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _int_kind(minimum: Optional[int], maximum: Optional[int]) -> str:
    if minimum is not None and maximum is not None:
        return f"an int in [{minimum}, {maximum}]"
    return "an int" + (f" >= {minimum}" if minimum is not None else
                       f" <= {maximum}" if maximum is not None else "")


def validate_int(value, arg: str, minimum: Optional[int] = None,
                 maximum: Optional[int] = None, allow_none: bool = False) -> Optional[int]:
    """``int(value)`` if it is an int in ``[minimum, maximum]`` (or None with ``allow_none``).

    >>> validate_int(None, "list_size", minimum=1, allow_none=True) is None
    True
    >>> validate_int(True, "num_samples", minimum=1)
    Traceback (most recent call last):
    ...
    ValueError: `num_samples` must be an int >= 1; got True.
    """
    if value is None and allow_none:
        return None
    if (not _is_int(value) or (minimum is not None and value < minimum)
            or (maximum is not None and value > maximum)):
        raise ValueError(f"`{arg}` must be {'None or ' if allow_none else ''}"
                         f"{_int_kind(minimum, maximum)}; got {value!r}.")
    return int(value)


def validate_topn(topn, arg: str = "topn") -> Optional[int]:
    """A cutoff: None (the whole list) or an int >= 1."""
    return validate_int(topn, arg, minimum=1, allow_none=True)


def _interval(minimum, maximum, open_minimum: bool) -> str:
    low = "(-inf" if minimum is None else ("(" if open_minimum else "[") + f"{minimum:g}"
    high = "inf)" if maximum is None else f"{maximum:g}]"
    return f"{low}, {high}"


def validate_number(value, arg: str, minimum: Optional[float] = None,
                    maximum: Optional[float] = None, open_minimum: bool = False) -> float:
    """``float(value)`` if it is a finite number in ``[minimum, maximum]`` (open at ``minimum``
    with ``open_minimum``), else ``ValueError``.

    >>> validate_number(0.5, "gamma", minimum=0.0, maximum=1.0, open_minimum=True)
    0.5
    >>> validate_number(2, "discount_alpha", minimum=-1.0, maximum=1.0)
    Traceback (most recent call last):
    ...
    ValueError: `discount_alpha` must be a finite number in [-1, 1]; got 2.
    """
    number = _finite_float(value)
    if (number is None or (minimum is not None and (number < minimum or (
            open_minimum and number == minimum))) or (maximum is not None and number > maximum)):
        raise ValueError(f"`{arg}` must be a finite number in "
                         f"{_interval(minimum, maximum, open_minimum)}; got {value!r}.")
    return number


def validate_positive(value, arg: str) -> float:
    """``float(value)`` if it is a finite number > 0, else ``ValueError``."""
    number = _finite_float(value)
    if number is None or not number > 0:
        raise ValueError(f"`{arg}` must be a positive finite number; got {value!r}.")
    return number


def _finite_float(value) -> Optional[float]:
    """``float(value)`` for a finite real number (not a bool), else None."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def validate_choice(value, choices: Sequence[str], arg: str) -> str:
    """``value`` if it is one of ``choices``, else ``ValueError`` listing them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"`{arg}` must be one of {list(choices)}; got {value!r}.")
    return value


def validate_bool(value, arg: str) -> bool:
    """``bool(value)`` for a bool (NumPy's too) or the ints 0 and 1, else ``ValueError``."""
    if isinstance(value, (bool, np.bool_)) or (_is_int(value) and value in (0, 1)):
        return bool(value)
    raise ValueError(f"`{arg}` must be a bool; got {value!r}.")


def validate_seed(seed, arg: str = "seed"):
    """None, ``int`` or ``[int, int]``; a seed tensor (TensorFlow's, a Keras 3 backend's) passes.

    >>> validate_seed((3, np.int32(4)))
    [3, 4]
    """
    if seed is None or _is_tensor(seed):
        return seed
    if _is_int(seed):
        return int(seed)
    if isinstance(seed, (list, tuple, np.ndarray)) and len(seed) == 2 and all(
            _is_int(s) for s in seed):
        return [int(s) for s in seed]
    raise ValueError(f"`{arg}` must be None, an int or a pair of ints; got {seed!r}.")


def _is_tensor(value) -> bool:
    """A TensorFlow tensor or variable, or a Keras 3 backend tensor (neither imported here)."""
    tf, keras = sys.modules.get("tensorflow"), sys.modules.get("keras")
    if tf is not None and isinstance(value, (tf.Tensor, tf.Variable)):
        return True
    is_tensor = getattr(getattr(keras, "ops", None), "is_tensor", None)
    return bool(is_tensor is not None and not isinstance(value, np.ndarray) and is_tensor(value))


# --- checks as annotations: ``option: Annotated[type, Check(...)] = default`` --------

class Check:
    """An option's check, ``check(value, arg) -> value``, as an annotation's metadata; its
    ``repr`` says what it accepts (``help``), :attr:`rejects` a value it refuses (for tests)."""

    def __init__(self, check: Callable[[Any, str], Any], accepts: str, rejects: Any):
        self._check, self._accepts, self.rejects = check, accepts, rejects

    def __call__(self, value, arg: str):
        return self._check(value, arg)

    def __repr__(self) -> str:
        return self._accepts


def check_of(annotation) -> Optional[Check]:
    """The :class:`Check` of an ``Annotated`` annotation, or None."""
    if get_origin(annotation) is Annotated:
        for item in get_args(annotation)[1:]:
            if isinstance(item, Check):
                return item
    return None


def OneOf(choices: Sequence[str]):  # pylint: disable=invalid-name
    """An option that is one of ``choices``."""
    return Annotated[str, Check(lambda value, arg: validate_choice(value, choices, arg),
                                f"one of {list(choices)}", "no_such_choice")]


def Number(minimum: Optional[float] = None, maximum: Optional[float] = None,  # pylint: disable=invalid-name
           open_minimum: bool = False):
    """A finite number within the bounds."""
    return Annotated[float, Check(lambda value, arg: validate_number(value, arg, minimum,
                                                                     maximum, open_minimum),
                                  f"a number in {_interval(minimum, maximum, open_minimum)}",
                                  float("nan"))]


def Integer(minimum: Optional[int] = None, maximum: Optional[int] = None,  # pylint: disable=invalid-name
            allow_none: bool = False):
    """An int within the bounds (or None with ``allow_none``)."""
    accepts = _int_kind(minimum, maximum) + (" or None" if allow_none else "")
    return Annotated[Optional[int] if allow_none else int,
                     Check(lambda value, arg: validate_int(value, arg, minimum, maximum,
                                                           allow_none), accepts, 1.5)]


#: a positive finite number
Positive = Annotated[float, Check(validate_positive, "a positive number", 0.0)]
#: a bool
Flag = Annotated[bool, Check(validate_bool, "a bool", "yes")]
#: a cutoff: None (the whole list) or an int >= 1
TopN = Annotated[Optional[int], Check(validate_topn, "None or an int >= 1", 0)]
#: None, an int, a pair of ints or a seed tensor
Seed = Annotated[Any, Check(validate_seed, "None, an int or a pair of ints", "seed")]
