"""Run control: a missed schedule runs once, deadlines and max_items stop and carry over, a dead owner's run resumes."""
from __future__ import annotations

import time

from jobs_helpers import doc_text


def _docs(rt, n: int, sentences: int = 3) -> list[int]:
    return [rt.documents.add_text(f"doc {i}", doc_text(i, sentences)).document_id for i in range(n)]


def test_missed_schedule_runs_once_at_start_up(make_runtime, caplog):
    """... and the journal says so, by the job's name: it said only "run run_... succeeded: {counts}", so an operator
    could not tell which job ran, or why a nightly job ran at 08:14."""
    import logging

    caplog.set_level(logging.INFO, logger="edge_agent.jobs")
    rt = make_runtime()
    _docs(rt, 2)
    job = rt.jobs.create_job("nightly", "summarize", {"max_tokens": 8}, {"cron": "0 2 * * *", "timezone": "Europe/Amsterdam"})
    # the machine was off for three nights: the stored next run lies three days back
    rt.jobs.store.update_job(job.id, next_run_at=time.time() - 3 * 86400)
    rt.jobs.start()
    end = time.monotonic() + 30
    while time.monotonic() < end:
        runs, total = rt.jobs.list_runs("nightly")
        if runs and runs[0].status == "succeeded":
            break
        time.sleep(0.05)
    time.sleep(1.5)  # more cron ticks: nothing else is due
    runs, total = rt.jobs.list_runs("nightly")
    assert total == 1 and runs[0].trigger == "schedule" and runs[0].status == "succeeded"
    nxt = rt.jobs.get_job("nightly").next_run_at
    assert time.time() < nxt <= time.time() + 86400 + 3600  # the next 02:00 in Amsterdam
    assert rt.jobs.tick(time.time()) == []
    lines = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("job nightly was due at ") and "it runs now, once" in m for m in lines), lines
    assert f"starting run {runs[0].id} of job nightly (schedule)" in lines, lines
    assert any(m.startswith(f"run {runs[0].id} of job nightly succeeded in ") for m in lines), lines


def test_tick_is_a_compare_and_set(make_runtime):
    """Two processes ticking at the same moment start the due run once."""
    from edge_agent.jobs.service import JobsService

    rt = make_runtime()
    job = rt.jobs.create_job("every-minute", "summarize", {}, {"cron": "* * * * *"})
    rt.jobs.store.update_job(job.id, next_run_at=time.time() - 5)
    other = JobsService(rt.settings, rt.jobs.db, rt.chat, None, lambda: rt.documents)
    stale = rt.jobs.store.get_job(job.id)
    started = rt.jobs.tick(time.time())
    rt.jobs.store.update_job(job.id, next_run_at=stale.next_run_at)  # the other process read the old value
    rt.jobs.store.claim_schedule(job.id, stale.next_run_at, time.time() + 60)  # ...but the first moved it already
    assert len(started) == 1 and other.tick(time.time()) == []


def test_deadline_stops_and_the_next_run_resumes(make_runtime, wordy_model):
    rt = make_runtime()
    ids = _docs(rt, 16)
    rt.jobs.create_job("slow", "summarize", {"max_tokens": 100}, limits={"concurrency": 8})
    first = rt.jobs.run_foreground("slow", overrides={"deadline": time.time() + 0.3, "concurrency": 1})
    assert first.status == "succeeded" and first.stop_reason == "deadline" and first.concurrency == 1
    assert first.counts["pending"] > 0 and first.total_items == 16
    done_first = {i.key for i in rt.jobs.results(first.id)[0] if i.status in ("succeeded", "failed")}
    assert rt.jobs.get_job("slow").last_success_at is None  # an incomplete run is no "last success"

    second = rt.jobs.run_foreground("slow")
    assert second.status == "succeeded" and second.stop_reason is None and second.carried_from == first.id
    second_items = rt.jobs.results(second.id)[0]
    done_second = {i.key for i in second_items if i.status in ("succeeded", "failed")}
    assert done_first.isdisjoint(done_second), second_items
    assert done_first | done_second == {f"doc:{i}" for i in ids}, second_items
    left = rt.jobs.results(first.id)[0]
    assert {i.status for i in left} <= {"succeeded", "skipped"}  # carried items are marked in the first run
    assert rt.jobs.get_job("slow").last_success_at == second.started_at


def test_max_items_then_the_rest(make_runtime, wordy_model):
    rt = make_runtime()
    _docs(rt, 5)
    rt.jobs.create_job("capped", "summarize", {"max_tokens": 8}, limits={"max_items": 2})
    first = rt.jobs.run_foreground("capped")
    assert first.stop_reason == "max_items" and first.counts["succeeded"] == 2 and first.counts["pending"] == 3
    rt.jobs.update_job("capped", {"limits": {}})
    second = rt.jobs.run_foreground("capped")
    assert second.counts["succeeded"] == 3 and second.stop_reason is None


def test_a_run_left_by_a_dead_process_is_resumed_with_only_the_items_not_done(make_runtime, wordy_model):
    rt = make_runtime()
    ids = _docs(rt, 6)
    job = rt.jobs.create_job("resume", "summarize", {"max_tokens": 8})
    run = rt.jobs.start_run(job.id)
    dead = "somehost-that-is-not-this:1:x"
    store = rt.jobs.store
    assert store.claim_run(run.id, dead, stale_s=30)
    store.start_items(run.id, dead, [(f"doc:{i}", {"document_id": i, "title": "", "content_hash": ""}) for i in ids], "b", "p")
    # the dead process committed two items before it died
    for i in ids[:2]:
        assert store.commit_item(run.id, f"doc:{i}", "succeeded", {"summary": "earlier"}, None, "b", "p", time.time())
    assert not store.commit_item(run.id, f"doc:{ids[0]}", "succeeded", {"summary": "twice"}, None, "b", "p", time.time())
    with store.db.write() as conn:
        conn.execute("UPDATE job_runs SET heartbeat_at = ? WHERE id = ?", (time.time() - 60, run.id))
    rt.jobs.start()
    final = rt.jobs.wait_run(run.id, 60)
    assert final.status == "succeeded" and final.resumes == 1 and final.counts["succeeded"] == 6
    items = {i.key: i for i in rt.jobs.results(run.id)[0]}
    assert items[f"doc:{ids[0]}"].result == {"summary": "earlier"}  # not run again
    assert all(items[f"doc:{i}"].result["summary"] != "earlier" for i in ids[2:])


def test_cancelling_a_run_no_living_process_holds_ends_it_at_once(make_runtime):
    """`jobs cancel` of a run whose process died said "the process running it stops it within seconds", and the run
    stayed running until some later start finished it: one that no living process holds ends cancelled at once."""
    import os
    import socket

    rt = make_runtime()
    ids = _docs(rt, 3)
    job = rt.jobs.create_job("orphan", "summarize", {"max_tokens": 8})
    run = rt.jobs.start_run(job.id)
    dead = f"{socket.gethostname()}:{2 ** 22 + 7}:x"  # this host, a pid above pid_max's default: no such process
    assert not os.path.exists(f"/proc/{2 ** 22 + 7}")
    store = rt.jobs.store
    assert store.claim_run(run.id, dead, stale_s=30)
    store.start_items(run.id, dead, [(f"doc:{i}", {"document_id": i, "title": "", "content_hash": ""}) for i in ids], "b", "p")
    assert store.commit_item(run.id, f"doc:{ids[0]}", "succeeded", {"summary": "earlier"}, None, "b", "p", time.time())
    got = rt.jobs.cancel_run(run.id)
    assert got.status == "cancelled" and got.counts == {"pending": 0, "succeeded": 1, "failed": 0, "skipped": 0, "cancelled": 2}

    held = rt.jobs.start_run(job.id)  # one a living process holds (this one, as another would) is only asked to stop
    assert store.claim_run(held.id, rt.jobs.owner, stale_s=30)
    assert rt.jobs.cancel_run(held.id).status == "queued" and rt.jobs.get_run(held.id).cancel_requested


def test_jobs_from_the_config_are_synced_and_a_bad_one_is_skipped(make_runtime, caplog):
    jobs = [
        {"name": "nightly", "kind": "summarize", "schedule": "0 2 * * *", "timezone": "Europe/Amsterdam",
         "params": {"changed_only": True}, "limits": {"deadline": "06:00"}},
        {"name": "broken", "kind": "summarize", "schedule": "every night"},
    ]
    rt = make_runtime(jobs=jobs)
    rt.jobs.sync_config_jobs()
    names = {j.name: j for j in rt.jobs.list_jobs()}
    assert set(names) == {"nightly"} and names["nightly"].source == "config"
    assert names["nightly"].params["changed_only"] is True and names["nightly"].next_run_at is not None
    assert "broken" in caplog.text and "bad cron expression" in caplog.text
    # removed from the config: removed from the database; an API job of the same name is left alone
    rt.jobs.settings.jobs = []
    rt.jobs.create_job("mine", "summarize")
    rt.jobs.sync_config_jobs()
    assert [j.name for j in rt.jobs.list_jobs()] == ["mine"]


def test_an_item_in_flight_at_process_deaths_runs_alone_then_is_failed_not_retried_forever(make_runtime, wordy_model):
    """An item the daemon keeps dying on (native crash, OOM killer) must not stop every restart:
    starts are recorded before the work, a dead process leaves them counted; a suspect runs alone,
    and one found with POISON_STARTS unfinished starts is failed with the reason."""
    from edge_agent.jobs.runner import POISON_STARTS

    rt = make_runtime()
    ids = _docs(rt, 7)
    job = rt.jobs.create_job("poison", "summarize", {"max_tokens": 24}, limits={"concurrency": 4})
    run = rt.jobs.start_run(job.id)
    dead = "somehost-that-is-not-this:1:x"
    store = rt.jobs.store
    assert store.claim_run(run.id, dead, stale_s=30)
    store.start_items(run.id, dead, [(f"doc:{i}", {"document_id": i, "title": "", "content_hash": ""}) for i in ids], "b", "p")
    for _ in range(POISON_STARTS):  # in flight each time a process died
        store.mark_started(run.id, f"doc:{ids[2]}")
    store.mark_started(run.id, f"doc:{ids[4]}")  # in flight once, with others
    with store.db.write() as conn:
        conn.execute("UPDATE job_runs SET heartbeat_at = ? WHERE id = ?", (time.time() - 60, run.id))
    rt.jobs.start()
    final = rt.jobs.wait_run(run.id, 60)
    assert final.status == "succeeded" and final.counts["failed"] == 1 and final.counts["succeeded"] == 6, final
    items = {i.key: i for i in rt.jobs.results(run.id)[0]}
    poisoned = items[f"doc:{ids[2]}"]
    assert poisoned.status == "failed" and f"stopped unexpectedly {POISON_STARTS} times" in poisoned.error
    suspect = items[f"doc:{ids[4]}"]
    assert suspect.status == "succeeded"
    for key, other in items.items():  # the suspect ran with nothing else in flight
        if key not in (suspect.key, poisoned.key):
            assert other.finished_at <= suspect.started_at or other.started_at >= suspect.finished_at, (key, other, suspect)


def test_a_clean_stop_gives_the_starts_back(make_runtime):
    """A shutdown (systemd stop, restart) in the middle of a run is not the items' fault: none becomes a suspect."""
    import pytest

    from edge_agent.jobs.runner import RunStopped

    rt = make_runtime(jobs_commit_max_ms=0)  # results committed as they finish: the stop comes while items are in flight
    _docs(rt, 12)
    rt.jobs.create_job("stopped", "summarize", {"max_tokens": 100}, limits={"concurrency": 4})
    with pytest.raises(RunStopped):  # the process begins to shut down once the first item is committed
        rt.jobs.run_foreground("stopped", progress=lambda done, total: rt.jobs.stopping.set())
    run = rt.jobs.list_runs("stopped")[0][0]
    with rt.jobs.store.db.read() as conn:
        pending, left = conn.execute("SELECT count(*), sum(unfinished_starts) FROM run_items WHERE run_id = ? AND status = 'pending'",
                                     (run.id,)).fetchone()
    assert run.status == "running" and pending > 0  # left for the next start to resume
    assert left == 0  # the items cut off by the shutdown are not suspects


def test_a_cancelled_run_left_pending_items_by_an_older_version_is_migrated(tmp_path):
    """Migration 7: a database where a cancelled run's unfinished items stayed pending opens with them cancelled;
    a deadline-stopped run keeps its pending items (the next run carries them over)."""
    import sqlite3

    from edge_agent.store.db import SqliteDatabase
    from edge_agent.store.jobs import JobStore
    from edge_agent.store.migrations import MIGRATIONS

    path = tmp_path / "old.sqlite3"
    SqliteDatabase(path, [m for m in MIGRATIONS if m.version < 7]).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO jobs(id, name, kind, params, limits, created_at, updated_at) VALUES ('j', 'j', 'summarize', '{}', '{}', 0, 0)")
    for run, status, reason in (("r1", "cancelled", "cancelled"), ("r2", "succeeded", "deadline")):
        conn.execute("INSERT INTO job_runs(id, job_id, kind, params, status, stop_reason, total_items, created_at, updated_at)"
                     " VALUES (?, 'j', 'summarize', '{}', ?, ?, 3, 0, 0)", (run, status, reason))
        for n, st in enumerate(("succeeded", "pending", "pending")):
            conn.execute("INSERT INTO run_items(run_id, item_key, ordinal, payload, status) VALUES (?, ?, ?, '{}', ?)",
                         (run, f"doc:{n}", n, st))
    conn.commit()
    conn.close()
    db = SqliteDatabase(path)
    store = JobStore(db)
    assert store.get_run("r1").counts == {"pending": 0, "succeeded": 1, "failed": 0, "skipped": 0, "cancelled": 2}
    assert store.get_run("r2").counts["pending"] == 2 and store.get_run("r2").counts["cancelled"] == 0
    rows, _ = store.results("r1", status="cancelled")
    assert [r.key for r in rows] == ["doc:1", "doc:2"] and rows[0].error == "not done: the run was cancelled"
    with db.write() as w:  # the rebuilt table keeps its id sequence and the new status is allowed
        w.execute("INSERT INTO run_items(run_id, item_key, ordinal, payload, status) VALUES ('r2', 'doc:9', 9, '{}', 'cancelled')")
    db.close()
