"""The tie-break keys of :mod:`tfr_extensions.arrays.tie_keys` in plain Python
integers (uint32 arithmetic by masking), sharing no code with the package."""
import numpy as np

_MASK = 0xFFFFFFFF
_GOLDEN = 0x9E3779B9


def _fmix32(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK
    return h ^ (h >> 16)


def tie_keys(batch: int, size: int, seed) -> np.ndarray:
    """Keys ``[batch, size]``: the top ``31 - k`` bits of the hash of (seed, list,
    position) over the reversed position in the low ``k`` bits."""
    if isinstance(seed, (list, tuple)):
        a, b = (int(s) % (2**31 - 1) for s in seed)
    else:
        a, b = int(seed) % (2**31 - 1), 0
    stream = _fmix32((_fmix32(a ^ _GOLDEN) + b) & _MASK)
    bits = max(size - 1, 0).bit_length()
    keys = np.zeros((batch, size), np.int64)
    for n in range(batch):
        row = _fmix32(n ^ stream)
        for i in range(size):
            draw = _fmix32(row ^ _fmix32((i + _GOLDEN) & _MASK)) >> 1
            keys[n, i] = ((draw >> bits) << bits) | (size - 1 - i)
    return keys
