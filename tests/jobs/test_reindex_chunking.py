"""A changed chunk_tokens (or chunk_overlap) re-chunks the documents: the parameters the index was cut with are recorded
(index_meta), and a writer that opens it with other ones makes every document read by an older reader, so the coming
reindex runs read them again (at most reread_limit a run) and cut them anew; `index stats` and doctor say how many wait.
Before, a changed chunk_tokens re-chunked nothing: only new and changed files got the new size. A re-chunk keeps the
text, so the documents' labels (and summaries) stay current: no classify or summarize run redoes them."""
from __future__ import annotations

from jobs_helpers import doc_text


def _run(rt, job: str):
    run = rt.jobs.run_foreground(job)
    assert run.status == "succeeded", run.error
    return {i.key.rsplit("/", 1)[-1]: i.result for i in rt.jobs.results(run.id)[0]}


def _label_hashes(docs) -> dict[int, str]:
    with docs.store.db.read() as conn:
        return {r[0]: r[1] for r in conn.execute("SELECT document_id, content_hash FROM document_labels")}


def _sizes(docs, doc_id: int) -> list[int]:
    return [c.token_count for c in docs.store.chunks_of(doc_id)]


def test_a_changed_chunk_size_rechunks_every_document_over_the_coming_reindex_runs(make_runtime, tmp_path, tiny_bundles):
    from edge_agent.cli.index import stats_lines
    from edge_agent.services.documents import DocumentService
    from jobs_helpers import job_settings

    rt = make_runtime(chunk_tokens=120, chunk_overlap=10)
    docs = rt.documents
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    for n in range(3):
        (shared / f"d{n}.txt").write_text(doc_text(n, 24))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(shared)], "reread_limit": 2})
    ids = {k: r["document_id"] for k, r in _run(rt, "ri").items()}
    before = {k: _sizes(docs, i) for k, i in ids.items()}
    assert all(len(s) >= 2 and max(s) > 60 for s in before.values()), before
    assert docs.stats()["reader"]["chunking"]["recorded"] == {"chunk_tokens": 120, "chunk_overlap": 10}
    rt.jobs.create_job("cls", "classify", {"labels": ["harbour", "orchard"], "method": "embedding", "self_train": False})
    assert rt.jobs.run_foreground("cls").counts["succeeded"] == 3
    assert _label_hashes(docs) == {i: docs.store.get(i).content_hash for i in ids.values()}

    # a read-only view with other settings (doctor, `index stats` beside the daemon) says what they would do, and
    # changes nothing
    view = DocumentService.from_settings(job_settings(tiny_bundles, tmp_path, chunk_tokens=48, chunk_overlap=10),
                                         embedder=docs.embedder, read_only=True)
    try:
        reader = view.stats()["reader"]
        assert reader["outdated_files"] == 0 and reader["chunking"]["pending_if_opened"] == 3
        shown = "\n".join(stats_lines(view.stats()))
        assert ("chunking: these settings cut chunks with chunk_tokens 48, chunk_overlap 10, the index was cut with "
                "chunk_tokens 120, chunk_overlap 10: the daemon or an `edge-agent index` command started with them marks "
                "3 documents to be read again and re-chunked") in shown, shown
    finally:
        view.close()
    assert docs.stats()["reader"]["outdated_files"] == 0

    rt = make_runtime(chunk_tokens=48, chunk_overlap=10)  # the daemon restarted with a smaller chunk_tokens
    docs = rt.documents
    reader = docs.stats()["reader"]
    assert reader["outdated_files"] == 3 and reader["chunking"]["before"] == {"chunk_tokens": 120, "chunk_overlap": 10}
    shown = "\n".join(stats_lines(docs.stats()))
    assert "reader: 3 documents read by an older reader (txt 3): the next reindex reads them again" in shown, shown
    assert ("chunking: changed from chunk_tokens 120, chunk_overlap 10 to chunk_tokens 48, chunk_overlap 10: the documents "
            "read by an older reader above include those not cut anew yet") in shown, shown

    rows = _run(rt, "ri")
    assert sorted((r["action"], r.get("reread"), r.get("text")) for r in rows.values()) == [
        ("unchanged", "later", None), ("updated", "done", "same"), ("updated", "done", "same")]
    for k, r in rows.items():
        sizes = _sizes(docs, ids[k])
        if r["action"] == "updated":
            assert max(sizes) <= 48 and len(sizes) > len(before[k]), (k, sizes)
        else:
            assert sizes == before[k]
    assert docs.stats()["reader"]["outdated_files"] == 1
    assert _label_hashes(docs) == {i: docs.store.get(i).content_hash for i in ids.values()}  # cut anew, labels current

    rows = _run(rt, "ri")
    assert sorted(r["action"] for r in rows.values()) == ["unchanged", "unchanged", "updated"]
    assert all(max(_sizes(docs, i)) <= 48 for i in ids.values())
    assert docs.stats()["reader"]["outdated_files"] == 0
    assert "chunking:" not in "\n".join(stats_lines(docs.stats()))

    rt = make_runtime(chunk_tokens=48, chunk_overlap=10)  # the same settings again: nothing to re-read
    assert rt.documents.stats()["reader"]["outdated_files"] == 0
    assert {r["action"] for r in _run(rt, "ri").values()} == {"unchanged"}
