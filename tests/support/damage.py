"""The damage the damaged-file suites do to a file, as a disk error, a power loss or
another tool would (tests/data/test_cache_damage.py, tests/pipelines/test_backup_damage.py,
tests/pipelines/test_cv_damage.py)."""
import os
from typing import Optional


def truncate_to_half(path):
    os.truncate(path, os.path.getsize(path) // 2)


def empty(path):
    """Size 0, as a file whose data never reached the disk before a power loss."""
    os.truncate(path, 0)


def overwrite(path, offset: Optional[int] = None):
    """64 bytes that were never there, at ``offset`` (default: the middle of the file)."""
    if offset is None:
        offset = max(os.path.getsize(path) // 2 - 32, 0)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(bytes(range(200, 255)) + b"\xff" * 9)
