"""The LibSVM reader's binary cache: entry keys, the cache folder, and reading and writing entries.

An entry is a folder ``<file name>.<path key>.<content key>`` in the cache
folder (:func:`default_cache_dir`: ``$TFRX_CACHE_DIR``, else
``~/.cache/tfr_extensions/libsvm``) holding one ``.npy`` per array of
:class:`LibSVMData` (``features``, ``labels``, ``qids``, ``query_offsets``, and
``docids`` when read) and, written last, ``manifest.json``
(:mod:`~tfr_extensions.data.durable`): each array's shape and dtype, each file's
size and checksum. The path key hashes the file's absolute path; the content
key hashes the path, the file's :mod:`~tfr_extensions.data.checksum` key,
:data:`CACHE_FORMAT` and the read's options (:func:`read_options`). Writing an
entry drops the other entries of the same path, so one file keeps one entry, and
reaches the disk (``fsync``) before the rename that publishes it.

An entry is verified before it is served: on every read, the manifest and each
file's size, and each array's shape and dtype against its ``.npy`` header; the
files' checksums the first time a process opens the entry (again whenever a
file's size, modification time or inode changed). A damaged or incomplete entry
is reported once by a warning that names it, deleted, and the source file parsed
again and written anew, so the result always equals reading the source
(verification cost: ``docs/caches_and_backups.md``).

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
import threading
import warnings
from typing import Dict, Optional, Tuple

import numpy as np

from tfr_extensions.data import durable
from tfr_extensions.data.checksum import Checksum
from tfr_extensions.data.libsvm_data import LibSVMData

#: Part of every content key: bump it when the parser's output or the entry layout changes
#: (3: entries carry a manifest).
CACHE_FORMAT = 3
_ARRAYS = ("features", "labels", "qids", "query_offsets")
#: entry folder -> its files' (size, mtime, inode) when this process last checked their
#: checksums: a later read of unchanged files checks their sizes only
_VERIFIED: Dict[str, Tuple] = {}
_VERIFIED_LOCK = threading.Lock()


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


def _stats(entry: pathlib.Path, names) -> Tuple:
    stats = [os.stat(entry / name) for name in (durable.MANIFEST_FILE, *names)]
    return tuple((s.st_size, s.st_mtime_ns, s.st_ino) for s in stats)


def _load_verified(entry: pathlib.Path, mmap: bool, names) -> LibSVMData:
    """The entry's arrays once its manifest, sizes, shapes, dtypes and (first open in
    this process, or files changed) checksums check; DamagedError otherwise."""
    manifest = durable.read_manifest(entry)
    arrays_meta = manifest.get("arrays", {})
    files = manifest["files"]
    expected = {f"{name}.npy" for name in names}
    if set(arrays_meta) != set(names) or set(files) != expected:
        raise durable.DamagedError(f"{durable.MANIFEST_FILE} lists {sorted(files)}, "
                                   f"the entry needs {sorted(expected)}")
    durable.check_files(entry, files, checksums=False)
    file_names = sorted(expected)
    stats = _stats(entry, file_names)
    with _VERIFIED_LOCK:
        known = _VERIFIED.get(str(entry)) == stats
    if not known:
        durable.check_files(entry, files, checksums=True)
    arrays = {}
    for name in names:
        array = np.load(entry / f"{name}.npy", mmap_mode="r" if mmap and name == "features"
                        else None, allow_pickle=False)
        meta = arrays_meta[name]
        if list(array.shape) != meta.get("shape") or array.dtype.str != meta.get("dtype"):
            raise durable.DamagedError(
                f"{name}.npy holds {array.dtype.str} {list(array.shape)}, its manifest says "
                f"{meta.get('dtype')} {meta.get('shape')}")
        arrays[name] = array
    if not known:
        with _VERIFIED_LOCK:
            _VERIFIED[str(entry)] = stats
    return LibSVMData(**arrays)


def load_entry(entry: pathlib.Path, mmap: bool, docids: bool) -> Optional[LibSVMData]:
    """The entry's data once verified (module docstring); None when there is no entry,
    or when it is damaged or incomplete: then a warning names it and it is deleted,
    so that the caller parses the source and writes it anew. With ``mmap``,
    ``features`` is a read-only ``np.memmap``."""
    if not entry.is_dir():
        return None
    names = _ARRAYS + (("docids",) if docids else ())
    try:
        return _load_verified(entry, mmap, names)
    except (ValueError, OSError, EOFError) as error:  # DamagedError, or numpy's own
        warnings.warn(f"The LibSVM cache entry {entry} is damaged ({error}): the file is "
                      "parsed again and the entry rewritten.", UserWarning, stacklevel=3)
        with _VERIFIED_LOCK:
            _VERIFIED.pop(str(entry), None)
        shutil.rmtree(entry, ignore_errors=True)
        return None


def save_entry(entry: pathlib.Path, data: LibSVMData) -> None:
    """Writes a fresh entry, its manifest last, durably (``fsync``) and atomically
    (temp dir + rename), and drops stale ones."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    stem = entry.name.rsplit(".", 1)[0]
    for stale in entry.parent.glob(f"{stem}.*"):
        if stale != entry and not stale.name.endswith(".tmp"):
            shutil.rmtree(stale, ignore_errors=True)
    temp = entry.parent / f"{entry.name}.{os.getpid()}.tmp"
    shutil.rmtree(temp, ignore_errors=True)
    temp.mkdir()
    arrays = {}
    for name in _ARRAYS + (("docids",) if data.docids is not None else ()):
        array = np.asarray(getattr(data, name))
        np.save(temp / f"{name}.npy", array, allow_pickle=False)
        arrays[name] = {"shape": list(array.shape), "dtype": array.dtype.str}
    durable.write_manifest(temp, {"arrays": arrays})
    try:
        durable.replace_durably(temp, entry)
    except OSError:  # another process wrote the same entry first
        shutil.rmtree(temp, ignore_errors=True)
