"""The Flask app factory: create_app(runtime) wires the blueprints, security checks, metrics and errors."""
from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import re
import threading
import time
import uuid

from flask import Flask, Response, current_app, g, request
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from edge_agent.api import access_log
from edge_agent.api.errors import error_response, register_error_handlers
from edge_agent.config import LOOPBACK_HOSTS

log = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"/health"})
CORS_METHODS = "GET, POST, DELETE, OPTIONS"
CORS_HEADERS = "Authorization, Content-Type"
CORS_MAX_AGE = "600"
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
METRIC_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})  # any other is "other": a label per
# made-up method ("AAAA", "AAAB", ...) would let any client grow /metrics and the process without bound
DEFAULT_PORTS = {"http": "80", "https": "443"}
REQUEST_ID_HEADER = "X-Request-Id"
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")  # echoed into a header and the log: no spaces, quotes or controls


def request_id() -> str:
    """This request's id: the client's X-Request-Id when it is a plain token (vLLM echoes it), else a new `req_<hex>`
    (OpenAI's shape; the openai client shows it as `response.request_id`). The same id for the whole request."""
    rid = g.get("edge_agent_request_id")
    if rid is None:
        given = request.headers.get(REQUEST_ID_HEADER, "")
        rid = given if _CLIENT_REQUEST_ID.fullmatch(given) else "req_" + uuid.uuid4().hex
        g.edge_agent_request_id = rid
    return rid


def route_template(req) -> str:
    """The URL rule a request matched; for a method the route lacks (a 405) the rule its path matches; else "unmatched"."""
    if req.url_rule is not None:
        return req.url_rule.rule
    exc = req.routing_exception
    if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
        try:
            rule, _ = current_app.url_map.bind_to_environ(req.environ).match(method=exc.valid_methods[0], return_rule=True)
            return rule.rule
        except HTTPException:
            pass
    return "unmatched"


def host_name(host: str) -> str:
    """The name part of a Host header value ("[::1]:8080" -> "[::1]", "Example.com:80" -> "example.com")."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _same_origin(origin: str, host: str) -> bool:
    """Whether an Origin header names this server as the client reached it (the Host header); "null" never does."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in DEFAULT_PORTS or not rest or "/" in rest:
        return False

    def split(netloc: str) -> tuple[str, str]:
        name = host_name(netloc)
        port = netloc[len(name):].lstrip(":") if netloc.startswith(name) else ""
        return name, port or DEFAULT_PORTS[scheme]

    return split(rest) == split(host.strip().lower())


def allowed_host_names(settings) -> set[str]:
    """allowed_hosts, the bound address and the loopback names: a page that DNS rebinding points here sends its own
    name, never a loopback one, so a LAN list (lan.conf.example) need not lock out curl on this machine."""
    names = {h.strip().lower() for h in settings.allowed_hosts if h.strip()} | set(LOOPBACK_HOSTS)
    bind = settings.host.strip().lower()
    if bind and bind not in ("0.0.0.0", "::", "[::]", "*"):
        names.add(f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind)
    return names


class SecurityGuard:
    """Host allow-list, CORS, bearer keys (constant-time) and request metrics, as before/after hooks."""

    def __init__(self, settings, metrics):
        self.keys = [k.encode() for k in settings.accepted_keys()]
        self.hosts = allowed_host_names(settings)
        self.any_host = "*" in self.hosts
        self.origins = [o.rstrip("/") for o in settings.cors_origins]
        self.any_origin = "*" in self.origins
        self.metrics = metrics

    def _origin_allowed(self, origin: str | None) -> bool:
        return bool(origin) and bool(self.origins) and (self.any_origin or origin.rstrip("/") in self.origins)

    def _cross_site(self) -> bool:
        """Whether a browser sent this request from a page that is neither this server nor an allowed origin.

        Browsers send Origin with every POST/DELETE (a form post and fetch alike) and Sec-Fetch-Site
        with every request; clients that are not browsers (curl, the openai client) send neither.
        """
        origin = request.headers.get("Origin")
        if origin is not None:
            return not (self._origin_allowed(origin) or _same_origin(origin, request.host))
        return request.headers.get("Sec-Fetch-Site", "").strip().lower() == "cross-site"

    def _authorized(self) -> bool:
        if not self.keys:
            return True
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return False
        given = token.strip().encode()
        ok = False
        for key in self.keys:  # compare with every key: timing says nothing about which matched
            ok |= hmac.compare_digest(given, key)
        return ok

    def before(self):
        """Returns the refusal (a response, so no blueprint's error handler can change it), or None to go on."""
        g.edge_agent_t0 = time.perf_counter()
        if request.path in PUBLIC_PATHS:
            return None
        if not self.any_host and host_name(request.host) not in self.hosts:
            return error_response(403, "this Host header is not allowed: add the name to allowed_hosts (EDGE_AGENT_ALLOWED_HOSTS)",
                                  "permission_error", code="host_not_allowed")
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers and self.origins:
            origin = request.headers.get("Origin")
            if not self._origin_allowed(origin):
                return error_response(403, "this origin is not allowed by CORS", "permission_error", code="origin_not_allowed")
            resp = Response(status=204)
            resp.headers["Access-Control-Allow-Methods"] = CORS_METHODS
            resp.headers["Access-Control-Allow-Headers"] = CORS_HEADERS
            resp.headers["Access-Control-Max-Age"] = CORS_MAX_AGE
            return resp
        if request.method in STATE_CHANGING and self._cross_site():  # in every auth mode: a browser may carry credentials
            return error_response(403, "cross-site request refused: a web page from another origin may not change anything here; "
                                  "if that page should, add its origin to cors_origins (EDGE_AGENT_CORS_ORIGINS)",
                                  "permission_error", code="cross_site_request")
        if not self._authorized():
            return error_response(401, "missing or invalid API key: send Authorization: Bearer <key>", "authentication_error",
                                  code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in ("", "identity"):  # a gzip body read as JSON was "not valid UTF-8"; one only labelled, served
            return error_response(415, f"Content-Encoding {encoding[:40]} is not supported: send the request body uncompressed",
                                  code="unsupported_media_type")
        return None

    def after(self, resp: Response) -> Response:
        origin = request.headers.get("Origin")
        if self._origin_allowed(origin):
            resp.headers["Access-Control-Allow-Origin"] = "*" if self.any_origin else origin.rstrip("/")
            resp.headers["Access-Control-Expose-Headers"] = f"Retry-After, {REQUEST_ID_HEADER}"
            resp.vary.add("Origin")
        resp.headers.pop("Access-Control-Allow-Credentials", None)  # bearer keys, never cookies
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        resp.headers.setdefault("Cache-Control", "no-store")
        resp.headers[REQUEST_ID_HEADER] = rid = request_id()
        t0 = g.get("edge_agent_t0")
        route = route_template(request)
        method = request.method if request.method in METRIC_METHODS else "other"
        self.metrics.observe_request(route, method, resp.status_code, time.perf_counter() - t0 if t0 else 0.0)
        rec = request.environ.get(access_log.ENVIRON_KEY)
        if rec is not None:
            rec.update(route=route, status=resp.status_code, request_id=rid)
        return resp


class InFlight:
    """WSGI middleware: counts requests until their body is fully sent; when draining, answers 503 and closes."""

    def __init__(self, app, metrics):
        self.app = app
        self.metrics = metrics
        self.count = 0
        self.draining = False
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        if self.draining:
            body = json.dumps({"error": {"message": "the server is shutting down", "type": "server_error", "param": None, "code": "shutting_down"}}).encode()
            start_response("503 Service Unavailable", [("Content-Type", "application/json"), ("Content-Length", str(len(body))), ("Connection", "close")])
            return [body]
        with self._lock:
            self.count += 1
        self.metrics.in_flight.inc()
        rec = access_log.start(environ)
        try:
            inner = self.app(environ, start_response)
        except BaseException:
            self._done(rec)
            raise
        return _ClosingIterable(inner, lambda: self._done(rec))

    def _done(self, rec: dict | None = None) -> None:
        with self._lock:
            self.count -= 1
        self.metrics.in_flight.dec()
        if rec is not None:  # when its body has been sent
            access_log.finish(rec)


class _ClosingIterable:
    def __init__(self, inner, on_close):
        self.inner = inner
        self.on_close = on_close
        self.closed = False

    def __iter__(self):
        return iter(self.inner)

    def close(self):
        if self.closed:
            return
        self.closed = True
        try:
            close = getattr(self.inner, "close", None)
            if close is not None:
                close()
        finally:
            self.on_close()


class ApiFlask(Flask):
    """Flask, but OPTIONS on a route (not a CORS preflight: SecurityGuard answers those) is 204 with an Allow header
    listing the route's methods and no body; Flask's own answer is 200 with an empty text/html body."""

    def make_default_options_response(self) -> Response:
        resp = super().make_default_options_response()
        resp.status_code = 204
        resp.headers.remove("Content-Type")
        return resp


def create_app(runtime) -> Flask:
    """The WSGI app over a runtime (its .settings, .chat, .embeddings, .documents, .metrics)."""
    from edge_agent.api import documents, health, openai, responses

    app = ApiFlask("edge_agent.api")
    app.config["MAX_CONTENT_LENGTH"] = None  # bodies are read with our own cap (chunked bodies too)
    app.url_map.strict_slashes = False
    app.extensions["edge_agent"] = runtime
    guard = SecurityGuard(runtime.settings, runtime.metrics)
    app.before_request(guard.before)
    app.after_request(guard.after)
    app.register_blueprint(openai.bp)
    app.register_blueprint(responses.bp)
    app.register_blueprint(health.bp)
    app.register_blueprint(documents.bp)
    app.extensions["edge_agent.extra_paths"] = documents.openapi_paths(runtime)
    app.extensions["edge_agent.extra_schemas"] = documents.openapi_schemas()
    from edge_agent.api import jobs

    app.register_blueprint(jobs.bp)
    app.extensions["edge_agent.extra_paths"].update(jobs.openapi_paths(runtime))
    app.extensions["edge_agent.extra_schemas"].update(jobs.openapi_schemas())
    from edge_agent.api import batches

    app.register_blueprint(batches.bp)
    app.extensions["edge_agent.extra_paths"].update(batches.openapi_paths(runtime))
    app.extensions["edge_agent.extra_schemas"].update(batches.openapi_schemas())
    from edge_agent.api import cluster

    app.register_blueprint(cluster.bp)
    app.extensions["edge_agent.extra_paths"].update(cluster.openapi_paths(runtime))
    from edge_agent.api import tokenize

    app.register_blueprint(tokenize.bp)
    app.extensions["edge_agent.extra_paths"].update(tokenize.openapi_paths(runtime))
    app.extensions["edge_agent.extra_schemas"].update(tokenize.openapi_schemas())
    from edge_agent.api import ollama

    app.register_blueprint(ollama.bp)
    app.extensions["edge_agent.extra_paths"].update(ollama.openapi_paths(runtime))
    app.extensions["edge_agent.extra_schemas"].update(ollama.openapi_schemas(runtime))
    register_error_handlers(app)
    tracker = InFlight(app.wsgi_app, runtime.metrics)
    app.wsgi_app = tracker  # type: ignore[method-assign]
    app.extensions["edge_agent.inflight"] = tracker
    return app
