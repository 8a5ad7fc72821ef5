"""The documents blueprint on a minimal Flask app, with the real DocumentService behind it."""
from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from flask import Flask
from rag_docs import make_pdf

from edge_agent.api.documents import bp
from edge_agent.api.errors import register_error_handlers


def _app(runtime) -> Flask:
    app = Flask("test")
    app.extensions["edge_agent"] = runtime
    app.register_blueprint(bp)
    register_error_handlers(app)
    return app


@pytest.fixture
def client(service):
    return _app(SimpleNamespace(documents=service)).test_client()


def _is_error(resp, status: int) -> dict:
    assert resp.status_code == status, resp.get_json()
    err = resp.get_json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert "Traceback" not in err["message"]
    return err


def test_upload_text_list_get_delete_retrieve(client):
    resp = client.post("/v1/documents", data={"file": (io.BytesIO(make_pdf(["Alpha page", "Warranty: five years"])), "manual.pdf")},
                       content_type="multipart/form-data")
    assert resp.status_code == 201 and resp.get_json()["status"] == "added"
    doc_id = resp.get_json()["document_id"]
    resp = client.post("/v1/documents", data={"file": (io.BytesIO(make_pdf(["Alpha page", "Warranty: five years"])), "manual.pdf")},
                       content_type="multipart/form-data")
    assert resp.status_code == 200 and resp.get_json()["status"] == "unchanged"
    resp = client.post("/v1/documents", json={"title": "Note", "text": "The wifi password rotates monthly."})
    assert resp.status_code == 201

    listing = client.get("/v1/documents?offset=0&limit=1").get_json()
    assert listing["total"] == 2 and len(listing["data"]) == 1 and listing["data"][0]["title"] == "manual"
    got = client.get(f"/v1/documents/{doc_id}").get_json()
    assert got["kind"] == "pdf" and [c["page"] for c in got["chunks"]] == [1, 2]

    hits = client.post("/v1/retrieve", json={"query": "how long is the warranty", "k": 2}).get_json()["data"]
    assert hits[0]["document_id"] == doc_id and hits[0]["location"]["page"] == 2 and hits[0]["snippet"]
    only = client.post("/v1/retrieve", json={"query": "password", "k": 3, "filters": {"type": "pdf"}}).get_json()["data"]
    assert {h["type"] for h in only} == {"pdf"}
    docs = client.post("/v1/retrieve", json={"query": "warranty password", "k": 3, "group": "document", "neighbors": 1,
                                             "diversity": 0.5}).get_json()["data"]
    assert len({h["document_id"] for h in docs}) == len(docs) == 2  # one hit per document
    assert "Alpha page" in next(h["text"] for h in docs if h["document_id"] == doc_id)  # the page before joined on

    assert client.delete(f"/v1/documents/{doc_id}").get_json()["deleted"] is True
    _is_error(client.delete(f"/v1/documents/{doc_id}"), 404)
    _is_error(client.get(f"/v1/documents/{doc_id}"), 404)


def test_errors_are_openai_shaped_without_paths(client, docs_root, tmp_path):
    err = _is_error(client.post("/v1/retrieve", json={"query": "", "k": 5}), 400)
    assert err["param"] == "query"
    _is_error(client.post("/v1/retrieve", json={"query": "x", "k": 1000}), 400)
    _is_error(client.post("/v1/retrieve", json={"query": "x", "bogus": 1}), 400)
    for bad in ({"diversity": 2}, {"neighbors": 9}, {"group": "page"}):
        _is_error(client.post("/v1/retrieve", json={"query": "x", **bad}), 400)
    _is_error(client.post("/v1/retrieve", data="not json", content_type="application/json"), 400)
    _is_error(client.post("/v1/documents", json={"title": "t"}), 400)
    err = _is_error(client.post("/v1/documents", json={"path": str(tmp_path / "outside.txt")}), 403)
    assert str(tmp_path) not in err["message"]
    err = _is_error(client.post("/v1/documents", json={"path": f"file://{docs_root}/x.txt"}), 403)
    err = _is_error(client.post("/v1/documents", json={"path": "missing.txt"}), 404)
    err = _is_error(client.post("/v1/documents", data={"file": (io.BytesIO(b"%PDF-1.4 junk"), "bad.pdf")},
                                content_type="multipart/form-data"), 422)
    assert "PDF" in err["message"]
    (docs_root / "ok.md").write_text("# Hello\nworld")
    resp = client.post("/v1/documents", json={"path": "ok.md"})
    assert resp.status_code == 201 and str(docs_root) not in resp.get_data(as_text=True)


def test_unavailable_while_loading():
    resp = _app(SimpleNamespace(documents=None, documents_status="still loading")).test_client().post("/v1/retrieve", json={"query": "x"})
    err = _is_error(resp, 503)
    assert "still loading" in err["message"] and resp.headers["Retry-After"] == "5"
