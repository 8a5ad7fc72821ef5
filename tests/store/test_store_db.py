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
    doc_id, _, _ = store.replace(DocumentMeta("text:a", "a", "txt", "h1", 1), _chunks(2))
    gone, _, _ = store.replace(DocumentMeta("text:gone", "gone", "txt", "h0", 1), _chunks(1))
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
