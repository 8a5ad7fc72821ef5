"""A reindex item that blocks (a file read hanging on a network share, a slow loader) no longer holds its run: the item
runs in a thread of its own, so a cancel or the deadline ends the run, and the work it gave up on stores nothing when
it returns later; the next run takes the file up again."""
from __future__ import annotations

import threading
import time

import pytest

from jobs_helpers import doc_text


@pytest.mark.parametrize("stop", ["cancel", "deadline"])
def test_a_hanging_item_does_not_hold_its_run_and_stores_nothing_later(make_runtime, tmp_path, monkeypatch, stop):
    import edge_agent.services.documents as documents_module

    rt = make_runtime()
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    for name, n in (("a.txt", 1), ("slow.txt", 2), ("z.txt", 3)):
        (shared / name).write_text(doc_text(n, 2))
    entered, release, returned = threading.Event(), threading.Event(), threading.Event()
    real_load = documents_module.load_bytes

    def load_bytes(data, name, limits):  # the loader of slow.txt waits, as a read on a share that hangs does
        if name == "slow.txt" and not release.is_set():
            entered.set()
            release.wait(120)
            returned.set()
        return real_load(data, name, limits)

    monkeypatch.setattr(documents_module, "load_bytes", load_bytes)
    rt.jobs.create_job("ri", "reindex", {"folders": [str(shared)]})
    got: dict = {}
    overrides = {"max_duration_s": 3} if stop == "deadline" else None
    t = threading.Thread(target=lambda: got.update(run=rt.jobs.run_foreground("ri", overrides=overrides)), daemon=True)
    try:
        t.start()
        assert entered.wait(60), "the slow file was never read"
        t0 = time.monotonic()
        if stop == "cancel":
            run_id = rt.jobs.list_runs("ri")[0][0].id
            rt.jobs.cancel_run(run_id)
        t.join(30)
        assert not t.is_alive(), f"the run waited on the hanging item ({stop})"
        waited = time.monotonic() - t0
    finally:
        release.set()
    run = got["run"]
    if stop == "cancel":
        assert run.status == "cancelled" and waited < 5, (run.status, waited)
    else:
        assert run.status == "succeeded" and run.stop_reason == "deadline", (run.status, run.stop_reason)
    rows = {i.key.rsplit("/", 1)[-1]: i for i in rt.jobs.results(run.id)[0]}
    left = "cancelled" if stop == "cancel" else "pending"  # a deadline's items left go to the job's next run
    assert rows["a.txt"].status == "succeeded" and rows["slow.txt"].status == left, {k: i.status for k, i in rows.items()}

    # the read comes back after the run ended: its document is not stored, nor the run changed
    assert returned.wait(30)
    for th in threading.enumerate():  # the item threads (the slow one finishing its chunking and embedding)
        if th.name.startswith("reindex "):
            th.join(60)
            assert not th.is_alive()
    names = {d["path"].rsplit("/", 1)[-1] for d in rt.documents.list(0, 10)[0]}
    assert names == {"a.txt"}, names
    after = {i.key.rsplit("/", 1)[-1]: i.status for i in rt.jobs.results(run.id)[0]}
    assert rt.jobs.get_run(run.id).status == run.status and after["slow.txt"] == left

    # the next run reads it (the loader no longer waits)
    run2 = rt.jobs.run_foreground("ri")
    assert run2.status == "succeeded" and run2.counts["failed"] == 0
    actions = {i.key.rsplit("/", 1)[-1]: i.result["action"] for i in rt.jobs.results(run2.id)[0]}
    assert actions["slow.txt"] == "added" and actions["z.txt"] == "added" and actions.get("a.txt", "unchanged") == "unchanged"
    assert {d["path"].rsplit("/", 1)[-1] for d in rt.documents.list(0, 10)[0]} == {"a.txt", "slow.txt", "z.txt"}
