"""SQL for document summaries: the documents a summarize run selects, their text from the stored chunks, and the
summary stored with a document in the same transaction as its run item's result (store/jobs.py commit_item)."""
from __future__ import annotations

import sqlite3
import time

from edge_agent.store.db import SqliteDatabase
from edge_agent.store.text_state import STALE, CarriedText, text_state


class SummaryStore:
    """Documents to summarize, their text (from the stored chunks) and their summaries."""

    def __init__(self, db: SqliteDatabase):
        self.db = db

    def select_documents(self, path_prefix: str | None = None, types: list[str] | None = None,
                         since: float | None = None) -> list[dict]:
        """Ready documents (id, title, path, kind, content_hash, updated_at) matching the filters, by id."""
        where, args = ["status = 'ready'"], []
        if path_prefix:
            where.append("substr(path, 1, length(?)) = ?")  # case-sensitive, unlike LIKE
            args += [path_prefix, path_prefix]
        if types:
            where.append(f"kind IN ({', '.join('?' * len(types))})")
            args += types
        if since is not None:
            where.append("updated_at > ?")
            args.append(since)
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT id, title, path, kind, content_hash, updated_at FROM documents WHERE {' AND '.join(where)} ORDER BY id", args
            ).fetchall()
        return [dict(r) for r in rows]

    def documents_under(self, folder: str) -> list[dict]:
        """Documents (any status) stored from a file under folder: id, path, status."""
        prefix = folder.rstrip("/") + "/"
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT id, path, status FROM documents WHERE substr(path, 1, length(?)) = ? ORDER BY id", (prefix, prefix)
            ).fetchall()
        return [dict(r) for r in rows]

    def current_summaries(self) -> dict[int, tuple[str, str | None, str | None]]:
        """document id -> (content_hash, bundle_id, prompt_version) of every stored summary (a stale one's content_hash,
        "stale:<hash>", matches no document: store.text_state)."""
        with self.db.read() as conn:
            return {r[0]: (r[1], r[2], r[3]) for r in conn.execute(
                "SELECT document_id, content_hash, bundle_id, prompt_version FROM document_summaries")}

    def document_text(self, document_id: int) -> tuple[dict, list[dict]] | None:
        """The document (id, title, kind, content_hash) and its chunks in order (text, char_start, char_end, heading, page)."""
        with self.db.read() as conn:
            doc = conn.execute("SELECT id, title, kind, content_hash, status FROM documents WHERE id = ?", (document_id,)).fetchone()
            if doc is None:
                return None
            chunks = conn.execute(
                "SELECT text, char_start, char_end, heading, page FROM chunks WHERE document_id = ? ORDER BY ordinal", (document_id,)
            ).fetchall()
        return dict(doc), [dict(c) for c in chunks]

    @staticmethod
    def save_effect(document_id: int, summary: str, content_hash: str, run_id: str, bundle_id: str,
                    prompt_version: str, text_digest: str | None = None, method: str | None = None) -> Effect:
        """An effect for commit_item: store the summary with the document (nothing if the document is gone). Given the
        digest of the chunks it was made from (text_state.chunks_digest), a summary of a text that was read again
        differently meanwhile (same content hash) is stored stale: the next run redoes it. method: how it was made
        (whole, lead, sections; extract: the document's own lead sentences, the model gave no usable summary)."""

        def effect(conn: sqlite3.Connection) -> None:
            stored_hash = content_hash
            if text_digest is not None:
                now = text_state(conn, document_id)
                if now is not None and now.digest != text_digest:
                    stored_hash = STALE + content_hash
            conn.execute(
                "INSERT INTO document_summaries(document_id, summary, content_hash, run_id, bundle_id, prompt_version, created_at,"
                " method) SELECT ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM documents WHERE id = ?)"
                " ON CONFLICT(document_id) DO UPDATE SET summary = excluded.summary, content_hash = excluded.content_hash,"
                " run_id = excluded.run_id, bundle_id = excluded.bundle_id, prompt_version = excluded.prompt_version,"
                " created_at = excluded.created_at, method = excluded.method",
                (document_id, summary, stored_hash, run_id, bundle_id, prompt_version, time.time(), method, document_id),
            )

        return effect

    @staticmethod
    def keep_effect(document_id: int, content_hash: str, bundle_id: str, was: str, now: str) -> Effect:
        """An effect that marks a document's stored summary current under prompt version `now` (it passed the checks
        of `now`, whose prompts are those of `was`): its text, run_id and created_at, the run that made it, stay. Only
        while the row is still the one checked (same content hash, bundle and version `was`): a summary replaced or
        made stale meanwhile is left as it is."""

        def effect(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE document_summaries SET prompt_version = ? WHERE document_id = ? AND content_hash = ?"
                         " AND bundle_id = ? AND prompt_version = ?", (now, document_id, content_hash, bundle_id, was))

        return effect

    @staticmethod
    def carry_effect(document_id: int) -> Effect:
        """An effect that gives a document without a summary the newest summary of another document with the same
        content (a renamed or copied file), as it was (same bundle and prompt version): current or stale by
        text_state.CarriedText (a summary is made from the chunks, so the chunks must match)."""

        def effect(conn: sqlite3.Connection) -> None:
            doc = conn.execute("SELECT content_hash FROM documents WHERE id = ?", (document_id,)).fetchone()
            if doc is None or conn.execute("SELECT 1 FROM document_summaries WHERE document_id = ?", (document_id,)).fetchone():
                return
            h = doc[0]
            rows = conn.execute(
                "SELECT document_id, summary, content_hash, run_id, bundle_id, prompt_version, created_at, method"
                " FROM document_summaries WHERE document_id != ? AND content_hash IN (?, ?) ORDER BY created_at DESC", (document_id, h, STALE + h),
            ).fetchall()
            carry = CarriedText(conn, document_id, h, title=False)
            carried = carry.pick(rows)
            if carried is None:
                return
            s, current = carried
            conn.execute(
                "INSERT INTO document_summaries(document_id, summary, content_hash, run_id, bundle_id, prompt_version, created_at,"
                " method) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (document_id, s["summary"], carry.stored_hash(current), s["run_id"], s["bundle_id"],
                 s["prompt_version"], s["created_at"], s["method"]),
            )

        return effect

    def get_summary(self, document_id: int) -> dict | None:
        """The stored summary of a document (summary, method, content_hash, run_id, bundle_id, prompt_version, created_at)."""
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT summary, method, content_hash, run_id, bundle_id, prompt_version, created_at FROM document_summaries"
                " WHERE document_id = ?", (document_id,),
            ).fetchone()
        return dict(row) if row else None
