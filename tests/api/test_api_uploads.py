"""Uploads through the real server on loopback over a real DocumentService (SQLite, FAISS, BM25 in tmp_path).

A refused upload stores nothing; identical uploads racing each other index the content once; a large
upload (or one that asks) is processed in the background and its document shows processing -> ready or
failed, also across a restart.
"""
from __future__ import annotations

import json
import threading
import uuid

import pytest

from api_helpers import KEY, REPO, api_settings, start_server, wait_until

TEXT = "The boiler in block D is serviced every March by Hendriks Installatie. " * 4


def _multipart(files: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = b""
    for name, data in files:
        body += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                 "Content-Type: application/octet-stream\r\n\r\n").encode() + data + b"\r\n"
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def upload(server, name: str, data: bytes, path: str = "/v1/documents", headers: dict | None = None) -> tuple[int, dict, dict]:
    body, ctype = _multipart([(name, data)])
    status, head, raw = server.request("POST", path, body, headers={"Content-Type": ctype, **(headers or {})})
    return status, head, json.loads(raw)


@pytest.fixture(scope="module")
def embedder():
    from edge_agent.rag.embedder import OnnxEmbedder

    return OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")


@pytest.fixture
def make_server(tiny_bundles, tmp_path, embedder):
    """A server over a fresh DocumentService in tmp_path; call again to restart it on the same data."""
    from edge_agent.config import Settings
    from edge_agent.services.documents import DocumentService

    running = []

    def make(**overrides):
        while running:
            running.pop().close()
        values = dict(data_dir=tmp_path / "var", index_dir=tmp_path / "index")
        values.update(overrides)
        svc = DocumentService.from_settings(Settings(**values), embedder=embedder)
        server = start_server(api_settings(tiny_bundles["llama"], tmp_path, max_batch=2, **overrides), documents=svc)
        running.append(server)
        return server

    yield make
    for server in running:
        server.close()


def _documents(server) -> list[dict]:
    status, _, raw = server.request("GET", "/v1/documents?limit=1000")
    assert status == 200
    return json.loads(raw)["data"]


def test_a_refused_upload_stores_nothing_and_keeps_the_old_version(make_server):
    server = make_server()
    status, _, good = upload(server, "boiler.txt", TEXT.encode())
    assert status == 201 and good["status"] == "added"
    for name, data in (("boiler.txt", b""), ("boiler.txt", b"   \n "), ("broken.pdf", b"%PDF-1.4 junk"), ("photo.png", b"\x89PNG")):
        status, _, err = upload(server, name, data)
        assert status == 422, (name, err)
        assert err["error"]["code"] == "unreadable_document" and err["error"]["message"]
    docs = _documents(server)
    assert [(d["title"], d["status"]) for d in docs] == [("boiler", "ready")]  # no failed records, the old version intact
    detail = json.loads(server.request("GET", f"/v1/documents/{good['document_id']}")[2])
    assert detail["content_hash"] == docs[0]["content_hash"] and len(detail["chunks"]) == good["chunks"]
    hits = json.loads(server.request("POST", "/v1/retrieve", {"query": "who services the boiler", "k": 1})[2])["data"]
    assert hits[0]["document_id"] == good["document_id"]


def test_identical_uploads_at_once_index_the_content_once(make_server):
    server = make_server()
    svc = server.runtime.documents
    data = ("Locker keys for the gym are kept at the front desk of building A. " * 30).encode()
    n = 6
    start = threading.Barrier(n)
    answers: list[tuple[int, dict]] = []

    def one():
        start.wait()
        status, _, body = upload(server, "lockers.txt", data)
        answers.append((status, body))

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(answers) == n
    assert sorted(s for s, _ in answers) == [200] * (n - 1) + [201], answers
    added = [b for s, b in answers if s == 201][0]
    assert added["status"] == "added"
    assert all(b["status"] == "unchanged" and b["document_id"] == added["document_id"] and b["chunks"] == added["chunks"]
               for s, b in answers if s == 200)
    assert [d["title"] for d in _documents(server)] == ["lockers"]
    stats = svc.stats()
    assert stats["chunks"] == added["chunks"] == stats["index"]["vectors"] == stats["index"]["bm25_chunks"]
    hits = json.loads(server.request("POST", "/v1/retrieve", {"query": "gym locker keys", "k": 5})[2])["data"]
    assert len({h["text"] for h in hits}) == len(hits)  # no chunk found twice
