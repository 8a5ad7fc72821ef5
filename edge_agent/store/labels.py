"""Document labels written by classify runs: one label per (document, label set), replaced by a newer run."""
from __future__ import annotations

import time
from typing import Any

from edge_agent.store.db import SqliteDatabase


class LabelStore:
    """Rows of `document_labels`."""

    def __init__(self, db: SqliteDatabase):
        self.db = db

    def put(self, document_id: int, label_set: str, label: str, score: float, method: str, content_hash: str | None = None,
            run_id: str | None = None, bundle_id: str | None = None, prompt_version: str | None = None) -> bool:
        """Store (or replace) a document's label in label_set; False when the document no longer exists."""
        with self.db.write() as conn:
            if conn.execute("SELECT 1 FROM documents WHERE id = ?", (document_id,)).fetchone() is None:
                return False
            conn.execute(
                "INSERT INTO document_labels(document_id, label_set, label, score, method, content_hash, run_id, bundle_id, prompt_version,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(document_id, label_set) DO UPDATE SET"
                " label = excluded.label, score = excluded.score, method = excluded.method, content_hash = excluded.content_hash,"
                " run_id = excluded.run_id, bundle_id = excluded.bundle_id, prompt_version = excluded.prompt_version,"
                " created_at = excluded.created_at",
                (document_id, label_set, label, float(score), method, content_hash, run_id, bundle_id, prompt_version, time.time()),
            )
        return True

    @staticmethod
    def save_effect(document_id: int, label_set: str, label: str, score: float, method: str, content_hash: str | None,
                    run_id: str | None, bundle_id: str | None, prompt_version: str | None):
        """A function of a connection that stores the label inside the caller's transaction (nothing if the document is gone)."""

        def effect(conn) -> None:
            conn.execute(
                "INSERT INTO document_labels(document_id, label_set, label, score, method, content_hash, run_id, bundle_id, prompt_version,"
                " created_at) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM documents WHERE id = ?)"
                " ON CONFLICT(document_id, label_set) DO UPDATE SET label = excluded.label, score = excluded.score,"
                " method = excluded.method, content_hash = excluded.content_hash, run_id = excluded.run_id,"
                " bundle_id = excluded.bundle_id, prompt_version = excluded.prompt_version, created_at = excluded.created_at",
                (document_id, label_set, label, float(score), method, content_hash, run_id, bundle_id, prompt_version, time.time(),
                 document_id),
            )

        return effect

    @staticmethod
    def carry_effect(document_id: int):
        """A function of a connection that gives a document, for each label set it has no label in, the label another
        document with the same content has there (a renamed or copied file)."""

        def effect(conn) -> None:
            conn.execute(
                "INSERT INTO document_labels(document_id, label_set, label, score, method, content_hash, run_id, bundle_id,"
                " prompt_version, created_at) SELECT ?, l.label_set, l.label, l.score, l.method, l.content_hash, l.run_id,"
                " l.bundle_id, l.prompt_version, l.created_at FROM document_labels l WHERE l.document_id != ?"
                " AND l.content_hash = (SELECT content_hash FROM documents WHERE id = ?) ORDER BY l.created_at DESC"
                " ON CONFLICT(document_id, label_set) DO NOTHING",
                (document_id, document_id, document_id),
            )

        return effect

    def for_document(self, document_id: int) -> list[dict[str, Any]]:
        """A document's labels, one per label set, by label set name."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT label_set, label, score, method, run_id, bundle_id, prompt_version, created_at FROM document_labels"
                " WHERE document_id = ? ORDER BY label_set", (document_id,),
            ).fetchall()
        return [dict(r) for r in rows]
