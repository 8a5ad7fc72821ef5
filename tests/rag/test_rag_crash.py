"""kill -9 during ingestion and during index saves: after restart index and SQLite agree, acked docs are found."""
from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_docs import EMBED_CACHE

HERE = Path(__file__).resolve().parent


def _run_and_kill(mode: str, data_dir: Path, index_dir: Path, start: int, rng: random.Random) -> dict[int, int]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "crash_worker.py"), mode, str(data_dir), str(index_dir), str(EMBED_CACHE), str(start)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    acked: dict[int, int] = {}
    try:
        line = proc.stdout.readline()
        assert line.strip() == "READY", "worker did not start"
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        # the random kill point counts from the first ack, so a slow (loaded) machine still kills mid-run
        # after some work was acknowledged, not before the first document got through
        deadline = time.monotonic() + 120
        while not acked and time.monotonic() < deadline and sel.select(timeout=max(0.0, deadline - time.monotonic())):
            line = proc.stdout.readline()
            if not line:  # the worker ended
                break
            if line.startswith("ACK"):
                _, i, doc_id = line.split()
                acked[int(i)] = int(doc_id)
        deadline = time.monotonic() + rng.uniform(0.2, 2.0)
        while time.monotonic() < deadline:
            if sel.select(timeout=max(0.0, deadline - time.monotonic())):
                line = proc.stdout.readline()
                if line.startswith("ACK"):
                    _, i, doc_id = line.split()
                    acked[int(i)] = int(doc_id)
        proc.kill()  # SIGKILL
        proc.wait(10)
        for line in proc.stdout.read().splitlines():  # acks already written before the kill count too
            if line.startswith("ACK"):
                _, i, doc_id = line.split()
                acked[int(i)] = int(doc_id)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return acked


@pytest.mark.parametrize("mode", ["ingest", "save"])
def test_kill_9_then_restart_agrees(mode, make_service, tmp_path):
    rng = random.Random(1234 if mode == "ingest" else 4321)
    acked: dict[int, int] = {}
    start = 0
    for _ in range(3):
        acked.update(_run_and_kill(mode, tmp_path / "var", tmp_path / "index", start, rng))
        start += 1000
        svc = make_service()
        check = svc.last_check
        assert svc.index.ids().tolist() == svc.store.chunk_ids().tolist(), check
        assert svc.index.bm25_ids().tolist() == svc.store.chunk_ids().tolist()
        assert svc.check(repair=False).ok
        for i, doc_id in acked.items():
            hits = svc.retrieve(f"zq{i}x", k=1, mode="bm25")
            assert hits and hits[0].document_id == doc_id, (i, check)
            assert svc.retrieve(f"Record {i}", k=1, mode="dense", filters={"document_ids": [doc_id]})
        svc.close()
    assert len(acked) >= 3
