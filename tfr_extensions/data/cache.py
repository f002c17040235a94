"""The LibSVM reader's binary cache: entry keys, the cache folder, and reading and writing entries.

An entry is a folder ``<file name>.<path key>.<content key>`` in the cache
folder (:func:`default_cache_dir`: ``$TFRX_CACHE_DIR``, else
``~/.cache/tfr_extensions/libsvm``) holding one ``.npy`` per array of
:class:`LibSVMData` (``features``, ``labels``, ``qids``, ``query_offsets``, and
``docids`` when read). The path key hashes the file's absolute path; the content
key hashes the path, the file's :mod:`~tfr_extensions.data.checksum` key,
:data:`CACHE_FORMAT` and the read's options (:func:`read_options`). Writing an
entry drops the other entries of the same path, so one file keeps one entry.

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> data = LibSVMData(np.ones((3, 2), np.float32), np.array([1, 0, 2], np.float32),
    ...                   np.array([7, 7, 9]), np.array([0, 2, 3]))
    >>> options = read_options(num_features=None, null_value=0.0, docids=False)
    >>> entry = entry_path(folder, pathlib.Path("/data/train.txt"), "36:0123abcd", options)
    >>> entry.name.startswith("train.txt.")
    True
    >>> save_entry(entry, data)
    >>> load_entry(entry, mmap=True, docids=False).query_offsets.tolist()
    [0, 2, 3]
    >>> shutil.rmtree(folder)
"""
import hashlib
import json
import os
import pathlib
import shutil
from typing import Optional

import numpy as np

from tfr_extensions.data.checksum import Checksum
from tfr_extensions.data.libsvm_data import LibSVMData

#: Part of every content key: bump it when the parser's output or the entry layout changes.
CACHE_FORMAT = 2
_ARRAYS = ("features", "labels", "qids", "query_offsets")


def default_cache_dir() -> pathlib.Path:
    """``$TFRX_CACHE_DIR``, else ``~/.cache/tfr_extensions/libsvm``."""
    env = os.environ.get("TFRX_CACHE_DIR")
    return (pathlib.Path(env) if env
            else pathlib.Path.home() / ".cache" / "tfr_extensions" / "libsvm")


def read_options(num_features: Optional[int], null_value: float, docids: bool,
                 group: Optional[pathlib.Path] = None,
                 group_bytes: Optional[bytes] = None) -> dict:
    """The options of a read that its entry is keyed on (a JSON-able dict).

    ``group`` and its content ``group_bytes``: the group file, or None.
    """
    group_key = None
    if group is not None:
        group_checksum = Checksum()
        group_checksum.update(group_bytes)
        group_key = [str(group), group_checksum.key()]
    return {"num_features": num_features, "null_value": float(null_value),
            "docids": bool(docids), "group": group_key}


def entry_path(cache_dir: pathlib.Path, path: pathlib.Path, content: str,
               options: dict) -> pathlib.Path:
    """``<name>.<path key>.<content key>`` in ``cache_dir``; ``content`` is the file's
    checksum key, ``options`` :func:`read_options`'s dict."""
    path_key = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    content_key = hashlib.sha256(json.dumps(
        [str(path), content, CACHE_FORMAT, options], sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir / f"{path.name}.{path_key}.{content_key}"


def load_entry(entry: pathlib.Path, mmap: bool, docids: bool) -> Optional[LibSVMData]:
    """The entry's data, None when it is missing or incomplete; with ``mmap``,
    ``features`` is a read-only ``np.memmap``."""
    names = _ARRAYS + (("docids",) if docids else ())
    if not all((entry / f"{name}.npy").is_file() for name in names):
        return None
    arrays = {name: np.load(entry / f"{name}.npy", mmap_mode="r" if mmap and name == "features"
                            else None, allow_pickle=False) for name in names}
    return LibSVMData(**arrays)


def save_entry(entry: pathlib.Path, data: LibSVMData) -> None:
    """Writes a fresh entry atomically (temp dir + rename) and drops stale ones."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    stem = entry.name.rsplit(".", 1)[0]
    for stale in entry.parent.glob(f"{stem}.*"):
        if stale != entry and not stale.name.endswith(".tmp"):
            shutil.rmtree(stale, ignore_errors=True)
    temp = entry.parent / f"{entry.name}.{os.getpid()}.tmp"
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir()
    for name in _ARRAYS + (("docids",) if data.docids is not None else ()):
        np.save(temp / f"{name}.npy", np.asarray(getattr(data, name)), allow_pickle=False)
    try:
        os.replace(temp, entry)
    except OSError:  # another process wrote the same entry first
        shutil.rmtree(temp, ignore_errors=True)
