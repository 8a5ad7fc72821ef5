"""Readiness that means ready: /ready waits for every enabled part and says what each is doing; /health is liveness."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from api_helpers import REPO, LiveServer, api_settings, wait_until

# shared with the RAG tests (tests/rag/rag_docs.py): the export is done once
EMBED_CACHE = Path(os.environ.get("EDGE_AGENT_TEST_EMBED_CACHE", REPO / ".cache" / "test-embedding-cache"))


def _start(settings) -> LiveServer:
    """The real server over build_runtime with the documents loading in the background, as the daemon does."""
    from edge_agent.api.app import create_app
    from edge_agent.runtime import build_runtime
    from edge_agent.server import HttpServer, server_threads

    rt = build_runtime(settings)  # load_documents follows settings.serve_documents, as in `edge-agent serve`
    app = create_app(rt)
    srv = HttpServer(app, "127.0.0.1", 0, threads=server_threads(settings, rt.scheduler.max_batch)).start()
    return LiveServer(srv.url, srv.host, srv.port, rt, app, srv)


def _get(server: LiveServer, path: str) -> tuple[int, dict]:
    status, _, body = server.request("GET", path)
    return status, json.loads(body)


@pytest.fixture
def prepared_data(tmp_path):
    """A data folder whose embedding cache is the tests' shared, already exported one."""
    EMBED_CACHE.mkdir(parents=True, exist_ok=True)
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "embedding-cache").symlink_to(EMBED_CACHE)
    return tmp_path


def test_ready_waits_for_the_embedder_and_the_index(tiny_bundles, prepared_data, monkeypatch):
    from edge_agent.services.documents import DocumentService

    gate = threading.Event()
    real = DocumentService.from_settings.__func__

    def held(cls, *a, **kw):  # the real loader, started only when the test opens the gate
        assert gate.wait(60)
        return real(cls, *a, **kw)

    monkeypatch.setattr(DocumentService, "from_settings", classmethod(held))
    server = _start(api_settings(tiny_bundles["llama"], prepared_data))
    try:
        status, body = _get(server, "/ready")
        assert status == 503 and body["status"] == "not_ready"
        assert body["parts"]["model"]["state"] == "ready"
        assert body["parts"]["embedder"]["state"] == "loading" and body["parts"]["index"]["state"] == "loading"
        assert set(body["waiting_for"]) == {"embedder", "index"}
        assert _get(server, "/health") == (200, {"status": "ok"})
        status, _, _ = server.request("POST", "/v1/embeddings", {"model": "default", "input": "hello"})
        assert status == 503  # what /ready promised: the embeddings route is not there yet
        gate.set()
        assert wait_until(lambda: server.request("GET", "/ready")[0] == 200, 120, 0.1)
        status, body = _get(server, "/ready")
        assert body["status"] == "ready" and body["waiting_for"] == []
        states = {n: p["state"] for n, p in body["parts"].items()}
        assert states.pop("jobs", "disabled") in ("ready", "disabled")  # jobs: ready when the cron loop runs here
        assert states == {"model": "ready", "embedder": "ready", "index": "ready", "disk": "ready", "grammar": "ready"}
        assert "all-MiniLM-L6-v2" in body["parts"]["embedder"]["detail"]
        rt = server.runtime  # one SQLite writer per process (convention 3): documents and jobs share the database
        assert rt.documents.store.db is rt.jobs.db is rt.db
        status, _, out = server.request("POST", "/v1/embeddings", {"model": "default", "input": "hello"})
        assert status == 200 and len(json.loads(out)["data"][0]["embedding"]) == 384  # ready meant ready
    finally:
        gate.set()
        server.close()


def test_a_failed_embedder_keeps_ready_down_and_says_why_without_paths(tiny_bundles, tmp_path):
    missing = tmp_path / "secret-place" / "no-model"
    server = _start(api_settings(tiny_bundles["llama"], tmp_path, embedding_model=str(missing)))
    try:
        assert wait_until(lambda: _get(server, "/ready")[1]["parts"]["embedder"]["state"] == "failed", 60, 0.05)
        status, body = _get(server, "/ready")
        assert status == 503 and body["waiting_for"] == ["embedder", "index"]
        assert "EmbedderError" in body["parts"]["embedder"]["detail"] and "secret-place" not in json.dumps(body)
        assert body["parts"]["index"]["state"] == "failed"
        assert _get(server, "/health")[0] == 200  # chat still works: the process is not broken
        status, _, _ = server.request("POST", "/v1/completions", {"model": "default", "prompt": "hi", "max_tokens": 2})
        assert status == 200
    finally:
        server.close()


def test_serve_documents_off_is_ready_without_them(tiny_bundles, tmp_path):
    server = _start(api_settings(tiny_bundles["llama"], tmp_path, serve_documents=False))
    try:
        status, body = _get(server, "/ready")
        assert status == 200 and body["parts"]["embedder"]["state"] == "disabled"
    finally:
        server.close()


def test_a_dead_decode_loop_turns_health_and_ready_red(tiny_bundles, tmp_path):
    server = _start(api_settings(tiny_bundles["llama"], tmp_path, serve_documents=False))
    try:
        assert _get(server, "/health") == (200, {"status": "ok"})
        assert wait_until(lambda: _get(server, "/ready")[0] == 200, 30, 0.05)
        server.runtime.scheduler.stop()  # the loop thread ends while the daemon still accepts requests
        status, body = _get(server, "/health")
        assert status == 503 and body["status"] == "failed" and "restart" in body["detail"]
        status, body = _get(server, "/ready")
        assert status == 503 and body["parts"]["model"]["state"] == "failed" and body["waiting_for"] == ["model"]
    finally:
        server.close()


def test_a_failing_cron_loop_takes_readiness_down_but_not_liveness_and_recovers(tiny_bundles, tmp_path, monkeypatch):
    """Ten failed ticks in a row take /ready down; the loop keeps trying (it used to end for good, so a database
    locked for ten seconds stopped nightly runs until a restart) and /ready comes back when a tick works again."""
    from edge_agent.jobs import schedule
    from edge_agent.jobs.service import JobsService

    broken = threading.Event()
    broken.set()
    ticks = []
    real_tick = JobsService.tick

    def tick(self, now):
        ticks.append(now)
        if broken.is_set():
            raise RuntimeError("the jobs table is gone")
        return real_tick(self, now)

    monkeypatch.setattr(schedule, "TICK_S", 0.01)
    monkeypatch.setattr(schedule, "RETRY_MAX_S", 0.05)
    monkeypatch.setattr(JobsService, "tick", tick)
    server = _start(api_settings(tiny_bundles["llama"], tmp_path, serve_documents=False, jobs_enabled=True))
    try:
        assert wait_until(lambda: _get(server, "/ready")[0] == 503, 30, 0.05)
        status, body = _get(server, "/ready")
        assert body["parts"]["jobs"]["state"] == "failed" and body["waiting_for"] == ["jobs"]
        detail = body["parts"]["jobs"]["detail"]
        assert "RuntimeError" in detail and "keeps trying" in detail and "jobs table" not in detail
        assert _get(server, "/health")[0] == 200
        seen = len(ticks)
        assert wait_until(lambda: len(ticks) >= seen + 3, 30, 0.05)  # still trying, not ended
        broken.clear()
        assert wait_until(lambda: _get(server, "/ready")[0] == 200, 30, 0.05)
        assert _get(server, "/ready")[1]["parts"]["jobs"]["state"] == "ready"
    finally:
        server.close()


def test_failure_streak_waits_longer_and_longer_up_to_its_cap(monkeypatch):
    from edge_agent.jobs import schedule

    monkeypatch.setattr(schedule, "RETRY_MAX_S", 8.0)
    failing, recovered = [], []
    streak = schedule.FailureStreak("the loop", failing.append, lambda: recovered.append(True))
    waits = [streak.failed(RuntimeError("x"), 1.0) for _ in range(11)]
    assert waits[:5] == [1.0, 2.0, 4.0, 8.0, 8.0] and max(waits) == 8.0
    assert len(failing) == 2 and not recovered  # the 10th and 11th failures: failing from the 10th
    streak.succeeded()
    assert recovered == [True] and streak.count == 0
    streak.failed(RuntimeError("x"), 1.0)
    streak.succeeded()
    assert recovered == [True]  # one failure is no recovery worth telling


def test_low_disk_is_degraded_but_ready(tiny_bundles, tmp_path):
    """Below min_free_bytes the disk part is degraded (writes answer 507), and /ready stays 200: chat and reads go on."""
    server = _start(api_settings(tiny_bundles["llama"], tmp_path, serve_documents=False))
    try:
        status, body = _get(server, "/ready")
        disk = body["parts"]["disk"]
        assert status == 200 and disk["state"] == "ready" and disk["free_bytes"] > 0
        server.runtime.settings.min_free_bytes = disk["free_bytes"] * 4  # more than this disk has
        status, body = _get(server, "/ready")
        disk = body["parts"]["disk"]
        assert status == 200 and disk["state"] == "degraded" and "min_free_bytes" in disk["detail"]
        assert "disk" not in body["waiting_for"] and str(tmp_path) not in json.dumps(body)
    finally:
        server.close()
