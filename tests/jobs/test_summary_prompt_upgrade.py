"""summarize-5 changed a check, not a prompt: every summary stored under summarize-4 was made again (27 s a document on
2 shared cores) though greedy decoding with the same bundle writes the same answer. A summarize-4 summary of the same
bundle and content that passes the current checks is now kept (its row marked current under summarize-5, its text, run
and time kept; the item's result says where it came from); one the current checks refuse, another bundle's, or an
older version's is made again."""
from __future__ import annotations

from jobs_helpers import doc_text


def _rows(rt, run_id) -> dict:
    return {int(i.key.split(":")[1]): i for i in rt.jobs.results(run_id)[0]}


def _summaries(db) -> dict[int, dict]:
    with db.read() as conn:
        return {r["document_id"]: dict(r) for r in conn.execute("SELECT * FROM document_summaries")}


def test_summaries_of_a_version_with_the_same_prompts_are_kept_when_they_pass_the_current_checks(
        make_runtime, tmp_path, wordy_model):
    from edge_agent.jobs.prompts import PROMPT_VERSION, SAME_PROMPTS

    rt = make_runtime()
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    for n in range(4):
        (shared / f"d{n}.txt").write_text(doc_text(n, 3))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(shared)]})
    assert rt.jobs.run_foreground("ri").counts["succeeded"] == 4
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 24})
    first = rt.jobs.run_foreground("sum")
    assert first.counts["succeeded"] == 4, first.counts
    before = _summaries(rt.db)
    keep, invented, other_bundle, older = sorted(before)
    assert before[keep]["method"] in ("whole", "extract"), before[keep]
    old = SAME_PROMPTS[0]
    with rt.db.write() as conn:  # as summarize-4 stored them (its prompts were summarize-5's)
        conn.execute("UPDATE document_summaries SET prompt_version = ?", (old,))
        conn.execute("UPDATE document_summaries SET summary = ?, method = 'whole' WHERE document_id = ?",
                     ("The harbour ledger was closed with 987654 euro in the river archive.", invented))
        conn.execute("UPDATE document_summaries SET bundle_id = 'another-bundle' WHERE document_id = ?", (other_bundle,))
        conn.execute("UPDATE document_summaries SET prompt_version = 'summarize-3' WHERE document_id = ?", (older,))

    second = rt.jobs.run_foreground("sum")
    assert second.status == "succeeded" and second.counts["succeeded"] == 4, second.counts
    rows, after = _rows(rt, second.id), _summaries(rt.db)
    kept = rows[keep].result
    assert kept["kept"] == {"prompt_version": old, "run_id": first.id} and kept["usage"]["generations"] == 0, kept
    assert rows[keep].prompt_version == PROMPT_VERSION and rows[keep].bundle_id == rt.jobs.ctx.bundle_id
    assert after[keep]["summary"] == before[keep]["summary"] and after[keep]["prompt_version"] == PROMPT_VERSION
    assert after[keep]["run_id"] == first.id and after[keep]["created_at"] == before[keep]["created_at"]  # who made it
    for redone in (invented, other_bundle, older):
        res = rows[redone].result
        assert "kept" not in res and res["usage"]["generations"] >= 1, res
        assert after[redone]["run_id"] == second.id and after[redone]["prompt_version"] == PROMPT_VERSION
    assert "987654" not in after[invented]["summary"]

    third = rt.jobs.run_foreground("sum")  # all current now: nothing selected
    assert third.total_items == 0, third.counts
