"""Slots follow their clients: a hung-up non-streaming client, an unread stream, 429s counted, a dead engine reported."""
from __future__ import annotations

import json
import socket
import threading
import time

from api_helpers import KEY, api_settings, send_unread, start_server, wait_until

LONG = {"model": "default", "prompt": "hello", "max_tokens": 4000, "temperature": 0, "ignore_eos": True}


def _send(server, body: dict) -> socket.socket:
    """POST /v1/completions on a raw socket (nothing read yet)."""
    return send_unread(server, "/v1/completions", body)


def _cancelled(server) -> float:
    return server.metric("edge_agent_generations_total", 'reason="cancelled"')


def test_non_streaming_client_that_hangs_up_frees_its_slot_within_a_second(small_live):
    """Tokens keep coming (no pause for a heartbeat), yet the socket is checked on a timer."""
    server = small_live
    before = _cancelled(server)
    s = _send(server, LONG)
    assert wait_until(lambda: server.metric("edge_agent_active_sequences") == 1, 5)
    time.sleep(0.5)  # decoding steadily
    s.close()
    closed = time.monotonic()
    assert wait_until(lambda: _cancelled(server) > before, 3)
    assert time.monotonic() - closed < 1.0
    assert wait_until(lambda: server.metric("edge_agent_active_sequences") == 0, 1)


def _call_unread(app, body: dict):
    """Call the WSGI app as a server would, but never iterate the body: (status line, body iterable)."""
    from werkzeug.test import EnvironBuilder

    environ = EnvironBuilder(method="POST", path="/v1/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}).get_environ()
    status = []
    app_iter = app(environ, lambda line, headers, exc_info=None: status.append(line))
    return status[0], app_iter


def test_a_stream_whose_body_is_closed_unread_frees_its_slot(small_live):
    server = small_live
    before = _cancelled(server)
    status, body = _call_unread(server.app, {**LONG, "stream": True})
    assert status.startswith("200")
    assert wait_until(lambda: server.runtime.scheduler.active == 1, 5)
    time.sleep(0.3)
    assert server.runtime.scheduler.active == 1  # held while the response lives
    body.close()  # closed without one chunk read: the body generator never started
    assert wait_until(lambda: server.runtime.scheduler.active == 0 and _cancelled(server) > before, 1.0)


def test_a_stream_nobody_reads_or_closes_is_cancelled_by_the_watchdog(small_live, monkeypatch):
    from edge_agent.api import openai as routes

    monkeypatch.setattr(routes, "STREAM_START_S", 0.5)
    server = small_live
    before = _cancelled(server)
    status, body = _call_unread(server.app, {**LONG, "stream": True})
    try:
        assert status.startswith("200")
        t0 = time.monotonic()
        assert wait_until(lambda: server.runtime.scheduler.active == 0 and _cancelled(server) > before, 3)
        assert 0.2 < time.monotonic() - t0 < 1.5
    finally:
        body.close()


def test_every_429_counts_as_a_rejected_request(small_live):
    server = small_live
    rejected = server.metric("edge_agent_rejected_requests_total")
    holder = _send(server, {**LONG, "stream": True})
    queued = None
    try:
        assert wait_until(lambda: server.metric("edge_agent_active_sequences") == 1, 5)
        queued = _send(server, {**LONG, "max_tokens": 3})
        assert wait_until(lambda: server.metric("edge_agent_queue_depth") == 1, 5)
        statuses = [server.request("POST", "/v1/completions", {"model": "default", "prompt": "x", "max_tokens": 2})[0] for _ in range(3)]
        assert statuses == [429, 429, 429]
        assert server.metric("edge_agent_rejected_requests_total") - rejected == 3
    finally:
        holder.close()
        if queued is not None:
            queued.close()
    assert wait_until(lambda: server.metric("edge_agent_active_sequences") == 0 and server.metric("edge_agent_queue_depth") == 0, 5)


def test_a_dead_engine_ends_its_requests_and_turns_health_and_ready_red(tiny_bundles, tmp_path):
    """The scheduler's thread dies mid-stream: the stream ends with an error event, /health and /ready answer 503
    (so a service manager restarts the daemon) and new requests get a clear 503 at once."""
    server = start_server(api_settings(tiny_bundles["llama"], tmp_path, max_batch=2, context_length=256, max_tokens_limit=256))
    try:
        assert server.request("GET", "/health")[0] == 200
        assert server.request("GET", "/ready")[0] == 200
        s = _send(server, {**LONG, "max_tokens": 200, "stream": True})
        buf = b""
        while b'"text"' not in buf:
            buf += s.recv(4096)
        sched = server.runtime.scheduler
        stop = threading.Event()

        def dying():
            stop.set()
            raise SystemExit("injected: the loop thread exits")

        sched._step = dying
        s.settimeout(10)
        while b"[DONE]" not in buf and b'"error"' not in buf:
            part = s.recv(4096)
            if not part:
                break
            buf += part
        s.close()
        assert stop.is_set() and not sched.alive and "SystemExit" in sched.failure
        assert b'"error"' in buf and b"[DONE]" not in buf  # the stream says it failed; it does not claim to be complete
        assert b"needs a restart" in buf
        status, _, body = server.request("GET", "/health")
        assert status == 503, body
        status, _, body = server.request("GET", "/ready")
        assert status == 503, body
        t0 = time.monotonic()
        status, _, body = server.request("POST", "/v1/completions", {"model": "default", "prompt": "x", "max_tokens": 2})
        assert status == 503 and time.monotonic() - t0 < 2
        assert "restart" in json.loads(body)["error"]["message"]
    finally:
        server.close()
