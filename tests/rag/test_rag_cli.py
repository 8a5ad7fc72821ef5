"""`edge-agent index ...` handlers in-process, built from Settings() via the environment."""
from __future__ import annotations

import json

import pytest


@pytest.fixture
def run(index_cli):
    return index_cli


def test_index_commands(run, tmp_path, capsys):
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("The boiler shows error E-442 when the pressure is low.")
    (folder / "sub" / "b.md").write_text("# Dakkapel\nDe vergunning komt van de gemeente.")
    (folder / "c.bin").write_bytes(b"\x00\x01")
    assert run("add", str(folder), "--no-progress") == 0
    assert "2 added, 0 updated, 0 unchanged, 1 failed" in capsys.readouterr().out
    assert run("add", str(folder), "--no-progress") == 0
    assert "0 added, 0 updated, 2 unchanged, 1 failed" in capsys.readouterr().out
    assert run("search", "E-442", "-k", "1", "--json") == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits[0]["title"] == "a"
    assert run("remove", str(hits[0]["document_id"])) == 0
    assert run("remove", "999") == 1
    capsys.readouterr()
    assert run("stats", "--json") == 0  # for scripts: every field, on stdout, nothing else
    out = capsys.readouterr()
    stats = json.loads(out.out)
    assert stats["chunks"] == 1 and stats["index"]["bm25_fields"]["subwords"] > 0  # the Dutch note's n-grams
    assert out.err == ""
    assert run("stats") == 0  # for a person (as `jobs list`, doctor): text on stdout
    out = capsys.readouterr()
    assert out.out.startswith("index: 2 documents (1 failed, 1 ready), 1 chunks, 1 vectors") and "compound words" in out.out
    assert "{" not in out.out and out.err == ""
    assert run("rebuild") == 0 and "rebuilt 1 vectors" in capsys.readouterr().out
    capsys.readouterr()
    assert run("check") == 0  # for a person: one line when all agree
    assert capsys.readouterr().out == "index check: OK (1 chunks in SQLite, 1 vectors in the index)\n"
    (tmp_path / "index" / "chunks.faiss").write_bytes(b"junk")
    assert run("check", "--no-repair", "--json") == 1  # for scripts: the whole result as JSON on stdout
    found = json.loads(capsys.readouterr().out)
    assert found["ok"] is False and found["problems"] and found["actions"] == []
    assert run("check") == 1  # found and repaired
    out = capsys.readouterr().out
    assert out.startswith("index check: problems found") and "  problem: " in out and "  done: " in out and "{" not in out
    assert run("check") == 0


def test_index_commands_use_the_global_flags(index_cli, embedder, monkeypatch, capsys, tmp_path):
    """`edge-agent --threads 2 index ...` builds the embedder from the settings the rest of the CLI resolves
    (flags over environment over file), not from a second load_settings() that drops the flags."""
    from edge_agent.cli import main

    doc = tmp_path / "a.txt"
    doc.write_text("The boiler shows error E-442 when the pressure is low.")
    assert index_cli("add", str(doc), "--no-progress") == 0  # an index to read (stats and search open none where none is)
    seen = []
    monkeypatch.setattr("edge_agent.rag.embedder.build_embedder", lambda settings, **_: seen.append(settings.threads) or embedder)
    for argv in (["stats"], ["search", "anything"], ["check", "--no-repair"], ["rebuild"]):
        assert main(["--threads", "2", "index", *argv]) in (0, 1), argv
    capsys.readouterr()
    assert seen == [2, 2, 2, 2]


def test_index_stats_names_documents_an_older_reader_read_and_add_reads_them_again(run, tmp_path, capsys):
    """After an upgrade whose loaders changed (here: documents from before reader versions were recorded), `index
    stats` says how many documents an older reader read and that a reindex reads them again; `index add` does."""
    import sqlite3

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("The boiler shows error E-442 when the pressure is low.")
    (folder / "b.md").write_text("# Dakkapel\nDe vergunning komt van de gemeente.")
    assert run("add", str(folder), "--no-progress") == 0
    capsys.readouterr()
    assert run("stats") == 0 and "reader:" not in capsys.readouterr().out
    with sqlite3.connect(tmp_path / "var" / "edge-agent.db") as conn:  # what migration 9 leaves on older documents
        conn.execute("UPDATE documents SET reader_version = NULL")
    conn.close()
    assert run("stats") == 0
    assert "reader: 2 documents read by an older reader (md 1, txt 1): the next reindex reads them again" in capsys.readouterr().out
    assert run("stats", "--json") == 0
    assert json.loads(capsys.readouterr().out)["reader"]["outdated_by_kind"] == {"md": 1, "txt": 1}
    assert run("add", str(folder), "--no-progress") == 0
    assert "0 added, 2 updated, 0 unchanged, 0 failed" in capsys.readouterr().out
    assert run("stats") == 0 and "reader:" not in capsys.readouterr().out


def test_reading_commands_on_an_empty_data_dir_create_nothing(run, tmp_path, capsys):
    """`index stats` and `index search` where nothing was ever indexed say so and exit 0; they used to create the
    database, the index folder and its lock (a reading command in a wrong folder, or as root before the daemon's first
    start, left files behind)."""
    var, index = tmp_path / "var", tmp_path / "index"
    assert run("stats") == 0
    out = capsys.readouterr().out
    assert out.startswith("index: none yet") and "no documents database" in out and "index add" in out
    assert run("stats", "--json") == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["documents"] == 0 and stats["chunks"] == 0 and stats["index"] is None and "no index yet" in stats["absent"]
    assert run("search", "anything", "--json") == 0
    got = capsys.readouterr()
    assert json.loads(got.out) == [] and "no index yet" in got.err
    assert not var.exists() and not index.exists()
    doc = tmp_path / "a.txt"
    doc.write_text("The boiler shows error E-442 when the pressure is low.")
    assert run("add", str(doc), "--no-progress") == 0 and var.exists()  # a write creates them
    capsys.readouterr()
    assert run("stats", "--json") == 0 and json.loads(capsys.readouterr().out)["documents"] == 1
