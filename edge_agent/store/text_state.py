"""What a summary or a label was made from beyond the content hash: the text the reader made of the bytes.

Summaries (document_summaries) and labels (document_labels) record the content hash of the document they were made
from, and summarize calls a summary current while that hash is the document's (with the same bundle and prompt
version). The bytes are not the text, though: a file read again by a newer reader (rag.reader_version) keeps its
hash while its chunks may change (a Sphinx page's footer dropped). So when a document is stored again under the
same hash, its old and new texts are compared (DocumentStore.replace; chunks_digest: the words the chunks hold, so
a re-chunk of the same text is no change): when they differ,
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


def chunk_pieces(chunks: Iterable[tuple[str, int, int]]) -> list[str]:
    """A document's text as its chunks hold it, (text, char_start, char_end) in order: one piece per chunk, its
    overlap with the chunks before it removed, and the gap before it (whitespace the chunks leave out) as one
    newline when it was more than one character, else one space. "".join(pieces) is the text up to its whitespace
    runs; a piece may be empty (a chunk the previous ones cover)."""
    pieces: list[str] = []
    end = None
    for text, start, stop in chunks:
        if end is None or start >= end:
            gap = 0 if end is None else start - end
            pieces.append(("\n" if gap > 1 else " " if gap == 1 else "") + text)
        else:
            pieces.append(text[end - start:])
        end = stop if end is None else max(end, stop)
    return pieces


def chunks_digest(chunks: Iterable[tuple[str, int, int]]) -> str:
    """A digest of the text a document's chunks hold (chunk_pieces: their overlaps removed), each run of whitespace
    one space (chunks are exact slices of the text that leave out only whitespace, rag.chunking), so the same text
    cut into other chunks (a chunk_tokens or chunk_overlap change) has the same digest and keeps its summary and
    labels current; a change of words, or of their order, does not."""
    text = " ".join("".join(chunk_pieces(chunks)).split())
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


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


class CarriedText:
    """The "carried as current?" rule for a record (a summary, a label) that another document with the same content
    made: a document new to the index (a renamed or copied file) takes it current when it was current there (its
    content_hash is the document's, not STALE) and that document's text is this one's (chunks digest, and title when
    `title`: a label is made from the title too); else stale, shown until the next run redoes it."""

    def __init__(self, conn: sqlite3.Connection, document_id: int, content_hash: str, title: bool):
        self.conn, self.content_hash, self.title = conn, content_hash, title
        self.mine = text_state(conn, document_id)
        self._states: dict[int, TextState | None] = {}

    def same_text(self, other_id: int) -> bool:
        """Whether document other_id's stored text is this one's."""
        if other_id not in self._states:
            self._states[other_id] = text_state(self.conn, other_id)
        theirs = self._states[other_id]
        if self.mine is None or theirs is None:
            return False
        return theirs == self.mine if self.title else theirs.digest == self.mine.digest

    def current(self, other_id: int, record_hash: str) -> bool:
        """Whether a record document other_id has, stored with record_hash, is carried as current."""
        return record_hash == self.content_hash and self.same_text(other_id)

    def pick(self, rows: Iterable[sqlite3.Row]) -> tuple[sqlite3.Row, bool] | None:
        """Of other documents' records (rows with document_id and content_hash, newest first), the one to carry and
        whether it is carried as current: the newest current one, else the newest (stale). None when there are none."""
        newest = None
        for r in rows:
            if self.current(r["document_id"], r["content_hash"]):
                return r, True
            newest = newest or r
        return None if newest is None else (newest, False)

    def stored_hash(self, current: bool) -> str:
        """The content_hash to store a carried record with."""
        return self.content_hash if current else STALE + self.content_hash
