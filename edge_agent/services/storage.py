"""Free disk space for the document store: checks before large writes, the status /ready and doctor show,
and recognising a write that failed because the disk is full.

A write that would leave less than `min_free_bytes` on its disk is refused before it starts
(InsufficientStorageError: HTTP 507 with the bytes needed), so a full disk never leaves half a
document behind; one that fails anyway (another process filled the disk meanwhile) is rolled back
by SQLite and reported the same way.
"""
from __future__ import annotations

import errno
import shutil
from pathlib import Path
from typing import Any

from edge_agent.services.document_results import DocumentError

SQLITE_FULL = 13
_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}


class InsufficientStorageError(DocumentError):
    """Not enough free disk space for a write; nothing was written. `needed` / `free` are bytes."""

    code = "insufficient_storage"

    def __init__(self, message: str, needed: int = 0, free: int = 0):
        super().__init__(message)
        self.needed = needed
        self.free = free


def free_bytes(path: Path) -> int:
    """Free bytes (for an unprivileged user) on the disk that holds `path` (or its nearest existing parent)."""
    p = Path(path).resolve()
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


def ensure_room(path: Path, needed: int, reserve: int, what: str) -> None:
    """Raise InsufficientStorageError unless writing `needed` bytes under `path` leaves `reserve` free."""
    free = free_bytes(path)
    if free - needed < reserve:
        short = needed + reserve - free
        raise InsufficientStorageError(
            f"insufficient storage: {what} needs about {needed} bytes and the disk keeps {reserve} bytes free "
            f"(min_free_bytes), but only {free} bytes are free: free {short} bytes or more (or delete documents) and retry",
            needed=needed, free=free,
        )


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether an exception (or one it was raised from or while handling) is a full disk or quota."""
    seen = 0
    while exc is not None and seen < 8:
        if getattr(exc, "sqlite_errorcode", None) == SQLITE_FULL or "database or disk is full" in str(exc):
            return True
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


SQLITE_READONLY = 8  # also its extended codes (SQLITE_READONLY_DBMOVED, ...): the low byte


def write_blocked_reason(exc: BaseException | None) -> str | None:
    """What keeps the data folder from being written, when that is why `exc` (or its cause) was raised: the disk is
    full, or the folder or its file system is read-only (a disk remounted read-only after errors). None otherwise.
    Such a failure passes once an operator makes room or remounts; it is no reason for a background thread to die."""
    if is_disk_full(exc):
        return "the data disk is full"
    seen = 0
    while exc is not None and seen < 8:
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF == SQLITE_READONLY or "readonly database" in str(exc):
            return "the database cannot be written (read-only)"
        if isinstance(exc, OSError) and exc.errno == errno.EROFS:
            return "the data folder is on a read-only file system"
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def disk_full_error(what: str, path: Path, reserve: int) -> InsufficientStorageError:
    """The error for a write that failed on a full disk (after SQLite rolled it back)."""
    free = free_bytes(path)
    return InsufficientStorageError(
        f"insufficient storage: the disk filled up while {what}; SQLite rolled it back, so nothing changed. "
        f"{free} bytes are free and {reserve} are kept in reserve (min_free_bytes): free space and retry",
        free=free,
    )


def disk_status(settings: Any) -> dict[str, Any]:
    """Free space of the data and index disks against min_free_bytes (no paths: /ready shows this).

    {"ok": bool, "min_free_bytes": int, "disks": {"data": {...}, "index": {...}}, "message": str | None};
    each disk: free_bytes, total_bytes, ok. `message` says what to do when a disk is low.
    """
    reserve = int(getattr(settings, "min_free_bytes", 0))
    disks: dict[str, Any] = {}
    low = []
    for name, folder in (("data", settings.data_dir), ("index", settings.index_dir)):
        p = Path(folder).resolve()
        while not p.exists() and p != p.parent:
            p = p.parent
        try:
            usage = shutil.disk_usage(p)
        except OSError as exc:
            disks[name] = {"free_bytes": None, "total_bytes": None, "ok": False, "error": exc.strerror or type(exc).__name__}
            low.append(name)
            continue
        ok = usage.free >= reserve
        disks[name] = {"free_bytes": usage.free, "total_bytes": usage.total, "ok": ok}
        if not ok:
            low.append(name)
    message = None
    if low:
        message = (f"low disk space on the {' and '.join(low)} disk (under min_free_bytes = {reserve} bytes free): "
                   "documents cannot be added until space is freed or documents are deleted")
    return {"ok": not low, "min_free_bytes": reserve, "disks": disks, "message": message}
