"""kill -9 of the daemon during a run, at random points, several times: every item ends with exactly one result."""
from __future__ import annotations

import http.client
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time

from jobs_helpers import REPO, doc_text


def start_daemon(bundle, tmp_path) -> tuple[subprocess.Popen, int]:
    env = dict(
        os.environ, EDGE_AGENT_CONFIG="/nonexistent/edge-agent-test.toml", EDGE_AGENT_THREADS="1",
        EDGE_AGENT_CONTEXT_LENGTH="512", EDGE_AGENT_MAX_BATCH="8", EDGE_AGENT_JOBS_CONCURRENCY="4",
        EDGE_AGENT_DATA_DIR=str(tmp_path / "var"), EDGE_AGENT_INDEX_DIR=str(tmp_path / "index"),
        EDGE_AGENT_SERVE_DOCUMENTS="false",  # summarize reads the stored chunks; no embedding model needed
    )
    cmd = [sys.executable, "-m", "edge_agent.cli.serve", "--models-dir", str(bundle.parent), "--model", bundle.name, "--port", "0"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    end = time.monotonic() + 120
    while time.monotonic() < end:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # keep the pipe drained
            return proc, int(m.group(1))
    proc.kill()
    raise AssertionError("daemon did not start:\n" + "".join(lines))


def call(port: int, method: str, path: str, body=None) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"Content-Type": "application/json"} if body is not None else {})
    r = conn.getresponse()
    out = json.loads(r.read())
    conn.close()
    assert r.status == 200, out
    return out


def test_kill_9_during_a_run_loses_nothing_and_repeats_nothing(tiny_bundles, tmp_path, embedder, wordy_site):
    from edge_agent.config import Settings
    from edge_agent.services.documents import DocumentService

    settings = Settings(data_dir=tmp_path / "var", index_dir=tmp_path / "index")
    docs = DocumentService.from_settings(settings, embedder=embedder)
    n = 24
    ids = [docs.add_text(f"doc {i}", doc_text(i, 4)).document_id for i in range(n)]
    docs.close()

    rng = random.Random(7)
    proc, port = start_daemon(tiny_bundles["llama"], tmp_path)
    kills_mid_run = 0
    try:
        # One item at a time: a restarted daemon resumes the run before its HTTP server listens, and with four
        # in flight a loaded machine could finish every remaining item in that gap (CI, load ~3).
        call(port, "POST", "/v1/jobs", {"name": "crashy", "kind": "summarize", "params": {"max_tokens": 120},
                                         "limits": {"concurrency": 1}})
        run_id = call(port, "POST", "/v1/jobs/crashy/run")["id"]
        for target in sorted(rng.sample(range(2, n // 2), 3)):  # kill after a random number of items, plus a random moment
            end = time.monotonic() + 60
            while time.monotonic() < end:
                before = call(port, "GET", f"/v1/runs/{run_id}")
                if before["status"] not in ("queued", "running") or before["counts"]["succeeded"] + before["counts"]["failed"] >= target:
                    break
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.2))
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            kills_mid_run += before["status"] in ("queued", "running")
            proc, port = start_daemon(tiny_bundles["llama"], tmp_path)
        end = time.monotonic() + 180
        while True:
            run = call(port, "GET", f"/v1/runs/{run_id}")
            if run["status"] not in ("queued", "running") or time.monotonic() > end:
                break
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    assert kills_mid_run >= 2, "the run ended before the daemon was killed: make the items longer"
    assert run["status"] == "succeeded" and run["counts"]["pending"] == 0, run
    assert run["counts"]["succeeded"] + run["counts"]["failed"] == n and run["resumes"] >= 1
    with sqlite3.connect(tmp_path / "var" / "edge-agent.db") as db:
        rows = db.execute("SELECT item_key, status, attempts FROM run_items WHERE run_id = ?", (run_id,)).fetchall()
        summaries = dict(db.execute("SELECT document_id, run_id FROM document_summaries").fetchall())
    assert sorted(k for k, _, _ in rows) == sorted(f"doc:{i}" for i in ids)  # every item once, none skipped
    assert all(attempts == 1 for _, _, attempts in rows)  # each committed exactly once
    ok = {int(k.split(":")[1]) for k, s, _ in rows if s == "succeeded"}
    assert ok, rows  # the daemon writes words (wordy_site): its summaries are kept, so the check below is not empty
    assert {d for d, r in summaries.items() if r == run_id} == ok  # the summary was stored with each committed result
