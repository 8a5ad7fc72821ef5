"""One writing process per document index: an exclusive lock file in the index folder.

The daemon holds it while it runs; `edge-agent index` commands that write take it too. A second
writer (another daemon, or the CLI adding files while the daemon runs) would otherwise keep its
own in-memory index and overwrite the other's FAISS file. The kernel releases the lock when the
process dies, so a killed daemon never leaves the index locked (fsutil.PidLock).
"""
from __future__ import annotations

from pathlib import Path

from edge_agent.fsutil import LockHeldError as IndexBusyError, PidLock

__all__ = ["LOCK_FILE", "IndexBusyError", "OwnerLock"]

LOCK_FILE = ".owner.lock"


class OwnerLock(PidLock):
    """An exclusive, non-blocking lock on `<index_dir>/.owner.lock` naming its holder's pid (acquire raises IndexBusyError)."""

    def __init__(self, index_dir: Path):
        super().__init__(Path(index_dir) / LOCK_FILE, f"the document index in {index_dir}")
