"""The vectors of a new embedding model, written beside the served ones while the index re-embeds.

A switch of embedding model must not take search down: the served vectors (chunk_vectors) stay
until every chunk has a vector of the new model here; `promote` then moves them over in one
transaction. Rows survive a restart, so the re-embedding resumes where it stopped.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from edge_agent.store.db import SqliteDatabase


class NextVectorStore:
    """SQL for chunk_vectors_next (migration 4). Every write goes through the database's single writer."""

    def __init__(self, db: SqliteDatabase):
        self.db = db

    def pending(self, model: str, batch: int = 64) -> tuple[np.ndarray, list[str]]:
        """Up to `batch` (chunk ids, texts) that have no vector of `model` yet, in id order."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT c.id, c.text FROM chunks c LEFT JOIN chunk_vectors_next n ON n.chunk_id = c.id AND n.model = ? "
                "WHERE n.chunk_id IS NULL ORDER BY c.id LIMIT ?", (model, batch)).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)), [r[1] for r in rows]

    def put(self, model: str, ids: Sequence[int], vectors: np.ndarray) -> None:
        """Store vectors of `model` for chunks that still exist (a chunk deleted meanwhile is skipped)."""
        with self.db.write() as conn:
            conn.execute("DELETE FROM chunk_vectors_next WHERE model != ?", (model,))  # a switch to a third model
            conn.executemany(
                "INSERT OR REPLACE INTO chunk_vectors_next(chunk_id, model, vector) SELECT ?, ?, ? WHERE EXISTS "
                "(SELECT 1 FROM chunks WHERE id = ?)",
                [(int(i), model, np.ascontiguousarray(v, dtype="<f4").tobytes(), int(i)) for i, v in zip(ids, vectors)],
            )

    def progress(self, model: str) -> tuple[int, int]:
        """(chunks with a vector of `model`, all chunks)."""
        with self.db.read() as conn:
            done = conn.execute("SELECT COUNT(*) FROM chunk_vectors_next WHERE model = ?", (model,)).fetchone()[0]
            total = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        return int(done), int(total)

    def promote(self, model: str, meta_key: str, meta_value: str) -> int:
        """In one transaction: when every chunk has a vector of `model`, make them the served vectors, record
        meta_key = meta_value and empty the staging table. Returns how many moved, or -1 if some are missing."""
        with self.db.write() as conn:
            missing = conn.execute(
                "SELECT COUNT(*) FROM chunks c LEFT JOIN chunk_vectors_next n ON n.chunk_id = c.id AND n.model = ? "
                "WHERE n.chunk_id IS NULL", (model,)).fetchone()[0]
            if missing:
                return -1
            n = conn.execute("INSERT OR REPLACE INTO chunk_vectors(chunk_id, vector) SELECT chunk_id, vector FROM chunk_vectors_next "
                             "WHERE model = ?", (model,)).rowcount
            conn.execute("DELETE FROM chunk_vectors_next")
            conn.execute("INSERT OR REPLACE INTO index_meta(key, value) VALUES (?, ?)", (meta_key, meta_value))
        return int(n)

    def discard(self) -> None:
        """Forget staged vectors (the switch was undone)."""
        with self.db.write() as conn:
            conn.execute("DELETE FROM chunk_vectors_next")
