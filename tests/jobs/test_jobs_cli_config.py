"""The README's [[jobs]] config block, used from the command line without a daemon (a systemd timer's `jobs run`)."""
from __future__ import annotations

import json

README_BLOCK = """
jobs_timezone = "Europe/Amsterdam"
[[jobs]]
name = "nightly-summaries"
kind = "summarize"
schedule = "0 2 * * *"
params = { changed_only = true }
limits = { deadline = "06:00" }
"""


def test_config_jobs_are_seen_by_the_cli(cli, monkeypatch, tmp_path, capsys):
    cfg = tmp_path / "config.toml"
    cfg.write_text(README_BLOCK)
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(cfg))
    assert cli("list", "--json") == 0
    jobs = {j["name"]: j for j in json.loads(capsys.readouterr().out)}
    assert jobs["nightly-summaries"]["kind"] == "summarize" and jobs["nightly-summaries"]["source"] == "config"
    assert cli("run", "nightly-summaries", "--no-progress") == 0, capsys.readouterr().err
    assert "succeeded" in capsys.readouterr().out
    assert cli("list", "--json") == 0  # a second sync changes nothing
    assert [j["name"] for j in json.loads(capsys.readouterr().out)] == ["nightly-summaries"]


BAD_BLOCK = README_BLOCK + """
[[jobs]]
name = "weekly-typo"
kind = "summarize"
schedule = "0 3 * * sunday-ish"
"""


def test_a_bad_config_job_is_an_error_the_operator_sees(cli, monkeypatch, tmp_path, capsys):
    """A bad [[jobs]] entry was a line in a log and the CLI exited 0: `jobs list` names it and exits 1, `jobs run` of it
    exits 2 with the reason; the good entries still list and run."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(BAD_BLOCK)
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(cfg))
    assert cli("list") == 1
    out = capsys.readouterr()
    assert "nightly-summaries" in out.out
    assert f"error: job 'weekly-typo' in {cfg} is not loaded: bad cron expression" in out.err, out.err
    assert cli("run", "weekly-typo") == 2
    err = capsys.readouterr().err
    assert "'weekly-typo'" in err and "bad cron expression" in err and "fix the entry" in err, err
    assert cli("run", "nightly-summaries", "--no-progress") == 0


def test_a_config_job_that_turns_bad_keeps_its_stored_runs(cli, monkeypatch, tmp_path, capsys):
    """A typo in an entry used to delete the stored job with its runs and results (it was 'no longer in the config')."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(README_BLOCK)
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(cfg))
    assert cli("run", "nightly-summaries", "--no-progress") == 0
    cfg.write_text(README_BLOCK.replace('kind = "summarize"', 'kind = "sumarize"'))
    assert cli("runs", "nightly-summaries") == 0  # still there
    assert cli("run", "nightly-summaries") == 2 and "unknown job kind 'sumarize'" in capsys.readouterr().err
    capsys.readouterr()
    assert cli("runs", "nightly-summaries") == 0
    assert "succeeded" in capsys.readouterr().out


def test_reads_write_nothing_and_work_on_a_read_only_database(cli, monkeypatch, tmp_path, capsys):
    """`jobs list`, `runs`, `results` synced the config's jobs into SQLite (a write): on a read-only file they failed."""
    import os
    import stat

    from edge_agent.config import Settings
    from edge_agent.services.documents import default_db_path

    import gc

    assert cli("add", "mine", "summarize") == 0  # the database exists, with one API job
    gc.collect()  # the command's connections close (a last checkpoint) before the files are looked at
    cfg = tmp_path / "config.toml"
    cfg.write_text(README_BLOCK)
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(cfg))
    db = default_db_path(Settings())
    before = (db.stat().st_mtime_ns, db.read_bytes())
    os.chmod(db, stat.S_IRUSR)  # read-only file (a read-only mount behaves alike: no -wal/-shm can be written)
    folder_mode = db.parent.stat().st_mode
    os.chmod(db.parent, stat.S_IRUSR | stat.S_IXUSR)
    try:
        capsys.readouterr()
        assert cli("list", "--json") == 0, capsys.readouterr().err
        listed = {j["name"]: j for j in json.loads(capsys.readouterr().out)}
        assert listed["mine"]["source"] == "api"
        assert listed["nightly-summaries"]["source"] == "config" and listed["nightly-summaries"]["next_run_at"]  # as it will be
        assert cli("runs") == 0
        after = (db.stat().st_mtime_ns, db.read_bytes())
        wal = db.with_name(db.name + "-wal")
        logged = wal.stat().st_size if wal.exists() else 0
    finally:
        os.chmod(db.parent, folder_mode)
        os.chmod(db, stat.S_IRUSR | stat.S_IWUSR)
    # nothing written: the file is as it was and nothing waits in its write-ahead log (as root, which the chmod does not
    # stop, SQLite may still create the empty -wal/-shm files a reader uses)
    assert after == before and logged == 0


def test_reads_without_a_database_create_none(cli, monkeypatch, tmp_path, capsys):
    """`jobs list`, `runs` and `results` created the database where none was (./var of a wrong folder, or as root
    before the daemon's first start, a file the daemon's user could not write); they now read an empty one, say so,
    and still show the config's jobs as they will be."""
    from edge_agent.config import Settings
    from edge_agent.services.documents import default_db_path

    cfg = tmp_path / "config.toml"
    cfg.write_text(README_BLOCK)
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(cfg))
    db = default_db_path(Settings())
    assert not db.exists()
    assert cli("list", "--json") == 0
    out, err = capsys.readouterr()
    assert [j["name"] for j in json.loads(out)] == ["nightly-summaries"] and "no database yet" in err
    assert cli("runs") == 0 and "no database yet" in capsys.readouterr().err
    assert cli("results", "run_0123") == 2
    assert not db.exists() and not db.parent.exists()
    assert cli("add", "mine", "summarize") == 0 and db.exists()  # a write creates it
