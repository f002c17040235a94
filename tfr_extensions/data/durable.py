"""Files that reach the disk before they are published, and folders that prove they are whole.

What the LibSVM cache (:mod:`~tfr_extensions.data.cache`) and the jobs' backups and
outputs (``pipelines``) keep on disk goes through here:

* :func:`replace_durably`: a finished temporary file or folder is ``fsync``ed (every
  file, then every folder in it), renamed over its final name, and the folder that
  holds it is ``fsync``ed, so that after a power loss the name points at the whole
  new content or at the old one, never at empty or half-written files.
* :func:`write_manifest` / :func:`verify_folder`: a folder's ``manifest.json``,
  written last, lists each file's size and :func:`~tfr_extensions.data.checksum.file_checksum`
  (CRC-32 per 8 MiB segment: the cheapest check that notices accidental damage;
  figures in ``docs/caches_and_backups.md``) and carries a checksum of its own
  text. A truncated, emptied or overwritten file, or a damaged manifest, raises
  :class:`DamagedError` naming the file and what is wrong.

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.bin").write_bytes(b"0123456789")
    >>> sorted(write_manifest(folder, {"epochs": 3})["files"])
    ['a.bin']
    >>> verify_folder(folder)["epochs"]
    3
    >>> _ = (folder / "a.bin").write_bytes(b"01234")
    >>> verify_folder(folder)
    Traceback (most recent call last):
    ...
    tfr_extensions.data.durable.DamagedError: a.bin has 5 bytes, its manifest says 10
    >>> shutil.rmtree(folder)
"""
import json
import os
import shutil
from typing import Any, Dict, List, Mapping, Optional, Union

from tfr_extensions.data.checksum import Checksum, file_checksum

PathLike = Union[str, os.PathLike]
MANIFEST_FILE = "manifest.json"
#: the manifest layout (its ``format`` field)
MANIFEST_FORMAT = 1
_SELF_KEY = "manifest_checksum"


class DamagedError(ValueError):
    """A file or folder is not what was written: truncated, emptied, overwritten or
    missing (the message names the file and the difference)."""


def fsync_path(path: PathLike) -> None:
    """``fsync`` of a file or folder (a folder: its entries). Systems that cannot open
    a folder (Windows) skip folders."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except (IsADirectoryError, PermissionError):
        if os.path.isdir(path):
            return
        raise
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def fsync_tree(path: PathLike) -> None:
    """``fsync`` of a file, or of every file and folder under a folder (itself last)."""
    if not os.path.isdir(path):
        fsync_path(path)
        return
    for root, folders, files in os.walk(path, topdown=False):
        for name in files:
            fsync_path(os.path.join(root, name))
        for name in folders:
            fsync_path(os.path.join(root, name))
    fsync_path(path)


def replace_durably(temp: PathLike, final: PathLike) -> None:
    """Publishes the finished file or folder ``temp`` as ``final``: :func:`fsync_tree`,
    ``os.replace`` (a folder replaces only a missing or empty ``final``), then an
    ``fsync`` of the parent folder, which makes the rename itself durable."""
    fsync_tree(temp)
    os.replace(temp, final)
    fsync_path(os.path.dirname(os.path.abspath(final)))


def _files(folder: PathLike) -> List[str]:
    """Relative paths (``/``-separated, sorted) of the regular files under ``folder``,
    the manifest aside."""
    found = []
    for root, _, files in os.walk(folder):
        for name in files:
            relative = os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/")
            if relative != MANIFEST_FILE:
                found.append(relative)
    return sorted(found)


def _self_checksum(manifest: Mapping[str, Any]) -> str:
    checksum = Checksum()
    checksum.update(json.dumps({k: v for k, v in manifest.items() if k != _SELF_KEY},
                               sort_keys=True, allow_nan=False).encode())
    return checksum.key()


def describe_files(folder: PathLike, names: Optional[List[str]] = None) -> Dict[str, Any]:
    """``{relative path: {"bytes": size, "checksum": file_checksum}}`` for ``names``
    (default: every file under ``folder`` but the manifest)."""
    return {name: {"bytes": os.path.getsize(os.path.join(folder, name)),
                   "checksum": file_checksum(os.path.join(folder, name))}
            for name in (_files(folder) if names is None else names)}


def sealed(record: Mapping[str, Any]) -> Dict[str, Any]:
    """``record`` with a checksum of its own JSON (``manifest_checksum``), which
    :func:`check_sealed` verifies."""
    record = {k: v for k, v in record.items() if k != _SELF_KEY}
    return {**record, _SELF_KEY: _self_checksum(record)}


def check_sealed(record: Any, what: str) -> Dict[str, Any]:
    """``record`` if it is a dict whose ``manifest_checksum`` matches its content;
    :class:`DamagedError` otherwise."""
    if not isinstance(record, dict) or record.get(_SELF_KEY) != _self_checksum(record):
        raise DamagedError(f"{what} does not match its own checksum")
    return record


def write_manifest(folder: PathLike, extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Writes ``<folder>/manifest.json`` (call it once every other file is written): the
    fields of ``extra``, ``format``, and ``files`` (:func:`describe_files`), sealed
    (:func:`sealed`); the manifest is ``fsync``ed. Returns it."""
    manifest = sealed({**dict(extra or {}), "format": MANIFEST_FORMAT,
                       "files": describe_files(folder)})
    path = os.path.join(folder, MANIFEST_FILE)
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True, allow_nan=False)
        f.flush()
        os.fsync(f.fileno())
    return manifest


def read_manifest(folder: PathLike) -> Dict[str, Any]:
    """The folder's manifest, checked against its own checksum; :class:`DamagedError`
    when it is missing, not JSON or altered."""
    path = os.path.join(folder, MANIFEST_FILE)
    try:
        with open(path, "rb") as f:
            manifest = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError as error:
        raise DamagedError(f"{MANIFEST_FILE} is missing") from error
    except ValueError as error:  # JSON or UTF-8
        raise DamagedError(f"{MANIFEST_FILE} is not valid JSON ({error})") from error
    check_sealed(manifest, MANIFEST_FILE)
    if manifest.get("format") != MANIFEST_FORMAT or not isinstance(manifest.get("files"), dict):
        raise DamagedError(f"{MANIFEST_FILE} has an unknown layout")
    return manifest


def check_files(folder: PathLike, files: Mapping[str, Any], checksums: bool = True) -> None:
    """:class:`DamagedError` unless every file of ``files`` (:func:`describe_files`'s
    layout) has its size and, with ``checksums``, its checksum."""
    for name, expected in files.items():
        path = os.path.join(folder, name)
        try:
            size = os.path.getsize(path)
        except OSError as error:
            raise DamagedError(f"{name} is missing") from error
        if size != expected.get("bytes"):
            raise DamagedError(f"{name} has {size} bytes, its manifest says "
                               f"{expected.get('bytes')}")
        if checksums and file_checksum(path) != expected.get("checksum"):
            raise DamagedError(f"{name} does not match its checksum (bytes overwritten)")


def verify_folder(folder: PathLike, checksums: bool = True) -> Dict[str, Any]:
    """The manifest of ``folder`` once every file it lists has its size and, with
    ``checksums``, its checksum; :class:`DamagedError` otherwise."""
    manifest = read_manifest(folder)
    check_files(folder, manifest["files"], checksums)
    return manifest


def remove(path: PathLike) -> None:
    """Deletes a file or folder, if it exists."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)
