"""Small LibSVM files for the reader's tests (``tests/data/test_libsvm*.py``): written
from text, read without the cache, parsed by the vectorized path only."""
from tfr_extensions.data import _parse
from tfr_extensions.data import read_libsvm


def write_file(tmp_path, text, name="data.txt"):
    """``text`` (str or bytes) as the file ``tmp_path / name``; its path."""
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def read_uncached(path, **kwargs):
    """:func:`tfr_extensions.data.read_libsvm` without the binary cache (unless asked)."""
    kwargs.setdefault("cache", False)
    return read_libsvm(path, **kwargs)


def no_slow_path(monkeypatch):
    """Makes the per-token fallback raise: the vectorized path must do all the work."""
    def fail(*args, **kwargs):
        raise AssertionError("parse_slow was called on valid data")
    monkeypatch.setattr(_parse, "parse_slow", fail)
