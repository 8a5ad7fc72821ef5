"""Durable files, written whole or not at all (ARCHITECTURE.md, convention 4), and owner locks; every layer may import it.

The recipe: write a temp file in the same folder, fsync it, os.replace it over the target,
fsync the folder so the rename survives a power cut. A failure (a full disk) removes the temp
file and leaves the old target as it was. Temp names start with "." and contain ".tmp", so
a folder's owner can sweep what a killed process left (rag.index.clean_leftovers).

An owner lock (PidLock) is an exclusive flock on a file that names its holder's pid: one daemon per
data dir (server.py), one writer per document index (rag/owner.py). The kernel releases it when the
process dies (kill -9 too), so a stale lock file never blocks the next start.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename inside it is durable."""
    fd = os.open(str(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_path(path: Path) -> Path:
    """A temp name next to path, unique per process and thread (".NAME.tmpPID.TID")."""
    return path.with_name(f".{path.name}.tmp{os.getpid()}.{threading.get_ident()}")


def write_atomic(path: Path, data: bytes | Iterable[bytes | memoryview]) -> None:
    """Write bytes (or chunks of bytes) to path whole or not at all; raises OSError (the old file is then untouched)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            for c in [data] if isinstance(data, (bytes, bytearray, memoryview)) else data:
                f.write(c)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def write_json_atomic(path: Path, data: Any, indent: int | None = 2) -> None:
    """write_atomic of data as UTF-8 JSON; raises OSError, TypeError (not serialisable)."""
    write_atomic(path, json.dumps(data, indent=indent, ensure_ascii=False).encode("utf-8"))


def publish(tmp: Path, dest: Path) -> None:
    """Move a finished temp file (written by a library, e.g. onnx.save) over dest durably; raises OSError."""
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, dest)
    fsync_dir(Path(dest).parent)


def replace_dir(tmp: Path, dest: Path) -> None:
    """Swap a finished folder into place (the old one, if any, is moved aside first, then deleted); raises OSError.

    Between the two renames dest is briefly absent; it is never half-written.
    """
    tmp, dest = Path(tmp), Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    old = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.old{os.getpid()}")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(dest, old)
    os.replace(tmp, dest)
    fsync_dir(dest.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


class LockHeldError(RuntimeError):
    """Another process holds a PidLock; `pid` is that process's (None if it did not say)."""

    def __init__(self, message: str, pid: int | None):
        super().__init__(message)
        self.pid = pid


class PidLock:
    """An exclusive, non-blocking flock on `path` naming its holder's pid; `what` names the thing it guards in errors."""

    def __init__(self, path: Path, what: str):
        self.path = Path(path)
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> "PidLock":
        """Take the lock or raise LockHeldError at once (never waits); raises OSError when the folder is not writable."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            who = f"process {pid}" if pid else "another process"
            raise LockHeldError(f"{self.what} is in use by {who}", pid) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
