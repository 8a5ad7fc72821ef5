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

EMBED_CACHE = Path(os.environ.get("EDGE_AGENT_TEST_EMBED_CACHE", REPO / ".cache" / "test-embedding-cache"))
WORDS = "river harbour engine ledger window orchard signal market bridge lantern copper meadow archive council".split()


def _data_dir(tmp_path: Path) -> Path:
    """A data folder whose embedding cache links to the tests' shared, already exported model."""
    from edge_agent.rag.embedder import OnnxEmbedder

    shared = OnnxEmbedder(cache_dir=EMBED_CACHE).folder
    mine = tmp_path / "var" / "embedding-cache" / shared.name
    (mine / "onnx").mkdir(parents=True)
    for p in shared.iterdir():
        if p.name != "onnx":
            (mine / p.name).symlink_to(p)
    for p in (shared / "onnx").iterdir():
        (mine / "onnx" / p.name).symlink_to(p)
    return tmp_path / "var"


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


@pytest.mark.parametrize("signals, exit_code", [(1, 0), (2, 1)])  # a second signal: "exiting now", status 1
def test_sigterm_during_an_upload_exits_cleanly(tiny_bundles, tmp_path, signals, exit_code):
    rng = random.Random(1)
    # ~17 MB: minutes of embedding even on many cores, so the upload is still running when the shutdown ends
    text = "\n\n".join(" ".join(rng.choice(WORDS) for _ in range(120)) + "." for _ in range(20000)).encode()
    proc, port, lines = _start(tiny_bundles["llama"], tmp_path, _data_dir(tmp_path))
    try:
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"long.txt\"\r\n"
                "Content-Type: text/plain\r\n\r\n").encode() + text + f"\r\n--{boundary}--\r\n".encode()
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        s.sendall(b"POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  + f"Content-Type: multipart/form-data; boundary={boundary}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        time.sleep(1.5)  # the upload is being chunked and embedded
        for _ in range(signals):
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
        rc = proc.wait(60)
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
