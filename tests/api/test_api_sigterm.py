"""`serve` in a subprocess: readiness line, SIGTERM stops accepting, running requests finish within the grace, exit 0."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from api_helpers import REPO


def start_serve(bundle, tmp_path, grace: float) -> tuple[subprocess.Popen, int, list[str]]:
    env = dict(
        os.environ, EDGE_AGENT_CONFIG="/nonexistent/edge-agent-test.toml", EDGE_AGENT_SHUTDOWN_GRACE_S=str(grace),
        EDGE_AGENT_THREADS="1", EDGE_AGENT_CONTEXT_LENGTH="4096", EDGE_AGENT_MAX_TOKENS_LIMIT="4096", EDGE_AGENT_MAX_BATCH="2",
        EDGE_AGENT_DATA_DIR=str(tmp_path / "var"), EDGE_AGENT_INDEX_DIR=str(tmp_path / "index"),
        EDGE_AGENT_EMBEDDING_MODEL=str(tmp_path / "no-embedding-model"),  # documents fail to load; chat must not care
    )
    cmd = [sys.executable, "-m", "edge_agent.cli.serve", "--models-dir", str(bundle.parent), "--model", bundle.name, "--port", "0"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    port = None
    end = time.monotonic() + 90
    while port is None and time.monotonic() < end:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
    assert port, "".join(lines)
    threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
    return proc, port, lines


def stream_request(port: int, max_tokens: int, first_chunk: threading.Event, out: dict) -> None:
    body = json.dumps({"model": "default", "prompt": "hello", "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True, "stream_options": {"include_usage": True}}).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    buf = b""
    while True:
        part = s.recv(65536)
        if not part:
            break
        buf += part
        if b'"text"' in buf:
            first_chunk.set()
        if b"data: [DONE]" in buf or buf.endswith(b"\r\n0\r\n\r\n"):  # the last event, or the end of the chunked body
            break
    s.close()
    out["body"] = buf.decode("utf-8", "replace")


def events(body: str) -> list[str]:
    return re.findall(r"data: (.*?)\n\n", body)


def test_sigterm_lets_running_requests_finish(long_bundle, tmp_path):
    proc, port, lines = start_serve(long_bundle, tmp_path, 30.0)
    try:
        first, out = threading.Event(), {}
        t = threading.Thread(target=stream_request, args=(port, 3500, first, out))
        t.start()
        assert first.wait(30)
        proc.send_signal(signal.SIGTERM)
        assert t.is_alive()  # the generation is still running
        time.sleep(0.5)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
        t.join(60)
        data = events(out["body"])
        assert data[-1] == "[DONE]", data[-3:]
        usage = json.loads(data[-2])["usage"]
        assert usage["completion_tokens"] == 3500
        assert proc.wait(30) == 0
        assert "all requests finished" in "".join(lines)
        assert "document service failed to load" in "".join(lines)  # logged in the background, not fatal
    finally:
        if proc.poll() is None:
            proc.kill()


def test_sigterm_cancels_what_outlasts_the_grace(long_bundle, tmp_path):
    proc, port, lines = start_serve(long_bundle, tmp_path, 0.5)
    try:
        first, out = threading.Event(), {}
        t = threading.Thread(target=stream_request, args=(port, 4000, first, out))
        t.start()
        assert first.wait(30)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert time.monotonic() - sent < 8
        t.join(10)
        last = events(out["body"])[-1]
        assert json.loads(last)["error"]["message"].endswith("the server is shutting down")
    finally:
        if proc.poll() is None:
            proc.kill()
