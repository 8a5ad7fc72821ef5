"""Parts loaded when a request first needs them (services/on_demand.py): the grammar tokenizer and the embedding
model's weights are not resident in a fresh daemon, the first request that needs one loads it once (also under
concurrent first requests) and is served correctly, /ready stays honest, and idle_unload_s gives them back."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from api_helpers import LiveServer, api_settings, wait_until
from embed_cache import link_embedding_cache

JSON_CHAT = {"model": "default", "messages": [{"role": "user", "content": "A fox as JSON."}], "max_tokens": 40,
             "temperature": 0, "response_format": {"type": "json_object"}}


def _start(settings) -> LiveServer:
    """The real server over build_runtime, documents loading in the background as `edge-agent serve` does."""
    from edge_agent.api.app import create_app
    from edge_agent.runtime import build_runtime
    from edge_agent.server import HttpServer, server_threads

    rt = build_runtime(settings)
    app = create_app(rt)
    srv = HttpServer(app, "127.0.0.1", 0, threads=server_threads(settings, rt.scheduler.max_batch)).start()
    return LiveServer(srv.url, srv.host, srv.port, rt, app, srv)


def _ready(server: LiveServer) -> tuple[int, dict]:
    status, _, body = server.request("GET", "/ready")
    return status, json.loads(body)


def _together(n: int, call) -> list:
    """call() from n threads released at once; their results."""
    gate, out = threading.Barrier(n), [None] * n

    def run(i: int) -> None:
        gate.wait(10)
        out[i] = call()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


@pytest.fixture
def prepared_data(tmp_path):
    """A data folder whose embedding cache links to the tests' shared, already exported model (exported here if
    missing); its onnx/ folder holds links of its own, so a test may replace the model file without touching the share."""
    link_embedding_cache(tmp_path / "var")
    return tmp_path


def test_the_grammar_tokenizer_is_built_by_the_first_structured_request_once(tiny_bundles, tmp_path, monkeypatch):
    from edge_agent.services import constrained

    builds = []
    real = constrained.token_bytes

    def slow_counted(tok):  # called once per build: a slow build lets every concurrent first request arrive during it
        builds.append(1)
        time.sleep(0.3)
        return real(tok)

    monkeypatch.setattr(constrained, "token_bytes", slow_counted)
    server = _start(api_settings(tiny_bundles["llama"], tmp_path, serve_documents=False, max_batch=4))
    try:
        assert wait_until(lambda: _ready(server)[0] == 200, 30, 0.05)
        tok = server.runtime.chat.engine.tokenizer
        part = _ready(server)[1]["parts"]["grammar"]
        assert part["state"] == "ready" and "first" in part["detail"]
        status, _, _ = server.request("POST", "/v1/completions", {"model": "default", "prompt": "hi", "max_tokens": 3})
        assert status == 200 and getattr(tok, "_edge_llg", None) is None and builds == []  # plain text needs no grammar
        answers = _together(4, lambda: server.request("POST", "/v1/chat/completions", JSON_CHAT, timeout=60))
        assert [a[0] for a in answers] == [200] * 4 and len(builds) == 1  # four first requests, one build
        for _, _, body in answers:
            choice = json.loads(body)["choices"][0]
            if choice["finish_reason"] == "stop":  # the grammar ended it: one JSON object (a "length" cut may be partial)
                assert isinstance(json.loads(choice["message"]["content"]), dict)
            else:
                assert choice["message"]["content"].lstrip().startswith("{")
        assert getattr(tok, "_edge_llg", None) is not None
        part = _ready(server)[1]["parts"]["grammar"]
        assert part["state"] == "ready" and "loaded on first use" in part["detail"]
    finally:
        server.close()


def test_a_grammar_that_cannot_be_built_answers_503_and_degrades_without_paths(tiny_bundles, tmp_path, monkeypatch):
    from edge_agent.services import constrained

    def broken(tok):
        raise RuntimeError("no grammar at /secret/place")

    monkeypatch.setattr(constrained, "token_bytes", broken)
    server = _start(api_settings(tiny_bundles["llama"], tmp_path, serve_documents=False, max_batch=4))
    try:
        assert wait_until(lambda: _ready(server)[0] == 200, 30, 0.05)
        status, _, body = server.request("POST", "/v1/chat/completions", JSON_CHAT)
        assert status == 503 and "structured outputs" in json.loads(body)["error"]["message"] and b"secret" not in body
        status, ready = _ready(server)
        assert status == 200 and ready["parts"]["grammar"]["state"] == "degraded" and "secret" not in json.dumps(ready)
        status, _, _ = server.request("POST", "/v1/completions", {"model": "default", "prompt": "hi", "max_tokens": 2})
        assert status == 200  # chat goes on
    finally:
        server.close()


def test_the_embedding_model_loads_on_the_first_embedding_request_once(tiny_bundles, prepared_data, monkeypatch):
    from edge_agent.rag.embedder import OnnxEmbedder, build_embedder

    loads = []
    real = OnnxEmbedder._load_serving

    def slow_counted(self, folder, file_name):
        loads.append(1)
        time.sleep(0.3)
        return real(self, folder, file_name)

    monkeypatch.setattr(OnnxEmbedder, "_load_serving", slow_counted)
    settings = api_settings(tiny_bundles["llama"], prepared_data, max_batch=4)
    server = _start(settings)
    try:
        assert wait_until(lambda: _ready(server)[0] == 200, 120, 0.05)
        emb = server.runtime.documents.embedder
        part = _ready(server)[1]["parts"]["embedder"]
        assert part["state"] == "ready" and "all-MiniLM-L6-v2" in part["detail"] and "first use" in part["detail"]
        assert getattr(emb, "loaded", True) is False and loads == []  # checked and described, weights not loaded
        status, _, _ = server.request("POST", "/v1/completions", {"model": "default", "prompt": "hi", "max_tokens": 3})
        assert status == 200 and emb.loaded is False
        texts = ["The invoice is overdue.", "Reset the router."]
        answers = _together(4, lambda: server.request("POST", "/v1/embeddings", {"model": "default", "input": texts}, timeout=60))
        assert [a[0] for a in answers] == [200] * 4 and len(loads) == 1  # four first requests, one load
        assert emb.loaded is True
        got = np.array([d["embedding"] for d in json.loads(answers[0][2])["data"]], np.float32)
        eager = build_embedder(settings)  # loaded at once, as before
        want = eager.embed(texts)
        assert got.shape == want.shape == (2, 384) and np.allclose(got, want, atol=1e-5)
        assert (emb.dim, emb.max_tokens, emb.model_id, emb.variant) == (eager.dim, eager.max_tokens, eager.model_id, eager.variant)
        part = _ready(server)[1]["parts"]["embedder"]
        assert part["state"] == "ready" and "loaded on first use" in part["detail"]
    finally:
        server.close()


def _model_file(data: Path) -> Path:
    decision = next((data / "var" / "embedding-cache").glob("*/edge-agent-embedder.json"))
    return decision.parent / json.loads(decision.read_text())["file_name"]


def test_an_empty_embedding_model_file_still_fails_readiness_at_start(tiny_bundles, prepared_data):
    model = _model_file(prepared_data)
    model.unlink()  # a link: the shared cache keeps its file
    model.write_bytes(b"")
    server = _start(api_settings(tiny_bundles["llama"], prepared_data, max_batch=4))
    try:
        assert wait_until(lambda: _ready(server)[1]["parts"]["embedder"]["state"] == "failed", 60, 0.05)
        status, body = _ready(server)
        assert status == 503 and "embedder" in body["waiting_for"] and str(prepared_data) not in json.dumps(body)
    finally:
        server.close()


def test_an_embedding_model_that_fails_to_load_on_first_use_answers_503_and_takes_readiness_down(tiny_bundles, prepared_data):
    model = _model_file(prepared_data)
    model.unlink()
    model.write_bytes(b"not an onnx model" * 100)  # present, so start-up cannot tell: only loading it can
    server = _start(api_settings(tiny_bundles["llama"], prepared_data, max_batch=4))
    try:
        assert wait_until(lambda: _ready(server)[0] == 200, 120, 0.05)
        status, _, body = server.request("POST", "/v1/embeddings", {"model": "default", "input": "hello"})
        err = json.loads(body)["error"]
        assert status == 503 and "doctor" in err["message"] and str(prepared_data) not in body.decode()
        status, ready = _ready(server)
        assert status == 503 and ready["parts"]["embedder"]["state"] == "failed" and ready["waiting_for"] == ["embedder"]
    finally:
        server.close()


def test_idle_unload_gives_both_parts_back_and_the_next_request_loads_them_again(tiny_bundles, prepared_data):
    server = _start(api_settings(tiny_bundles["llama"], prepared_data, max_batch=4, idle_unload_s=0.3))
    try:
        assert wait_until(lambda: _ready(server)[0] == 200, 120, 0.05)
        emb, tok = server.runtime.documents.embedder, server.runtime.chat.engine.tokenizer
        assert server.request("POST", "/v1/embeddings", {"model": "default", "input": "hello"})[0] == 200
        assert server.request("POST", "/v1/chat/completions", JSON_CHAT)[0] == 200
        released = server.runtime.releaser.released
        assert wait_until(lambda: released == {"embedder": 1, "grammar": 1}, 10, 0.05)  # counted after each release
        assert not emb.loaded and getattr(tok, "_edge_llg", None) is None
        assert "given back" in _ready(server)[1]["parts"]["grammar"]["detail"]
        status, _, body = server.request("POST", "/v1/embeddings", {"model": "default", "input": "hello"})
        assert status == 200 and len(json.loads(body)["data"][0]["embedding"]) == 384
        assert server.request("POST", "/v1/chat/completions", JSON_CHAT)[0] == 200
    finally:
        server.close()


def test_preload_parts_loads_both_before_ready(tiny_bundles, prepared_data):
    """preload_parts: the old behaviour for who prefers no first-request delay; /ready waits for both."""
    server = _start(api_settings(tiny_bundles["llama"], prepared_data, max_batch=4, preload_parts=True))
    try:
        assert wait_until(lambda: _ready(server)[0] == 200, 120, 0.05)
        assert server.runtime.documents.embedder.loaded is True
        assert getattr(server.runtime.chat.engine.tokenizer, "_edge_llg", None) is not None
        assert server.request("POST", "/v1/chat/completions", JSON_CHAT)[0] == 200
    finally:
        server.close()
