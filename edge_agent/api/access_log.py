"""One log line per HTTP request: method, route, status, duration, request id and tokens; never the prompt, the body or
the key."""
from __future__ import annotations

import logging
import time

from flask import request

access_log = logging.getLogger("edge_agent.access")
ENVIRON_KEY = "edge_agent.request"
PROBES = frozenset({"/health", "/ready", "/metrics"})


def note_usage(usage) -> None:
    """Remember a request's token usage (a TokenUsage, read when the body is sent, or an int) for its log line."""
    rec = request.environ.get(ENVIRON_KEY)
    if rec is not None:
        rec["usage"] = usage


def _tokens(usage) -> str:
    if usage is None:
        return "-"
    if isinstance(usage, int):
        return f"prompt={usage}"
    return f"prompt={getattr(usage, 'prompt_tokens', 0)} completion={getattr(usage, 'completion_tokens', 0)}"


def start(environ: dict) -> dict:
    """The request's record, kept in its WSGI environ until the line is written."""
    environ[ENVIRON_KEY] = rec = {"t0": time.perf_counter(), "method": environ.get("REQUEST_METHOD", "?")}
    return rec


def finish(rec: dict) -> None:
    """Write the line (the route is the URL rule, so ids and query strings never appear).

    Successful probes (/health, /ready, /metrics: a watchdog or Prometheus every few seconds)
    are logged at DEBUG (-v), so they do not bury the requests in the journal.
    """
    route, status = rec.get("route", "unmatched"), rec.get("status", 500)
    level = logging.DEBUG if route in PROBES and status < 400 else logging.INFO
    access_log.log(
        level, "%s %s %s %.3fs %s %s", rec["method"], route, status, time.perf_counter() - rec["t0"], rec.get("request_id", "-"),
        _tokens(rec.get("usage")),
    )
