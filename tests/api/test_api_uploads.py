"""Uploads through the real server on loopback over a real DocumentService (SQLite, FAISS, BM25 in tmp_path).

A refused upload stores nothing; identical uploads racing each other index the content once; a large
upload (or one that asks) is processed in the background and its document shows processing -> ready or
failed, also across a restart.
"""
from __future__ import annotations

import json
import threading

import pytest

from api_helpers import KEY, REPO, api_settings, multipart, start_server, wait_until
from edge_agent.rag.reader_version import READER_VERSIONS

TEXT = "The boiler in block D is serviced every March by Hendriks Installatie. " * 4


def upload(server, name: str, data: bytes, path: str = "/v1/documents", headers: dict | None = None) -> tuple[int, dict, dict]:
    body, ctype = multipart([(name, data)], "application/octet-stream")
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
        (tmp_path / "docs").mkdir(exist_ok=True)
        values = dict(data_dir=tmp_path / "var", index_dir=tmp_path / "index", ingest_roots=[tmp_path / "docs"])
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
    assert detail["reader_version"] == docs[0]["reader_version"] == READER_VERSIONS["txt"]  # the reader that read it
    hits = json.loads(server.request("POST", "/v1/retrieve", {"query": "who services the boiler", "k": 1})[2])["data"]
    assert hits[0]["document_id"] == good["document_id"]


def test_an_unreadable_file_under_an_ingest_root_is_listed_failed_and_the_422_says_which(make_server, tmp_path):
    """A server-side file keeps its failed record on purpose (it mirrors the file, as a folder ingestion's do): the 422 names it."""
    server = make_server()
    (tmp_path / "docs" / "scan.pdf").write_bytes(b"%PDF-1.4 junk")
    status, _, raw = server.request("POST", "/v1/documents", {"path": "scan.pdf"})
    err = json.loads(raw)["error"]
    assert status == 422 and err["code"] == "unreadable_document" and err["param"] == "path"
    assert str(tmp_path) not in err["message"] and f"document {err['document_id']}" in err["message"]
    doc = _get(server, err["document_id"])
    assert doc["status"] == "failed" and doc["error"] and doc["path"] == "scan.pdf"


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


def _gate(svc) -> threading.Event:
    """Hold the background worker before it processes each upload (the real finish_upload runs once the gate opens)."""
    gate, real = threading.Event(), svc.finish_upload
    svc.finish_upload = lambda *a: (gate.wait(60), real(*a))[1]
    return gate


def _get(server, doc_id: int) -> dict:
    status, _, raw = server.request("GET", f"/v1/documents/{doc_id}")
    assert status == 200, raw
    return json.loads(raw)


def test_a_large_upload_is_processed_in_the_background(make_server):
    server = make_server(upload_async_bytes=4096)
    svc = server.runtime.documents
    gate = _gate(svc)
    big = ("The north wing fire doors are tested on the first Monday of every month by the caretaker. " * 60).encode()
    assert len(big) > 4096
    status, head, body = upload(server, "fire-doors.txt", big)
    assert status == 202 and body["status"] == "processing" and body["chunks"] == 0, body
    doc_id = body["document_id"]
    assert head["location"] == f"/v1/documents/{doc_id}"
    doc = _get(server, doc_id)
    assert doc["status"] == "processing" and doc["chunks"] == [] and doc["error"] is None
    assert [d["status"] for d in _documents(server)] == ["processing"]
    again = upload(server, "fire-doors.txt", big)  # the same bytes while it processes: the same document, not a second job
    assert again[0] == 202 and again[2]["document_id"] == doc_id and svc.uploads.waiting == 0  # the worker holds the first
    small = upload(server, "small.txt", b"The caretaker's phone number is 0612345678.")
    assert small[0] == 201 and small[2]["status"] == "added"  # small uploads keep the synchronous answer
    gate.set()
    assert wait_until(lambda: _get(server, doc_id)["status"] != "processing", 60, 0.05)
    doc = _get(server, doc_id)
    assert doc["status"] == "ready" and len(doc["chunks"]) == doc["chunk_count"] > 0 and doc["error"] is None
    hits = json.loads(server.request("POST", "/v1/retrieve", {"query": "when are fire doors tested", "k": 1})[2])["data"]
    assert hits[0]["document_id"] == doc_id
    assert upload(server, "fire-doors.txt", big)[2]["status"] == "unchanged"
    status, _, body = upload(server, "fire-doors-2.txt", big, path="/v1/documents?wait=true")
    assert status == 201 and body["status"] == "added"  # wait=true keeps a large upload in the request
    status, _, body = upload(server, "x.txt", b"x", path="/v1/documents?wait=maybe")
    assert status == 400 and body["error"]["param"] == "wait"


def test_asking_for_async_and_a_failure_in_the_background(make_server):
    server = make_server(upload_async_bytes=0)
    status, head, body = upload(server, "note.txt", b"The bike shed key hangs behind the reception desk.",
                                headers={"Prefer": "respond-async"})
    assert status == 202 and head["preference-applied"] == "respond-async"
    note = body["document_id"]
    status, _, body = upload(server, "broken.pdf", b"%PDF-1.4 not really a pdf", path="/v1/documents?wait=false")
    assert status == 202 and body["status"] == "processing"
    broken = body["document_id"]
    assert wait_until(lambda: _get(server, broken)["status"] != "processing" and _get(server, note)["status"] != "processing", 60, 0.05)
    assert _get(server, note)["status"] == "ready"
    failed = _get(server, broken)
    assert failed["status"] == "failed" and failed["error"] and "/" not in failed["error"] and failed["chunks"] == []


def test_a_restart_never_leaves_an_upload_processing(make_server):
    """A daemon killed while an upload waited (its record says processing, no worker has it): the next start fails it."""
    from edge_agent.services.upload_tasks import UPLOAD_INTERRUPTED

    server = make_server()
    svc = server.runtime.documents
    meta, _ = svc._upload_meta("report.pdf", b"%PDF-1.4 whatever")
    doc_id = svc.mark_processing(meta)  # what a 202 records before the worker takes the upload
    assert _get(server, doc_id)["status"] == "processing"
    server = make_server()  # the first one closes without an upload queue: as if it had been killed
    doc = _get(server, doc_id)
    assert doc["status"] == "failed" and doc["error"] == UPLOAD_INTERRUPTED


def test_uploads_still_waiting_at_shutdown_are_failed(make_server):
    """A graceful stop finishes the upload being processed; those still waiting are failed with the reason, not left processing."""
    from edge_agent.services.upload_tasks import UPLOAD_INTERRUPTED

    server = make_server()
    svc = server.runtime.documents
    gate = _gate(svc)
    ids = [upload(server, f"w{i}.txt", f"Waiting upload number {i} about the roof.".encode(), path="/v1/documents?wait=false")[2]["document_id"]
           for i in range(3)]
    threading.Thread(target=lambda: (svc._stop.wait(60), gate.set()), daemon=True).start()  # open the gate as the stop begins
    server = make_server()
    docs = {d["id"]: d for d in _documents(server)}
    assert [(docs[i]["status"], docs[i]["error"]) for i in ids] == [("ready", None)] + [("failed", UPLOAD_INTERRUPTED)] * 2


def _without_core_properties(docx_bytes: bytes) -> bytes:
    """The DOCX without docProps/core.xml (its title, author, dates) and its relationship, as some generators write."""
    import io
    import re
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(docx_bytes)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "docProps/core.xml":
                continue
            if info.filename == "_rels/.rels":
                data = re.sub(rb"<Relationship [^>]*core-properties[^>]*/>", b"", data)
            if info.filename == "[Content_Types].xml":
                data = re.sub(rb"<Override [^>]*docProps/core\.xml[^>]*/>", b"", data)
            dst.writestr(info, data)
    return out.getvalue()


def test_a_docx_without_core_properties_is_titled_by_its_file_name(make_server):
    """python-docx makes up core properties for a DOCX that has none, titled "Word Document": every such upload
    was listed, searched (the title is a boosted BM25 field) and cited as "Word Document"."""
    import sys

    sys.path.insert(0, str(REPO / "tests" / "rag"))
    from rag_docs import make_docx

    server = make_server()
    data = _without_core_properties(make_docx([("p", "De opzegtermijn voor de huurder bedraagt een maand.")]))
    status, _, body = upload(server, "huurcontract.docx", data)
    assert status == 201, body
    assert body["title"] == "huurcontract"
    titled = make_docx([("p", "De huurprijs bedraagt 950 euro.")], title="Huurprijs 2027")
    status, _, body = upload(server, "prijs.docx", titled)
    assert status == 201 and body["title"] == "Huurprijs 2027"  # a title the file has is kept


def test_a_large_text_document_sent_as_json_is_processed_in_the_background(make_server):
    """POST /v1/documents {title, text} ignored upload_async_bytes, ?wait=false and Prefer: respond-async: a 7 MB text
    held its request for over two minutes (parse, chunk, embed on 2 busy cores), past a client's timeout."""
    server = make_server(upload_async_bytes=4096)
    svc = server.runtime.documents
    gate = _gate(svc)
    text = "De brandwerende deuren in de noordvleugel worden elke eerste maandag van de maand getest door de conciërge. " * 60
    assert len(text.encode()) > 4096
    status, head, body = server.request("POST", "/v1/documents", {"title": "Brandveiligheid", "text": text})
    body = json.loads(body)
    assert status == 202 and body["status"] == "processing" and body["source"] == "text:Brandveiligheid", body
    doc_id = body["document_id"]
    assert head["location"] == f"/v1/documents/{doc_id}" and _get(server, doc_id)["status"] == "processing"
    small = json.loads(server.request("POST", "/v1/documents", {"title": "Sleutel", "text": "De sleutel hangt bij de receptie."})[2])
    assert small["status"] == "added"  # a small text keeps the synchronous answer
    status, _, asked = server.request("POST", "/v1/documents?wait=false", {"title": "Fietsen", "text": "De fietsenstalling sluit om tien uur."})
    assert status == 202 and json.loads(asked)["status"] == "processing"
    gate.set()
    assert wait_until(lambda: _get(server, doc_id)["status"] != "processing", 60, 0.05)
    doc = _get(server, doc_id)
    assert doc["status"] == "ready" and doc["title"] == "Brandveiligheid" and doc["chunk_count"] > 0
    status, _, body = server.request("POST", "/v1/documents", {"title": "Brandveiligheid", "text": text})
    assert json.loads(body)["status"] == "unchanged" and json.loads(body)["document_id"] == doc_id
    status, _, body = server.request("POST", "/v1/documents?wait=true", {"title": "Brandveiligheid 2", "text": text})
    assert status == 201 and json.loads(body)["status"] == "added"  # wait=true keeps it in the request


@pytest.mark.parametrize("body, param, words", [
    ({"path": ""}, "path", "at least 1 character"),
    ({"path": "a" * 5000}, "path", "at most 4096 characters"),
    ({"title": "Notitie", "text": 5}, "text", "valid string"),
    ({"title": "Notitie"}, "text", "Field required"),
    ({"text": "De sleutel hangt bij de receptie."}, "title", "Field required"),
    ({}, "title", "Field required"),
])
def test_a_bad_json_document_names_the_field_it_got_wrong(make_server, body, param, words):
    """The body is one of two shapes ({title, text} or {path}); the error of the shape the client sent, not the
    other's: {"path": ""} was answered "invalid value for 'title': Field required"."""
    server = make_server()
    status, _, raw = server.request("POST", "/v1/documents", body)
    err = json.loads(raw)["error"]
    assert status == 400 and err["param"] == param and words in err["message"], err


def test_a_file_over_max_file_bytes_is_a_413_whatever_its_size(make_server):
    """Within a MiB over max_file_bytes an upload was a 400 "file is over the N-byte limit", further over a 413
    "the upload is larger than ...": one cause, two answers. Now 413 both, naming the setting, nothing stored."""
    server = make_server(max_file_bytes=4096)
    for size in (5000, 3 * 1024 * 1024):
        status, _, err = upload(server, "big.txt", b"a " * (size // 2))
        assert status == 413, (size, err)
        assert "max_file_bytes" in err["error"]["message"] or err["error"]["code"] == "body_too_large", err
    assert _documents(server) == []


def test_office_files_upload_and_are_found_by_a_cell_and_a_note(make_server):
    """An Excel sheet and a PowerPoint deck through POST /v1/documents: a question matches a cell and a speaker note;
    a Word document renamed .xlsx and a password-protected workbook get a 422 that says what to do, and store nothing."""
    import io
    import sys

    sys.path.insert(0, str(REPO / "tests" / "rag"))
    from office_docs import make_pptx, make_xlsx
    from rag_docs import make_docx

    server = make_server()
    sheet = make_xlsx({"Declaraties": [["Medewerker", "Omschrijving", "Bedrag"],
                                       ["Fatma Yilmaz", "Cursus reanimatie in Zwolle", 1250]]}, formats={"C2": "#,##0.00"})
    status, _, body = upload(server, "declaraties.xlsx", sheet)
    assert status == 201 and body["status"] == "added", body
    deck = make_pptx([{"title": "Quarterly review", "bullets": ["Revenue grew"],
                       "notes": "Mention the new dialysis wing opening in Groningen"}])
    status, _, body = upload(server, "review.pptx", deck)
    assert status == 201, body

    def top(query):
        return json.loads(server.request("POST", "/v1/retrieve", {"query": query, "k": 1})[2])["data"][0]

    hit = top("cursus reanimatie Zwolle")
    assert hit["title"] == "declaraties" and "Bedrag: 1.250,00" in hit["text"]
    assert top("dialysis wing Groningen")["title"] == "review"

    from msoffcrypto.format.ooxml import OOXMLFile

    locked = io.BytesIO()
    OOXMLFile(io.BytesIO(sheet)).encrypt("geheim", locked)
    for name, data, words in (("brief.xlsx", make_docx([("p", "Geachte heer")]), "give it the .docx extension"),
                              ("locked.xlsx", locked.getvalue(), "protected with a password")):
        status, _, err = upload(server, name, data)
        assert status == 422 and err["error"]["code"] == "unreadable_document", err
        assert words in err["error"]["message"] and "Traceback" not in err["error"]["message"]
    assert sorted(d["title"] for d in _documents(server)) == ["declaraties", "review"]
