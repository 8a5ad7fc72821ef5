"""A re-read that changes a document's text (same bytes, a newer reader) makes its summary and labels stale, so the
next summarize (changed_only too) and classify runs redo them; a re-read whose text comes out the same keeps them
current and is not selected again. A stale summary stays shown until its replacement is stored.

The older reader is the HTML loader that kept Sphinx's footer (old_html_reader, conftest): its summaries could say
"The Python Software Foundation is a non-profit corporation." for every page.
"""
from __future__ import annotations

import time

from jobs_helpers import FOOTER, doc_text, sphinx_page

STALE = "stale:"


def _run(rt, job: str):
    run = rt.jobs.run_foreground(job)
    assert run.status == "succeeded", run.error
    return run, {i.key.rsplit("/", 1)[-1]: i for i in rt.jobs.results(run.id)[0]}


def _texts(docs, doc_id: int) -> str:
    return " ".join(c.text for c in docs.store.chunks_of(doc_id))


def _label_hashes(db, doc_id: int) -> dict[str, str | None]:
    with db.read() as conn:
        return {r[0]: r[1] for r in conn.execute("SELECT label_set, content_hash FROM document_labels WHERE document_id = ?",
                                                 (doc_id,))}


def _bump(monkeypatch, *kinds: str) -> None:
    """A loader fix released with its kinds' reader versions bumped: their files are read again."""
    from edge_agent.rag import reader_version

    bumped = dict(reader_version.READER_VERSIONS)
    for kind in kinds:
        bumped[kind] += 1
    monkeypatch.setattr(reader_version, "READER_VERSIONS", bumped)


def test_a_reread_that_changes_the_text_makes_summary_and_labels_stale_an_identical_one_keeps_them(
        make_runtime, tmp_path, old_html_reader, wordy_model, monkeypatch):
    rt = make_runtime()
    docs = rt.documents
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    (shared / "zipfile.html").write_text(sphinx_page("zipfile", 1))
    (shared / "notes.md").write_text("# Notes\n\n" + doc_text(2, 3))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(shared)]})
    job = rt.jobs.create_job("sum", "summarize", {"max_tokens": 8})
    rt.jobs.create_job("cls", "classify", {"labels": ["harbour", "orchard"], "method": "embedding", "label_set": "topic",
                                           "changed_only": True})
    _, rows = _run(rt, "ri")
    page, notes = (rows[n].result["document_id"] for n in ("zipfile.html", "notes.md"))
    assert FOOTER in _texts(docs, page)
    run, _ = _run(rt, "sum")
    assert run.counts["succeeded"] == 2
    _, labelled = _run(rt, "cls")
    assert set(labelled) == {f"doc:{page}", f"doc:{notes}"}
    before = {d: docs.get(d) for d in (page, notes)}
    assert all(b["summary"]["content_hash"] == b["content_hash"] for b in before.values())

    time.sleep(0.01)
    old_html_reader()  # the fix that drops the footer, released with html's reader version bumped; md's bumped too
    _bump(monkeypatch, "html", "md")  # (a change elsewhere in the md loader that leaves this file's text as it was)
    _, rows = _run(rt, "ri")
    # the results say which re-read changed the text
    assert {k: (i.result["action"], i.result.get("reread"), i.result.get("text")) for k, i in rows.items()} == {
        "zipfile.html": ("updated", "done", "changed"), "notes.md": ("updated", "done", "same")}
    assert FOOTER not in _texts(docs, page)

    after = docs.get(page)  # text changed: summary and labels kept, shown, but stale
    assert after["content_hash"] == before[page]["content_hash"] and after["updated_at"] > before[page]["updated_at"]
    assert after["summary"]["summary"] == before[page]["summary"]["summary"]
    assert after["summary"]["content_hash"] == STALE + after["content_hash"]
    assert after["labels"] == before[page]["labels"]
    assert _label_hashes(rt.jobs.db, page) == {"topic": STALE + after["content_hash"]}
    same = docs.get(notes)  # the same text: current, and not "changed" for changed_only jobs
    assert same["reader_version"] != before[notes]["reader_version"]
    assert same["summary"] == before[notes]["summary"] and same["updated_at"] == before[notes]["updated_at"]
    assert _label_hashes(rt.jobs.db, notes) == {"topic": same["content_hash"]}

    # summarize, changed_only as a nightly job runs it: only the page is redone, now current
    rt.jobs.update_job(job.id, {"params": {"max_tokens": 8, "changed_only": True}})
    run, done = _run(rt, "sum")
    assert set(done) == {f"doc:{page}"} and run.counts["succeeded"] == 1
    redone = docs.get(page)["summary"]
    assert redone["content_hash"] == after["content_hash"] and redone["run_id"] == run.id
    rt.jobs.update_job(job.id, {"params": {"max_tokens": 8}})
    assert _run(rt, "sum")[0].total_items == 0  # everything current now
    _, relabelled = _run(rt, "cls")  # classify changed_only: the page only, its label current again
    assert set(relabelled) == {f"doc:{page}"}
    assert _label_hashes(rt.jobs.db, page) == {"topic": after["content_hash"]}


def test_a_summary_of_a_text_read_again_while_it_was_made_is_stored_stale(make_runtime):
    """A summarize item reads the chunks, generates for a while; a re-read that changes them commits meanwhile: the
    summary, stored with the unchanged content hash, must not count as current."""
    from edge_agent.store.summaries import SummaryStore
    from edge_agent.store.text_state import chunks_digest

    rt = make_runtime()
    docs = rt.documents
    doc_id = docs.add_text("notes", doc_text(3, 4)).document_id
    store = SummaryStore(rt.jobs.db)
    doc, chunks = store.document_text(doc_id)
    read = chunks_digest((c["text"], c["char_start"], c["char_end"]) for c in chunks)
    with rt.jobs.db.write() as conn:
        SummaryStore.save_effect(doc_id, "made from the text as it is", doc["content_hash"], "run_a", "b", "p", read)(conn)
    assert store.get_summary(doc_id)["content_hash"] == doc["content_hash"]
    other = chunks_digest([("the text as an older reader made it", 0, 36)])
    with rt.jobs.db.write() as conn:
        SummaryStore.save_effect(doc_id, "made from another text", doc["content_hash"], "run_b", "b", "p", other)(conn)
    got = store.get_summary(doc_id)
    assert (got["summary"], got["content_hash"]) == ("made from another text", STALE + doc["content_hash"])
    assert doc_id not in {d for d, v in store.current_summaries().items() if v[0] == doc["content_hash"]}


def test_a_renamed_file_an_older_reader_read_takes_its_summary_stale(make_runtime, tmp_path, old_html_reader, wordy_model,
                                                                     monkeypatch):
    """A rename in the same reindex as a reader upgrade: the new path is read by the new reader, the old document's
    summary (made from the footer-closed text) comes along, shown but stale, and the next summarize redoes it. A
    renamed file whose text is the same takes it current (test_jobs_kinds: a renamed file keeps its summary)."""
    from edge_agent.store.labels import LabelStore

    rt = make_runtime()
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    (shared / "zipfile.html").write_text(sphinx_page("zipfile", 4))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(shared)]})
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 8})
    _run(rt, "ri")
    assert _run(rt, "sum")[0].counts["succeeded"] == 1
    old = rt.documents.list(0, 10)[0][0]
    summary = rt.documents.get(old["id"])["summary"]
    assert LabelStore(rt.jobs.db).put(old["id"], "topic", "python", 0.9, "embedding", old["content_hash"])

    old_html_reader()
    _bump(monkeypatch, "html")
    (shared / "zipfile.html").rename(shared / "zipfile-3.13.html")
    run, _ = _run(rt, "ri")
    assert sorted(i.result["action"] for i in rt.jobs.results(run.id)[0]) == ["added", "removed"]
    new = rt.documents.list(0, 10)[0][0]
    got = rt.documents.get(new["id"])
    assert new["id"] != old["id"] and FOOTER not in _texts(rt.documents, new["id"])
    assert got["summary"]["summary"] == summary["summary"] and got["summary"]["content_hash"] == STALE + new["content_hash"]
    assert [(lb["label_set"], lb["label"]) for lb in got["labels"]] == [("topic", "python")]
    assert _label_hashes(rt.jobs.db, new["id"]) == {"topic": STALE + new["content_hash"]}
    run, done = _run(rt, "sum")
    assert set(done) == {f"doc:{new['id']}"}
    assert rt.documents.get(new["id"])["summary"]["content_hash"] == new["content_hash"]


def test_an_upload_read_again_in_the_background_compares_with_the_text_it_had(make_runtime, old_html_reader, monkeypatch):
    """A background upload removes the old chunks when it is recorded "processing": the text they had travels with
    it, so a page whose text changed gets its summary marked stale and a file whose text did not keeps it current."""
    from edge_agent.store.summaries import SummaryStore

    rt = make_runtime()
    docs = rt.documents
    page_bytes = sphinx_page("zipfile", 5).encode()
    notes_bytes = ("# Notes\n\n" + doc_text(6, 3)).encode()
    ids = {name: docs.add_upload(name, data).document_id for name, data in (("zipfile.html", page_bytes), ("notes.md", notes_bytes))}
    for doc_id in ids.values():
        doc = docs.get(doc_id)
        with rt.jobs.db.write() as conn:
            SummaryStore.save_effect(doc_id, f"summary of {doc['title']}", doc["content_hash"], "run_a", "b", "p")(conn)
    old_html_reader()
    _bump(monkeypatch, "html", "md")
    for name, data in (("zipfile.html", page_bytes), ("notes.md", notes_bytes)):
        assert docs.start_upload(name, data).status == "processing"
    deadline = time.monotonic() + 60
    while any(docs.store.get(i).status == "processing" for i in ids.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    page, notes = docs.get(ids["zipfile.html"]), docs.get(ids["notes.md"])
    assert page["status"] == notes["status"] == "ready" and FOOTER not in _texts(docs, page["id"])
    assert page["summary"]["summary"] == "summary of zipfile" and page["summary"]["content_hash"] == STALE + page["content_hash"]
    assert notes["summary"]["summary"] == "summary of Notes" and notes["summary"]["content_hash"] == notes["content_hash"]


def test_a_new_prompt_version_redoes_the_summaries_also_under_changed_only(make_runtime, wordy_model, monkeypatch):
    """Summaries stored under summarize-4 were checked for made-up addresses, not figures (5d8f1f0): the version was
    bumped so they are redone. A nightly changed_only job selected only documents changed since its last run, so a
    version bump left every old summary in place for good; now an outdated summary is selected too (once)."""
    import edge_agent.jobs.summarize as summarize

    rt = make_runtime()
    ids = [rt.documents.add_text(f"doc {i}", doc_text(i, 3)).document_id for i in range(3)]
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 8, "changed_only": True})
    run, _ = _run(rt, "sum")
    assert run.counts["succeeded"] == 3
    time.sleep(0.01)
    assert _run(rt, "sum")[0].total_items == 0  # nothing changed

    with rt.jobs.ctx.db.write() as conn:  # one summary as the release before the figure check stored it
        conn.execute("UPDATE document_summaries SET prompt_version = 'summarize-4' WHERE document_id = ?", (ids[1],))
    run, rows = _run(rt, "sum")
    assert run.total_items == 1 and set(rows) == {f"doc:{ids[1]}"}, sorted(rows)
    assert _run(rt, "sum")[0].total_items == 0  # redone once, then current

    monkeypatch.setattr(summarize, "PROMPT_VERSION", summarize.PROMPT_VERSION + "-next")  # any later bump
    run, rows = _run(rt, "sum")
    assert run.total_items == 3 and run.counts["succeeded"] == 3
    assert _run(rt, "sum")[0].total_items == 0


def test_a_failed_summary_is_tried_again_under_changed_only(make_runtime, monkeypatch):
    """A nightly changed_only job selected only documents changed since its last successful run, so a document whose
    item failed (an engine error, a run stopped early) and which did not change was never summarized again."""
    import edge_agent.jobs.summarize as summarize
    from edge_agent.jobs.kinds import ItemError

    rt = make_runtime()
    ids = [rt.documents.add_text(f"doc {i}", doc_text(i, 3)).document_id for i in range(3)]
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 8, "changed_only": True})
    real = summarize.SummaryPending.__init__

    def failing(self, item, params, ctx):
        if int(item.payload["document_id"]) == ids[1]:
            raise ItemError("the engine went away")
        real(self, item, params, ctx)

    monkeypatch.setattr(summarize.SummaryPending, "__init__", failing)
    run = rt.jobs.run_foreground("sum")
    assert run.counts["succeeded"] == 2 and run.counts["failed"] == 1
    monkeypatch.setattr(summarize.SummaryPending, "__init__", real)
    time.sleep(0.01)
    run, rows = _run(rt, "sum")
    assert set(rows) == {f"doc:{ids[1]}"} and run.counts["succeeded"] == 1  # only the one without a summary
    assert _run(rt, "sum")[0].total_items == 0
