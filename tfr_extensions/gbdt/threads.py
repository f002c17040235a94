"""The thread pools that run a round's blocks, and each thread's reused pair buffer.

Blocks are independent (each draws its tie breaks from its own seed), so they
may run in any order on any thread: NumPy releases the GIL in its array loops.
The pools live here, once per process, and not in the objective, which
LightGBM deep-copies.

>>> map_blocks(lambda i: i * i, [2, 0, 1], num_threads=2, pairs=0)  # few pairs: this thread
{2: 4, 0: 0, 1: 1}
"""
import concurrent.futures
import os
import threading
from typing import Callable, Dict, Optional, Sequence, TypeVar

import numpy as np

Result = TypeVar("Result")

#: Below this many pair terms per round the blocks run in the calling thread:
#: handing them to threads costs more than it saves (``benchmarks.gbdt_objective``).
THREADED_MIN_PAIRS = 1 << 21

_EXECUTORS: Dict[int, concurrent.futures.ThreadPoolExecutor] = {}
_EXECUTORS_LOCK = threading.Lock()
_WORKSPACES = threading.local()


def map_blocks(function: Callable[[int], Result], order: Sequence[int],
               num_threads: Optional[int], pairs: int) -> Dict[int, Result]:
    """``{i: function(i)}`` for the blocks ``order`` (the costliest first).

    On ``num_threads`` threads (None or 0: one per CPU; never more than the
    blocks) from :data:`THREADED_MIN_PAIRS` pair terms per round on
    (``pairs``), else in the calling thread.
    """
    threads = min(num_threads or os.cpu_count() or 1, len(order))
    if threads > 1 and pairs >= THREADED_MIN_PAIRS:
        return dict(zip(order, _executor(threads).map(function, order)))
    return {i: function(i) for i in order}


def _executor(threads: int) -> concurrent.futures.ThreadPoolExecutor:
    """A thread pool of ``threads`` workers, made once per process."""
    with _EXECUTORS_LOCK:
        if threads not in _EXECUTORS:
            _EXECUTORS[threads] = concurrent.futures.ThreadPoolExecutor(
                threads, thread_name_prefix="tfrx-gbdt")
        return _EXECUTORS[threads]


def workspace(shape, dtype) -> np.ndarray:
    """A buffer of ``shape`` reused by this thread across blocks and rounds
    (fresh arrays of this size would be paged in at every call)."""
    size = int(np.prod(shape))
    buffers = _WORKSPACES.__dict__.setdefault("buffers", {})
    buffer = buffers.get(dtype)
    if buffer is None or buffer.size < size:
        buffer = buffers[dtype] = np.empty(max(size, 1), dtype)
    return buffer[:size].reshape(shape)
