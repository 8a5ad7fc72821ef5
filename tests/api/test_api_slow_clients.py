"""Slow and greedy clients (issue 14.1): hundreds of sockets dripping a byte at a time must not lock out
normal requests; each gets 408 at its deadline, one address more than its cap gets 429.

Loopback only: the drippers bind 127.0.0.2 and up (all of 127/8 is loopback on Linux), the normal
client 127.0.0.1. Bounded: at most 300 sockets, each test under ~15 s.
"""
from __future__ import annotations

import http.client
import selectors
import socket
import threading
import time

import pytest

from api_helpers import KEY, api_settings

HEADER_S = 1.5


@pytest.fixture
def guarded(tiny_bundles, tmp_path):
    """A real server whose limits are small enough to reach in a test."""
    from edge_agent.api.app import create_app
    from edge_agent.runtime import build_runtime
    from edge_agent.server import ConnectionLimits, HttpServer

    rt = build_runtime(api_settings(tiny_bundles["llama"], tmp_path), load_documents=False)
    servers = []

    def start(**limits) -> HttpServer:
        values = dict(header_timeout_s=HEADER_S, body_timeout_s=HEADER_S, body_min_rate=1024, per_client=32)
        values.update(limits)
        srv = HttpServer(create_app(rt), "127.0.0.1", 0, threads=8, limits=ConnectionLimits(**values)).start()
        servers.append(srv)
        return srv

    yield start
    for srv in servers:
        srv.stop_accepting()
        srv.close(flush_s=0.2)
    rt.close()


class Drippers:
    """Sockets that send a request one byte every `every` seconds; records what the server answered and when."""

    def __init__(self, port: int, sources: list[str], n: int, request: bytes, every: float = 0.25):
        self.request = request
        self.socks: list[socket.socket] = []
        self.sent: dict[int, int] = {}
        self.answer: dict[int, bytes] = {}
        self.closed_at: dict[int, float] = {}
        self.t0 = time.monotonic()
        for i in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((sources[i % len(sources)], 0))
            s.settimeout(5)
            s.connect(("127.0.0.1", port))
            s.setblocking(False)
            self.socks.append(s)
            self.sent[s.fileno()] = 0
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        for s in self.socks:
            sel.register(s, selectors.EVENT_READ)
        next_drip = 0.0
        while not self._stop.is_set() and len(self.closed_at) < len(self.socks):
            now = time.monotonic()
            if now >= next_drip:
                next_drip = now + self.every
                for s in self.socks:
                    fd = s.fileno()
                    if fd in self.closed_at or self.sent[fd] >= len(self.request):
                        continue
                    try:
                        self.sent[fd] += s.send(self.request[self.sent[fd]:self.sent[fd] + 1])
                    except OSError:
                        pass  # reset by the server: the read below records the close
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                fd = s.fileno()
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if data:
                    self.answer[fd] = self.answer.get(fd, b"") + data
                else:
                    self.closed_at[fd] = time.monotonic() - self.t0
                    sel.unregister(s)
        sel.close()

    def statuses(self) -> list[int | None]:
        out = []
        for s in self.socks:
            a = self.answer.get(s.fileno(), b"")
            out.append(int(a.split(b" ", 2)[1]) if a.startswith(b"HTTP/1.1 ") else None)
        return out

    def wait_closed(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end and len(self.closed_at) < len(self.socks):
            time.sleep(0.05)
        return len(self.closed_at) == len(self.socks)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for s in self.socks:
            s.close()


def _normal_request(port: int) -> tuple[int, float]:
    t = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15, source_address=("127.0.0.1", 0))
    try:
        conn.request("GET", "/v1/models", headers={"Authorization": f"Bearer {KEY}"})
        r = conn.getresponse()
        r.read()
        return r.status, time.monotonic() - t
    finally:
        conn.close()


SLOW_HEADERS = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" + b"X-Pad: " + b"a" * 200


def _answers_during(srv, drippers: Drippers, seconds: float, limit_s: float) -> list[float]:
    """Normal requests every 0.3 s while the drippers run; each must answer 200 within limit_s."""
    took = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        status, dt = _normal_request(srv.port)
        assert status == 200
        assert dt < limit_s, f"a normal request took {dt:.2f} s among {len(drippers.socks)} slow sockets"
        took.append(dt)
        time.sleep(0.3)
    return took


def test_greedy_address_is_capped_and_normal_requests_keep_answering(guarded):
    srv = guarded()
    drippers = Drippers(srv.port, ["127.0.0.2"], 300, SLOW_HEADERS)
    try:
        took = _answers_during(srv, drippers, 2.5, limit_s=2.0)
        assert len(took) >= 4
        assert drippers.wait_closed(HEADER_S + 6), "the server left slow sockets open past the header deadline"
        statuses = drippers.statuses()
        assert statuses.count(429) >= 300 - 32  # over the per-address cap: refused at once
        assert statuses.count(408) >= 1 and set(statuses) <= {408, 429}
        # the 408s came at the header deadline (a second of maintenance slack), not at once and not never
        late = [drippers.closed_at[s.fileno()] for s, st in zip(drippers.socks, statuses) if st == 408]
        assert min(late) >= HEADER_S - 0.3 and max(late) <= HEADER_S + 4.0
    finally:
        drippers.close()
    assert srv.peers.open.get("127.0.0.2", 0) == 0  # every refused or timed-out connection was released


def test_hundreds_of_slow_clients_over_the_connection_limit(guarded):
    """250 drippers from 10 addresses (25 each, under the per-address cap) against a 100-connection limit:
    the deadline frees the slots, so a normal request waits at most about one header deadline."""
    srv = guarded(connections=100)
    sources = [f"127.0.0.{i}" for i in range(2, 12)]
    drippers = Drippers(srv.port, sources, 250, SLOW_HEADERS)
    try:
        took = _answers_during(srv, drippers, 4.0, limit_s=HEADER_S + 4.0)
        assert took
        assert drippers.wait_closed(4 * (HEADER_S + 1.5) + 5)
        assert set(drippers.statuses()) == {408}
    finally:
        drippers.close()


def test_slow_body_and_silent_socket_are_closed(guarded):
    srv = guarded()
    head = (b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {KEY}\r\nContent-Length: 5000\r\n\r\n".encode())
    body = socket.create_connection(("127.0.0.1", srv.port), timeout=15)
    silent = socket.create_connection(("127.0.0.1", srv.port), timeout=15)
    try:
        t0 = time.monotonic()
        body.sendall(head)
        got = b""
        while True:  # drip the body until the server answers
            body.settimeout(0.25)
            try:
                chunk = body.recv(4096)
                if not chunk:
                    break
                got += chunk
            except socket.timeout:
                try:
                    body.send(b"x")
                except OSError:
                    break
            if time.monotonic() - t0 > 15:
                break
        took = time.monotonic() - t0
        assert got.startswith(b"HTTP/1.1 408"), got[:80]
        assert b"request_timeout" in got
        assert HEADER_S - 0.3 <= took <= HEADER_S + 4.0  # body deadline: 1.5 s plus 1 s per 1024 bytes received
        silent.settimeout(HEADER_S + 4.0)
        assert silent.recv(100) == b""  # connected and said nothing: closed at the header deadline, no answer
    finally:
        body.close()
        silent.close()
    assert _normal_request(srv.port)[0] == 200


def test_the_slow_client_warning_says_news_once_not_the_same_line_forever(guarded, caplog, monkeypatch):
    import logging

    from edge_agent import server

    monkeypatch.setattr(server, "SLOW_CLIENT_LOG_S", 0.2)  # the daemon's 10 s, shortened to fit a test
    srv = guarded(header_timeout_s=0.5)
    lines = lambda: [r for r in caplog.records if "slow or greedy clients" in r.getMessage()]  # noqa: E731
    with caplog.at_level(logging.WARNING, logger="edge_agent.server"):
        silent = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        try:
            assert silent.recv(100) == b""  # closed at its header deadline
        finally:
            silent.close()
        time.sleep(2.5)  # a dozen maintenance passes later: the count has not changed, so no new line
        assert len(lines()) == 1 and "1 connections closed past their deadline" in lines()[0].getMessage()
    assert _normal_request(srv.port)[0] == 200


def test_a_late_wakeup_after_close_writes_nowhere():
    """A worker that finishes after the server closed pulls the trigger: that write went to the pipe's closed fd
    number (EBADF) or, once the process had reused the number, into someone else's file or socket."""
    import os

    import flask

    from edge_agent.server import HttpServer

    srv = HttpServer(flask.Flask("late"), "127.0.0.1", 0, threads=2).start()
    write_end = srv.server.trigger.trigger
    srv.close()
    pipes = [os.pipe() for _ in range(4)]  # low numbers first: the closed ones come back
    try:
        assert any(write_end in p for p in pipes), (write_end, pipes)
        srv.server.pull_trigger()  # raised EBADF or wrote a byte into a reused number
        for r, w in pipes:
            os.set_blocking(r, False)
            with pytest.raises(BlockingIOError):
                os.read(r, 1)
    finally:
        for p in pipes:
            for fd in p:
                os.close(fd)
