"""Reader versions: a file whose bytes did not change is read again when an older loader read it (a reindex, an
ingest of it, an upload of the same bytes), its old chunks serving until the new ones commit; a current one is not.

The "older reader" is the HTML loader as it was before it dropped page chrome (the old_html_reader fixture, conftest):
Sphinx's <div class="footer"> (copyright, 'Please donate.') then closed every page's last chunk.
"""
from __future__ import annotations

import threading

import pytest

from jobs_helpers import FOOTER, doc_text, sphinx_page


def _texts(docs, doc_id: int) -> str:
    return " ".join(c.text for c in docs.store.chunks_of(doc_id))


def _forget_versions(db) -> None:
    """What migration 9 leaves on documents read before it: no reader version (an unknown, older reader)."""
    with db.write() as conn:
        conn.execute("UPDATE documents SET reader_version = NULL")


def _run(rt, job: str):
    run = rt.jobs.run_foreground(job)
    assert run.status == "succeeded", run.error
    return run, {i.key.rsplit("/", 1)[-1]: i for i in rt.jobs.results(run.id)[0]}


def test_an_upgrade_reads_again_the_files_an_older_reader_read(make_runtime, tmp_path, old_html_reader):
    """Documents from before reader versions were recorded (NULL) are read again by the next reindex although their
    bytes did not change, their chunks then the current loader's; a second run finds them current."""
    from edge_agent.cli.index import stats_lines
    from edge_agent.rag.reader_version import reader_version

    rt = make_runtime()
    docs = rt.documents
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    (shared / "zipfile.html").write_text(sphinx_page("zipfile", 1))
    (shared / "notes.txt").write_text(doc_text(2, 3))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(shared)]})
    _, rows = _run(rt, "ri")
    assert {k: i.result["action"] for k, i in rows.items()} == {"zipfile.html": "added", "notes.txt": "added"}
    page = rows["zipfile.html"].result["document_id"]
    assert FOOTER in _texts(docs, page)  # the older reader kept the footer
    _forget_versions(docs.store.db)
    old_html_reader()  # the upgrade: the current loader

    status = docs.stats()["reader"]
    assert status["outdated_files"] == 2 and status["outdated_by_kind"] == {"html": 1, "txt": 1}
    shown = "\n".join(stats_lines(docs.stats()))  # what `edge-agent index stats` and doctor print
    assert "reader: 2 documents read by an older reader (html 1, txt 1): the next reindex reads them again" in shown

    (shared / "notes.txt").write_text(doc_text(2, 4))  # changed meanwhile: an update, not a re-read of the same bytes
    _, rows = _run(rt, "ri")
    assert {k: (i.result["action"], i.result.get("reread"), i.result.get("text")) for k, i in rows.items()} == {
        "zipfile.html": ("updated", "done", "changed"), "notes.txt": ("updated", "done", None)}
    assert rows["zipfile.html"].result["document_id"] == page  # the same document, read again
    text = _texts(docs, page)
    assert FOOTER not in text and "Copyright" not in text and "¶" not in text and doc_text(1, 4)[:40] in text
    assert docs.store.get(page).reader_version == reader_version("html")
    assert docs.stats()["reader"]["outdated_files"] == 0 and "reader:" not in "\n".join(stats_lines(docs.stats()))

    _, rows = _run(rt, "ri")
    assert {k: (i.result["action"], i.result.get("reread"), i.result.get("text")) for k, i in rows.items()} == {
        "zipfile.html": ("unchanged", None, None), "notes.txt": ("unchanged", None, None)}


def test_a_bumped_reader_reads_again_its_kind_only_at_most_reread_limit_a_run(make_runtime, tmp_path, old_html_reader,
                                                                               monkeypatch):
    """A loader fix with its kind's version bumped: the next runs read those files again, reread_limit of them a run
    (the rest say "later"), while files of other kinds stay unchanged and a new file is added in the same run."""
    from edge_agent.rag import reader_version

    rt = make_runtime()
    docs = rt.documents
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    for n in range(3):
        (shared / f"p{n}.html").write_text(sphinx_page(f"page{n}", n))
    (shared / "notes.txt").write_text(doc_text(5, 3))
    (shared / "rows.csv").write_text("name,city\nAnna,Utrecht\nBram,Delft\n")
    rt.jobs.create_job("ri", "reindex", {"folders": [str(shared)], "reread_limit": 2})
    _, rows = _run(rt, "ri")
    ids = {k: i.result["document_id"] for k, i in rows.items()}
    assert all(FOOTER in _texts(docs, ids[f"p{n}.html"]) for n in range(3))
    old_html_reader()
    bumped = reader_version.READER_VERSIONS["html"] + 1
    monkeypatch.setattr(reader_version, "READER_VERSIONS", {**reader_version.READER_VERSIONS, "html": bumped})
    assert docs.stats()["reader"]["outdated_by_kind"] == {"html": 3}

    (shared / "new.md").write_text(doc_text(6, 2))
    _, rows = _run(rt, "ri")
    assert {k: (i.result["action"], i.result.get("reread")) for k, i in rows.items()} == {
        "p0.html": ("updated", "done"), "p1.html": ("updated", "done"), "p2.html": ("unchanged", "later"),
        "notes.txt": ("unchanged", None), "rows.csv": ("unchanged", None), "new.md": ("added", None)}
    assert [FOOTER in _texts(docs, ids[f"p{n}.html"]) for n in range(3)] == [False, False, True]
    assert docs.stats()["reader"]["outdated_files"] == 1

    _, rows = _run(rt, "ri")
    assert rows["p2.html"].result == {**rows["p2.html"].result, "action": "updated", "reread": "done"}
    assert FOOTER not in _texts(docs, ids["p2.html"]) and docs.store.get(ids["p2.html"]).reader_version == bumped
    assert docs.stats()["reader"]["outdated_files"] == 0
    assert sorted(i.result["action"] for i in rows.values()) == ["unchanged"] * 5 + ["updated"]


def test_reread_limit_is_a_whole_number_or_null(make_runtime, tmp_path):
    from edge_agent.jobs.kinds import InvalidJobError
    from edge_agent.jobs.reindex import REREAD_LIMIT

    rt = make_runtime()
    folder = str(tmp_path / "docs")
    assert rt.jobs.create_job("a", "reindex", {"folders": [folder]}).params["reread_limit"] == REREAD_LIMIT
    assert rt.jobs.create_job("b", "reindex", {"folders": [folder], "reread_limit": None}).params["reread_limit"] is None
    assert rt.jobs.create_job("c", "reindex", {"folders": [folder], "reread_limit": 0}).params["reread_limit"] == 0
    for bad in (-1, "5", True, 2.5):
        with pytest.raises(InvalidJobError, match="reread_limit must be a whole number"):
            rt.jobs.create_job("bad", "reindex", {"folders": [folder], "reread_limit": bad})


def test_old_chunks_serve_until_the_new_ones_commit_and_a_failed_reread_keeps_them(make_runtime, tmp_path, old_html_reader,
                                                                                   monkeypatch):
    from edge_agent.rag.loaders import LoaderError
    from edge_agent.services import documents as documents_module

    rt = make_runtime()
    docs = rt.documents
    for n in range(2):
        (tmp_path / "docs" / f"p{n}.html").write_text(sphinx_page(f"page{n}", n))
    first, second = (docs.add_file(tmp_path / "docs" / f"p{n}.html").document_id for n in range(2))
    _forget_versions(docs.store.db)
    old_html_reader()

    entered, release = threading.Event(), threading.Event()
    chunk = docs.chunker.chunk

    def slow_chunk(sections):  # the new reading is under way: loaded, not yet embedded or committed
        entered.set()
        assert release.wait(30)
        return chunk(sections)

    monkeypatch.setattr(docs.chunker, "chunk", slow_chunk)
    out = {}
    worker = threading.Thread(target=lambda: out.setdefault("res", docs.add_file(tmp_path / "docs" / "p0.html")))
    worker.start()
    try:
        assert entered.wait(30)
        hits = docs.retrieve("Python Software Foundation non-profit corporation", k=3, mode="bm25")
        assert hits and hits[0].document_id == first and FOOTER in hits[0].text  # the old chunks still answer
    finally:
        release.set()
        worker.join(30)
    monkeypatch.setattr(docs.chunker, "chunk", chunk)
    assert out["res"].status == "updated" and out["res"].document_id == first and FOOTER not in _texts(docs, first)

    def damaged(*args, **kwargs):
        raise LoaderError("could not read html file: is it damaged?")

    monkeypatch.setattr(documents_module, "load_bytes", damaged)
    res = docs.add_file(tmp_path / "docs" / "p1.html")
    assert res.status == "failed" and "the version already stored is kept" in res.error
    kept = docs.store.get(second)
    assert kept.status == "ready" and kept.reader_version is None and FOOTER in _texts(docs, second)
    assert docs.stats()["reader"]["outdated_files"] == 1  # still to read again: the next run tries


def test_an_upload_of_the_same_bytes_is_read_again_when_an_older_reader_read_it(make_runtime, old_html_reader):
    import time

    from edge_agent.cli.index import stats_lines

    rt = make_runtime()
    docs = rt.documents
    data = sphinx_page("zipfile", 3).encode()
    doc_id = docs.add_upload("zipfile.html", data).document_id
    _forget_versions(docs.store.db)
    old_html_reader()
    reader = docs.stats()["reader"]
    assert reader["outdated_uploads"] == 1 and reader["outdated_files"] == 0
    assert "reader: 1 upload read by an older reader: upload it again" in "\n".join(stats_lines(docs.stats()))
    res = docs.add_upload("zipfile.html", data)
    assert (res.status, res.document_id) == ("updated", doc_id) and FOOTER not in _texts(docs, doc_id)
    assert docs.add_upload("zipfile.html", data).status == "unchanged"

    _forget_versions(docs.store.db)  # in the background (a large upload): processed, not answered "unchanged"
    assert docs.start_upload("zipfile.html", data).status == "processing"
    deadline = time.monotonic() + 60
    while docs.store.get(doc_id).status == "processing" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert docs.store.get(doc_id).status == "ready" and docs.store.get(doc_id).reader_version is not None
    assert docs.start_upload("zipfile.html", data).status == "unchanged"


def test_an_emails_reader_version_follows_the_loaders_it_reads_attachments_with():
    from edge_agent.rag.loaders import KINDS
    from edge_agent.rag.reader_version import READER_VERSIONS, is_current, reader_version

    assert set(READER_VERSIONS) == set(KINDS.values())  # a new kind gets a version
    bumped = {**READER_VERSIONS, "html": READER_VERSIONS["html"] + 1}
    assert reader_version("eml", bumped) == reader_version("eml") + 1  # an HTML fix reads mails again
    assert reader_version("pdf", bumped) == reader_version("pdf")
    assert reader_version("unknown") is None and not is_current("html", None)
    assert is_current("html", reader_version("html")) and not is_current("html", reader_version("html") + 1)
