r"""The keys that break ties in score, written once for every framework: a counter-based
hash of ``(seed, list, position)``, the random permutation per list of Section 4.2 of the
twin-sigmoid paper. TensorFlow, JAX and PyTorch draw the same keys for a seed, so a seeded
loss gives the same values and gradients on every backend.

For the seed pair :math:`(a, b)` (:func:`seed_pair`), list :math:`n` and position
:math:`i`, with :math:`f` MurmurHash3's 32-bit finalizer and :math:`\oplus` exclusive or,

.. math::
    s = f(f(a \oplus \varphi) + b), \quad h_{ni} = f(f(n \oplus s) \oplus f(i + \varphi)),

:math:`\varphi` = 0x9E3779B9, every operation on 32 bits (int32 that wrap, the shifts
logical); the key is the top :math:`31 - k` bits of :math:`h_{ni}` over the low
:math:`k` bits :math:`L - 1 - i`, :math:`k` the bit length of :math:`L - 1`: distinct
within a list by construction, a uniform random order otherwise. Padding a list (XLA's
buckets) keeps its documents' keys, which depend on the list's index and the positions.

>>> [int(k) for k in tie_keys((1, 4), 0)[0]]
[491818039, 1676105798, 1004936121, 1315547496]
"""
from typing import Sequence, Tuple

import numpy as np

from tfr_extensions import arrays

#: the modulus of the seeds (TensorFlow's stateless seeds are int32 in ``[0, 2^31 - 1)``)
SEED_MODULUS = 2**31 - 1
_GOLDEN = 0x9E3779B9
_MIX = (0x85EBCA6B, 0xC2B2AE35)


def _int32(value: int) -> int:
    """A 32-bit pattern as the int32 that holds it."""
    return value - 2**32 if value >= 2**31 else value


def seed_pair(seed) -> Tuple[int, int]:
    """A Python seed as its pair ``(a, b)`` in ``[0, 2^31 - 1)``: an int ``s`` is
    ``(s mod m, 0)``, a pair ``(x, y)`` is ``(x mod m, y mod m)``, ``m`` =
    :data:`SEED_MODULUS` (TensorFlow's ``seed_tensor`` of the same seed)."""
    if isinstance(seed, (list, tuple, np.ndarray)):
        first, second = (int(s) for s in seed)
        return first % SEED_MODULUS, second % SEED_MODULUS
    return int(seed) % SEED_MODULUS, 0


def stream_seed(seed, salt: int = 0) -> int:
    """``s`` of a seeded stream whose call ``k`` draws with the pair ``(s, k)`` on every
    framework (a ``SeedGenerator``'s state, TensorFlow's step counter): an int, or a pair
    folded into one, plus ``7919 * salt``, modulo :data:`SEED_MODULUS`.

    >>> stream_seed(5), stream_seed([1, 2], salt=1)
    (5, 1007924)
    """
    if isinstance(seed, (list, tuple, np.ndarray)):
        first, second = (int(s) for s in seed)
        seed = first * 1_000_003 + second
    return (int(seed) + 7919 * salt) % SEED_MODULUS


def _shift(xp, shift, h, bits):
    """``shift(h, bits)``, ``bits`` a tensor (a Python int: a host copy, a GPU wait on PyTorch)."""
    return shift(h, xp.constant(bits, "int32") if isinstance(bits, int) else bits)


def _shift_right(xp, h, bits: int):
    """Logical right shift of int32 bit patterns."""
    return _shift(xp, xp.right_shift, h, bits) & ((1 << (32 - bits)) - 1)


def _fmix32(xp, h):
    """MurmurHash3's 32-bit finalizer, on int32 that wrap."""
    h = h ^ _shift_right(xp, h, 16)
    h = h * _int32(_MIX[0])
    h = h ^ _shift_right(xp, h, 13)
    h = h * _int32(_MIX[1])
    return h ^ _shift_right(xp, h, 16)


def hash_seed(xp, first, second, salt=_GOLDEN):
    r"""The stream :math:`s = f(f(a \oplus \varphi) + b)` of the seed pair :math:`(a, b)`
    (int32 tensors); an int32 tensor ``salt`` in place of :math:`\varphi` hashes once per salt."""
    salt = _int32(salt) if isinstance(salt, int) else salt
    return _fmix32(xp, _fmix32(xp, first ^ salt) + second)


def tie_keys(shape: Sequence, seed, xp=None):
    """Int32 keys ``[B, L]`` in ``[0, 2^31)``, distinct within each list (module docstring).

    Args:
      shape: ``(B, L)``; on TensorFlow either may be a scalar tensor.
      seed: a Python int or pair (:func:`seed_pair`), or an integer tensor ``[2]``
        (a stateless seed, a ``SeedGenerator``'s seed).
      xp: the array namespace (default :func:`tfr_extensions.arrays.namespace`).
    """
    xp = xp or arrays.namespace()
    batch, size = shape
    if isinstance(seed, (int, np.integer, list, tuple)):
        first, second = (xp.constant(_int32(v), "int32") for v in seed_pair(seed))
    else:
        seed = xp.cast(seed, "int32")
        first, second = seed[0], seed[1]
    stream = hash_seed(xp, first, second)
    lists = xp.arange(batch, dtype="int32")[:, None]
    positions = xp.arange(size, dtype="int32")[None, :]
    rows = _fmix32(xp, lists ^ stream)
    draws = _shift_right(xp, _fmix32(xp, rows ^ _fmix32(xp, positions + _int32(_GOLDEN))), 1)
    if isinstance(size, int):  # k, the bit length of L - 1
        index_bits = max(size - 1, 0).bit_length()
    else:  # (a scalar tensor)
        shifted = xp.right_shift(xp.maximum(size - 1, 0), xp.arange(31, dtype="int32"))
        index_bits = xp.sum(xp.cast(shifted > 0, "int32"))
    top = _shift(xp, xp.left_shift, _shift(xp, xp.right_shift, draws, index_bits), index_bits)
    return top | ((size - 1) - positions)
