"""One writing process per document index: an exclusive lock file in the index folder.

The daemon holds it while it runs; `edge-agent index` commands that write take it too. A second
writer (another daemon, or the CLI adding files while the daemon runs) would otherwise keep its
own in-memory index and overwrite the other's FAISS file. The kernel releases the lock when the
process dies, so a killed daemon never leaves the index locked.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = ".owner.lock"


class IndexBusyError(RuntimeError):
    """Another process holds the index; `pid` is that process's (None if it did not say)."""

    def __init__(self, message: str, pid: int | None):
        super().__init__(message)
        self.pid = pid


class OwnerLock:
    """An exclusive, non-blocking lock on `<index_dir>/.owner.lock` naming its holder's pid."""

    def __init__(self, index_dir: Path):
        self.path = Path(index_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> "OwnerLock":
        """Take the lock or raise IndexBusyError at once (never waits)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            who = f"process {pid}" if pid else "another process"
            raise IndexBusyError(f"the document index in {self.path.parent} is in use by {who}", pid) from None
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
