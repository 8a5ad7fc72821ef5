"""Multipart uploads of several files where a later one is refused: the 400 says exactly which files were kept."""
from __future__ import annotations

import json

import pytest

from api_helpers import api_settings, make_documents, multipart, multipart_parts, start_server


@pytest.fixture(scope="module")
def docs_server(tiny_bundles, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("names")
    svc, _ = make_documents(tmp)
    server = start_server(api_settings(tiny_bundles["llama"], tmp, max_batch=2), documents=svc)
    yield server
    server.close()


def test_a_refused_later_file_names_the_kept_ones(docs_server):
    body, ctype = multipart([("first.txt", b"The loading dock closes at six."), ("b" * 300 + ".txt", b"Too long a name.")])
    status, _, out = docs_server.request("POST", "/v1/documents", body, headers={"Content-Type": ctype})
    err = json.loads(out)
    assert status == 400 and "longer than 255" in err["error"]["message"], out
    assert [d["source"] for d in err["data"]] == ["upload:first.txt"]  # was a bare 400 though first.txt was stored
    status, _, listed = docs_server.request("GET", "/v1/documents?limit=100")
    assert "upload:first.txt" in {d["source_key"] for d in json.loads(listed)["data"]}
    body, ctype = multipart([("c" * 300 + ".txt", b"x")])  # alone: a plain 400, nothing kept
    status, _, out = docs_server.request("POST", "/v1/documents", body, headers={"Content-Type": ctype})
    assert status == 400 and "longer than 255" in json.loads(out)["error"]["message"] and "data" not in json.loads(out)


def test_a_name_written_in_another_unicode_form_replaces_the_same_document(docs_server):
    """"één.txt" from a Mac (decomposed: e + U+0301, as its file systems store names) and from Windows (composed é) is
    one file to its user; it was kept as two documents, so the old version ("een maand") kept answering beside the
    new ("twee maanden"). Names (and text titles) are compared in NFC."""
    import unicodedata

    def upload(name: str, data: bytes) -> dict:
        body, ctype = multipart([(name, data)])
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


def _titles(server) -> list[str]:
    status, _, listed = server.request("GET", "/v1/documents?limit=1000")
    assert status == 200
    return [d["title"] for d in json.loads(listed)["data"]]


BAD_TITLES = ["Notulen\x00mei", "Factuur \u202etxt.exe", "regel een\nregel twee", "C1\x85NEL", "tab\there", "iso\u2066late",
              "line\u2028sep", "del\x7f"]


@pytest.mark.parametrize("title", BAD_TITLES, ids=["nul", "rlo", "newline", "c1-nel", "tab", "lri", "line-sep", "del"])
def test_a_title_with_a_control_or_bidi_override_character_is_refused(docs_server, title):
    """A title is shown in lists, answers' sources and logs: NUL, newlines, C1 controls and bidi overrides there forge or
    hide what a reader sees ("Factuur \u202etxt.exe" reads as "Factuur exe.txt"). Refused with a 400 naming the field,
    and nothing is stored; the same name in an upload is refused naming `file`."""
    before = _titles(docs_server)
    status, _, out = docs_server.request("POST", "/v1/documents", {"title": title, "text": "Vergadering om tien uur."})
    err = json.loads(out)["error"]
    assert status == 400 and err["param"] == "title" and "U+" in err["message"], out
    if "\x00" not in title and "\n" not in title:  # a raw name in the header (NUL and newline: the filename* form below)
        body, ctype = multipart_parts([(f'filename="{title}.txt"', b"Vergadering om tien uur.")])
        status, _, out = docs_server.request("POST", "/v1/documents", body, headers={"Content-Type": ctype})
        err = json.loads(out)["error"]
        assert status == 400 and err["param"] == "file" and "U+" in err["message"], out
    from urllib.parse import quote
    body, ctype = multipart_parts([(f"filename*=UTF-8''{quote(title + '.txt')}", b"Vergadering om tien uur.")])
    status, _, out = docs_server.request("POST", "/v1/documents", body, headers={"Content-Type": ctype})
    assert status == 400 and json.loads(out)["error"]["param"] == "file", out
    assert _titles(docs_server) == before


def test_white_space_around_a_title_is_still_trimmed_not_refused(docs_server):
    status, _, out = docs_server.request("POST", "/v1/documents", {"title": "  Agenda juni\n", "text": "Punt een: begroting."})
    assert status in (200, 201) and json.loads(out)["title"] == "Agenda juni", out


@pytest.mark.parametrize("disposition,name", [
    ('filename="C:\\Users\\jan\\Documents\\notulen.txt"', "notulen.txt"),  # IE and old Edge: the full path, bare
    ('filename="\\\\fileserver\\share\\verslag mei.txt"', "verslag mei.txt"),  # a UNC path, bare
    ('filename="C:\\\\Users\\\\jan\\\\begroting.txt"', "begroting.txt"),  # the same path escaped as a quoted-string
    ('filename="offerte \\"nieuw\\".txt"', 'offerte "nieuw".txt'),  # an escaped quote stays a quote
])
def test_a_windows_path_as_file_name_keeps_its_last_component(docs_server, disposition, name):
    """werkzeug reads filename="..." as an RFC 2616 quoted-string, so the backslashes of the path IE sends were eaten and
    the document was named "C:UsersjanDocumentsnotulen.txt"; browsers (and Django) take the last path component."""
    body, ctype = multipart_parts([(disposition, b"De notulen van de vergadering in mei.")])
    status, _, out = docs_server.request("POST", "/v1/documents", body, headers={"Content-Type": ctype})
    assert status in (200, 201), out
    assert json.loads(out)["source"] == "upload:" + name, out
