"""The "carried as current?" rule (store.text_state.CarriedText) as summaries and labels use it: a document new to the
index takes another same-content document's record current only when that record was current and the texts match
(a summary by the chunks, a label by the title and the chunks); else stale."""
from __future__ import annotations

import time

from edge_agent.store import SqliteDatabase
from edge_agent.store.labels import LabelStore
from edge_agent.store.summaries import SummaryStore
from edge_agent.store.text_state import STALE

HASH = "h" * 64


def _doc(conn, key: str, title: str, chunks: list[str]) -> int:
    now = time.time()
    cur = conn.execute(
        "INSERT INTO documents(source_key, title, path, kind, content_hash, size, status, chunk_count, created_at, updated_at)"
        " VALUES (?, ?, NULL, 'txt', ?, 10, 'ready', ?, ?, ?)", (key, title, HASH, len(chunks), now, now))
    doc_id = cur.lastrowid
    start = 0
    for i, text in enumerate(chunks):
        conn.execute("INSERT INTO chunks(document_id, ordinal, text, char_start, char_end, token_count) VALUES (?, ?, ?, ?, ?, 1)",
                     (doc_id, i, text, start, start + len(text)))
        start += len(text)
    return doc_id


def _summary(conn, doc_id: int, summary: str, content_hash: str, created: float) -> None:
    conn.execute("INSERT INTO document_summaries(document_id, summary, content_hash, created_at) VALUES (?, ?, ?, ?)",
                 (doc_id, summary, content_hash, created))


def _label(conn, doc_id: int, label: str, content_hash: str, created: float) -> None:
    conn.execute("INSERT INTO document_labels(document_id, label_set, label, score, method, content_hash, created_at)"
                 " VALUES (?, 'topics', ?, 1.0, 'likelihood', ?, ?)", (doc_id, label, content_hash, created))


def _carried(db, doc_id: int) -> tuple[tuple, tuple]:
    with db.write() as conn:
        SummaryStore.carry_effect(doc_id)(conn)
        LabelStore.carry_effect(doc_id)(conn)
    with db.read() as conn:
        s = conn.execute("SELECT summary, content_hash FROM document_summaries WHERE document_id = ?", (doc_id,)).fetchone()
        lb = conn.execute("SELECT label, content_hash FROM document_labels WHERE document_id = ?", (doc_id,)).fetchone()
    return tuple(s), tuple(lb)


def test_a_summary_is_carried_current_by_its_chunks_a_label_by_its_title_too(tmp_path):
    db = SqliteDatabase(tmp_path / "t.db")
    with db.write() as conn:
        src = _doc(conn, "/a/report.txt", "Report", ["one two", "three"])
        _summary(conn, src, "sum", HASH, 1.0)
        _label(conn, src, "finance", HASH, 1.0)
        same = _doc(conn, "/b/report.txt", "Report", ["one two", "three"])
        retitled = _doc(conn, "/b/other.txt", "Other title", ["one two", "three"])
        reread = _doc(conn, "/b/reread.txt", "Report", ["one two three"])
    assert _carried(db, same) == (("sum", HASH), ("finance", HASH))
    assert _carried(db, retitled) == (("sum", HASH), ("finance", STALE + HASH))
    assert _carried(db, reread) == (("sum", STALE + HASH), ("finance", STALE + HASH))
    db.close()


def test_the_newest_current_record_is_carried_before_a_newer_stale_one(tmp_path):
    db = SqliteDatabase(tmp_path / "t.db")
    with db.write() as conn:
        old = _doc(conn, "/a/old.txt", "Report", ["one two"])
        _summary(conn, old, "current one", HASH, 1.0)
        _label(conn, old, "current label", HASH, 1.0)
        newer = _doc(conn, "/a/newer.txt", "Report", ["one two"])
        _summary(conn, newer, "stale one", STALE + HASH, 2.0)
        _label(conn, newer, "stale label", STALE + HASH, 2.0)
        new = _doc(conn, "/b/new.txt", "Report", ["one two"])
        different = _doc(conn, "/b/different.txt", "Report", ["changed"])
    assert _carried(db, new) == (("current one", HASH), ("current label", HASH))
    # no current one fits: the newest, stale
    assert _carried(db, different) == (("stale one", STALE + HASH), ("stale label", STALE + HASH))
    db.close()


def test_the_digest_is_over_the_text_summarize_summarizes():
    """chunks_digest and summarize's document_pieces read one text from the chunks (store.text_state.chunk_pieces):
    overlaps removed, a gap as whitespace, a chunk the previous ones cover adding nothing."""
    import hashlib

    from edge_agent.jobs.summarize import document_pieces
    from edge_agent.store.text_state import chunks_digest

    text = "Alpha beta gamma.\n\nDelta epsilon zeta. Eta theta."
    spans = [(0, 17), (6, 17), (10, 17), (19, 38), (39, 50), (19, 38)]  # overlaps, a covered chunk, gaps of 2 and 1
    chunks = [{"text": text[a:b], "char_start": a, "char_end": b} for a, b in spans]
    pieces = document_pieces(chunks)
    assert "".join(pieces) == text.replace("\n\n", "\n")
    assert pieces == [p for p in pieces if p.strip()]
    want = hashlib.sha256(" ".join(text.split()).encode()).hexdigest()
    assert chunks_digest((c["text"], c["char_start"], c["char_end"]) for c in chunks) == want
    recut = [(text[a:b], a, b) for a, b in [(0, 12), (0, 38), (39, 50)]]  # the same text cut otherwise
    assert chunks_digest(recut) == want
