"""Disk space (issue 14.3): refused before writing with 507 and the bytes needed, the FAISS file a cache saved on a
schedule (not per ingest), leftovers of interrupted writes cleaned at start, free space reported."""
from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

import pytest
from flask import Flask

from edge_agent.api.documents import bp
from edge_agent.api.errors import register_error_handlers
from edge_agent.services.storage import InsufficientStorageError, disk_status, free_bytes


def _client(service):
    app = Flask("test")
    app.extensions["edge_agent"] = SimpleNamespace(documents=service, settings=None)
    app.register_blueprint(bp)
    register_error_handlers(app)
    return app.test_client()


def test_too_little_room_is_refused_before_anything_is_written(make_service, tmp_path):
    svc = make_service()
    kept = svc.add_text("Kept", "Written while there was room.")
    svc.min_free_bytes = free_bytes(tmp_path) + (1 << 30)  # as if the disk were nearly full
    with pytest.raises(InsufficientStorageError) as err:
        svc.add_text("Alpha", "Alpha centauri is the closest star system.")
    assert err.value.needed > 0 and "min_free_bytes" in str(err.value) and "free" in str(err.value)
    assert svc.store.count() == 1 and svc.store.get_by_key("text:Alpha") is None
    assert svc.index.ids().tolist() == svc.store.chunk_ids().tolist()
    resp = _client(svc).post("/v1/documents", json={"title": "Beta", "text": "Beta blockers lower the heart rate."})
    assert resp.status_code == 507
    body = resp.get_json()["error"]
    assert body["code"] == "insufficient_storage" and body["needed_bytes"] > 0 and body["free_bytes"] >= 0
    assert "insufficient storage" in body["message"] and str(tmp_path) not in resp.get_data(as_text=True)
    svc.delete(kept.document_id)  # deleting frees space: never refused
    assert svc.store.count() == 0


def test_the_faiss_file_is_a_cache_saved_on_a_schedule(make_service):
    svc = make_service(index_save_interval_s=0.3)
    path = svc.index.path
    before = path.stat().st_mtime_ns if path.exists() else None
    svc._stop.set()  # hold the saver for a moment: an ingest alone must not rewrite the file
    svc._saver.join(5)
    for i in range(3):
        svc.add_text(f"doc-{i}", f"Document {i} carries the marker zq{i}x.")
    assert (path.stat().st_mtime_ns if path.exists() else None) == before
    svc._stop.clear()
    import threading

    svc._saver = threading.Thread(target=svc._save_loop, args=(0.3,), daemon=True)
    svc._saver.start()
    end = time.monotonic() + 10
    while time.monotonic() < end and (not path.exists() or svc._dirty):
        time.sleep(0.05)
    from edge_agent.rag.index import FaissIndex

    assert FaissIndex.load(path, svc.index.dim).ids().tolist() == svc.store.chunk_ids().tolist()


def test_leftovers_are_cleaned_at_start(make_service, tmp_path):
    svc = make_service()
    svc.add_text("Alpha", "Alpha centauri is the closest star system.")
    svc.close()
    index = tmp_path / "index"
    (index / ".chunks.faiss.tmp4242.1").write_bytes(b"x" * 1000)  # a save killed half-way
    (index / ".bm25.snapshot.tmp4242.1").write_bytes(b"x" * 1000)
    for n, age in enumerate((300, 200, 100)):
        bad = index / f"chunks.faiss.bad-2026010{n}-000000-1"
        bad.write_bytes(b"old")
        os.utime(bad, (time.time() - age, time.time() - age))
    again = make_service()
    names = sorted(p.name for p in index.iterdir())
    assert not [n for n in names if ".tmp" in n]
    assert [n for n in names if ".bad-" in n] == ["chunks.faiss.bad-20260102-000000-1"]  # only the newest is kept
    assert again.retrieve("closest star", k=1)[0].title == "Alpha"


def test_disk_status_says_when_the_disks_are_low(make_settings):
    ok = disk_status(make_settings())
    assert ok["ok"] and ok["message"] is None and ok["disks"]["data"]["free_bytes"] > 0
    low = disk_status(make_settings(min_free_bytes=1 << 60))
    assert not low["ok"] and not low["disks"]["index"]["ok"] and "min_free_bytes" in low["message"]
    assert "/" not in json.dumps(low)  # no server paths: /ready shows it
