"""A full disk (issue 14.3): data and index on a small tmpfs, filled through the real server until writes fail.

Every answer must match what happened: 201 = stored (and intact after a restart), 507 = nothing of that
document kept (or, for several uploads, `data` names exactly the ones kept), 200 on DELETE = gone, 507 on
DELETE = still there; never a generic 500. Skipped where this process may not mount a tmpfs.
"""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from api_helpers import REPO, api_settings, multipart, start_server

FILLER = "The quarterly archive review covers shelving, humidity logs and the loan desk rota. " * 18  # ~1.5 KB


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; run as root (or in a container allowed to mount) to test a full disk")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m,mode=0755", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}): the full-disk test needs one")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_full_disk_answers_tell_the_truth_and_survive_a_restart(small_disk, tiny_bundles, tmp_path):
    from edge_agent.config import Settings
    from edge_agent.rag.embedder import OnnxEmbedder
    from edge_agent.services.documents import DocumentService
    from edge_agent.services.storage import free_bytes

    emb = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    settings = Settings(data_dir=small_disk / "var", index_dir=small_disk / "index", min_free_bytes=128 << 10,
                        index_save_interval_s=0.5)
    svc = DocumentService.from_settings(settings, embedder=emb)
    with open(small_disk / "filler", "wb") as f:  # leave ~700 KB: a few dozen documents
        f.write(b"\0" * max(0, free_bytes(small_disk) - (700 << 10)))
    server = start_server(api_settings(tiny_bundles["llama"], tmp_path, api_keys=[]), documents=svc)
    acked: dict[str, int] = {}  # key -> document id: answered 201
    refused: set[str] = set()  # answered 507: must not exist
    deleted: set[int] = set()  # DELETE answered 200
    kept_on_507: set[int] = set()  # DELETE answered 507
    statuses: list[int] = []
    during_commit = 0
    try:
        for phase in (1, 2):
            if phase == 2:  # the check passes, as if another process filled the disk between it and the commit:
                svc.min_free_bytes = -(1 << 30)  # now SQLite itself runs out of space mid-commit and rolls back
            misses, i = 0, 0
            deadline = time.monotonic() + 60
            while misses < 6 and time.monotonic() < deadline:
                i += 1
                title = f"doc-{phase}-{i}"
                status, _, body = server.request("POST", "/v1/documents", {"title": title, "text": f"{title} has the codeword zq{phase}x{i}y. {FILLER}"}, key=None)
                statuses.append(status)
                assert status in (201, 507), (status, body)
                if status == 201:
                    acked[f"text:{title}"] = json.loads(body)["document_id"]
                    misses = 0
                else:
                    err = json.loads(body)["error"]
                    during_commit += "filled up while" in err["message"]
                    assert err["code"] == "insufficient_storage" and "free" in err["message"]
                    refused.add(f"text:{title}")
                    misses += 1
                if i % 5 == 0:  # several uploads in one request: 201 = all kept, 507 lists the ones kept
                    names = {f"up-{phase}-{i}-{k}.txt": f"Upload {k} of {phase}/{i}: marker up{phase}x{i}x{k}. {FILLER}".encode() for k in range(3)}
                    payload, ctype = multipart(list(names.items()))
                    status, _, body = server.request("POST", "/v1/documents", payload, {"Content-Type": ctype}, key=None)
                    statuses.append(status)
                    assert status in (201, 507), (status, body)
                    out = json.loads(body)
                    kept = out["data"] if status == 201 else out.get("data", [])
                    for d in kept:
                        acked[d["source"]] = d["document_id"]
                    refused.update(f"upload:{n}" for n in names if f"upload:{n}" not in {d["source"] for d in kept})
                if i % 7 == 0 and acked:
                    victim = sorted(set(acked.values()) - deleted - kept_on_507)[0]
                    status, _, body = server.request("DELETE", f"/v1/documents/{victim}", key=None)
                    statuses.append(status)
                    assert status in (200, 507), (status, body)
                    (deleted if status == 200 else kept_on_507).add(victim)
            assert misses == 6, "the disk never filled"
    finally:
        server.close()  # closes the document service: the FAISS save and the BM25 snapshot may fail on the full disk
    assert 500 not in statuses and statuses.count(201) >= 5 and statuses.count(507) >= 12
    assert during_commit >= 1  # the rollback path ran, not only the check before writing

    again = DocumentService.from_settings(settings.model_copy(update={"min_free_bytes": 0}), embedder=emb)  # restart, disk still full
    try:
        for key, doc_id in acked.items():
            doc = again.store.get_by_key(key)
            if doc_id in deleted:
                assert doc is None, key
                continue
            assert doc is not None and doc.id == doc_id and doc.status == "ready" and doc.chunk_count > 0, key
            word = key.split(":", 1)[1]
            marker = (f"zq{word.split('-')[1]}x{word.split('-')[2]}y" if key.startswith("text:")
                      else "up{}x{}x{}".format(*word[3:-4].split("-")))
            hits = again.retrieve(marker, k=1, mode="bm25")
            assert hits and hits[0].document_id == doc_id, (key, marker)
        for key in refused:
            assert again.store.get_by_key(key) is None, f"{key} was answered 507 but is stored"
        for doc_id in kept_on_507:
            assert again.store.get(doc_id) is not None
        assert again.index.ids().tolist() == again.store.chunk_ids().tolist()
        leftovers = [p.name for p in (small_disk / "index").iterdir() if ".tmp" in p.name or ".bad-" in p.name]
        assert leftovers == []
    finally:
        again.close()
