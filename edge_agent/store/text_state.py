"""What a summary or a label was made from beyond the content hash: the text the reader made of the bytes.

Summaries (document_summaries) and labels (document_labels) record the content hash of the document they were made
from, and summarize calls a summary current while that hash is the document's (with the same bundle and prompt
version). The bytes are not the text, though: a file read again by a newer reader (rag.reader_version) keeps its
hash while its chunks may change (a Sphinx page's footer dropped). So when a document is stored again under the
same hash, its old and new texts are compared, chunk by chunk in order (DocumentStore.replace): when they differ,
its summary and labels are marked stale, their content_hash prefixed with STALE ("stale:<hash>", which no document's
hash equals), so the next run redoes them while the old ones stay shown until then (nothing is deleted before its
replacement exists). Identical texts (most re-reads: most loaders did not change) leave them current.

A summary is made from the chunks' texts and offsets (summarize joins them without their overlaps); a label from
the title too (classify reads the title, then the chunks).
"""
from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

STALE = "stale:"


@dataclass(frozen=True)
class TextState:
    """A document's text as stored: its title and a digest of its chunks (chunks_digest)."""

    title: str
    digest: str


def chunks_digest(chunks: Iterable[tuple[str, int, int]]) -> str:
    """A digest of a document's chunks, (text, char_start, char_end) in order."""
    h = hashlib.sha256()
    for text, start, end in chunks:
        data = text.encode("utf-8", "surrogatepass")
        h.update(f"{len(data)}:{start}:{end}:".encode())
        h.update(data)
    return h.hexdigest()


def text_state(conn: sqlite3.Connection, document_id: int) -> TextState | None:
    """The stored text of a document (None when there is no such document)."""
    row = conn.execute("SELECT title FROM documents WHERE id = ?", (document_id,)).fetchone()
    if row is None:
        return None
    rows = conn.execute("SELECT text, char_start, char_end FROM chunks WHERE document_id = ? ORDER BY ordinal", (document_id,))
    return TextState(row[0], chunks_digest((r[0], r[1], r[2]) for r in rows))


def mark_stale(conn: sqlite3.Connection, document_id: int, content_hash: str, summary: bool, labels: bool) -> None:
    """Mark a document's summary and/or labels made from `content_hash` stale (kept, shown, no longer current)."""
    if summary:
        conn.execute("UPDATE document_summaries SET content_hash = ? WHERE document_id = ? AND content_hash = ?",
                     (STALE + content_hash, document_id, content_hash))
    if labels:
        conn.execute("UPDATE document_labels SET content_hash = ? WHERE document_id = ? AND content_hash = ?",
                     (STALE + content_hash, document_id, content_hash))
