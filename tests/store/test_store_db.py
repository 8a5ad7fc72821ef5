"""SQLite store: WAL, migrations, serialised writers, stable chunk ids."""
from __future__ import annotations

import sqlite3
import threading

import numpy as np
import pytest

from edge_agent.store import ChunkRecord, DocumentStore, Migration, MigrationError, SqliteDatabase
from edge_agent.store.documents import DocumentMeta
from edge_agent.store.migrations import MIGRATIONS


def test_wal_busy_timeout_and_migrations(tmp_path):
    db = SqliteDatabase(tmp_path / "x.db")
    with db.read() as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000
    assert db.schema_versions() == [m.version for m in MIGRATIONS]
    db.close()
    extra = Migration(1000, "a later subsystem", "CREATE TABLE later_things (id INTEGER PRIMARY KEY, kind TEXT);")
    db = SqliteDatabase(tmp_path / "x.db", [*MIGRATIONS, extra])
    assert db.schema_versions()[-1] == 1000
    assert db.migrate([*MIGRATIONS, extra]) == []
    db.close()
    with pytest.raises(MigrationError, match="does not know"):
        SqliteDatabase(tmp_path / "x.db", MIGRATIONS)


def test_writes_are_fsynced_unless_marked_not_durable(tmp_path):
    """Every commit is durable (synchronous=FULL: it survives a power loss) except a write that asks for less, which
    commits without an fsync and leaves the connection durable again, also when it fails."""
    db = SqliteDatabase(tmp_path / "d.db")
    with db.write() as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        conn.execute("CREATE TABLE t (a INT)")
    with db.write(durable=False) as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL: no fsync at this commit
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(sqlite3.IntegrityError):
        with db.write(durable=False) as conn:
            conn.execute("INSERT INTO t VALUES (2)")
            conn.execute("INSERT INTO schema_migrations(version, name, applied_at) VALUES (1, 'dup', 0)")
    with db.write() as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2
    other = sqlite3.connect(tmp_path / "d.db")
    assert other.execute("SELECT a FROM t").fetchall() == [(1,)]  # committed; the failed one rolled back whole
    other.close()
    db.close()


def test_failed_migration_rolls_back(tmp_path):
    bad = Migration(2000, "broken", "CREATE TABLE t1 (a INT);\nCREATE TABLE t1 (a INT);")
    with pytest.raises(Exception):
        SqliteDatabase(tmp_path / "y.db", [*MIGRATIONS, bad])
    db = SqliteDatabase(tmp_path / "y.db", MIGRATIONS)
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name='t1'").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == len(MIGRATIONS)


def test_processing_migration_keeps_chunks_labels_and_ids(tmp_path):
    """Migration 6 rebuilds `documents` (a wider CHECK): what references it stays, deletes still cascade, ids are not reused."""
    before = [m for m in MIGRATIONS if m.version < 6]
    db = SqliteDatabase(tmp_path / "old.db", before)
    store = DocumentStore(db)
    doc_id = _old_document(db, "text:a", 2)  # as the program of that schema wrote them
    gone = _old_document(db, "text:gone", 1)
    store.delete(gone)
    with db.write() as conn:
        conn.execute("INSERT INTO document_labels(document_id, label_set, label, score, method, created_at) VALUES (?, 's', 'l', 1, 'm', 0)",
                     (doc_id,))
    db.close()
    db = SqliteDatabase(tmp_path / "old.db")
    store = DocumentStore(db)
    assert db.schema_versions() == [m.version for m in MIGRATIONS]
    assert [c.ordinal for c in store.chunks_of(doc_id)] == [0, 1] and store.get(doc_id).status == "ready"
    pid, _ = store.mark_processing(DocumentMeta("upload:b.pdf", "b", "pdf", "h2", 9))
    assert pid > gone > doc_id  # AUTOINCREMENT's high-water mark survived the rebuild
    assert store.fail_processing("stopped") == 1 and store.get(pid).status == "failed" and store.get(pid).error == "stopped"
    with db.read() as conn:
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM document_labels").fetchone()[0] == 1
    store.delete(doc_id)
    with db.read() as conn:
        assert conn.execute("SELECT count(*) FROM document_labels").fetchone()[0] == 0  # the cascade still points at documents
        assert conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0] == 0
    db.close()


def _chunks(n: int) -> list[ChunkRecord]:
    return [ChunkRecord(0, i, f"text {i}", 0, 6, 2, vector=np.full(4, i, np.float32)) for i in range(n)]


def _old_document(db, key: str, n: int, kind: str = "txt", path: str | None = None) -> int:
    """A ready document with n chunks and vectors, written with the columns every schema since version 1 has (the
    store's own SQL writes today's columns, which an older schema lacks)."""
    with db.write() as conn:
        doc_id = conn.execute(
            "INSERT INTO documents(source_key, title, path, kind, content_hash, size, status, chunk_count, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 'h', 1, 'ready', ?, 0, 0)", (key, key, path, kind, n)).lastrowid
        for c in _chunks(n):
            cid = conn.execute("INSERT INTO chunks(document_id, ordinal, text, char_start, char_end, token_count)"
                               " VALUES (?, ?, ?, 0, 6, 2)", (doc_id, c.ordinal, c.text)).lastrowid
            conn.execute("INSERT INTO chunk_vectors(chunk_id, vector) VALUES (?, ?)", (cid, c.vector.tobytes()))
    return int(doc_id)


def test_reader_version_migration_leaves_existing_documents_unknown(tmp_path):
    """Migration 9 adds documents.reader_version: rows from before it are NULL (read by an unknown, older reader),
    with their chunks and vectors as they were; what the store writes from then on records the version given."""
    db = SqliteDatabase(tmp_path / "old.db", [m for m in MIGRATIONS if m.version < 9])
    html = _old_document(db, "file:/docs/a.html", 2, "html", "/docs/a.html")
    _old_document(db, "upload:b.csv", 1, "csv")
    db.close()
    db = SqliteDatabase(tmp_path / "old.db")
    assert db.schema_versions() == [m.version for m in MIGRATIONS]
    store = DocumentStore(db)
    doc = store.get(html)
    assert doc.reader_version is None and doc.status == "ready" and doc.chunk_count == 2
    assert [c.text for c in store.chunks_of(html)] == ["text 0", "text 1"] and store.missing_vectors() == []
    assert sorted(store.reader_counts()) == [("csv", None, "upload", 1), ("html", None, "file", 1)]
    assert store.readers_under("/docs") == {"/docs/a.html": ("html", None)}
    meta = DocumentMeta("file:/docs/a.html", "a", "html", "h", 1, path="/docs/a.html", reader_version=7)
    assert store.replace(meta, _chunks(1))[0] == html
    assert store.get(html).reader_version == 7 and store.readers_under("/docs/") == {"/docs/a.html": ("html", 7)}
    db.close()


def test_replace_delete_and_ids_never_reused(tmp_path):
    store = DocumentStore(SqliteDatabase(tmp_path / "x.db"))
    meta = DocumentMeta("file:/a", "a", "txt", "h1", 10, path="/docs/a.txt")
    doc_id, old, new = store.replace(meta, _chunks(3))
    assert old == [] and new == [1, 2, 3]
    doc_id2, old, new = store.replace(meta, _chunks(2))
    assert doc_id2 == doc_id and old == [1, 2, 3] and new == [4, 5]
    assert store.delete(doc_id) == [4, 5] and store.delete(doc_id) is None
    _, _, new = store.replace(DocumentMeta("file:/b", "b", "md", "h2", 5, path="/docs/sub/b.md"), _chunks(1))
    assert new == [6]
    assert store.chunk_ids().tolist() == [6]
    ids, vecs = next(store.iter_vectors(4))
    assert ids.tolist() == [6] and vecs.shape == (1, 4)
    assert store.filter_chunk_ids(path_prefix="/docs/sub").tolist() == [6]
    assert store.filter_chunk_ids(path_prefix="/docs/su").tolist() == []
    assert store.filter_chunk_ids(kinds=["txt"]).tolist() == []


def test_concurrent_writers_are_serialised(tmp_path):
    db = SqliteDatabase(tmp_path / "x.db")
    store = DocumentStore(db)
    errors = []

    def worker(n: int) -> None:
        try:
            for j in range(10):
                store.replace(DocumentMeta(f"k{n}-{j}", "t", "txt", "h", 1), _chunks(2))
        except Exception as exc:  # pragma: no cover - would be "database is locked"
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.count() == 40 and store.chunk_count() == 80
    other = SqliteDatabase(tmp_path / "x.db")  # a second process-like handle sees it all
    assert DocumentStore(other).count() == 40


def test_a_shared_database_closes_with_its_last_user(tmp_path):
    db = SqliteDatabase(tmp_path / "x.db")
    other = db.share()
    assert other is db
    db.close()  # the first user is done: the other still reads and writes
    with other.write() as conn:
        conn.execute("CREATE TABLE t(x)")
    with other.read() as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    other.close()
    with pytest.raises(sqlite3.ProgrammingError):  # closed for good now
        with db.write() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
