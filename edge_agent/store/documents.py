"""SQL for documents, chunks and chunk vectors."""
from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import numpy as np

from edge_agent.store.db import SqliteDatabase
from edge_agent.store.text_state import TextState, chunks_digest, mark_stale, text_state

DOC_COLUMNS = (
    "id, source_key, title, path, kind, mime, content_hash, size, mtime, status, error, chunk_count, created_at, updated_at,"
    " reader_version"
)


@dataclass
class DocumentRecord:
    """One row of `documents`."""

    id: int
    source_key: str
    title: str
    path: str | None
    kind: str
    mime: str | None
    content_hash: str
    size: int
    mtime: float | None
    status: str
    error: str | None
    chunk_count: int
    created_at: float
    updated_at: float
    reader_version: int | None = None  # of its kind's loader (rag.reader_version); None: read before versions were recorded

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ChunkRecord:
    """One row of `chunks` (the vector, when present, is a float32 array)."""

    document_id: int
    ordinal: int
    text: str
    char_start: int
    char_end: int
    token_count: int
    page: int | None = None
    heading: str | None = None
    id: int | None = None
    vector: np.ndarray | None = field(default=None, repr=False)


@dataclass
class DocumentMeta:
    """What is known of a document before it is stored."""

    source_key: str
    title: str
    kind: str
    content_hash: str
    size: int
    path: str | None = None
    mime: str | None = None
    mtime: float | None = None
    reader_version: int | None = None  # the reader version it is read with (rag.reader_version)
    # the text a ready version under the same content hash had, when it left before this one was stored (an upload of
    # the same bytes processed in the background: mark_processing sets it); None: unknown, or the old chunks are there
    read_before: TextState | None = None
    # set by replace when it stored the same content hash again (a re-read): whether the title or the text came out
    # differently (True: summary and/or labels marked stale) or the same (False); None: new or changed bytes
    text_changed: bool | None = None


def _doc(row: sqlite3.Row | None) -> DocumentRecord | None:
    return None if row is None else DocumentRecord(**{k: row[k] for k in row.keys()})


def _chunk(row: sqlite3.Row) -> ChunkRecord:
    return ChunkRecord(**{k: row[k] for k in row.keys()})


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class DocumentStore:
    """Documents, chunks and their vectors in one SQLite database."""

    def __init__(self, db: SqliteDatabase):
        self.db = db

    # --- documents --------------------------------------------------------
    def get(self, document_id: int) -> DocumentRecord | None:
        with self.db.read() as conn:
            return _doc(conn.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE id = ?", (document_id,)).fetchone())

    def get_by_key(self, source_key: str) -> DocumentRecord | None:
        with self.db.read() as conn:
            row = conn.execute(f"SELECT {DOC_COLUMNS} FROM documents WHERE source_key = ?", (source_key,)).fetchone()
            return _doc(row)

    def list(self, offset: int = 0, limit: int = 50) -> list[DocumentRecord]:
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT {DOC_COLUMNS} FROM documents ORDER BY id LIMIT ? OFFSET ?", (limit, offset)
            ).fetchall()
        return [_doc(r) for r in rows]  # type: ignore[misc]

    def count(self) -> int:
        with self.db.read() as conn:
            return conn.execute("SELECT count(*) FROM documents").fetchone()[0]

    def replace(self, meta: DocumentMeta, chunks: Sequence[ChunkRecord]) -> tuple[int, list[int], list[int]]:
        """Insert or replace a document and all its chunks and vectors in one transaction.

        Returns (document id, removed chunk ids, new chunk ids); the new ids are set on `chunks`.

        Stored again under the same content hash (a re-read by a newer reader), a document whose text changed gets
        its summary and labels marked stale in the same transaction (store.text_state); one whose title and text
        are the same keeps them current and keeps its updated_at (what changed_only jobs select by); which of the two
        is left on meta.text_changed.
        """
        now = time.time()
        with self.db.write() as conn:
            row = conn.execute("SELECT id, status, content_hash, updated_at FROM documents WHERE source_key = ?",
                               (meta.source_key,)).fetchone()
            stale_summary = stale_labels = False
            updated_at = now
            if row is not None and row["content_hash"] == meta.content_hash:
                before = text_state(conn, int(row["id"])) if row["status"] == "ready" else meta.read_before
                after = TextState(meta.title, chunks_digest((c.text, c.char_start, c.char_end) for c in chunks))
                stale_summary = before is None or before.digest != after.digest
                stale_labels = stale_summary or before is None or before.title != after.title
                meta.text_changed = stale_labels
                if not stale_labels:
                    updated_at = row["updated_at"]
            doc_id, old_ids = self._upsert(conn, meta, "ready", None, len(chunks), now, updated_at)
            if stale_summary or stale_labels:
                mark_stale(conn, doc_id, meta.content_hash, stale_summary, stale_labels)
            new_ids: list[int] = []
            for c in chunks:
                cur = conn.execute(
                    "INSERT INTO chunks(document_id, ordinal, text, page, heading, char_start, char_end, token_count)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (doc_id, c.ordinal, c.text, c.page, c.heading, c.char_start, c.char_end, c.token_count),
                )
                cid = int(cur.lastrowid)  # type: ignore[arg-type]
                c.id, c.document_id = cid, doc_id
                if c.vector is None:
                    raise ValueError("every chunk needs its vector")
                conn.execute(
                    "INSERT INTO chunk_vectors(chunk_id, vector) VALUES (?, ?)",
                    (cid, np.ascontiguousarray(c.vector, dtype="<f4").tobytes()),
                )
                new_ids.append(cid)
        return doc_id, old_ids, new_ids

    def record_failure(self, meta: DocumentMeta, error: str) -> tuple[int, list[int]]:
        """Record a document that could not be ingested (its old chunks are removed); returns (id, removed ids)."""
        with self.db.write() as conn:
            return self._upsert(conn, meta, "failed", error, 0, time.time())

    def mark_processing(self, meta: DocumentMeta) -> tuple[int, list[int]]:
        """Record a document whose upload is being processed in the background (an older version's chunks are
        removed: it is being replaced); returns (id, removed chunk ids). A ready version with the same content hash
        leaves its text on meta.read_before, for replace to compare the new one with."""
        with self.db.write() as conn:
            row = conn.execute("SELECT id, status, content_hash FROM documents WHERE source_key = ?", (meta.source_key,)).fetchone()
            if row is not None and row["status"] == "ready" and row["content_hash"] == meta.content_hash:
                meta.read_before = text_state(conn, int(row["id"]))
            return self._upsert(conn, meta, "processing", None, 0, time.time())

    def fail_processing(self, reason: str) -> int:
        """Mark every document still "processing" failed with `reason` (at start: no process works on them); returns how many."""
        with self.db.write() as conn:
            cur = conn.execute("UPDATE documents SET status = 'failed', error = ?, updated_at = ? WHERE status = 'processing'",
                               (reason, time.time()))
            return cur.rowcount

    def _upsert(
        self, conn: sqlite3.Connection, meta: DocumentMeta, status: str, error: str | None, n: int, now: float,
        updated_at: float | None = None,
    ) -> tuple[int, list[int]]:
        row = conn.execute("SELECT id FROM documents WHERE source_key = ?", (meta.source_key,)).fetchone()
        values = (meta.title, meta.path, meta.kind, meta.mime, meta.content_hash, meta.size, meta.mtime, status, error, n,
                  meta.reader_version)
        if row is None:
            cur = conn.execute(
                "INSERT INTO documents(source_key, title, path, kind, mime, content_hash, size, mtime, status, error,"
                " chunk_count, reader_version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (meta.source_key, *values, now, now),
            )
            return int(cur.lastrowid), []  # type: ignore[arg-type]
        doc_id = int(row[0])
        old = self._delete_chunks(conn, doc_id)
        conn.execute(
            "UPDATE documents SET title=?, path=?, kind=?, mime=?, content_hash=?, size=?, mtime=?, status=?, error=?,"
            " chunk_count=?, reader_version=?, updated_at=? WHERE id=?",
            (*values, now if updated_at is None else updated_at, doc_id),
        )
        return doc_id, old

    @staticmethod
    def _delete_chunks(conn: sqlite3.Connection, doc_id: int) -> list[int]:
        old = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE document_id = ? ORDER BY id", (doc_id,))]
        conn.execute("DELETE FROM chunk_vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE document_id = ?)", (doc_id,))
        conn.execute("DELETE FROM chunks WHERE document_id = ?", (doc_id,))
        return old

    def delete(self, document_id: int) -> list[int] | None:
        """Delete a document with its chunks; returns the removed chunk ids, or None if there was no such document."""
        with self.db.write() as conn:
            if conn.execute("SELECT 1 FROM documents WHERE id = ?", (document_id,)).fetchone() is None:
                return None
            old = self._delete_chunks(conn, document_id)
            conn.execute("DELETE FROM documents WHERE id = ?", (document_id,))
            return old

    # --- chunks -----------------------------------------------------------
    def chunk_ids(self) -> np.ndarray:
        """Every chunk id, ascending, as int64."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT id FROM chunks ORDER BY id").fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def chunk_count(self) -> int:
        with self.db.read() as conn:
            return conn.execute("SELECT count(*) FROM chunks").fetchone()[0]

    def document_ids_of(self, ids: Sequence[int]) -> dict[int, int]:
        """Chunk id -> its document's id, for the given chunk ids; unknown ids are left out."""
        ids = [int(i) for i in ids]
        out: dict[int, int] = {}
        with self.db.read() as conn:
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                rows = conn.execute(f"SELECT id, document_id FROM chunks WHERE id IN ({','.join('?' * len(part))})", part).fetchall()
                out.update((int(r[0]), int(r[1])) for r in rows)
        return out

    def chunks_by_ids(self, ids: Sequence[int]) -> dict[int, tuple[ChunkRecord, DocumentRecord]]:
        """Chunk rows with their documents, keyed by chunk id; unknown ids are left out."""
        out: dict[int, tuple[ChunkRecord, DocumentRecord]] = {}
        ids = [int(i) for i in ids]
        with self.db.read() as conn:
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = conn.execute(
                    "SELECT c.id AS c_id, c.document_id, c.ordinal, c.text, c.page, c.heading, c.char_start, c.char_end,"
                    f" c.token_count, {', '.join('d.' + c.strip() + ' AS d_' + c.strip() for c in DOC_COLUMNS.split(','))}"
                    f" FROM chunks c JOIN documents d ON d.id = c.document_id WHERE c.id IN ({marks})",
                    part,
                ).fetchall()
                for r in rows:
                    chunk = ChunkRecord(
                        id=r["c_id"], document_id=r["document_id"], ordinal=r["ordinal"], text=r["text"],
                        page=r["page"], heading=r["heading"], char_start=r["char_start"], char_end=r["char_end"],
                        token_count=r["token_count"],
                    )
                    doc = DocumentRecord(**{k[2:]: r[k] for k in r.keys() if k.startswith("d_")})
                    out[chunk.id] = (chunk, doc)  # type: ignore[index]
        return out

    def chunks_of(self, document_id: int) -> list[ChunkRecord]:
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT id, document_id, ordinal, text, page, heading, char_start, char_end, token_count"
                " FROM chunks WHERE document_id = ? ORDER BY ordinal",
                (document_id,),
            ).fetchall()
        return [_chunk(r) for r in rows]

    def chunks_in_range(self, document_id: int, first: int, last: int) -> list[ChunkRecord]:
        """The chunks of a document whose ordinal lies in [first, last], in order."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT id, document_id, ordinal, text, page, heading, char_start, char_end, token_count"
                " FROM chunks WHERE document_id = ? AND ordinal BETWEEN ? AND ? ORDER BY ordinal",
                (document_id, first, last),
            ).fetchall()
        return [_chunk(r) for r in rows]

    def iter_vectors(self, dim: int, batch: int = 4096) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield (ids int64, vectors float32 [n, dim]) over every stored vector, in id order.

        Raises ValueError if a stored vector does not have `dim` floats.
        """
        last = -1
        while True:
            with self.db.read() as conn:
                rows = conn.execute(
                    "SELECT chunk_id, vector FROM chunk_vectors WHERE chunk_id > ? ORDER BY chunk_id LIMIT ?", (last, batch)
                ).fetchall()
            if not rows:
                return
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            buf = b"".join(r[1] for r in rows)
            if len(buf) != len(rows) * dim * 4:
                raise ValueError(f"stored vectors are not {dim}-dimensional: re-embed with `edge-agent index rebuild`")
            vecs = np.frombuffer(buf, dtype="<f4").reshape(len(rows), dim).astype(np.float32)
            yield ids, vecs
            last = int(ids[-1])

    def vectors_by_ids(self, ids: Sequence[int], dim: int, batch: int = 500) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield (ids int64, vectors float32 [n, dim]) of the given chunks that have a stored vector.

        Raises ValueError if a stored vector does not have `dim` floats.
        """
        ids = [int(i) for i in ids]
        for start in range(0, len(ids), batch):
            part = ids[start : start + batch]
            with self.db.read() as conn:
                rows = conn.execute(
                    f"SELECT chunk_id, vector FROM chunk_vectors WHERE chunk_id IN ({','.join('?' * len(part))}) ORDER BY chunk_id",
                    part,
                ).fetchall()
            if not rows:
                continue
            buf = b"".join(r[1] for r in rows)
            if len(buf) != len(rows) * dim * 4:
                raise ValueError(f"stored vectors are not {dim}-dimensional: re-embed with `edge-agent index rebuild`")
            yield (np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
                   np.frombuffer(buf, dtype="<f4").reshape(len(rows), dim).astype(np.float32))

    def iter_texts(self, batch: int = 4096) -> Iterator[tuple[np.ndarray, list[str]]]:
        """Yield (ids int64, texts) over every chunk, in id order."""
        last = -1
        while True:
            with self.db.read() as conn:
                rows = conn.execute("SELECT id, text FROM chunks WHERE id > ? ORDER BY id LIMIT ?", (last, batch)).fetchall()
            if not rows:
                return
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            yield ids, [r[1] for r in rows]
            last = int(ids[-1])

    def iter_index_texts(self, batch: int = 4096) -> Iterator[tuple[np.ndarray, list[tuple[str, str | None, str]]]]:
        """Yield (ids int64, [(document title, heading, text)]) over every chunk, in id order (what BM25 indexes)."""
        last = -1
        while True:
            with self.db.read() as conn:
                rows = conn.execute(
                    "SELECT c.id, c.text, c.heading, d.title FROM chunks c JOIN documents d ON d.id = c.document_id"
                    " WHERE c.id > ? ORDER BY c.id LIMIT ?", (last, batch)).fetchall()
            if not rows:
                return
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            yield ids, [(r[3], r[2], r[1]) for r in rows]
            last = int(ids[-1])

    def missing_vectors(self) -> list[int]:
        """Chunk ids that have no stored vector (should be none)."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT c.id FROM chunks c LEFT JOIN chunk_vectors v ON v.chunk_id = c.id WHERE v.chunk_id IS NULL"
            ).fetchall()
        return [r[0] for r in rows]

    def replace_vectors(self, ids: Sequence[int], vectors: np.ndarray) -> None:
        """Overwrite the stored vectors of existing chunks (after re-embedding)."""
        with self.db.write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO chunk_vectors(chunk_id, vector) VALUES (?, ?)",
                [(int(i), np.ascontiguousarray(v, dtype="<f4").tobytes()) for i, v in zip(ids, vectors)],
            )

    def filter_chunk_ids(
        self, document_ids: Sequence[int] | None = None, path_prefix: str | None = None, kinds: Sequence[str] | None = None
    ) -> np.ndarray:
        """Chunk ids of documents that match every given filter (int64, ascending)."""
        where, args = [], []  # type: ignore[var-annotated]
        if document_ids is not None:
            where.append(f"d.id IN ({','.join('?' * len(document_ids))})" if document_ids else "0")
            args.extend(int(i) for i in document_ids)
        if path_prefix is not None:
            where.append("(d.path = ? OR d.path LIKE ? ESCAPE '\\')")
            base = path_prefix.rstrip("/")
            args.extend([base, _like_prefix(base + "/")])
        if kinds is not None:
            where.append(f"d.kind IN ({','.join('?' * len(kinds))})" if kinds else "0")
            args.extend(kinds)
        sql = "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self.db.read() as conn:
            rows = conn.execute(sql + " ORDER BY c.id", args).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    # --- meta and stats ---------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT value FROM index_meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        with self.db.write() as conn:
            conn.execute("INSERT OR REPLACE INTO index_meta(key, value) VALUES (?, ?)", (key, value))

    def record_chunking(self, key: str, value: str, before_key: str) -> tuple[str | None, int]:
        """Record the chunking parameters (value, under index_meta key) the documents are cut with from now on; returns
        (the value recorded before, the number of ready documents marked read by an older reader). When it differs
        from the recorded one, every ready document's reader_version is cleared (rag.reader_version: older than any
        reader, so reindex and ingest read them again, re-chunking them) and the old value is kept under before_key,
        in one transaction. A first recording (none before) marks nothing: what cut the documents is not known."""
        with self.db.write() as conn:
            row = conn.execute("SELECT value FROM index_meta WHERE key = ?", (key,)).fetchone()
            before = None if row is None else row[0]
            if before == value:
                return before, 0
            marked = 0
            if before is not None:
                marked = conn.execute("UPDATE documents SET reader_version = NULL WHERE status = 'ready'"
                                      " AND reader_version IS NOT NULL").rowcount
                conn.execute("INSERT OR REPLACE INTO index_meta(key, value) VALUES (?, ?)", (before_key, before))
            conn.execute("INSERT OR REPLACE INTO index_meta(key, value) VALUES (?, ?)", (key, value))
            return before, marked

    def reader_counts(self) -> list[tuple[str, int | None, str, int]]:
        """Ready documents counted by (kind, reader_version, source), source "file" (read from a path on this
        server), "upload" or "text" (the text as sent: no loader reads it)."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT kind, reader_version, CASE WHEN path IS NOT NULL THEN 'file' WHEN source_key LIKE 'upload:%' THEN 'upload'"
                " ELSE 'text' END AS source, count(*) FROM documents WHERE status = 'ready' GROUP BY 1, 2, 3").fetchall()
        return [(r[0], r[1], r[2], int(r[3])) for r in rows]

    def readers_under(self, folder: str) -> dict[str, tuple[str, int | None]]:
        """path -> (kind, reader_version) of the ready documents read from a file under folder."""
        prefix = folder.rstrip("/") + "/"
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT path, kind, reader_version FROM documents WHERE status = 'ready' AND substr(path, 1, length(?)) = ?",
                (prefix, prefix)).fetchall()
        return {r[0]: (r[1], r[2]) for r in rows}

    def stats(self) -> dict[str, Any]:
        """Counts of documents by status and kind, chunks and tokens."""
        with self.db.read() as conn:
            by_status = dict(conn.execute("SELECT status, count(*) FROM documents GROUP BY status").fetchall())
            by_kind = dict(conn.execute("SELECT kind, count(*) FROM documents GROUP BY kind").fetchall())
            chunks, tokens = conn.execute("SELECT count(*), coalesce(sum(token_count), 0) FROM chunks").fetchone()
            size = conn.execute("SELECT coalesce(sum(size), 0) FROM documents").fetchone()[0]
        return {
            "documents": sum(by_status.values()),
            "documents_by_status": by_status,
            "documents_by_kind": by_kind,
            "chunks": chunks,
            "tokens": tokens,
            "bytes": size,
        }
