"""The HTTP server: waitress over create_app(runtime), with a graceful SIGTERM shutdown.

waitress (3.x) writes each response chunk to the socket as soon as it is produced
(send_bytes = 1, flushed from the worker thread), so Server-Sent Events are not held back.
channel_request_lookahead = 1 keeps reading the socket while a request runs, so a client
that hangs up is noticed (waitress.client_disconnected) even while no token is written.
"""
from __future__ import annotations

import logging
import signal
import sys
import threading
import time

from waitress import wasyncore
from waitress.server import BaseWSGIServer, create_server

from edge_agent.api.app import create_app, is_loopback
from edge_agent.config import Settings
from edge_agent.sdnotify import ServiceNotifier, status_line

log = logging.getLogger(__name__)


class ServeError(Exception):
    """The server cannot start as configured (the message says what to change)."""


def check_bind(settings: Settings) -> list[str]:
    """The accepted API keys; raises ServeError for a non-loopback bind without any key, or an unreadable key file."""
    try:
        keys = settings.accepted_keys()
    except OSError as e:
        raise ServeError(f"cannot read api_key_file {settings.api_key_file}: {e.strerror or e}") from None
    if not keys and not is_loopback(settings.host):
        raise ServeError(
            f"refusing to listen on {settings.host}, which other machines can reach, without an API key: "
            "set api_keys (EDGE_AGENT_API_KEYS='[\"...\"]') or api_key_file, or bind 127.0.0.1"
        )
    return keys


def server_threads(settings: Settings, max_batch: int) -> int:
    """Enough worker threads that every running and queued generation holds one and a 429 still answers at once."""
    return max(settings.server_threads, max_batch + settings.max_queue + 8)


class HttpServer:
    """A waitress server for one app: start() runs it in a thread; stop_accepting(), drain() and close() end it."""

    def __init__(self, app, host: str, port: int, *, threads: int = 32, max_body_bytes: int = 8 << 20):
        self.app = app
        self.tracker = app.extensions.get("edge_agent.inflight")
        self.map: dict = {}
        self.server = create_server(
            app, map=self.map, host=host, port=port, threads=threads, channel_request_lookahead=1,
            connection_limit=max(100, threads * 2), max_request_body_size=max_body_bytes, ident="edge-agent",
            asyncore_use_poll=True, expose_tracebacks=False, clear_untrusted_proxy_headers=True,
        )
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

        listeners[0].trigger.pull_trigger(thunk)
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
        self._in_loop(lambda: wasyncore.close_all(self.map))
        self.server.task_dispatcher.shutdown(cancel_pending=True, timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)


def serve(settings: Settings, runtime=None) -> int:
    """Run the daemon until SIGTERM/SIGINT, then shut down gracefully; returns the exit status.

    Raises ServeError (bind without key) and BundleError (model missing) before listening.
    """
    check_bind(settings)
    if runtime is None:
        from edge_agent.runtime import build_runtime

        runtime = build_runtime(settings)
    app = create_app(runtime)
    threads = server_threads(settings, runtime.scheduler.max_batch)
    body_cap = max(settings.max_body_bytes, settings.max_file_bytes + (1 << 20))
    srv = HttpServer(app, settings.host, settings.port, threads=threads, max_body_bytes=body_cap)
    stop = threading.Event()

    def on_signal(signum, frame):
        if stop.is_set():
            print("edge-agent: second signal, exiting now", file=sys.stderr, flush=True)
            raise SystemExit(1)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    announced = False
    try:
        srv.start()
        auth = "API key required" if settings.accepted_keys() else "no API key (loopback only)"
        print(f"edge-agent listening on {srv.url} (model {runtime.chat.model_name}, {threads} threads, {auth})", file=sys.stderr, flush=True)
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
        return 0
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
