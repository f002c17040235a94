"""The cache key of a file: the same for any way its bytes are fed, and byte-identical
across versions (existing cache entries stay valid)."""
import numpy as np
import pytest

from tfr_extensions.data import checksum as checksum_module
from tfr_extensions.data.checksum import SEGMENT_BYTES, Checksum, file_checksum


def _write(tmp_path, text, name="data.bin"):
    path = tmp_path / name
    path.write_bytes(text)
    return path


@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 640, 1000])
def test_lookup_key_equals_the_key_of_the_bytes_parsed(tmp_path, monkeypatch, size):
    """The parallel whole-file checksum (cache lookup) and the one fed by parser blocks
    (cache write) agree for any block size, across segment boundaries."""
    monkeypatch.setattr(checksum_module, "SEGMENT_BYTES", 64)
    text = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    path = _write(tmp_path, text, name="bytes.bin")
    key = file_checksum(path)
    assert key.startswith(f"{size}:")
    for block in (1, 7, 64, 100, 4096):
        checksum = Checksum()
        for start in range(0, size, block):
            checksum.update(text[start:start + block])
        assert checksum.key() == key, block
    changed = bytearray(text)
    if size:
        changed[size // 2] ^= 1  # one bit anywhere changes the key
        assert file_checksum(_write(tmp_path, bytes(changed), name="b2.bin")) != key


def test_keys_are_those_of_earlier_versions(tmp_path):
    """Keys pinned from the reader before the split into modules: a short stream, and a
    file of one whole segment plus a tail read on threads."""
    checksum = Checksum()
    checksum.update(b"1 qid:1 1:0.5\n")
    assert checksum.key() == "14:08df59fabebb333b"
    assert SEGMENT_BYTES == 8 << 20
    text = bytes(range(256)) * (SEGMENT_BYTES // 256) + b"tail\n"
    assert file_checksum(_write(tmp_path, text)) == "8388613:16b697b22232cc7b"
