"""Stored files (uploaded batch inputs, batch outputs) and OpenAI batch records: the SQL and the bytes on disk.

A file's bytes are written whole or not at all (edge_agent.fsutil.write_atomic: a temp file in the
same folder, fsync, os.replace, fsync of the folder), and only then the row. A crash before the row
leaves at most a temp or unreferenced file, removed by `sweep()` at start; a row always has its bytes.
"""
from __future__ import annotations

import errno
import hashlib
import json
import secrets
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_agent.fsutil import write_atomic
from edge_agent.store.db import SqliteDatabase

FREE_SPACE_MARGIN = 64 << 20  # keep this much free after a client's upload (the SQLite database needs room too)
ROOM_CHECK_BYTES = 8 << 20  # an upload of unknown length checks the free space again after every this many bytes


class FileTooLargeError(ValueError):
    """The file is larger than the limit (`limit` bytes)."""

    def __init__(self, limit: int):
        super().__init__(f"the file is larger than {limit} bytes: split it into smaller files")
        self.limit = limit


class StorageFullError(OSError):
    """Not enough free space for the file (nothing was written)."""


@dataclass
class FileRecord:
    id: str
    purpose: str
    filename: str
    bytes: int
    sha256: str
    created_at: float

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI `file` object."""
        return {"id": self.id, "object": "file", "bytes": self.bytes, "created_at": int(self.created_at), "filename": self.filename,
                "purpose": self.purpose, "status": "processed", "expires_at": None, "status_details": None}


@dataclass
class BatchRecord:
    id: str
    job_id: str
    run_id: str | None
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict | None
    output_file_id: str | None
    error_file_id: str | None
    created_at: float


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


class FileStore:
    """Files under `folder` (one per id) with their rows in the `files` table."""

    def __init__(self, db: SqliteDatabase, folder: Path):
        self.db = db
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def path(self, file_id: str) -> Path:
        """Where a file's bytes live (ids are ours: hex only, never a path)."""
        if not file_id.startswith("file-") or not file_id[5:].isalnum():
            raise KeyError(file_id)
        return self.folder / file_id

    def create(self, purpose: str, filename: str, data: bytes | Iterable[bytes], max_bytes: int | None = None,
               expected_bytes: int | None = None) -> FileRecord:
        """Store data durably and record it; returns the record.

        Raises FileTooLargeError beyond max_bytes (nothing kept), StorageFullError when the disk
        is full or, for an upload (max_bytes or expected_bytes given), would keep less than
        FREE_SPACE_MARGIN free (nothing kept), OSError for other write failures (nothing kept).
        """
        upload = max_bytes is not None or expected_bytes is not None  # a client's file: keep the margin free
        if upload:
            self._check_room(expected_bytes or 0)
        file_id = new_id("file-")
        final = self.path(file_id)
        digest, size = hashlib.sha256(), 0
        next_check = ROOM_CHECK_BYTES

        def blocks():
            nonlocal size, next_check
            for block in [data] if isinstance(data, (bytes, bytearray)) else data:
                size += len(block)
                if max_bytes is not None and size > max_bytes:
                    raise FileTooLargeError(max_bytes)
                if upload and size >= next_check:  # a streamed upload's size is known only at its end
                    next_check = size + ROOM_CHECK_BYTES
                    self._check_room(0)
                digest.update(block)
                yield block

        try:
            write_atomic(final, blocks())  # whole or not at all; a refusal mid-way leaves nothing
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise StorageFullError(f"the disk is full ({e.strerror}); nothing was stored: free some space and retry") from None
            raise
        rec = FileRecord(file_id, purpose, filename, size, digest.hexdigest(), time.time())
        try:
            with self.db.write() as conn:
                conn.execute("INSERT INTO files(id, purpose, filename, bytes, sha256, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                             (rec.id, rec.purpose, rec.filename, rec.bytes, rec.sha256, rec.created_at))
        except BaseException:
            final.unlink(missing_ok=True)
            raise
        return rec

    def _check_room(self, size: int) -> None:
        free = shutil.disk_usage(self.folder).free
        if free < size + FREE_SPACE_MARGIN:
            raise StorageFullError(f"not enough free disk space ({free >> 20} MiB free; a file must leave {FREE_SPACE_MARGIN >> 20} MiB "
                                   "free): nothing was stored; free some space and retry")

    def get(self, file_id: str) -> FileRecord | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT id, purpose, filename, bytes, sha256, created_at FROM files WHERE id = ?", (file_id,)).fetchone()
        return FileRecord(**dict(row)) if row else None

    def list(self, purpose: str | None = None, limit: int = 100, after: str | None = None, ascending: bool = False) -> list[FileRecord]:
        """Files, newest first (or oldest first), optionally after the file with id `after` (paging)."""
        order = "ASC" if ascending else "DESC"
        sql, args = "SELECT id, purpose, filename, bytes, sha256, created_at FROM files WHERE 1=1", []
        if purpose:
            sql += " AND purpose = ?"
            args.append(purpose)
        if after:
            cmp = ">" if ascending else "<"
            sql += f" AND (created_at, id) {cmp} (SELECT created_at, id FROM files WHERE id = ?)"
            args.append(after)
        sql += f" ORDER BY created_at {order}, id {order} LIMIT ?"
        args.append(limit)
        with self.db.read() as conn:
            return [FileRecord(**dict(r)) for r in conn.execute(sql, args)]

    def read_bytes(self, file_id: str) -> bytes:
        """A file's content. Raises KeyError when the file is unknown."""
        if self.get(file_id) is None:
            raise KeyError(file_id)
        return self.path(file_id).read_bytes()

    def delete(self, file_id: str) -> bool:
        """Remove the row, then the bytes; False when there was no such file."""
        with self.db.write() as conn:
            gone = conn.execute("DELETE FROM files WHERE id = ?", (file_id,)).rowcount
        if gone:
            self.path(file_id).unlink(missing_ok=True)
        return bool(gone)

    def sweep(self, min_age_s: float = 600.0) -> int:
        """Remove temp leftovers and files no row names (a crash between write and insert); returns the count.

        Only files older than min_age_s: another process may be between its write and its insert right now.
        """
        with self.db.read() as conn:
            known = {r[0] for r in conn.execute("SELECT id FROM files")}
        removed = 0
        cutoff = time.time() - min_age_s
        for p in self.folder.iterdir():
            if p.is_file() and (p.suffix == ".part" or p.name not in known) and p.stat().st_mtime < cutoff:
                p.unlink(missing_ok=True)
                removed += 1
        return removed


class BatchStore:
    """Rows of the `batches` table (the OpenAI batch objects; their state comes from the job run)."""

    COLUMNS = "id, job_id, run_id, input_file_id, endpoint, completion_window, metadata, output_file_id, error_file_id, created_at"

    def __init__(self, db: SqliteDatabase):
        self.db = db

    def insert(self, rec: BatchRecord) -> None:
        with self.db.write() as conn:
            conn.execute(f"INSERT INTO batches({self.COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (rec.id, rec.job_id, rec.run_id, rec.input_file_id, rec.endpoint, rec.completion_window,
                          None if rec.metadata is None else json.dumps(rec.metadata), rec.output_file_id, rec.error_file_id,
                          rec.created_at))

    def set_run(self, batch_id: str, run_id: str) -> None:
        with self.db.write() as conn:
            conn.execute("UPDATE batches SET run_id = ? WHERE id = ?", (run_id, batch_id))

    def set_outputs(self, batch_id: str, output_file_id: str | None, error_file_id: str | None) -> None:
        with self.db.write() as conn:
            conn.execute("UPDATE batches SET output_file_id = ?, error_file_id = ? WHERE id = ?", (output_file_id, error_file_id, batch_id))

    def delete(self, batch_id: str) -> None:
        with self.db.write() as conn:
            conn.execute("DELETE FROM batches WHERE id = ?", (batch_id,))

    def get(self, batch_id: str) -> BatchRecord | None:
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {self.COLUMNS} FROM batches WHERE id = ?", (batch_id,)).fetchone()
        return _batch(row) if row else None

    def by_job(self, job_id: str) -> BatchRecord | None:
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {self.COLUMNS} FROM batches WHERE job_id = ?", (job_id,)).fetchone()
        return _batch(row) if row else None

    def list(self, limit: int = 20, after: str | None = None) -> list[BatchRecord]:
        """Batches, newest first, after the batch with id `after` (paging)."""
        sql, args = f"SELECT {self.COLUMNS} FROM batches", []
        if after:
            sql += " WHERE (created_at, id) < (SELECT created_at, id FROM batches WHERE id = ?)"
            args.append(after)
        sql += " ORDER BY created_at DESC, id DESC LIMIT ?"
        args.append(limit)
        with self.db.read() as conn:
            return [_batch(r) for r in conn.execute(sql, args)]


def _batch(row) -> BatchRecord:
    d = dict(row)
    d["metadata"] = json.loads(d["metadata"]) if d["metadata"] else None
    return BatchRecord(**d)
