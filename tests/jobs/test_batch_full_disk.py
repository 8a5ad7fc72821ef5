"""Batch files on a full disk: an upload is refused with 507 (nothing kept) before it eats the room SQLite needs,
and a disk that fills mid-write is a StorageFullError, never a 500. Data on a 3 MB tmpfs; skipped where this
process may not mount one."""
from __future__ import annotations

import os
import subprocess

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
