"""Batch files on a full disk: an upload is refused with 507 (nothing kept) before it eats the room SQLite needs,
and a disk that fills mid-write is a StorageFullError, never a 500. Data on a 3 MB tmpfs; skipped where this
process may not mount one."""
from __future__ import annotations

import os
import subprocess
import time

import openai
import pytest

from jobs_helpers import job_settings


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root: the full-disk test needs one")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m,mode=0755", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_upload_to_a_nearly_full_disk_is_507_and_keeps_nothing(tiny_bundles, tmp_path, small_disk):
    from edge_agent.api.app import create_app
    from edge_agent.runtime import build_runtime
    from edge_agent.server import HttpServer

    settings = job_settings(tiny_bundles, tmp_path, data_dir=small_disk / "var", serve_documents=False)
    rt = build_runtime(settings, load_documents=False, start_jobs=True)
    srv = HttpServer(create_app(rt), "127.0.0.1", 0, threads=8).start()
    try:
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=30)
        line = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "llama", "messages": []}}\n'
        with pytest.raises(openai.APIStatusError) as e:  # 3 MB disk: below the free space an upload must leave
            client.files.create(file=("in.jsonl", line * 2000), purpose="batch")
        assert e.value.status_code == 507, e.value.message
        assert "disk" in e.value.message and "Traceback" not in e.value.message and "/" not in e.value.message
        assert client.files.list().data == []
        assert [q.name for q in (small_disk / "var" / "files").iterdir()] == []  # no file, no temp file
        chat = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
        assert chat.choices[0].finish_reason in ("length", "stop")  # still serving
    finally:
        srv.close()
        rt.close()


def test_a_disk_that_fills_mid_write_is_storage_full(tmp_path, small_disk, monkeypatch):
    from edge_agent.store import files
    from edge_agent.store.db import SqliteDatabase

    monkeypatch.setattr(files, "FREE_SPACE_MARGIN", 0)  # as if another process filled the disk after the check
    fs = files.FileStore(SqliteDatabase(tmp_path / "x.db"), small_disk / "files")
    for max_bytes in (1 << 30, None):  # a client's upload, then a batch's output file
        with pytest.raises(files.StorageFullError, match="full"):
            fs.create("batch", "in.jsonl", (b"x" * (1 << 20) for _ in range(8)), max_bytes=max_bytes)
    assert fs.list() == [] and list(fs.folder.iterdir()) == []  # whole or not at all
    rec = fs.create("batch", "small.jsonl", b"{}\n", max_bytes=1 << 20)  # the room is back for what fits
    assert fs.read_bytes(rec.id) == b"{}\n"


def _fill(folder) -> None:
    """Write zeros into folder until its disk is full."""
    with open(folder / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


def test_job_runs_wait_on_a_full_disk_and_go_on_when_there_is_room(tiny_bundles, tmp_path, small_disk, monkeypatch):
    """A full data disk made the job dispatcher fail ten times in a row and die, taking /ready down with "restart the
    daemon": nightly runs stopped until a restart although the operator had made room. Now the dispatcher and the cron
    loop wait (/ready shows jobs degraded, saying why) and the queued and the missed scheduled run go on once there is room."""
    from edge_agent.jobs import schedule, service
    from edge_agent.runtime import build_runtime

    monkeypatch.setattr(service, "DISPATCH_POLL_S", 0.05)  # ten failures, which killed the dispatcher, in half a second
    monkeypatch.setattr(schedule, "TICK_S", 0.05)
    monkeypatch.setattr(service, "BLOCKED_RETRY_S", 0.2)
    settings = job_settings(tiny_bundles, tmp_path, data_dir=small_disk / "var", serve_documents=False)
    rt = build_runtime(settings, load_documents=False, start_jobs=False)
    try:
        params = {"labels": ["a", "b"], "method": "likelihood", "source": "texts", "texts": ["one", "two"]}
        rt.jobs.create_job("now", "classify", params)
        nightly = rt.jobs.create_job("nightly", "classify", params, {"cron": "0 2 * * *", "timezone": "Europe/Amsterdam"})
        queued = rt.jobs.start_run("now", "manual")
        with rt.jobs.db.write() as conn:  # its 02:00 passed while the machine was off
            conn.execute("UPDATE jobs SET next_run_at = ? WHERE id = ?", (time.time() - 3600, nightly.id))
        _fill(small_disk)
        rt.jobs.start()
        time.sleep(2.0)
        ready, parts = rt.readiness()
        assert rt.jobs.alive, rt.jobs.failure
        assert parts["jobs"]["state"] == "degraded" and "full" in parts["jobs"]["detail"], parts["jobs"]
        assert ready  # serving goes on
        assert rt.jobs.get_run(queued.id).status == "queued"

        (small_disk / "filler").unlink()
        end = time.time() + 60
        while time.time() < end:
            runs = rt.jobs.list_runs(None, 0, 10)[0]
            if len(runs) == 2 and all(r.status == "succeeded" for r in runs):
                break
            time.sleep(0.2)
        assert sorted((r.trigger, r.status, r.counts["succeeded"]) for r in runs) == [
            ("manual", "succeeded", 2), ("schedule", "succeeded", 2)]
        assert rt.readiness()[1]["jobs"]["state"] == "ready" and rt.jobs.waiting is None
    finally:
        rt.close()
