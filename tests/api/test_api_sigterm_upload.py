"""SIGTERM while a document upload is being embedded: the daemon exits 0, not SIGABRT (exit 134, a core dump and a
failed stop under systemd), and nothing of the abandoned upload is half-stored."""
from __future__ import annotations

import os
import random
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from api_helpers import REPO
from embed_cache import link_embedding_cache

WORDS = "river harbour engine ledger window orchard signal market bridge lantern copper meadow archive council".split()


def _data_dir(tmp_path: Path) -> Path:
    """A data folder whose embedding cache links to the tests' shared, already exported model."""
    return link_embedding_cache(tmp_path / "var")


def _start(bundle: Path, tmp_path: Path, data: Path) -> tuple[subprocess.Popen, int, list[str]]:
    env = dict(os.environ, EDGE_AGENT_CONFIG="/nonexistent/edge-agent-test.toml", EDGE_AGENT_SHUTDOWN_GRACE_S="0.5",
               EDGE_AGENT_THREADS="1", EDGE_AGENT_DATA_DIR=str(data), EDGE_AGENT_INDEX_DIR=str(tmp_path / "index"))
    cmd = [sys.executable, "-m", "edge_agent.cli.serve", "--models-dir", str(bundle.parent), "--model", bundle.name, "--port", "0"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    end = time.monotonic() + 120
    while time.monotonic() < end:  # wait for "ready" (the document index open), not only "listening"
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"edge-agent ready: .* on http://127\.0\.0\.1:(\d+)", line)
        if m:
            threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
            return proc, int(m.group(1)), lines
    proc.kill()
    raise AssertionError("".join(lines))


def _upload(port: int, text: bytes, query: str) -> socket.socket:
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"long.txt\"\r\n"
            "Content-Type: text/plain\r\n\r\n").encode() + text + f"\r\n--{boundary}--\r\n".encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(f"POST /v1/documents{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
              + f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    return s


def _long_text() -> bytes:
    rng = random.Random(1)
    # ~17 MB: minutes of embedding even on many cores, so the upload is still running when the shutdown ends
    return "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(120)) + "." for _ in range(20000)).encode()


def _shut_down(proc: subprocess.Popen, signals: int) -> int:
    time.sleep(1.5)  # the upload is being chunked and embedded
    for _ in range(signals):
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
    return proc.wait(60)


@pytest.mark.parametrize("signals, exit_code", [(1, 0), (2, 1)])  # a second signal: "exiting now", status 1
def test_sigterm_during_an_upload_exits_cleanly(tiny_bundles, tmp_path, signals, exit_code):
    proc, port, lines = _start(tiny_bundles["llama"], tmp_path, _data_dir(tmp_path))
    try:
        s = _upload(port, _long_text(), "?wait=true")  # the client waits for the whole ingestion
        rc = _shut_down(proc, signals)
        answer = s.recv(65536)
        s.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    log = "".join(lines)
    assert not answer.startswith(b"HTTP/1.1 201"), "the upload finished before the shutdown: make the text longer"
    assert rc == exit_code and "terminate called" not in log, (rc, log[-2000:])  # was -6 (SIGABRT) both ways
    assert ("abandoned" if signals == 1 else "second signal") in log
    with sqlite3.connect(tmp_path / "var" / "edge-agent.db") as db:  # the abandoned upload left no row and no chunk
        assert db.execute("SELECT count(*) FROM documents").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0


def test_sigterm_during_a_background_upload_exits_cleanly_and_marks_it_failed(tiny_bundles, tmp_path):
    """A large upload answered 202 is embedded by a background thread, not a request: the shutdown ends with no request in
    flight, yet that thread is still inside onnxruntime (was: exit -6, "terminate called without an active exception")."""
    proc, port, lines = _start(tiny_bundles["llama"], tmp_path, _data_dir(tmp_path))
    try:
        s = _upload(port, _long_text(), "")  # over upload_async_bytes: 202 at once
        answer = s.recv(65536)
        rc = _shut_down(proc, 1)
        s.close()
    finally:
        if proc.poll() is None:
            proc.kill()
    log = "".join(lines)
    assert answer.startswith(b"HTTP/1.1 202"), answer[:200]
    assert rc == 0 and "terminate called" not in log, (rc, log[-2000:])
    assert "background work still running was abandoned" in log, log[-2000:]
    with sqlite3.connect(tmp_path / "var" / "edge-agent.db") as db:  # "failed" with the reason, never "processing"; no chunk
        rows = db.execute("SELECT status, error FROM documents").fetchall()
        assert len(rows) == 1 and rows[0][0] == "failed" and "upload the file again" in rows[0][1], rows
        assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
