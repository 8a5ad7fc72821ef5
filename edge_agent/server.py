"""The HTTP server: waitress over create_app(runtime), with a graceful SIGTERM shutdown.

Slow and greedy clients: waitress (3.0) has an inactivity timeout (channel_timeout) and one
connection limit for everyone, so a socket that drips one byte a second is never closed and
connection_limit of them lock every client out. `GuardedChannel` adds what it lacks, as Apache's
mod_reqtimeout does: a request's headers must arrive within header_timeout_s of its first byte
(of the connection, for a new one), its body within body_timeout_s plus one second per
body_min_rate bytes, or the client gets 408 and the socket closes; one address may hold
per_client connections (more are answered 429 and closed). Checked every second in the
server's maintenance pass. Bodies are read by the event loop, so slow ones hold no thread.

waitress (3.x) writes each response chunk to the socket as soon as it is produced
(send_bytes = 1, flushed from the worker thread), so Server-Sent Events are not held back.
channel_request_lookahead = 1 keeps reading the socket while a request runs, so a client
that hangs up is noticed (waitress.client_disconnected) even while no token is written.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from waitress import wasyncore
from waitress.channel import HTTPChannel
from waitress.server import BaseWSGIServer, create_server
from waitress.task import ErrorTask

from edge_agent.api.app import METRIC_METHODS, create_app, is_loopback
from edge_agent.api.errors import error_body
from edge_agent.config import Settings
from edge_agent.fsutil import LockHeldError, PidLock
from edge_agent.sdnotify import ServiceNotifier, status_line

log = logging.getLogger(__name__)


class ServeError(Exception):
    """The server cannot start as configured (the message says what to change)."""


def check_bind(settings: Settings) -> list[str]:
    """The accepted API keys; raises ServeError for a host name that does not resolve, a non-loopback bind without any
    key, or an unreadable key file."""
    try:
        keys = settings.accepted_keys()
    except OSError as e:
        raise ServeError(f"cannot read api_key_file {settings.api_key_file}: {e.strerror or e}") from None
    check_resolves(settings.host)  # a name that is no address at all is refused for that, not for a missing key
    if not keys and not is_loopback(settings.host):
        raise ServeError(
            f"refusing to listen on {settings.host}, which other machines can reach, without an API key: "
            "set api_keys (EDGE_AGENT_API_KEYS='[\"...\"]') or api_key_file, or bind 127.0.0.1"
        )
    return keys


def check_resolves(host: str) -> None:
    """Raise ServeError when host is a name this machine cannot resolve (an address, or a name that resolves, passes)."""
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ServeError(f"cannot listen on {host}: the name does not resolve ({e.strerror or e}): give an address of this "
                         "machine, or a name it resolves (--host, EDGE_AGENT_HOST; 0.0.0.0 listens on every address)") from None


def check_port(host: str, port: int) -> None:
    """Raise OSError (EADDRINUSE, EADDRNOTAVAIL) now if host:port cannot be bound, before the model loads.

    A taken port was found only after the model and the embedding model had loaded (seconds on a
    CPU, minutes on a first GPU start). Binding with SO_REUSEADDR, as waitress does, so a port in
    TIME_WAIT is not "taken"; Linux still refuses it while another socket listens there.
    """
    if port == 0:
        return
    family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(addr)


DAEMON_LOCK = ".daemon.lock"  # in data_dir: held by the one daemon that serves it


def lock_data_dir(settings: Settings) -> PidLock:
    """Take the data dir's daemon lock; raises ServeError naming the holder's pid when another daemon has it.

    Two daemons on one data dir would share its SQLite database: the cron loop and run resumption of
    both would start the same scheduled run twice. The lock is an flock (fsutil.PidLock): the kernel
    drops it when its daemon dies, even by kill -9. CLI commands (`jobs list`, `index stats`) do not take it.
    """
    folder = Path(settings.data_dir).resolve()
    try:
        return PidLock(folder / DAEMON_LOCK, f"the data dir {folder}").acquire()
    except LockHeldError as e:
        who = f"pid {e.pid}" if e.pid else "another process"
        raise ServeError(f"another edge-agent daemon ({who}) is already serving the data dir {folder}: stop it first, "
                         "or give this one its own data_dir (EDGE_AGENT_DATA_DIR)") from None
    except OSError as e:
        raise ServeError(f"cannot lock the data dir {folder}: {e.strerror or e}: check data_dir (EDGE_AGENT_DATA_DIR) "
                         "and that this user may write there") from None


def server_threads(settings: Settings, max_batch: int) -> int:
    """Enough worker threads that every running and queued generation holds one and a 429 still answers at once."""
    return max(settings.server_threads, max_batch + settings.max_queue + 8)


@dataclass(frozen=True)
class ConnectionLimits:
    """Deadlines and caps against slow or greedy clients (see the module docstring)."""

    header_timeout_s: float = 5.0  # first byte of a request (accept, for a new connection) -> end of headers
    body_timeout_s: float = 10.0  # end of headers -> end of body, plus 1 s per body_min_rate bytes received
    body_min_rate: int = 16 * 1024
    idle_timeout_s: int = 30  # a kept-alive connection with no request in flight
    per_client: int = 64  # open connections from one client address
    connections: int = 512  # open connections in all (waitress's connection_limit; more wait in the listen backlog)

    @classmethod
    def from_settings(cls, settings: Settings) -> "ConnectionLimits":
        return cls(settings.header_timeout_s, settings.body_timeout_s, settings.body_min_bytes_per_s,
                   settings.idle_timeout_s, settings.max_connections_per_client, settings.max_connections)


def _error_bytes(status: str, message: str, code: str, extra: str = "") -> bytes:
    kind = "rate_limit_error" if status.startswith("429") else "invalid_request_error"  # as the app's 429s (BusyError)
    body = json.dumps(error_body(message, kind, code=code)).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
    return head.encode() + body


_WAITRESS_ERRORS = {  # status -> (message, code) for the errors waitress answers itself, before the app runs
    400: ("the request is not valid HTTP/1.1 ({detail}): check the client's headers and body framing", "bad_http_request"),
    413: ("the request body is too large ({detail}): uploads may be at most max_file_bytes, JSON bodies max_body_bytes",
          "body_too_large"),
    431: ("the request headers are too large: send fewer or shorter headers", "headers_too_large"),
    500: ("internal server error; the server log has the details", "internal_error"),
}


def _asked_path(request) -> str:
    """The path a request asked for, as far as waitress read it: its request line (for headers too large waitress parses
    a stand-in "GET /", while header_plus still holds what arrived before), else the parsed path."""
    line = (getattr(request, "header_plus", b"") or b"").lstrip().split(b"\r\n", 1)[0].split(b" ")
    return line[1].decode("latin-1") if len(line) >= 3 else str(getattr(request, "path", "") or "")


class JsonErrorTask(ErrorTask):
    """waitress' own error answers (body over the cap, malformed HTTP, headers too large) in OpenAI's JSON error shape,
    or Ollama's ({"error": "text"}) on its routes (/api/*) as the app answers there."""

    def execute(self):
        e = self.request.error
        code = int(getattr(e, "code", 500) or 500)
        message, err_code = _WAITRESS_ERRORS.get(code, _WAITRESS_ERRORS[400 if code < 500 else 500])
        detail = " ".join(str(getattr(e, "body", "") or "").split())[:200] if code < 500 else ""
        kind = "invalid_request_error" if code < 500 else "server_error"
        text = message.format(detail=detail or "refused")
        ollama = _asked_path(self.request).startswith("/api/")
        body = json.dumps({"error": text} if ollama else error_body(text, kind, code=err_code)).encode()
        self.status = f"{code} {getattr(e, 'reason', 'Error')}"
        _count(self.channel, getattr(self.request, "command", None), code)
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


WAITRESS_ROUTE = "(waitress)"  # the route label of answers waitress gives before the app runs (no route matched)


def _count(channel, method: str | None, status: int) -> None:
    """Count an answer waitress gave itself (413, 400, 431, 408, 429) in /metrics, as the app counts its own."""
    metrics = getattr(channel, "metrics", None)
    if metrics is not None:
        metrics.observe_request(WAITRESS_ROUTE, method if method in METRIC_METHODS else "other", status, 0.0)


class _Peers:
    """Open connections per client address (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.open: Counter[str] = Counter()
        self.refused = 0
        self.timed_out = 0

    def add(self, peer: str, cap: int) -> bool:
        with self._lock:
            self.open[peer] += 1
            return self.open[peer] <= cap

    def remove(self, peer: str) -> None:
        with self._lock:
            self.open[peer] -= 1
            if self.open[peer] <= 0:
                del self.open[peer]


class GuardedChannel(HTTPChannel):
    """A waitress channel that enforces ConnectionLimits (subclassed per server with `limits` and `peers`)."""

    limits = ConnectionLimits()
    peers: _Peers
    metrics = None  # the app's ServiceMetrics, when it has one
    error_task_class = JsonErrorTask

    def __init__(self, server, sock, addr, adj, map=None):
        self.request_started: float | None = time.monotonic()  # a new connection owes its first request's headers
        self.headers_done: float | None = None
        self.request_bytes = 0
        self._counted = False
        super().__init__(server, sock, addr, adj, map=map)
        self.peer = str(addr[0]) if isinstance(addr, tuple) and addr else str(addr)
        self._counted = True
        if not self.peers.add(self.peer, self.limits.per_client):
            self.peers.refused += 1
            self.refuse("429 Too Many Requests", f"too many open connections from your address (at most {self.limits.per_client}): "
                        "close idle ones and retry", "too_many_connections", "Retry-After: 1\r\n")

    def received(self, data):
        before = self.request
        if data and before is None and self.request_started is None:  # a new connection's clock started at accept
            self.request_started, self.headers_done, self.request_bytes = time.monotonic(), None, 0
        self.request_bytes += len(data)
        out = super().received(data)
        req = self.request
        if req is None:
            self.request_started = self.headers_done = None
        elif req is not before and before is not None:  # one request completed, the next began in this read
            self.request_started, self.headers_done, self.request_bytes = time.monotonic(), None, 0
        if req is not None and req.headers_finished and self.headers_done is None:
            self.headers_done = time.monotonic()
        return out

    def overdue(self, now: float) -> bool:
        """Whether the request being received has missed its deadline."""
        if self.request_started is None or self.requests or self.will_close or self.close_when_flushed:
            return False
        lim = self.limits
        if self.headers_done is None:
            return now - self.request_started > lim.header_timeout_s
        return now - self.headers_done > lim.body_timeout_s + self.request_bytes / lim.body_min_rate

    def refuse(self, status: str, message: str, code: str, extra: str = "") -> None:
        """Answer with an error (event-loop thread only, no request running) and close once it is sent."""
        payload = _error_bytes(status, message, code, extra)
        _count(self, getattr(self.request, "command", None), int(status.split()[0]))
        with self.outbuf_lock:
            self.outbufs[-1].append(payload)
            self.current_outbuf_count += len(payload)
            self.total_outbufs_len += len(payload)
        self.request = None
        self.request_started = self.headers_done = None
        self.close_when_flushed = True

    def del_channel(self, map=None):
        if self._counted:
            self._counted = False
            self.peers.remove(self.peer)
        super().del_channel(map)


SLOW_CLIENT_LOG_S = 10.0  # at most one "slow or greedy clients" line this often, and only when its counts changed


def _guard(listener: BaseWSGIServer, limits: ConnectionLimits, peers: _Peers, metrics=None) -> None:
    """Make a waitress listener use GuardedChannel and check its deadlines in every maintenance pass."""
    listener.channel_class = type("GuardedChannel", (GuardedChannel,), {"limits": limits, "peers": peers, "metrics": metrics})
    idle = BaseWSGIServer.maintenance
    last_log = [0.0]
    last_counts = [(0, 0)]

    def maintenance(now: float) -> None:
        idle(listener, now)
        mono = time.monotonic()
        for ch in list(listener.active_channels.values()):
            if isinstance(ch, GuardedChannel) and ch.overdue(mono):
                peers.timed_out += 1
                if ch.request_bytes or ch.request is not None:
                    ch.refuse("408 Request Timeout", "the request did not arrive in time: send headers within "
                              f"{limits.header_timeout_s:g} s and the body at {limits.body_min_rate} bytes/s or faster", "request_timeout")
                else:
                    ch.will_close = True  # connected and said nothing: just close
        counts = (peers.timed_out, peers.refused)
        if counts != last_counts[0] and mono - last_log[0] > SLOW_CLIENT_LOG_S:  # only news: not the same line forever
            last_log[0], last_counts[0] = mono, counts
            log.warning("slow or greedy clients: %d connections closed past their deadline, %d refused over the per-address cap "
                        "(since start)", peers.timed_out, peers.refused)

    listener.maintenance = maintenance  # type: ignore[method-assign]


def _guard_trigger(trigger) -> None:
    """Make a waitress trigger safe to pull after it closed.

    A worker thread pulls the trigger (os.write on the pipe's raw fd number) after it wrote a response; one that
    ran late, after close() had closed the pipe, wrote into a closed number (EBADF) or into whatever file or
    socket the process had opened under that number since. Pull and close now share a lock, and a closed
    trigger's pull does nothing.
    """
    lock = threading.Lock()
    pull, close = trigger._physical_pull, trigger._close

    def guarded_pull() -> None:
        with lock:
            if not trigger._closed:
                pull()

    def guarded_close() -> None:
        with lock:
            close()

    trigger._physical_pull, trigger._close = guarded_pull, guarded_close


class HttpServer:
    """A waitress server for one app: start() runs it in a thread; stop_accepting(), drain() and close() end it."""

    def __init__(self, app, host: str, port: int, *, threads: int = 32, max_body_bytes: int = 8 << 20,
                 limits: ConnectionLimits | None = None):
        self.app = app
        self.tracker = app.extensions.get("edge_agent.inflight")
        self.map: dict = {}
        self.limits = limits or ConnectionLimits()
        self.server = create_server(
            app, map=self.map, host=host, port=port, threads=threads, channel_request_lookahead=1,
            connection_limit=max(self.limits.connections, threads * 2), max_request_body_size=max_body_bytes, ident="edge-agent",
            asyncore_use_poll=True, expose_tracebacks=False, clear_untrusted_proxy_headers=True,
            channel_timeout=self.limits.idle_timeout_s, cleanup_interval=1,
        )
        self.peers = _Peers()
        for listener in self._listeners():
            _guard(listener, self.limits, self.peers, getattr(self.tracker, "metrics", None))
            _guard_trigger(listener.trigger)
        listen = getattr(self.server, "effective_listen", None) or [(self.server.effective_host, self.server.effective_port)]
        self.host, self.port = listen[0][0], int(listen[0][1])
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{shown}:{self.port}"
        self._thread: threading.Thread | None = None

    def _listeners(self) -> list[BaseWSGIServer]:
        return [d for d in list(self.map.values()) if isinstance(d, BaseWSGIServer)]

    def start(self) -> "HttpServer":
        self._thread = threading.Thread(target=self.server.run, name="edge-agent-http", daemon=True)
        self._thread.start()
        return self

    def _in_loop(self, fn, timeout: float = 5.0) -> None:
        """Run fn in the server's event-loop thread and wait for it."""
        listeners = self._listeners()
        if not listeners or self._thread is None or not self._thread.is_alive():
            fn()
            return
        done = threading.Event()

        def thunk():
            try:
                fn()
            finally:
                done.set()

        trigger = listeners[0].trigger
        if trigger._closed:  # the loop runs no thunks any more
            fn()
            return
        trigger.pull_trigger(thunk)
        done.wait(timeout)

    def stop_accepting(self) -> None:
        """Close the listening sockets: new connections are refused; open ones are served."""
        def close_listeners():
            for s in self._listeners():
                if s.accepting:
                    wasyncore.dispatcher.close(s)

        self._in_loop(close_listeners)

    @property
    def in_flight(self) -> int:
        return self.tracker.count if self.tracker is not None else 0

    def drain(self, grace_s: float) -> bool:
        """Answer new requests on open connections with 503; wait up to grace_s for running ones. True if none is left."""
        if self.tracker is not None:
            self.tracker.draining = True
        end = time.monotonic() + grace_s
        while self.in_flight and time.monotonic() < end:
            time.sleep(0.05)
        return self.in_flight == 0

    def _flushed(self) -> bool:
        return all(not getattr(d, "total_outbufs_len", 0) for d in list(self.map.values()))

    def close(self, flush_s: float = 2.0) -> None:
        """Let written responses reach their clients (up to flush_s), then close every socket and stop the threads."""
        end = time.monotonic() + flush_s
        while not self._flushed() and time.monotonic() < end:
            time.sleep(0.02)
        self._in_loop(lambda: wasyncore.close_all(self.map))  # a worker still running sees its client gone
        self.server.task_dispatcher.shutdown(cancel_pending=True, timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's open-file soft limit towards `wanted` (at most the hard limit); returns the limit now."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):  # pragma: no cover - not allowed here
            pass
    return soft


# threads that may still be inside native code (onnxruntime, a PDF parser) after the documents closed
BACKGROUND_THREADS = frozenset({"upload-ingest", "folder-ingest", "edge-agent-reembed", "hnsw-build", "bm25-merge", "faiss-saver"})


def _exit_now(left: int, background: list[str]) -> None:
    """End the process at once: `left` requests still run in worker threads, or `background` threads (a background
    upload's embedding) still work, inside native code (an embedding, a PDF parse).

    Interpreter teardown under such a thread aborts ("terminate called without an active exception",
    SIGABRT, exit 134: a failed stop and a core dump under systemd). What they were writing is safe:
    SQLite commits and index files are atomic, as after a kill -9; their clients see the connection close, and
    a background upload was marked failed ("upload the file again") when the documents closed.
    """
    if left:
        print(f"edge-agent: {left} request(s) still running were abandoned (nothing half-written)", file=sys.stderr, flush=True)
    if background:
        print(f"edge-agent: background work still running was abandoned ({', '.join(sorted(set(background)))}; "
              "nothing half-written)", file=sys.stderr, flush=True)
    logging.shutdown()
    sys.stdout.flush()
    os._exit(0)


def serve(settings: Settings, runtime=None) -> int:
    """Run the daemon until SIGTERM/SIGINT, then shut down gracefully; returns the exit status.

    Raises ServeError (bind without key, port taken, another daemon on the data dir) and BundleError (model
    missing) before listening; the first three before the model loads.
    """
    check_bind(settings)
    try:
        check_port(settings.host, settings.port)
    except OSError as e:
        fix = ("stop the process that holds it (`ss -ltnp`) or choose another port (--port, EDGE_AGENT_PORT)"
               if e.errno == errno.EADDRINUSE else "bind an address of this machine (--host, EDGE_AGENT_HOST)")
        shown = f"[{settings.host}]" if ":" in settings.host else settings.host
        raise ServeError(f"cannot listen on {shown}:{settings.port}: {e.strerror or e}: {fix}") from None
    lock = lock_data_dir(settings)
    try:
        return _run(settings, runtime)
    finally:
        lock.release()


def _run(settings: Settings, runtime) -> int:
    """serve() once its checks passed and it holds the data dir: build the runtime, listen, wait for a signal, shut down."""
    if runtime is None:
        from edge_agent.runtime import build_runtime

        runtime = build_runtime(settings)
    app = create_app(runtime)
    threads = server_threads(settings, runtime.scheduler.max_batch)
    fds = raise_fd_limit(settings.max_connections + 256)  # sockets, model and index files, SQLite
    if fds < settings.max_connections + 64:
        log.warning("open-file limit %d is low for max_connections %d: raise LimitNOFILE", fds, settings.max_connections)
    body_cap = max(settings.max_body_bytes, settings.max_file_bytes + (1 << 20))
    srv = HttpServer(app, settings.host, settings.port, threads=threads, max_body_bytes=body_cap,
                     limits=ConnectionLimits.from_settings(settings))
    stop = threading.Event()

    def on_signal(signum, frame):
        if stop.is_set():  # not SystemExit: teardown under a thread inside onnxruntime aborts (SIGABRT, exit 134)
            print("edge-agent: second signal, exiting now", file=sys.stderr, flush=True)
            os._exit(1)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    announced = False
    try:
        srv.start()
        auth = "API key required" if settings.accepted_keys() else "no API key (loopback only)"
        print(f"edge-agent listening on {srv.url} (model {runtime.chat.model_name}, {threads} HTTP worker threads, {auth})", file=sys.stderr, flush=True)
        notifier = ServiceNotifier()
        while True:  # readiness to systemd (READY=1 once every part answers, STATUS=, WATCHDOG=1 while the loop lives)
            ready, parts = runtime.readiness()
            line = status_line(ready, parts)
            if ready and not announced:
                print(f"edge-agent {line} on {srv.url}", file=sys.stderr, flush=True)
                announced = True
            notifier.update(ready, runtime.liveness()[0], line)
            if stop.wait(0.5):
                break
        grace = settings.shutdown_grace_s
        notifier.stopping(f"shutting down; running requests get {grace:g} s")
        print(f"edge-agent: shutting down; running requests get {grace:g} s", file=sys.stderr, flush=True)
        srv.stop_accepting()
        finished = srv.drain(grace)
        runtime.close(grace_s=0.0)  # cancels what is still running; those streams end with an error event
        if not finished:
            srv.drain(3.0)
        srv.close()
        print(f"edge-agent: stopped ({'all requests finished' if finished else 'unfinished requests were cancelled'})", file=sys.stderr, flush=True)
        background = [t.name for t in threading.enumerate() if t is not threading.current_thread() and t.is_alive()
                      and t.name in BACKGROUND_THREADS]
        if srv.in_flight or background:
            _exit_now(srv.in_flight, background)
        return 0
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
