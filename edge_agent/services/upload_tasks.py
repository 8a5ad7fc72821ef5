"""Uploads that overlap or take long: one ingestion per source key at a time, and background processing.

Identical uploads sent at once (a client retrying, several tabs) each read, chunked and embedded the
bytes and all answered "added". `KeyedLocks` serialises the ingestions of one source key, so the first
adds the document and the others find it ("unchanged", the same document id); different documents
still load and embed in parallel.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class KeyedLocks:
    """One lock per key, made on first use and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, list] = {}  # key -> [its lock, how many hold or wait for it]

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        """Hold the key's lock for the block (waits while another thread holds it)."""
        with self._guard:
            entry = self._locks.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._guard:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._locks[key]

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)
