"""FileStore: bytes written whole or not at all, rows only for complete files, leftovers swept."""
from __future__ import annotations

import os
import time

import pytest

from edge_agent.store.db import SqliteDatabase
from edge_agent.store.files import FileStore, FileTooLargeError


def test_files_whole_or_not_at_all(tmp_path):
    fs = FileStore(SqliteDatabase(tmp_path / "x.db"), tmp_path / "files")
    rec = fs.create("batch", "in.jsonl", [b"line 1\n", b"line 2\n"])
    assert fs.read_bytes(rec.id) == b"line 1\nline 2\n" and rec.bytes == 14 and len(rec.sha256) == 64
    with pytest.raises(FileTooLargeError):
        fs.create("batch", "big.jsonl", (b"x" * 1000 for _ in range(10)), max_bytes=5000)
    assert [r.id for r in fs.list()] == [rec.id]
    assert sorted(p.name for p in fs.folder.iterdir()) == [rec.id]  # no partial file, no row
    # a crash between the write and the row leaves a file no row names: swept once it is old enough
    orphan = fs.folder / "file-0123abcd"
    orphan.write_bytes(b"half")
    assert fs.sweep() == 0 and orphan.exists()  # may be another process's file in flight
    os.utime(orphan, (time.time() - 3600,) * 2)
    assert fs.sweep() == 1 and not orphan.exists() and fs.read_bytes(rec.id)
    assert fs.delete(rec.id) and not fs.delete(rec.id) and fs.get(rec.id) is None and not any(fs.folder.iterdir())
    with pytest.raises(KeyError):
        fs.path("../../etc/passwd")
