"""`edge-agent jobs ...` in-process on tmp_path: add, list, run with a progress bar, runs, results, cancel, delete."""
from __future__ import annotations

import datetime as dt
import json

from jobs_helpers import doc_text


def test_jobs_cli_round_trip(cli, capsys, tmp_path, embedder, monkeypatch, wordy_model):
    from edge_agent.config import Settings
    from edge_agent.services.documents import DocumentService

    docs = DocumentService.from_settings(Settings(), embedder=embedder)
    for i in range(3):
        docs.add_text(f"d{i}", doc_text(i, 3))
    assert cli("add", "sum", "summarize", "--params", '{"max_tokens": 8}', "--schedule", "0 2 * * *", "--timezone",
               "Europe/Amsterdam") == 0
    added = capsys.readouterr().out
    assert "added job sum" in added and added.rstrip().endswith(f"({dt.datetime.now().astimezone():%Z})")  # "... 01:00 (UTC)"
    assert cli("add", "bad", "summarise") == 2
    assert "unknown job kind 'summarise'" in capsys.readouterr().err
    assert cli("add", "bad", "summarize", "--schedule", "0 25 * * *") == 2
    assert "bad cron expression" in capsys.readouterr().err
    assert cli("list") == 0
    listing = capsys.readouterr().out
    assert "0 2 * * * Europe/Amsterdam" in listing
    # the next run is this machine's local time: its zone is named, or "0 2 * * * Europe/Amsterdam" beside
    # "2026-12-02 01:00" (a box on UTC) reads as a wrong schedule
    zone = dt.datetime.now().astimezone().strftime("%Z")
    assert f"NEXT RUN ({zone})" in listing and f"LAST SUCCESS ({zone})" in listing

    assert cli("run", "sum") == 0
    out = capsys.readouterr()
    assert "3 succeeded, 0 failed, 0 left" in out.out
    assert "3/3" in out.err  # the progress reached the end
    # stderr is no terminal here (a systemd timer's journal): whole lines, not a bar redrawn with \r into one line
    assert "\r" not in out.err and "sum: 3/3 items" in out.err.splitlines(), out.err
    run_id = out.out.split()[1].rstrip(":")
    assert cli("results", run_id, "--json") == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 3 and all(r["status"] == "succeeded" and r["result"]["summary"] for r in rows)
    assert cli("runs", "sum") == 0
    assert run_id in capsys.readouterr().out
    assert cli("cancel", run_id) == 0
    assert "succeeded" in capsys.readouterr().out  # a finished run stays as it was

    # reindex needs the index to itself: this test's open service stands in for the daemon
    (tmp_path / "docs" / "a.txt").write_text("text")
    assert cli("add", "ri", "reindex", "--params", json.dumps({"folders": [str(tmp_path / "docs")]})) == 0
    capsys.readouterr()
    assert cli("run", "ri") == 2
    err = capsys.readouterr().err
    assert "run the job through the daemon (POST /v1/jobs/ri/run)" in err
    assert err.count("stop the daemon") == 1 and "add documents" not in err, err  # was both hints at once, one about uploads
    docs.close()
    monkeypatch.setattr("edge_agent.rag.embedder.build_embedder", lambda settings, **_: embedder)
    assert cli("run", "ri", "--no-progress") == 0
    assert "1 succeeded" in capsys.readouterr().out
    assert cli("delete", "ri") == 0 and cli("runs", "ri") == 2


def test_jobs_list_fits_long_names_and_hides_openai_batch_jobs(cli, capsys):
    import argparse

    from edge_agent.cli.common import settings_from
    from edge_agent.cli.jobs import _service
    from edge_agent.jobs.batch_files import BATCH_SOURCE, BatchService

    long_name = "summaries-of-the-legal-department-contracts-folder-every-night"
    assert cli("add", long_name, "summarize", "--schedule", "0 2 * * *") == 0
    svc = _service(argparse.Namespace())
    line = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": []}}\n'
    file_id = BatchService(settings_from(argparse.Namespace()), svc).upload("batch", "b.jsonl", [line])["id"]
    svc.create_job("batch_abc123", "batch", {"input_file_id": file_id, "endpoint": "/v1/chat/completions",
                                             "completion_window": "24h", "batch_id": "batch_abc123"}, source=BATCH_SOURCE)
    capsys.readouterr()
    assert cli("list") == 0
    lines = capsys.readouterr().out.splitlines()
    header, row = lines[0], next(line for line in lines if line.startswith(long_name))
    assert header.index("KIND") == row.index("summarize")  # the columns stay aligned past a 24-character name
    assert "batch_abc123" not in "\n".join(lines) and "1 OpenAI batch job not shown" in lines[-1]
    assert cli("list", "--all") == 0
    assert "batch_abc123" in capsys.readouterr().out


def test_jobs_runs_shows_why_a_run_failed(cli, capsys, tmp_path):
    """A run that could not list its items ends with stop_reason 'error': `jobs runs` shows the error itself, not the word 'error'."""
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "mail.csv").write_text("id,onderwerp\n1,Factuur\n", encoding="utf-8")
    assert cli("add", "mail", "classify", "--params", json.dumps({"labels": ["factuur", "klacht"], "source": "csv",
               "csv_path": str(tmp_path / "docs" / "mail.csv"), "text_column": "tekst"})) == 0
    assert cli("run", "mail", "--no-progress") == 1
    capsys.readouterr()
    assert cli("runs", "mail") == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert "failed" in row and "the CSV has no column 'tekst'" in row, row


def test_jobs_run_with_nothing_to_do_says_so(cli, capsys, tmp_path, embedder, wordy_model):
    """A second summarize run finds every summary current: it printed '0 succeeded, 0 failed, 0 left', which reads
    as if the job had failed to find its documents."""
    from edge_agent.config import Settings
    from edge_agent.services.documents import DocumentService

    docs = DocumentService.from_settings(Settings(), embedder=embedder)
    docs.add_text("nota", doc_text(1, 2))
    docs.close()
    assert cli("add", "sum", "summarize", "--params", '{"max_tokens": 8}') == 0
    assert cli("run", "sum", "--no-progress") == 0
    assert "1 succeeded" in capsys.readouterr().out
    assert cli("run", "sum", "--no-progress") == 0
    out = capsys.readouterr().out
    assert ": succeeded: nothing to do (no items" in out and "0 succeeded" not in out, out


def _jobs_run_process(job: str, stderr):
    """`edge-agent jobs run JOB` in a process of its own, this tree first on the path (the wordy sitecustomize imports
    edge_agent before `-m` puts the working folder on it)."""
    import os
    import subprocess
    import sys

    from jobs_helpers import REPO

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ["PYTHONPATH"]]))
    return subprocess.Popen([sys.executable, "-m", "edge_agent", "jobs", "run", job, "--no-progress"], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=stderr, text=True)


def _items_done(proc, db_path, at_least: int, timeout: float = 180) -> int:
    """Items of the run that are no longer pending, polled until at_least, the process ends, or timeout seconds."""
    import sqlite3
    import time

    done, end = 0, time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None and done < at_least:
        with sqlite3.connect(db_path) as db:
            done = db.execute("SELECT count(*) FROM run_items WHERE status != 'pending'").fetchone()[0]
        time.sleep(0.02)
    return done


def test_a_jobs_run_killed_mid_run_is_taken_over_by_the_next(cli, capsys, tmp_path, embedder, wordy_site):
    """A `jobs run` killed mid-run (kill -9, the OOM killer) left its run "running" for good where no daemon takes runs
    over (jobs_enabled = false: the systemd timer's setup), and every later `jobs run` of the job exited 2, "already has
    an active run". The next `jobs run` takes it over and does only the items not yet done, each once."""
    import signal
    import sqlite3
    import subprocess

    from edge_agent.config import Settings
    from edge_agent.services.documents import DocumentService

    docs = DocumentService.from_settings(Settings(), embedder=embedder)
    n = 12
    ids = [docs.add_text(f"d{i}", doc_text(i, 4)).document_id for i in range(n)]
    docs.close()
    assert cli("add", "crashy", "summarize", "--params", '{"max_tokens": 120}', "--concurrency", "1") == 0
    db_path = tmp_path / "var" / "edge-agent.db"
    proc = _jobs_run_process("crashy", subprocess.DEVNULL)
    done = 0
    try:
        done = _items_done(proc, db_path, 2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert 2 <= done < n, f"{done} of {n} items were done when the process was killed: make the items longer"
    capsys.readouterr()
    assert cli("run", "crashy", "--no-progress") == 0, capsys.readouterr().err
    out = capsys.readouterr()
    assert "taking over run" in out.err, out.err
    with sqlite3.connect(db_path) as db:
        runs = db.execute("SELECT id, status, resumes FROM job_runs").fetchall()
        rows = db.execute("SELECT item_key, status, attempts FROM run_items").fetchall()
    assert len(runs) == 1 and runs[0][1] == "succeeded" and runs[0][2] == 1, runs  # the same run, resumed once
    assert sorted(k for k, _, _ in rows) == sorted(f"doc:{i}" for i in ids)  # every item once, none skipped
    assert all(s in ("succeeded", "failed") and attempts == 1 for _, s, attempts in rows), rows


def test_output_into_a_closed_pipe_is_no_traceback(tmp_path):
    """`edge-agent jobs runs | head -3` printed a BrokenPipeError traceback once head had its lines: a reader that
    left ends the command quietly, with 141 (128 + SIGPIPE) as a shell reports a program the signal ended."""
    import os
    import subprocess
    import sys

    from jobs_helpers import REPO

    env = dict(os.environ, EDGE_AGENT_CONFIG="/nonexistent/edge-agent-test.toml", EDGE_AGENT_DATA_DIR=str(tmp_path / "var"))
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        proc = subprocess.run([sys.executable, "-m", "edge_agent", "jobs", "list"], cwd=REPO, env=env, stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr
    assert proc.returncode == 141, proc.stderr


def test_sigterm_gives_a_jobs_run_back_for_the_next_to_resume(cli, capsys, tmp_path, embedder, wordy_site):
    """`systemctl stop` of a timer's `jobs run` (SIGTERM) cut it off mid-item like kill -9: its items in flight counted
    as crashes (three such stops fail an item as poison) and its run stayed held by a dead process. It now stops at
    once, gives the run back with nothing in flight, says so and exits 143; the next `jobs run` resumes it."""
    import signal
    import sqlite3
    import subprocess

    from edge_agent.config import Settings
    from edge_agent.services.documents import DocumentService

    docs = DocumentService.from_settings(Settings(), embedder=embedder)
    n = 12
    for i in range(n):
        docs.add_text(f"d{i}", doc_text(i, 4))
    docs.close()
    assert cli("add", "stoppable", "summarize", "--params", '{"max_tokens": 120}', "--concurrency", "2") == 0
    db_path = tmp_path / "var" / "edge-agent.db"
    proc = _jobs_run_process("stoppable", subprocess.PIPE)
    done = 0
    try:
        done = _items_done(proc, db_path, 2)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert 2 <= done < n, f"{done} of {n} items were done at the SIGTERM: make the items longer"
    assert proc.returncode == 143 and "stopped (SIGTERM)" in err and "Traceback" not in err, (proc.returncode, done, err)
    with sqlite3.connect(db_path) as db:
        (status, owner), = db.execute("SELECT status, owner FROM job_runs").fetchall()
        starts = db.execute("SELECT count(*) FROM run_items WHERE unfinished_starts > 0").fetchone()[0]
    assert status == "running" and owner is None and starts == 0  # given back, nothing counted as a crash
    assert cli("run", "stoppable", "--no-progress") == 0, capsys.readouterr().err
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT status FROM job_runs").fetchall() == [("succeeded",)]
        assert db.execute("SELECT count(*), max(attempts) FROM run_items").fetchone() == (n, 1)


def test_jobs_runs_says_when_no_process_runs_an_active_run(cli, capsys, tmp_path):
    """`jobs runs` showed "running" for a run whose process had died (the daemon down, a killed `jobs run`): it now
    says that nothing runs it and what resumes it."""
    import socket

    from edge_agent.config import Settings
    from edge_agent.jobs.service import JobsService
    from edge_agent.services.documents import default_db_path
    from edge_agent.store import SqliteDatabase

    assert cli("add", "nightly", "summarize") == 0 and cli("add", "other", "summarize") == 0
    db = SqliteDatabase(default_db_path(Settings()))
    svc = JobsService(Settings(), db)
    orphan = svc.start_run("nightly")
    assert svc.store.claim_run(orphan.id, f"{socket.gethostname()}:{2 ** 22 + 7}:x", stale_s=30)  # no such pid
    held = svc.start_run("other")
    assert svc.store.claim_run(held.id, svc.owner, stale_s=30)  # this process: alive
    capsys.readouterr()
    assert cli("runs") == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "no process is running it" in rows[orphan.id] and "`edge-agent jobs run nightly`" in rows[orphan.id], rows
    assert "no process" not in rows[held.id], rows
    db.close()
