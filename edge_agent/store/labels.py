"""Document labels written by classify runs: one label per (document, label set), replaced by a newer run."""
from __future__ import annotations

import time
from typing import Any

from edge_agent.store.db import SqliteDatabase
from edge_agent.store.text_state import STALE, CarriedText


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
        """A function of a connection that gives a document, for each label set it has no label in, the newest label
        another document with the same content has there (a renamed or copied file): current or stale by
        text_state.CarriedText (a label is made from the title and the chunks, so both must match)."""

        def effect(conn) -> None:
            doc = conn.execute("SELECT content_hash FROM documents WHERE id = ?", (document_id,)).fetchone()
            if doc is None:
                return
            h = doc[0]
            have = {r[0] for r in conn.execute("SELECT label_set FROM document_labels WHERE document_id = ?", (document_id,))}
            rows = conn.execute(
                "SELECT document_id, label_set, label, score, method, content_hash, run_id, bundle_id, prompt_version, created_at"
                " FROM document_labels WHERE document_id != ? AND content_hash IN (?, ?) ORDER BY created_at DESC",
                (document_id, h, STALE + h),
            ).fetchall()
            carry = CarriedText(conn, document_id, h, title=True)
            by_set: dict[str, list] = {}
            for r in rows:
                if r["label_set"] not in have:
                    by_set.setdefault(r["label_set"], []).append(r)
            for group in by_set.values():
                r, current = carry.pick(group)
                conn.execute(
                    "INSERT INTO document_labels(document_id, label_set, label, score, method, content_hash, run_id, bundle_id,"
                    " prompt_version, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (document_id, r["label_set"], r["label"], r["score"], r["method"], carry.stored_hash(current), r["run_id"],
                     r["bundle_id"], r["prompt_version"], r["created_at"]),
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
