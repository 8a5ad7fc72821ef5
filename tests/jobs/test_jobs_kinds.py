"""summarize and reindex on small real data, through JobsService over the tiny real Llama and a real index."""
from __future__ import annotations

import time

import pytest

from jobs_helpers import doc_text
from edge_agent.jobs.prompts import PROMPT_VERSION


def _run(rt, job, timeout=120.0, **overrides):
    run = rt.jobs.run_foreground(job, overrides=overrides or None)
    assert run.status not in ("queued", "running")
    return run


def test_summarize_all_then_only_changed(make_runtime, wordy_model):
    rt = make_runtime()
    docs = rt.documents
    ids = [docs.add_text(f"doc {i}", doc_text(i, 3)).document_id for i in range(4)]
    long_id = docs.add_text("long", doc_text(99, 60)).document_id  # longer than the 512-token context
    job = rt.jobs.create_job("sum", "summarize", {"max_tokens": 12})

    run = _run(rt, "sum")
    assert run.status == "succeeded" and run.stop_reason is None
    assert run.counts == {"pending": 0, "succeeded": 5, "failed": 0, "skipped": 0, "cancelled": 0}
    items, total = rt.jobs.results(run.id)
    assert total == 5
    by_doc = {i.result["document_id"]: i for i in items}
    assert by_doc[long_id].result["sections"] > 1 and by_doc[long_id].result["stages"] >= 2  # map, then reduce
    assert all(by_doc[i].result["sections"] == 1 for i in ids)
    for i in items:
        assert i.result["summary"].strip() and i.bundle_id == rt.jobs.ctx.bundle_id and i.prompt_version == PROMPT_VERSION
        shown = docs.get(i.result["document_id"])["summary"]
        assert shown["summary"] == i.result["summary"] and shown["run_id"] == run.id
    assert run.generated_tokens > 0

    # nothing changed: current summaries are skipped
    assert _run(rt, "sum").total_items == 0
    # changed_only: only the document changed since the last successful run
    rt.jobs.update_job(job.id, {"params": {"max_tokens": 12, "changed_only": True, "force": True}})
    time.sleep(0.01)
    docs.add_text("doc 1", doc_text(1, 3) + " A new closing sentence about the harbour.")
    run3 = _run(rt, "sum")
    keys = [i.key for i in rt.jobs.results(run3.id)[0]]
    assert keys == [f"doc:{ids[1]}"]


def test_summarize_with_a_chat_template(make_runtime):
    """An instruction-tuned bundle gets the chat template (the user's text as one user turn), not the completion frame."""
    from edge_agent.services.prompts import PromptFormatter

    rt = make_runtime()
    chatml = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    rt.chat.formatter = PromptFormatter({"type": "chat", "template": chatml}, rt.chat.engine.tokenizer, 1, 2)
    rt.documents.add_text("one", doc_text(3, 3))
    rt.jobs.create_job("sum-chat", "summarize", {"max_tokens": 8})
    seen = []
    real_chat, real_complete = rt.chat.chat, rt.chat.complete
    rt.chat.chat = lambda msgs, *a, **k: seen.append(("chat", msgs)) or real_chat(msgs, *a, **k)
    rt.chat.complete = lambda *a, **k: seen.append(("complete", a)) or real_complete(*a, **k)
    run = _run(rt, "sum-chat")
    (item,), _ = rt.jobs.results(run.id)
    # the random tiny model may end its turn at once: then the item fails alone, saying so
    assert item.status == "succeeded" or item.error == "the model wrote an empty summary"
    assert run.status == "succeeded"
    assert seen and all(kind == "chat" for kind, _ in seen)
    assert seen[0][1][0]["role"] == "user" and "Summarize" in seen[0][1][0]["content"]
    assert doc_text(3, 3)[:60] in seen[0][1][0]["content"]


def test_summarize_filters_and_bad_params(make_runtime, tmp_path):
    from edge_agent.jobs.kinds import InvalidJobError

    rt = make_runtime()
    folder = tmp_path / "docs" / "reports"
    folder.mkdir(parents=True)
    (folder / "a.md").write_text(doc_text(5, 3))
    (tmp_path / "docs" / "b.txt").write_text(doc_text(6, 3))
    a = rt.documents.add_file(folder / "a.md").document_id
    rt.documents.add_file(tmp_path / "docs" / "b.txt")
    rt.documents.add_text("t", doc_text(7, 2))
    rt.jobs.create_job("reports", "summarize", {"path_prefix": str(folder.resolve()), "max_tokens": 8})
    run = _run(rt, "reports")
    assert [i.key for i in rt.jobs.results(run.id)[0]] == [f"doc:{a}"]
    rt.jobs.create_job("md", "summarize", {"types": ["md"], "max_tokens": 8, "force": True})
    assert [i.key for i in rt.jobs.results(_run(rt, "md").id)[0]] == [f"doc:{a}"]
    # a prefix relative to the ingest root, as the jobs and documents APIs show paths (was: "must be an absolute path")
    job = rt.jobs.create_job("reports-rel", "summarize", {"path_prefix": "reports", "max_tokens": 8, "force": True})
    assert job.params["path_prefix"] == str(folder.resolve())
    assert [i.key for i in rt.jobs.results(_run(rt, "reports-rel").id)[0]] == [f"doc:{a}"]
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "docs" / "link").symlink_to(outside, target_is_directory=True)
    for bad in ({"types": ["exe"]}, {"path_prefix": "../outside"}, {"path_prefix": "link"}, {"path_prefix": "a\x00b"},
                {"max_tokens": 0}, {"colour": 1}, {"force": "yes"}):
        with pytest.raises(InvalidJobError) as e:
            rt.jobs.create_job("bad", "summarize", bad)
        assert str(tmp_path) not in str(e.value)


def test_reindex_adds_updates_and_removes(make_runtime, tmp_path):
    from edge_agent.jobs.kinds import InvalidJobError

    rt = make_runtime()
    root = tmp_path / "docs"
    shared = root / "shared"
    shared.mkdir(parents=True)
    for n in range(3):
        (shared / f"f{n}.txt").write_text(doc_text(n, 2))
    rt.jobs.create_job("nightly-index", "reindex", {"folders": [str(shared)]})
    run = _run(rt, "nightly-index")
    assert run.status == "succeeded" and run.counts["succeeded"] == 3
    assert sorted(i.result["action"] for i in rt.jobs.results(run.id)[0]) == ["added"] * 3

    (shared / "f0.txt").write_text(doc_text(10, 2))  # changed
    (shared / "f1.txt").unlink()  # deleted
    (shared / "new.md").write_text(doc_text(11, 2))  # new
    (shared / "bad.pdf").write_bytes(b"%PDF-1.4 not really")  # unreadable: fails alone
    run2 = _run(rt, "nightly-index")
    actions = {i.key.split("/")[-1] if i.key.startswith("file:") else "remove": (i.status, (i.result or {}).get("action"))
               for i in rt.jobs.results(run2.id)[0]}
    assert actions["f0.txt"] == ("succeeded", "updated")
    assert actions["f2.txt"] == ("succeeded", "unchanged")
    assert actions["new.md"] == ("succeeded", "added")
    assert actions["remove"] == ("succeeded", "removed")
    assert actions["bad.pdf"][0] == "failed"
    assert run2.status == "succeeded" and run2.counts["failed"] == 1  # one bad file never fails the run
    paths = {d["path"] for d in rt.documents.list(0, 100)[0] if d["status"] == "ready"}
    assert {p.rsplit("/", 1)[-1] for p in paths} == {"f0.txt", "f2.txt", "new.md"}

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for folders in ([str(outside)], ["/etc"], [str(root / "missing")], [], ["../docs"]):
        with pytest.raises(InvalidJobError):
            rt.jobs.create_job("bad-index", "reindex", {"folders": folders})


def test_reindex_keeps_the_documents_of_a_folder_that_lists_no_file(make_runtime, tmp_path):
    """A network share that did not mount at 01:00 is an empty folder: the reindex removed every document indexed from it
    (their summaries and labels with them) and re-embedded all of them the next night. A folder with no file keeps its
    documents, and an item says why, until the job is run with remove_deleted "all"; a folder with files left still
    loses the documents of the files that went."""
    rt = make_runtime()
    share = tmp_path / "docs" / "share"
    other = tmp_path / "docs" / "other"
    for folder in (share, other):
        folder.mkdir(parents=True)
        for n in range(2):
            (folder / f"f{n}.txt").write_text(doc_text(n + (10 if folder == other else 0), 2))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(share), str(other)]})
    assert _run(rt, "ri").counts["succeeded"] == 4
    for f in share.iterdir():
        f.unlink()  # as the empty mount point looks
    (other / "f1.txt").unlink()
    run = _run(rt, "ri")
    rows = {i.key: i for i in rt.jobs.results(run.id)[0]}
    assert run.status == "succeeded" and run.counts["failed"] == 1, {k: (i.status, i.error) for k, i in rows.items()}
    refused = rows[f"folder:{share.relative_to(tmp_path / 'docs')}"]
    assert refused.status == "failed" and "has no files, but 2 documents are indexed from it" in refused.error
    assert str(tmp_path) not in refused.error
    indexed = sorted(d["path"].rsplit("/", 2)[-2] + "/" + d["path"].rsplit("/", 1)[-1] for d in rt.documents.list(0, 10)[0])
    assert indexed == ["other/f0.txt", "share/f0.txt", "share/f1.txt"]  # other/f1.txt went, the share's stayed

    rt.jobs.update_job("ri", {"params": {"folders": [str(share), str(other)], "remove_deleted": "all"}})
    run = _run(rt, "ri")
    assert run.counts["failed"] == 0 and [d["path"].rsplit("/", 1)[-1] for d in rt.documents.list(0, 10)[0]] == ["f0.txt"]


def test_reindex_keeps_the_documents_of_an_emptied_folder_under_a_watched_one(make_runtime, tmp_path):
    """A share mounted on a folder under the watched one that did not mount is an empty folder there: its documents
    were removed (the guard looked at the watched folder only, which still lists other files). Now a gone file's
    document is kept while the nearest folder above it that exists lists no file; a file deleted, or a folder deleted
    with its files, is still removed."""
    import shutil

    rt = make_runtime()
    watched = tmp_path / "docs" / "shared"
    share, local, gone = watched / "share", watched / "local", watched / "gone"
    for folder in (share / "sub", local, gone):
        folder.mkdir(parents=True)
    files = [watched / "top.txt", share / "s0.txt", share / "sub" / "s1.txt", local / "keep.txt", local / "old.txt",
             gone / "g.txt"]
    for n, f in enumerate(files):
        f.write_text(doc_text(n, 2))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(watched)]})
    assert _run(rt, "ri").counts["succeeded"] == len(files)
    shutil.rmtree(share)
    share.mkdir()  # the mount point, empty: the share did not mount
    (local / "old.txt").unlink()
    shutil.rmtree(gone)
    run = _run(rt, "ri")
    rows = {i.key: i for i in rt.jobs.results(run.id)[0]}
    refused = rows.get("folder:shared/share")
    assert refused is not None and refused.status == "failed", {k: (i.status, i.error) for k, i in rows.items()}
    assert "has no files, but 2 documents are indexed from it" in refused.error and str(tmp_path) not in refused.error
    assert run.counts["failed"] == 1 and sum(k.startswith("remove:") for k in rows) == 2
    indexed = sorted(d["path"].split("/shared/", 1)[1] for d in rt.documents.list(0, 20)[0])
    assert indexed == ["local/keep.txt", "share/s0.txt", "share/sub/s1.txt", "top.txt"]

    rt.jobs.update_job("ri", {"params": {"folders": [str(watched)], "remove_deleted": "all"}})
    assert _run(rt, "ri").counts["failed"] == 0
    assert sorted(d["path"].split("/shared/", 1)[1] for d in rt.documents.list(0, 20)[0]) == ["local/keep.txt", "top.txt"]


def test_reindex_picks_up_office_files(make_runtime, tmp_path):
    """.xlsx, .pptx, .odt, .ods, .odp and .rtf in a folder are indexed by the nightly reindex (they failed with advice
    to convert them before); an old .xls still fails alone, saying what to save it as."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rag"))
    from office_docs import make_ods, make_odp, make_odt, make_pptx, make_rtf, make_xlsx

    rt = make_runtime()
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    files = {
        "budget.xlsx": make_xlsx({"Budget": [["Item", "Amount"], ["Rent", 1250]]}),
        "plan.pptx": make_pptx([{"title": "Plan", "notes": "Start in May"}]),
        "nota.odt": make_odt([("h1", "Kosten"), ("p", "De kosten stijgen.")]),
        "tabel.ods": make_ods({"Blad1": [["Post", "Bedrag"], ["Huur", (1250, "1.250,00")]]}),
        "raad.odp": make_odp([{"title": "Besluiten"}]),
        "brief.rtf": make_rtf(["Geachte heer, uw aanvraag is ontvangen."]),
        "oud.xls": b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600,
    }
    for name, data in files.items():
        (shared / name).write_bytes(data)
    rt.jobs.create_job("office", "reindex", {"folders": [str(shared)]})
    run = _run(rt, "office")
    rows = {i.key.rsplit("/", 1)[-1]: i for i in rt.jobs.results(run.id)[0]}
    for name in files:
        if name != "oud.xls":
            assert (rows[name].status, rows[name].result["action"]) == ("succeeded", "added"), (name, rows[name].error)
    assert rows["oud.xls"].status == "failed" and "save it as .xlsx" in rows["oud.xls"].error
    kinds = {d["path"].rsplit("/", 1)[-1]: d["kind"] for d in rt.documents.list(0, 100)[0] if d["status"] == "ready"}
    assert kinds == {"budget.xlsx": "xlsx", "plan.pptx": "pptx", "nota.odt": "odt", "tabel.ods": "ods", "raad.odp": "odp",
                     "brief.rtf": "rtf"}
    assert _run(rt, "office").counts["failed"] == 1  # the next night: the office files unchanged, the .xls again


def test_reindex_skips_file_names_with_control_or_bidi_characters(make_runtime, tmp_path):
    """Uploads refuse a name with a control or bidi-override character (a 400); a file on disk so named was indexed
    as is ("Factuur <RLO>txt.exe" listed as "Factuur exe.txt"). Now each such file fails alone, saying why; the
    rest of the folder is indexed and the run succeeds."""
    import os

    rt = make_runtime()
    shared = tmp_path / "docs" / "shared"
    (shared / "sub\u2067dir").mkdir(parents=True)
    names = {"ok.txt": None, "Factuur \u202etxt.exe": "U+202E", "two\nlines.txt": "U+000A", "tab\there.md": "U+0009",
             "sub\u2067dir/inner.txt": "U+2067"}
    for i, name in enumerate(names):
        (shared / name).write_text(doc_text(20 + i, 2))
    raw = os.fsencode(shared) + b"/latin1-\xe9t\xe9.txt"  # not UTF-8: a surrogate in the str name
    with open(raw, "wb") as f:
        f.write(doc_text(30, 2).encode())
    rt.jobs.create_job("ri", "reindex", {"folders": [str(shared)]})
    run = _run(rt, "ri")
    assert run.status == "succeeded" and run.counts["succeeded"] == 1 and run.counts["failed"] == 5, run
    errors = {i.key.split("/shared/", 1)[-1]: i.error for i in rt.jobs.results(run.id)[0] if i.status == "failed"}
    # keys show the characters escaped (a name not UTF-8 could not be stored at all: the run failed at listing)
    assert set(errors) == {"Factuur \\u202etxt.exe", "two\\nlines.txt", "tab\\there.md", "sub\\u2067dir/inner.txt",
                           "latin1-\\xe9t\\xe9.txt"}, errors
    for key, code in zip(sorted(errors), ["U+202E", "not UTF-8", "U+2067", "U+0009", "U+000A"]):
        assert code in errors[key] and "file name" in errors[key] and "rename" in errors[key], (key, errors[key])
    listed = [d["path"] for d in rt.documents.list(0, 100)[0]]
    assert [p.rsplit("/", 1)[-1] for p in listed] == ["ok.txt"], listed  # nothing stored for the refused ones
    with pytest.raises(Exception) as e:  # adding one by path is refused as an upload of that name is
        rt.documents.add_file(shared / "Factuur \u202etxt.exe")
    assert getattr(e.value, "param", None) == "path" and "U+202E" in str(e.value)


def test_reindex_from_a_second_process_says_the_daemon_owns_the_index(make_runtime, tmp_path, embedder):
    """A read-only document service (another process owns the index) fails the run with what to do instead."""
    from edge_agent.services.documents import DocumentService

    rt = make_runtime()
    (tmp_path / "docs" / "x.txt").write_text("some text to index")
    ro = DocumentService.from_settings(rt.settings, embedder=embedder, read_only=True)
    rt.jobs.ctx.documents = lambda: ro
    rt.jobs.create_job("ri", "reindex", {"folders": [str(tmp_path / "docs")]})
    run = _run(rt, "ri")
    assert run.status == "failed" and "owns the document index" in run.error and "POST /v1/jobs" in run.error


def test_reindex_skips_binary_under_a_text_name_and_an_empty_file_until_it_has_text(make_runtime, tmp_path):
    """A PNG named .html was indexed as one chunk of garbage, and an empty .html failed again every night: both are
    skipped, saying why, every run, and the empty one is added once it has text."""
    import zlib

    rt = make_runtime()
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    png = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde"
           + b"\x00\x00\x00\x0cIDAT" + zlib.compress(b"\x00\xff\x00\x00") + b"\x00\x00\x00\x00IEND\xaeB`\x82")
    (shared / "photo.html").write_bytes(png)
    (shared / "noise.txt").write_bytes(bytes(range(1, 8)) * 300)  # control bytes, no NUL, no signature
    (shared / "later.html").write_bytes(b"")
    (shared / "page.html").write_text(f"<html><body><p>{doc_text(3, 2)}</p></body></html>")
    rt.jobs.create_job("ri", "reindex", {"folders": [str(shared)]})
    for night in range(2):
        run = _run(rt, "ri")
        rows = {i.key.rsplit("/", 1)[-1]: i for i in rt.jobs.results(run.id)[0]}
        assert run.counts["failed"] == 0, {k: i.error for k, i in rows.items()}
        for name, why in (("photo.html", "not a html file: it is a PNG image"), ("noise.txt", "not a txt file: it looks binary"),
                          ("later.html", "empty")):
            assert rows[name].status == "succeeded" and rows[name].result["action"] == "skipped", rows[name]
            assert rows[name].result["reason"].startswith(why), rows[name].result
        assert rows["page.html"].result["action"] == ("added" if night == 0 else "unchanged")
    indexed = {d["path"].rsplit("/", 1)[-1]: d["status"] for d in rt.documents.list(0, 100)[0]}
    assert indexed == {"page.html": "ready"}  # no garbage chunk, no failed record

    (shared / "later.html").write_text(f"<p>{doc_text(4, 2)}</p>")
    run = _run(rt, "ri")
    rows = {i.key.rsplit("/", 1)[-1]: i for i in rt.jobs.results(run.id)[0]}
    assert rows["later.html"].result["action"] == "added"


def test_reindex_skips_a_named_pipe_or_socket_instead_of_waiting_on_it(make_runtime, tmp_path, monkeypatch):
    """A named pipe (FIFO) in a watched folder stopped the nightly reindex for good: opening it waits for a writer, so
    the run stayed "running" with nothing committed and a cancel could not stop it. Pipes and sockets are skipped,
    saying why, the other files indexed; adding one by path fails with the same reason instead of hanging."""
    import os
    import socket
    import threading

    from edge_agent.services.paths import NOT_REGULAR

    rt = make_runtime()
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    (shared / "a.txt").write_text(doc_text(1, 2))
    os.mkfifo(shared / "pipe.txt")
    monkeypatch.chdir(shared)  # a socket's path must be short: bound relative to its folder
    sock = socket.socket(socket.AF_UNIX)
    sock.bind("s.md")
    rt.jobs.create_job("ri", "reindex", {"folders": [str(shared)]})
    got: dict = {}
    t = threading.Thread(target=lambda: got.update(run=rt.jobs.run_foreground("ri")), daemon=True)
    try:
        t.start()
        t.join(120)
        if t.is_alive():
            with open(shared / "pipe.txt", "wb"):  # the reader waits for a writer: be one, so the thread ends
                pass
            t.join(30)
            pytest.fail("the reindex waited on the named pipe")
        run = got["run"]
        rows = {i.key.rsplit("/", 1)[-1]: i for i in rt.jobs.results(run.id)[0]}
        assert run.status == "succeeded" and run.counts["failed"] == 0, {k: i.error for k, i in rows.items()}
        assert rows["a.txt"].result["action"] == "added"
        for name in ("pipe.txt", "s.md"):
            assert rows[name].result["action"] == "skipped" and rows[name].result["reason"] == NOT_REGULAR, rows[name]
        res = rt.documents.add_file(shared / "pipe.txt")
        assert res.status == "failed" and res.error == NOT_REGULAR
    finally:
        sock.close()


def test_the_loader_refuses_binary_under_a_text_name_saying_why():
    """The same check guards uploads and folder ingestion: a PNG named .html is refused, not indexed as garbage."""
    from edge_agent.rag.loaders import LoaderError, load_bytes

    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4
    with pytest.raises(LoaderError, match="not a html file: it is a PNG image"):
        load_bytes(png, "photo.html")
    legacy = "Café crème à la française, déjà vu.\n".encode("cp1252") * 50  # 8-bit text still loads
    assert "crème" in load_bytes(legacy, "menu.txt").sections[0].text


def test_a_renamed_file_keeps_its_summary_and_labels(make_runtime, tmp_path, wordy_model):
    """A rename was an add plus a remove: the summary and labels went with the removed document until the next
    summarize and classify runs. A file added with the content of an indexed document takes them over."""
    from edge_agent.store.labels import LabelStore

    rt = make_runtime()
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    (shared / "report.txt").write_text(doc_text(7, 3))
    (shared / "other.txt").write_text(doc_text(8, 3))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(shared)]})
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 8})
    _run(rt, "ri")
    assert _run(rt, "sum").counts["succeeded"] == 2
    old = next(d for d in rt.documents.list(0, 10)[0] if d["path"].endswith("report.txt"))
    summary = rt.documents.get(old["id"])["summary"]
    assert summary and LabelStore(rt.jobs.db).put(old["id"], "topic", "finance", 0.9, "embedding", old["content_hash"])

    (shared / "report.txt").rename(shared / "report-2026.txt")
    (shared / "other.txt").write_text(doc_text(9, 3))  # changed content: its old summary is not current, nothing carried
    run = _run(rt, "ri")
    actions = sorted((i.result or {}).get("action") for i in rt.jobs.results(run.id)[0])
    assert actions == ["added", "removed", "updated"], actions
    new = next(d for d in rt.documents.list(0, 10)[0] if d["path"].endswith("report-2026.txt"))
    got = rt.documents.get(new["id"])
    assert got["summary"]["summary"] == summary["summary"] and got["summary"]["content_hash"] == new["content_hash"]
    assert [(lb["label_set"], lb["label"]) for lb in got["labels"]] == [("topic", "finance")]
    assert _run(rt, "sum").total_items == 1  # only the changed file: the renamed one's summary is current


def test_background_work_has_no_request_time_limit(make_runtime, wordy_model):
    """request_timeout_s bounds a generation someone waits on, not a job's: a nightly summarize whose sections queue
    behind each other (and behind users) longer than the limit used to fail its items "past the request time limit"."""
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.errors import GenerationTimeoutError

    rt = make_runtime(request_timeout_s=0.001)  # no generation of this model finishes within a millisecond
    with pytest.raises(GenerationTimeoutError):  # a user's request still has the limit
        rt.chat.complete(["The river near the harbour"], SamplingOptions(max_tokens=16, temperature=0.0)).collect()
    ids = [rt.documents.add_text(f"doc {i}", doc_text(i, 3)).document_id for i in range(3)]
    ids.append(rt.documents.add_text("long", doc_text(98, 60)).document_id)  # sections queued together, then a reduce
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 12})
    run = _run(rt, "sum")
    assert run.status == "succeeded" and run.counts["succeeded"] == 4, [i.error for i in rt.jobs.results(run.id)[0]]
    assert all(rt.documents.get(i)["summary"]["summary"] for i in ids)
