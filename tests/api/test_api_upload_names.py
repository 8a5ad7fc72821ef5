"""Multipart uploads of several files where a later one is refused: the 400 says exactly which files were kept."""
from __future__ import annotations

import json
import uuid

import pytest

from api_helpers import api_settings, make_documents, start_server


@pytest.fixture(scope="module")
def docs_server(tiny_bundles, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("names")
    svc, _ = make_documents(tmp)
    server = start_server(api_settings(tiny_bundles["llama"], tmp, max_batch=2), documents=svc)
    yield server
    server.close()


def _multipart(files: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    body = b""
    for name, data in files:
        body += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                 "Content-Type: text/plain\r\n\r\n").encode() + data + b"\r\n"
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_a_refused_later_file_names_the_kept_ones(docs_server):
    body, ctype = _multipart([("first.txt", b"The loading dock closes at six."), ("b" * 300 + ".txt", b"Too long a name.")])
    status, _, out = docs_server.request("POST", "/v1/documents", body, headers={"Content-Type": ctype})
    err = json.loads(out)
    assert status == 400 and "longer than 255" in err["error"]["message"], out
    assert [d["source"] for d in err["data"]] == ["upload:first.txt"]  # was a bare 400 though first.txt was stored
    status, _, listed = docs_server.request("GET", "/v1/documents?limit=100")
    assert "upload:first.txt" in {d["source_key"] for d in json.loads(listed)["data"]}
    body, ctype = _multipart([("c" * 300 + ".txt", b"x")])  # alone: a plain 400, nothing kept
    status, _, out = docs_server.request("POST", "/v1/documents", body, headers={"Content-Type": ctype})
    assert status == 400 and "longer than 255" in json.loads(out)["error"]["message"] and "data" not in json.loads(out)


def test_a_name_written_in_another_unicode_form_replaces_the_same_document(docs_server):
    """"één.txt" from a Mac (decomposed: e + U+0301, as its file systems store names) and from Windows (composed é) is
    one file to its user; it was kept as two documents, so the old version ("een maand") kept answering beside the
    new ("twee maanden"). Names (and text titles) are compared in NFC."""
    import unicodedata

    def upload(name: str, data: bytes) -> dict:
        body, ctype = _multipart([(name, data)])
        status, _, out = docs_server.request("POST", "/v1/documents", body, headers={"Content-Type": ctype})
        assert status in (200, 201), out
        return json.loads(out)

    first = upload(unicodedata.normalize("NFC", "Huurcontract één.txt"), "De opzegtermijn is één maand.".encode())
    second = upload(unicodedata.normalize("NFD", "Huurcontract één.txt"), "De opzegtermijn is twee maanden.".encode())
    assert second["status"] == "updated" and second["document_id"] == first["document_id"], (first, second)
    assert second["source"] == first["source"] == "upload:" + unicodedata.normalize("NFC", "Huurcontract één.txt")
    for form in ("NFD", "NFC"):
        title = unicodedata.normalize(form, "Notitie café")
        status, _, out = docs_server.request("POST", "/v1/documents", {"title": title, "text": f"Versie {form}."})
        assert status in (200, 201), out
    status, _, listed = docs_server.request("GET", "/v1/documents?limit=100")
    titles = [d["title"] for d in json.loads(listed)["data"]]
    assert titles.count(unicodedata.normalize("NFC", "Notitie café")) == 1 and unicodedata.normalize("NFD", "Notitie café") not in titles
