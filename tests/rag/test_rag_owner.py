"""One process owns an index folder: a second writer is refused at once, readers get a read-only view."""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from edge_agent.services.documents import DocumentService, IndexInUseError, IndexUnreadableError, ReadOnlyError


def test_a_second_writer_is_refused_and_a_reader_sees_committed_documents(make_service, make_settings, embedder):
    owner = make_service()
    owner.add_text("Alpha", "Alpha centauri is the closest star system.")
    with pytest.raises(IndexInUseError) as err:
        DocumentService.from_settings(make_settings(), embedder=embedder)
    assert err.value.pid == os.getpid() and "in use by process" in str(err.value)

    reader = DocumentService.from_settings(make_settings(), embedder=embedder, read_only=True)
    try:
        assert reader.retrieve("closest star", k=1)[0].title == "Alpha"
        with pytest.raises(ReadOnlyError):
            reader.add_text("Beta", "Beta blockers lower the heart rate.")
        with pytest.raises(ReadOnlyError):
            reader.delete(1)
        with pytest.raises(ReadOnlyError):
            reader.check(repair=True)
        assert reader.check(repair=False).ok
    finally:
        reader.close()
    owner.close()
    again = DocumentService.from_settings(make_settings(), embedder=embedder)  # the lock went with close()
    try:
        assert again.last_check.ok and again.store.count() == 1
    finally:
        again.close()


def test_a_reader_changes_nothing_in_a_database_its_owner_has_not_migrated(make_service, make_settings, embedder):
    """The read-only view (commands while the daemon runs) writes nothing, not even a migration: a database without
    this version's newest migration (as an older daemon leaves it) is refused with a clear error and left as it was;
    with no database at all it says so and creates none."""
    import sqlite3

    from edge_agent.store.migrations import MIGRATIONS

    owner = make_service()
    owner.add_text("Alpha", "Alpha centauri is the closest star system.")
    db_path = owner.store.db.path
    owner.close()
    newest = max(m.version for m in MIGRATIONS)
    with sqlite3.connect(db_path) as conn:  # as if an older daemon had made it
        conn.execute("DELETE FROM schema_migrations WHERE version = ?", (newest,))
    with pytest.raises(IndexUnreadableError, match=f"lacks schema versions \\[{newest}\\]"):
        DocumentService.from_settings(make_settings(), embedder=embedder, read_only=True)
    with sqlite3.connect(db_path) as conn:  # not applied by the reader
        assert newest not in {v for (v,) in conn.execute("SELECT version FROM schema_migrations")}
    fresh = make_settings(data_dir=str(db_path.parent / "empty"))
    with pytest.raises(IndexUnreadableError, match="no database"):
        DocumentService.from_settings(fresh, embedder=embedder, read_only=True)
    assert not (db_path.parent / "empty").exists()


def test_reader_builds_a_lagging_index_in_memory_and_leaves_the_file_alone(make_service, make_settings, embedder):
    owner = make_service()
    owner.add_text("Alpha", "Alpha centauri is the closest star system.")
    assert owner.save_index()
    stale = owner.index.path.read_bytes()
    owner.add_text("Beta", "Beta blockers lower the heart rate.")
    owner.index.path.write_bytes(stale)  # as if the owner had not saved its last batch yet
    reader = DocumentService.from_settings(make_settings(), embedder=embedder, read_only=True)
    try:
        assert reader.retrieve("heart rate medicine", k=1)[0].title == "Beta"
        assert reader.index.ids().tolist() == reader.store.chunk_ids().tolist()
    finally:
        reader.close()
    assert owner.index.path.read_bytes() == stale
    assert not list(owner.index.path.parent.glob("*.bad-*"))  # nothing moved aside by the reader


def test_cli_refuses_writes_while_the_daemon_owns_the_index(make_service, index_cli, tmp_path, capsys):
    run = index_cli
    owner = make_service()
    owner.add_text("Alpha", "The boiler shows error E-442 when the pressure is low.")
    note = tmp_path / "note.txt"
    note.write_text("Another document.")
    assert run("add", str(note), "--no-progress") == 2
    err = capsys.readouterr().err
    assert "in use by process" in err and "POST /v1/documents" in err
    # each refusal says what to do instead for that command, not "add documents through it" for all of them
    for argv, hint in ((["remove", "1"], "DELETE /v1/documents/1"), (["rebuild"], "stop the daemon first"),
                       (["check"], "`edge-agent index check --no-repair`")):
        assert run(*argv) == 2
        err = capsys.readouterr().err
        assert "in use by process" in err and hint in err and "POST /v1/documents" not in err, (argv, err)
    assert run("search", "E-442", "-k", "1") == 0
    out = capsys.readouterr()
    assert "Alpha" in out.out and "read" in out.err
    assert run("check", "--no-repair") == 0
    assert owner.store.count() == 1


def test_daemon_reports_an_owned_index_without_paths(make_service, make_settings):
    from edge_agent.runtime import _load_documents

    make_service()
    rt = SimpleNamespace(settings=make_settings(), documents=None, documents_status=None, releaser=None)
    _load_documents(rt)
    assert rt.documents is None
    assert "another edge-agent process" in rt.documents_status and str(os.getpid()) in rt.documents_status
    assert "/" not in rt.documents_status
