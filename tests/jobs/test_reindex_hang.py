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


def _results(rt, run_id) -> dict:
    return {i.key: i for i in rt.jobs.results(run_id)[0]}


def _run(rt, name, timeout=60):
    """run_foreground in a thread, so a run that hangs fails the test instead of holding it."""
    got: dict = {}
    t = threading.Thread(target=lambda: got.update(run=rt.jobs.run_foreground(name)), daemon=True)
    t0 = time.monotonic()
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "the run hung"
    return got["run"], time.monotonic() - t0


@pytest.fixture
def hanging(monkeypatch):
    """hang(path) makes listing that folder (os.scandir) and os.path.exists of paths under it wait, as on an NFS hard
    mount whose server is gone; release() lets them go. (Only those paths wait: everything else runs as ever.)"""
    import os

    release = threading.Event()
    dead: list[str] = []
    real_scandir, real_exists = os.scandir, os.path.exists

    def blocked(path) -> bool:
        p = os.fspath(path)
        return any(p == d or p.startswith(d + "/") for d in dead) and not release.is_set()

    def scandir(path=".", *a, **k):
        if blocked(path):
            release.wait(120)
        return real_scandir(path, *a, **k)

    def exists(path):
        if blocked(path):
            release.wait(120)
        return real_exists(path)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os.path, "exists", exists)
    yield dead.append, release
    release.set()


def test_a_folder_whose_listing_hangs_fails_alone_and_keeps_its_documents(make_runtime, tmp_path, hanging):
    """A dead network share (its listing hangs) held the whole run in the run loop, with no cancel or deadline able to
    end it. Now its folder item fails after stall_timeout_s saying so, the other folders are indexed, none of its
    documents is removed; a later run while the listing still hangs fails it at once (no second thread waits on it)."""
    hang, release = hanging
    rt = make_runtime()
    share, local = tmp_path / "docs" / "share", tmp_path / "docs" / "local"
    for folder, base in ((share, 0), (local, 10)):
        folder.mkdir(parents=True)
        for n in range(2):
            (folder / f"{folder.name}{n}.txt").write_text(doc_text(base + n, 2))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(share), str(local)], "stall_timeout_s": 1})
    first, _ = _run(rt, "ri")
    assert first.status == "succeeded" and first.counts["succeeded"] == 4, first.counts
    (local / "local2.txt").write_text(doc_text(12, 2))

    hang(str(share))
    run, took = _run(rt, "ri")
    rows = _results(rt, run.id)
    assert run.status == "succeeded" and took < 30, (run.status, took)
    failed = rows["folder:share"]
    assert failed.status == "failed" and "did not answer within 1 s while listing it" in failed.error, failed.error
    assert "none of its documents removed" in failed.error and str(tmp_path) not in failed.error
    assert rows["file:" + str(local / "local2.txt")].result["action"] == "added"
    assert not [k for k in rows if k.startswith("remove:")]
    names = {d["path"].rsplit("/", 1)[-1] for d in rt.documents.list(0, 20)[0]}
    assert names == {"share0.txt", "share1.txt", "local0.txt", "local1.txt", "local2.txt"}, names

    before = {t.name for t in threading.enumerate() if t.name.startswith("reindex list")}
    again, took = _run(rt, "ri")
    assert took < 10, took  # not another stall_timeout_s: known to hang still
    err = _results(rt, again.id)["folder:share"].error
    assert "still does not answer: a listing started" in err, err
    assert {t.name for t in threading.enumerate() if t.name.startswith("reindex list")} == before

    release.set()
    for th in threading.enumerate():
        if th.name.startswith("reindex list"):
            th.join(30)
    (share / "share0.txt").unlink()
    last, _ = _run(rt, "ri")
    rows = _results(rt, last.id)
    assert last.counts["failed"] == 0 and "folder:share" not in rows, last.counts
    assert [r.result["action"] for k, r in rows.items() if k.startswith("remove:")] == ["removed"]


def test_an_existence_check_that_hangs_fails_its_folder_not_the_run(make_runtime, tmp_path, hanging):
    """The check whether an indexed file is gone (a stat) on a share that stops answering: same as a listing."""
    hang, release = hanging
    rt = make_runtime()
    share = tmp_path / "docs" / "share"
    (share / "sub").mkdir(parents=True)
    (share / "keep.txt").write_text(doc_text(1, 2))
    (share / "sub" / "gone.txt").write_text(doc_text(2, 2))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(share)], "stall_timeout_s": 1})
    assert _run(rt, "ri")[0].counts["succeeded"] == 2
    (share / "sub" / "gone.txt").unlink()
    (share / "sub").rmdir()
    hang(str(share / "sub"))  # the listing answers (sub is gone); the stat of the gone file hangs
    run, took = _run(rt, "ri")
    err = _results(rt, run.id)["folder:share"].error
    assert run.status == "succeeded" and took < 30 and "while checking which indexed files are gone" in err, err
    assert len(rt.documents.list(0, 20)[0]) == 2  # nothing removed while it could not be checked
    release.set()


@pytest.mark.parametrize("hang_at", [1, 2], ids=["first read", "read after the first"])
def test_a_file_whose_read_hangs_fails_and_the_run_goes_on(make_runtime, tmp_path, monkeypatch, hang_at):
    """A read that hangs in an item's thread held the run until its deadline (or for good: no deadline by default).
    Now the item fails after stall_timeout_s, saying so; the rest of that folder is failed at once while the read
    still hangs (not one more thread each), other folders are indexed, and a run after the read returns adds them.
    The second open of the file (the whole read, after a first look at its head) hung the run before it was watched."""
    import edge_agent.services.documents as documents_module

    rt = make_runtime()
    share, local = tmp_path / "docs" / "share", tmp_path / "docs" / "local"
    share.mkdir(parents=True)
    local.mkdir(parents=True)
    for name, n in (("a.txt", 1), ("b.txt", 2), ("c.txt", 3)):
        (share / name).write_text(doc_text(n, 2))
    (local / "l.txt").write_text(doc_text(4, 2))
    release = threading.Event()
    real_open = documents_module.open_regular
    opens = []

    def open_regular(path):
        if str(path) == str(share / "a.txt"):
            opens.append(path)
            if len(opens) == hang_at and not release.is_set():
                release.wait(120)
        return real_open(path)

    monkeypatch.setattr(documents_module, "open_regular", open_regular)
    rt.jobs.create_job("ri", "reindex", {"folders": [str(share), str(local)], "stall_timeout_s": 1})
    try:
        run, took = _run(rt, "ri")
        rows = {k.rsplit("/", 1)[-1]: r for k, r in _results(rt, run.id).items()}
        assert run.status == "succeeded" and took < 30, (run.status, took)
        assert rows["a.txt"].status == "failed" and "did not answer within 1 s" in rows["a.txt"].error
        assert str(tmp_path) not in rows["a.txt"].error
        for name in ("b.txt", "c.txt"):
            assert rows[name].status == "failed" and "still does not answer: a read of 'a.txt'" in rows[name].error
        assert rows["l.txt"].result["action"] == "added"
    finally:
        release.set()
    for th in threading.enumerate():
        if th.name.startswith("reindex "):
            th.join(30)
    assert {d["path"].rsplit("/", 1)[-1] for d in rt.documents.list(0, 20)[0]} == {"l.txt"}  # the late read stored nothing
    again, _ = _run(rt, "ri")
    assert again.counts["failed"] == 0
    assert {d["path"].rsplit("/", 1)[-1] for d in rt.documents.list(0, 20)[0]} == {"a.txt", "b.txt", "c.txt", "l.txt"}


def test_stall_timeout_s_is_checked(make_runtime, tmp_path):
    from edge_agent.jobs.kinds import InvalidJobError

    rt = make_runtime()
    (tmp_path / "docs" / "f").mkdir(parents=True)
    for bad in (0, "60", True, 7200):
        with pytest.raises(InvalidJobError, match="stall_timeout_s must be"):
            rt.jobs.create_job(f"ri{bad}", "reindex", {"folders": [str(tmp_path / "docs" / "f")], "stall_timeout_s": bad})


def test_a_cancel_ends_a_run_whose_listing_hangs(make_runtime, tmp_path, hanging):
    """Before stall_timeout_s (here the default, 60 s) a cancel ends the run: the listing no longer holds the run loop."""
    hang, release = hanging
    rt = make_runtime()
    share = tmp_path / "docs" / "share"
    share.mkdir(parents=True)
    (share / "a.txt").write_text(doc_text(1, 2))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(share)]})
    hang(str(share))
    got: dict = {}
    t = threading.Thread(target=lambda: got.update(run=rt.jobs.run_foreground("ri")), daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while not rt.jobs.list_runs("ri")[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # listing now
    t0 = time.monotonic()
    rt.jobs.cancel_run(rt.jobs.list_runs("ri")[0][0].id)
    t.join(20)
    assert not t.is_alive() and time.monotonic() - t0 < 10
    assert got["run"].status == "cancelled" and got["run"].total_items == 0, got["run"]
    release.set()


def test_a_slow_listing_that_makes_progress_is_not_taken_for_a_dead_share(make_runtime, tmp_path, monkeypatch):
    """stall_timeout_s bounds a listing that makes no progress, not a long one: a folder of many files on a slow share
    (here 0.3 s an entry, 2.4 s in all, with stall_timeout_s 1) is listed whole."""
    import os

    rt = make_runtime()
    slow = tmp_path / "docs" / "slow"
    slow.mkdir(parents=True)
    for n in range(8):
        (slow / f"f{n}.txt").write_text(doc_text(n, 1))
    real_scandir = os.scandir

    class Slow:
        def __init__(self, inner):
            self.inner = inner

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.inner.close()

        def __iter__(self):
            return self

        def __next__(self):
            entry = next(self.inner)
            time.sleep(0.3)
            return entry

        def close(self):
            self.inner.close()

    monkeypatch.setattr(os, "scandir", lambda path=".", *a, **k: Slow(real_scandir(path, *a, **k))
                        if os.fspath(path) == str(slow) else real_scandir(path, *a, **k))
    rt.jobs.create_job("ri", "reindex", {"folders": [str(slow)], "stall_timeout_s": 1})
    run, _ = _run(rt, "ri")
    assert run.counts["succeeded"] == 8 and run.counts["failed"] == 0, run.counts


def test_creating_a_job_for_a_folder_that_does_not_answer_is_a_clear_400_not_a_hung_request(make_runtime, tmp_path,
                                                                                             monkeypatch):
    """The create-time check of a folder (resolve, is it a folder) waited as long as the share: now CHECK_TIMEOUT_S."""
    import edge_agent.jobs.reindex as reindex
    from edge_agent.jobs.kinds import InvalidJobError

    rt = make_runtime()
    dead = tmp_path / "docs" / "dead-share"
    dead.mkdir(parents=True)
    release = threading.Event()
    real_resolve = reindex.resolve_confined

    def resolve_confined(raw, roots):  # a stat on a dead network mount blocks
        if "dead-share" in str(raw):
            release.wait(120)
        return real_resolve(raw, roots)

    monkeypatch.setattr(reindex, "resolve_confined", resolve_confined)
    monkeypatch.setattr(reindex, "CHECK_TIMEOUT_S", 0.5)
    t0 = time.monotonic()
    try:
        with pytest.raises(InvalidJobError, match="did not answer within 0.5 s") as e:
            rt.jobs.create_job("dead", "reindex", {"folders": [str(dead)]})
        assert time.monotonic() - t0 < 10
        assert str(e.value).startswith(f"folder {str(dead)!r} did not answer")  # the folder as the client gave it
    finally:
        release.set()
    ok = tmp_path / "docs" / "fine"
    ok.mkdir()
    rt.jobs.create_job("fine", "reindex", {"folders": [str(ok)]})  # a folder that answers is taken as before
    with pytest.raises(InvalidJobError, match="is a file"):
        (ok / "a.txt").write_text("x")
        rt.jobs.create_job("file", "reindex", {"folders": [str(ok / "a.txt")]})
