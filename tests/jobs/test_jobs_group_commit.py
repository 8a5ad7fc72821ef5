"""Group commit of job results: a group is all or nothing, every item is committed exactly once across a kill -9
in the middle of committing groups, and a slow trickle of items is still committed within the time bound.

Real SQLite files in tmp_path and the real RunLoop; the items are a small kind of this module's own (each
item's effect writes a row of its own table in the commit's transaction, so a half-written group would show).
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


class TimedPending:
    """An item that is done `seconds` after it started."""

    def __init__(self, key: str, seconds: float, log: dict | None):
        self.key, self.at, self.log = key, time.time() + seconds, log

    def done(self) -> bool:
        if time.time() < self.at:
            return False
        if self.log is not None:
            self.log.setdefault(self.key, time.time())
        return True

    def result(self, timeout=None) -> dict:
        return {"key": self.key, "usage": {"completion_tokens": 2}}

    def cancel(self) -> None:
        pass


class EffectKind:
    """Items "0".."n-1" (params n, seconds each, work_s of busy time in start_item); each success stores a row in
    `effects` with its result (a plain INSERT: a second commit of the same item would fail loudly)."""

    name = "effect-test"
    prompt_version = "t1"

    def __init__(self, bad: set[str] | None = None):
        self.bad = bad or set()
        self.finished: dict[str, float] = {}  # key -> when it was seen done

    def validate(self, params, ctx):
        return params

    def list_items(self, params, ctx, since):
        from edge_agent.jobs.kinds import Item

        for i in range(params["n"]):
            yield Item(str(i), {"i": i})

    def start_item(self, item, params, ctx):
        if params.get("work_s"):
            time.sleep(params["work_s"])
        return TimedPending(item.key, params.get("seconds", 0.0), self.finished)

    def commit_effect(self, item, result, run_id, ctx):
        key = item.key

        def effect(conn) -> None:
            if key in self.bad:
                raise RuntimeError(f"cannot store item {key}")
            conn.execute("INSERT INTO effects(run_id, item_key) VALUES (?, ?)", (run_id, key))

        return effect


def open_store(path: Path):
    from edge_agent.store.db import SqliteDatabase
    from edge_agent.store.jobs import JobStore

    db = SqliteDatabase(path)
    with db.write() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS effects(run_id TEXT NOT NULL, item_key TEXT NOT NULL, PRIMARY KEY(run_id, item_key))")
    return db, JobStore(db)


def new_run(store, params: dict, concurrency: int, owner: str):
    from edge_agent.store.jobs import JobRecord, new_id

    job = store.create_job(JobRecord(id=new_id("job"), name=new_id("t"), kind=EffectKind.name, params=params))
    return store.create_run(job, params, "manual", concurrency, None, None, None, owner=owner)


def loop_for(store, db, kind, owner: str, **commit):
    from edge_agent.jobs.kinds import JobContext
    from edge_agent.jobs.runner import RunLoop

    ctx = JobContext(chat=None, embeddings=None, documents=lambda: None, settings=None, bundle_id="b", db=db)
    return RunLoop(store, kind, ctx, owner, threading.Event(), **commit)


def state(db, run_id: str) -> tuple[dict, set, tuple]:
    """(item key -> (status, attempts)), the keys with an effect row, and the run's counters (succeeded, failed, tokens)."""
    with db.read() as conn:
        items = {k: (s, a) for k, s, a in conn.execute(
            "SELECT item_key, status, attempts FROM run_items WHERE run_id = ?", (run_id,))}
        effects = {k for (k,) in conn.execute("SELECT item_key FROM effects WHERE run_id = ?", (run_id,))}
        counters = tuple(conn.execute("SELECT succeeded_items, failed_items, generated_tokens FROM job_runs WHERE id = ?",
                                      (run_id,)).fetchone())
    return items, effects, counters


def test_a_failure_inside_a_group_commit_leaves_none_of_its_items_done(tmp_path):
    from edge_agent.store.jobs import ItemOutcome

    db, store = open_store(tmp_path / "jobs.db")
    kind = EffectKind(bad={"3"})
    run = new_run(store, {"n": 6}, 4, "me")
    store.start_items(run.id, "me", [(str(i), {"i": i}) for i in range(6)], "b", "t1")
    from edge_agent.jobs.kinds import Item

    def outcome(i: int) -> ItemOutcome:
        res = {"key": str(i)}
        return ItemOutcome(str(i), "succeeded", res, None, time.time(), time.time(),
                           kind.commit_effect(Item(str(i)), res, run.id, None), tokens=2)

    with pytest.raises(RuntimeError, match="cannot store item 3"):
        store.commit_items(run.id, [outcome(i) for i in range(5)], "b", "t1")  # item 3's effect fails mid-group
    items, effects, counters = state(db, run.id)
    assert {s for s, _ in items.values()} == {"pending"} and effects == set() and counters == (0, 0, 0)
    assert all(a == 0 for _, a in items.values())

    good = [outcome(i) for i in (0, 1, 2, 4)] + [ItemOutcome("5", "failed", None, "bad input", time.time())]
    assert store.commit_items(run.id, good, "b", "t1") == [True] * 5
    assert store.commit_items(run.id, good[:2], "b", "t1") == [False, False]  # once only: no effect, no count
    items, effects, counters = state(db, run.id)
    assert effects == {"0", "1", "2", "4"} and counters == (4, 1, 8)
    assert items["3"] == ("pending", 0) and items["5"] == ("failed", 1)
    assert all(a == 1 for k, (_, a) in items.items() if k != "3")
    db.close()


def test_the_run_loop_commits_in_groups_and_an_item_that_cannot_be_stored_fails_alone(tmp_path):
    db, store = open_store(tmp_path / "jobs.db")
    kind = EffectKind(bad={"7"})
    groups: list[int] = []
    real = store.commit_items

    def counted(run_id, outcomes, *a):
        groups.append(len(outcomes))
        return real(run_id, outcomes, *a)

    store.commit_items = counted  # the real method, its group sizes recorded
    run = new_run(store, {"n": 40}, 8, "me")
    done_seen: list[int] = []
    loop = loop_for(store, db, kind, "me", commit_max_items=8, commit_max_s=10.0)
    loop.progress = lambda done, total: done_seen.append(done)
    final = loop.execute(run)
    items, effects, counters = state(db, run.id)
    assert final.status == "succeeded" and final.counts["succeeded"] == 39 and final.counts["failed"] == 1, final.counts
    assert counters == (39, 1, 78) and effects == {str(i) for i in range(40)} - {"7"}
    assert all(a == 1 for _, a in items.values())
    failed = store.results(run.id, 0, 100, "failed")[0][0]
    assert failed.key == "7" and "storing the result failed" in failed.error
    # groups of up to 8 (the failed group of item 7 then one by one), far fewer transactions than items
    assert max(groups) == 8 and sum(1 for g in groups if g > 1) >= 3 and len(groups) < 40, groups
    assert done_seen == list(range(1, 41))  # progress counts committed items, each once
    db.close()


def test_a_slow_trickle_is_committed_within_the_time_bound(tmp_path):
    """With room for 64 results a group, items finishing one every 0.4 s are each committed (and counted in the
    run's counts, as GET /v1/runs/{id} shows them) within commit_max_s, not at the end of the run."""
    db, store = open_store(tmp_path / "jobs.db")
    kind = EffectKind()
    run = new_run(store, {"n": 4, "seconds": 0.4}, 1, "me")
    seen: dict[int, float] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            got = store.get_run(run.id)
            n = got.counts["succeeded"] if got else 0
            for k in range(1, n + 1):
                seen.setdefault(k, time.time())
            time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    final = loop_for(store, db, kind, "me", commit_max_items=64, commit_max_s=0.1).execute(run)
    ended = time.time()
    time.sleep(0.05)
    stop.set()
    watcher.join()
    assert final.counts["succeeded"] == 4
    finished = sorted(kind.finished.values())
    lags = [seen[k + 1] - finished[k] for k in range(4)]
    assert all(lag < 0.6 for lag in lags), lags  # 0.1 s bound + polls on a loaded machine; 1.2 s if it waited
    assert seen[1] < ended - 0.5, (seen, ended)  # the first was visible long before the run ended
    db.close()


CHILD = """
import sys, threading
sys.path.insert(0, {here!r})
from test_jobs_group_commit import EffectKind, open_store, loop_for
db, store = open_store({db!r})
run = store.get_run({run_id!r})
owner = {host!r} + ":" + str(__import__("os").getpid()) + ":child"
assert store.claim_run(run.id, owner, 30.0)
run = store.get_run(run.id)
loop_for(store, db, EffectKind(), owner, commit_max_items=16, commit_max_s=0.05).execute(run)
"""


def test_kill_9_while_groups_commit_keeps_every_item_exactly_once(tmp_path):
    """A process committing groups is killed at random moments; after each kill every item is either done with its
    effect and counted, or pending without either (no half group), and the resumed run ends with each item once."""
    import socket

    rng = random.Random(11)
    path = tmp_path / "jobs.db"
    db, store = open_store(path)
    n = 300
    host = socket.gethostname()
    run = new_run(store, {"n": n, "work_s": 0.002}, 4, None)
    kills = 0
    for _ in range(5):
        before = store.get_run(run.id).done_items
        child = subprocess.Popen([sys.executable, "-c", CHILD.format(here=str(HERE), db=str(path), run_id=run.id, host=host)],
                                 cwd=REPO, stderr=subprocess.PIPE, text=True)
        end = time.monotonic() + 60
        while time.monotonic() < end and child.poll() is None:
            got = store.get_run(run.id)
            if got.done_items > before:
                break
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.15))
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            kills += 1
        _, err = child.communicate(timeout=30)
        assert child.returncode in (0, -signal.SIGKILL), err
        items, effects, counters = state(db, run.id)
        done = {k for k, (s, _) in items.items() if s != "pending"}
        assert done == effects, (done ^ effects)  # a result with its effect, or neither
        assert counters[0] == len(done) and counters[2] == 2 * len(done)  # the run's counters moved with the rows
        assert all(a == (1 if k in done else 0) for k, (_, a) in items.items())
        if items and len(done) == n:
            break
    assert kills >= 3, "the run ended before it was killed: make the items slower"
    owner = f"{host}:{os.getpid()}:resume"
    assert store.claim_run(run.id, owner, 30.0)  # the killed owners are dead
    final = loop_for(store, db, EffectKind(), owner).execute(store.get_run(run.id))
    items, effects, counters = state(db, run.id)
    assert final.status == "succeeded" and final.counts["succeeded"] == n and final.resumes >= 1
    assert effects == {str(i) for i in range(n)} and counters == (n, 0, 2 * n)
    assert all(s == "succeeded" and a == 1 for s, a in items.values())
    db.close()
