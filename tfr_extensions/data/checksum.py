"""Content key of a file for the LibSVM cache: its length and a CRC-32 per fixed segment.

:class:`Checksum` is fed bytes in any pieces (the parser's blocks);
:func:`file_checksum` reads a whole file on up to 4 threads. Both give the
same key for the same bytes, because the CRCs are per :data:`SEGMENT_BYTES`
segment whatever the feeding.

    >>> checksum = Checksum()
    >>> checksum.update(b"1 qid:1 1:0.5\\n")
    >>> checksum.key()  # "<length>:<blake2b of the CRCs>"
    '14:08df59fabebb333b'
"""
import hashlib
import os
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Union

import numpy as np

#: The key has one CRC-32 per segment of this many bytes (part of the cache key:
#: changing it invalidates every cache entry).
SEGMENT_BYTES = 8 << 20


class Checksum:
    """Cache key of a byte stream: its length and the CRC-32 of every :data:`SEGMENT_BYTES` segment.

    CRC-32 (zlib) rather than a cryptographic hash: the key is computed on every
    cache hit, so its speed bounds a hit's advantage over parsing, and blake2b or
    sha256 are slower (figures: ``docs/notes/libsvm_reader.md``). The key only has
    to notice accidental changes: with the length in it, a changed file keeps its
    key with probability 2**-32. Fixed segments make the key independent of how
    the bytes are fed (parser blocks of any size, or :func:`file_checksum`'s
    parallel reads).
    """

    def __init__(self):
        self.crcs, self.crc, self.filled, self.size = [], 0, 0, 0

    def update(self, data) -> None:
        """Feeds the next bytes (any bytes-like object, any length)."""
        view = memoryview(data).cast("B")
        while len(view):
            take = min(len(view), SEGMENT_BYTES - self.filled)
            self.crc = zlib.crc32(view[:take], self.crc)
            self.filled += take
            self.size += take
            view = view[take:]
            if self.filled == SEGMENT_BYTES:
                self.add_segment(self.crc, 0)
                self.crc, self.filled = 0, 0

    def add_segment(self, crc: int, size: int) -> None:
        """Records a whole segment's CRC (``size`` bytes not yet counted)."""
        self.crcs.append(crc)
        self.size += size

    def key(self) -> str:
        """``"<length>:<16 hex digits>"``, the digits a blake2b of the segments' CRCs."""
        crcs = self.crcs + ([self.crc] if self.filled else [])
        digest = hashlib.blake2b(np.asarray(crcs, "<u4").tobytes(), digest_size=8).hexdigest()
        return f"{self.size}:{digest}"


def file_checksum(path: Union[str, os.PathLike]) -> str:
    """:class:`Checksum` key of a file; segments are read (``os.preadv`` into one
    buffer per thread) and hashed on up to 4 threads (zlib releases the GIL)."""
    if not hasattr(os, "preadv"):  # Windows: one thread, sequential reads
        checksum = Checksum()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(SEGMENT_BYTES), b""):
                checksum.update(block)
        return checksum.key()
    descriptor = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(descriptor).st_size
        starts = range(0, size, SEGMENT_BYTES)
        local = threading.local()

        def segment(start: int):
            buffer = getattr(local, "buffer", None)
            if buffer is None:
                buffer = local.buffer = bytearray(SEGMENT_BYTES)
            view, crc, done = memoryview(buffer), 0, 0
            while done < SEGMENT_BYTES:  # short reads only at the end of the file
                count = os.preadv(descriptor, [view[done:]], start + done)
                if not count:
                    break
                crc = zlib.crc32(view[done: done + count], crc)
                done += count
            return crc, done

        try:
            workers = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            workers = os.cpu_count() or 1
        workers = min(4, workers, len(starts))
        if workers > 1:
            with ThreadPoolExecutor(workers) as pool:
                segments = list(pool.map(segment, starts))
        else:
            segments = [segment(start) for start in starts]
    finally:
        os.close(descriptor)
    checksum = Checksum()
    for crc, count in segments:
        if count == SEGMENT_BYTES:
            checksum.add_segment(crc, count)
        else:  # the last, partial segment (the file may also have shrunk meanwhile)
            checksum.crc, checksum.filled, checksum.size = crc, count, checksum.size + count
            break
    return checksum.key()
