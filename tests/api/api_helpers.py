"""Helpers for API tests: start the real server on a free loopback port, raw HTTP requests, metrics."""
from __future__ import annotations

import http.client
import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

os.environ["EDGE_AGENT_CONFIG"] = "/nonexistent/edge-agent-test.toml"  # no machine config leaks into tests

KEY = "sk-test-0123456789"
ORIGIN = "http://app.example"
REPO = Path(__file__).resolve().parents[2]


@dataclass
class LiveServer:
    url: str
    host: str
    port: int
    runtime: object
    app: object
    srv: object

    def request(self, method: str, path: str, body: bytes | str | dict | None = None, headers: dict | None = None,
                key: str | None = KEY, timeout: float = 30.0) -> tuple[int, dict, bytes]:
        """One raw HTTP request (status, lower-cased headers, body)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        h = {"Content-Type": "application/json"} if body is not None else {}
        if key:
            h["Authorization"] = f"Bearer {key}"
        h.update(headers or {})
        if isinstance(body, dict):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def metric(self, name: str, labels: str = "") -> float:
        status, _, body = self.request("GET", "/metrics")
        assert status == 200
        pattern = "(?m)^" + re.escape(name) + (r"\{" + re.escape(labels) + r"\}" if labels else "") + r" ([0-9.e+-]+)"
        m = re.search(pattern, body.decode())
        return float(m.group(1)) if m else 0.0

    def close(self) -> None:
        self.srv.stop_accepting()
        self.srv.drain(1.0)
        self.runtime.close()
        self.srv.close()


def multipart_parts(parts: list[tuple[str, bytes]], content_type: str = "text/plain") -> tuple[bytes, str]:
    """A multipart/form-data body (and its Content-Type) of parts named `file`: each (the Content-Disposition tail after
    `form-data; name="file"; `, data), sent as UTF-8."""
    boundary = uuid.uuid4().hex
    body = b"".join((f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; {tail}\r\n"
                     f"Content-Type: {content_type}\r\n\r\n").encode() + data + b"\r\n" for tail, data in parts)
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def multipart(files: list[tuple[str, bytes]], content_type: str = "text/plain") -> tuple[bytes, str]:
    """multipart_parts of (file name, data) pairs."""
    return multipart_parts([(f'filename="{name}"', data) for name, data in files], content_type)


def api_settings(bundle: Path, tmp: Path, **overrides):
    from edge_agent.config import Settings

    values = dict(
        models_dir=bundle.parent, model=bundle.name, threads=1, context_length=512, max_batch=16, max_queue=64,
        data_dir=tmp / "var", index_dir=tmp / "index", api_keys=[KEY], cors_origins=[ORIGIN], max_tokens_limit=256,
        max_body_bytes=64 * 1024, request_timeout_s=60.0, shutdown_grace_s=5.0,
    )
    values.update(overrides)
    return Settings(**values)


def start_server(settings, documents=None) -> LiveServer:
    from edge_agent.api.app import create_app
    from edge_agent.runtime import build_runtime
    from edge_agent.server import HttpServer, server_threads

    rt = build_runtime(settings, documents=documents, load_documents=False)
    app = create_app(rt)
    srv = HttpServer(app, "127.0.0.1", 0, threads=server_threads(settings, rt.scheduler.max_batch)).start()
    return LiveServer(srv.url, srv.host, srv.port, rt, app, srv)


def send_unread(server: LiveServer, path: str, body: dict) -> "socket.socket":
    """POST body to path on a raw socket and read nothing (a client that may hang up at any point)."""
    import socket

    raw = json.dumps(body).encode()
    s = socket.create_connection((server.host, server.port), timeout=30)
    s.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n".encode()
              + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(raw)}\r\n\r\n".encode() + raw)
    return s


def brace_ids(server: LiveServer) -> list[int]:
    """The ids of the model's tokens whose text starts with "{" after blanks: the tokens a tool call can begin with
    (services/tools.auto_constraint), so a bias on them decides whether a model that may call does."""
    tok = server.runtime.chat.engine.tokenizer
    return [i for i in range(tok.get_vocab_size()) if tok.decode([i], skip_special_tokens=False).lstrip(" \n").startswith("{")]


def lean_first_token(server: LiveServer, monkeypatch, bias: float) -> None:
    """Every answer's first token is pushed towards "{" by bias (negative: away from it), after the grammar's mask: for
    routes without logit_bias (Ollama's /api/chat, /v1/responses), a model that decides to call, or to answer in words."""
    braces = brace_ids(server)
    submit = server.runtime.scheduler.submit

    def biased(ids, params, **kw):
        inner = params.logits_processor

        def lean(tokens, logits):
            logits = inner(tokens, logits) if inner is not None else logits
            if not tokens:
                logits[braces] += bias
            return logits

        params.logits_processor = lean
        return submit(ids, params, **kw)

    monkeypatch.setattr(server.runtime.scheduler, "submit", biased)


def wait_until(predicate, timeout: float, step: float = 0.02) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


FACT = "The access code for the Zeeland archive is QX-7731-B. The archive reading room opens at nine on weekdays."
QUESTION = "What is the access code for the Zeeland archive?"


def make_documents(tmp, embedder=None):
    """A DocumentService in tmp with three small documents; returns it and {name: document id}."""
    from edge_agent.config import Settings
    from edge_agent.rag.embedder import OnnxEmbedder
    from edge_agent.services.documents import DocumentService

    docs = tmp / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "bikes.md").write_text("# Bicycle shed\nThe bicycle shed behind building C closes at ten in the evening.")
    embedder = embedder or OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    settings = Settings(data_dir=tmp / "var", index_dir=tmp / "index", ingest_roots=[docs])
    svc = DocumentService.from_settings(settings, embedder=embedder)
    ids = {
        "archive": svc.add_text("Zeeland archive", FACT).document_id,
        "canteen": svc.add_text("Canteen", "The canteen serves tomato soup on Mondays and pasta on Thursdays.").document_id,
        "bikes": svc.add_file(docs / "bikes.md").document_id,
    }
    return svc, ids
