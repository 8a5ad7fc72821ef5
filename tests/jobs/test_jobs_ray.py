"""Job runs on Ray (jobs_backend = "ray"): a real local Ray instance, two actors, each loading the tiny
Llama bundle; results must match the local backend's, and a killed actor must cost nothing."""
from __future__ import annotations

import json
import threading
import time

import pytest

ray = pytest.importorskip("ray", reason="the cluster extra (ray) is not installed")

from jobs_helpers import doc_text  # noqa: E402

RAY = dict(jobs_backend="ray", ray_actors=2, ray_actor_cpus=1, ray_inflight_per_actor=4, jobs_concurrency=8)


@pytest.fixture(scope="module", autouse=True)
def _ray_down_after():
    yield
    if ray.is_initialized():
        ray.shutdown()


def _batch_file(rt, n: int) -> str:
    from edge_agent.jobs.batch_files import stores

    lines = [json.dumps({"custom_id": f"req-{i}", "method": "POST", "url": "/v1/completions",
                         "body": {"model": "default", "prompt": f"Item {i}: the river", "max_tokens": 6, "temperature": 0}})
             for i in range(n)]
    lines.insert(3, "{not json")  # one bad line: a per-line error, the run goes on
    rec = stores(rt.settings, rt.jobs.ctx.db).files.create("batch", "in.jsonl", "\n".join(lines).encode())
    return rec.id


def _outcomes(rt, run_id: str) -> dict[str, tuple[str, object]]:
    rows, total = rt.jobs.results(run_id, limit=1000)
    assert total == len(rows)
    out = {}
    for r in rows:
        res = r.result or {}
        key = res.get("label") or res.get("summary") or json.dumps(res.get("response", {}).get("body", {}).get("choices"))
        out[r.key] = (r.status, key)
    return out


def test_ray_runs_match_the_local_backend(make_runtime, wordy_site):
    local = make_runtime()
    texts = {local.documents.add_text(f"doc {i}", doc_text(i)).document_id for i in range(6)}
    assert len(texts) == 6
    params = {"labels": ["river", "copper", "garden"], "method": "likelihood", "label_set": "topic"}
    # embedding with self-training: the owner adapts the prototypes to the run, the actors classify with them
    adapted = {"labels": ["river", "copper", "garden"], "method": "embedding", "label_set": "topic2", "self_train": True}
    jobs = {"topics": ("classify", params), "adapted": ("classify", adapted),
            "digest": ("summarize", {"max_tokens": 12, "force": True}),
            "file": ("batch", {"input_file_id": _batch_file(local, 10), "endpoint": "/v1/completions"})}
    want = {}
    for name, (kind, p) in jobs.items():
        local.jobs.create_job(name, kind, p)
        want[name] = _outcomes(local, local.jobs.run_foreground(name).id)
    local.close()

    rt = make_runtime(**RAY)  # the same data folder: the same documents, a pool of two actors
    assert rt.cluster is not None and len(rt.cluster.slots) == 2
    for name, (kind, p) in jobs.items():  # new jobs: a summarize job skips what its last run summarized
        rt.jobs.create_job(f"{name}-ray", kind, p)
        run = rt.jobs.run_foreground(f"{name}-ray")
        assert run.status == "succeeded", run
        assert _outcomes(rt, run.id) == want[name], name  # greedy: the same labels, summaries and answers
        if name == "adapted":  # the actors used the prototypes self-trained by the owner
            assert all(r.result["self_trained"] is True for r in rt.jobs.results(run.id, limit=100)[0])
    st = rt.cluster.status()
    assert st["actors"] == 2 and st["items_done"] >= 6 + 6 + 6 + 10 and st["in_flight"] == 0
    # the labels were written by the owner, with the owner's bundle id
    doc = rt.documents.get(min(texts))
    assert doc["labels"] and doc["labels"][0]["bundle_id"] == rt.jobs.ctx.bundle_id
    from edge_agent.api.app import create_app

    body = create_app(rt).test_client().get("/v1/cluster").get_json()
    assert body["backend"] == "ray" and body["actors"] == 2 and sum(n["actors"] for n in body["nodes"].values()) == 2
    from prometheus_client import generate_latest

    assert b"edge_agent_cluster_actors 2.0" in generate_latest(rt.metrics.registry)


def test_a_killed_actor_costs_no_item(make_runtime):
    rt = make_runtime(**RAY)
    for i in range(12):
        rt.documents.add_text(f"doc {i}", doc_text(i, sentences=10))
    rt.jobs.create_job("digest", "summarize", {"max_tokens": 24})
    victim = rt.cluster.slots[0].actor
    killed = threading.Event()

    def kill_when_busy() -> None:
        end = time.monotonic() + 120
        while time.monotonic() < end and not rt.cluster.slots[0].inflight:
            time.sleep(0.01)
        ray.kill(victim, no_restart=False)  # the actor dies with items in flight; Ray restarts it
        killed.set()

    t = threading.Thread(target=kill_when_busy, daemon=True)
    t.start()
    run = rt.jobs.run_foreground("digest")
    t.join(5)
    assert killed.is_set()
    assert run.status == "succeeded"
    rows, total = rt.jobs.results(run.id, limit=100)
    assert total == 12 and len({r.key for r in rows}) == 12  # one result per item
    # the items the dead actor held ran again elsewhere: none was given up on
    assert all(r.status in ("succeeded", "failed") and "gave up" not in (r.error or "") for r in rows)
    assert rt.cluster.items_done >= sum(r.status == "succeeded" for r in rows)


def test_ray_backend_without_a_cluster_says_why(make_runtime, monkeypatch):
    from edge_agent.jobs import ray_backend

    def unreachable(*a, **k):
        raise ConnectionError("no head")

    if ray.is_initialized():
        ray.shutdown()
    monkeypatch.setattr(ray, "init", unreachable)
    rt = make_runtime(**{**RAY, "ray_address": "ray://192.0.2.1:10001"})
    assert rt.cluster is None
    state, why = rt.parts["cluster"]
    assert state == "failed" and "ray_address" in why
    assert not isinstance(rt.jobs.kinds["summarize"], ray_backend.RayKind)  # runs stay local and still work
    from edge_agent.api.app import create_app

    body = create_app(rt).test_client().get("/v1/cluster").get_json()
    assert body["actors"] == 0 and "not running" in body["error"] and "192.0.2.1" not in body["error"]


def test_a_lost_node_costs_no_item(make_runtime):
    """A two-node local cluster (Ray's own test cluster: one raylet per node); the worker node's
    raylet is killed mid-run, its actor with it, and every item still ends with exactly one result."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        worker = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        rt = make_runtime(**{**RAY, "ray_address": cluster.address})
        assert len({s.node for s in rt.cluster.slots}) >= 1 and len(rt.cluster.slots) == 2
        for i in range(10):
            rt.documents.add_text(f"doc {i}", doc_text(i, sentences=10))
        rt.jobs.create_job("digest", "summarize", {"max_tokens": 24})
        on_worker = [s for s in rt.cluster.slots
                     if ray.get(s.actor.where.remote())["pid"] and s.actor._actor_id.hex() in
                     {a for a, st in _actor_nodes().items() if st == worker.node_id}]
        assert len(on_worker) == 1  # one actor per node: each node has one CPU, each actor takes one
        removed = threading.Event()

        def remove_when_busy() -> None:
            end = time.monotonic() + 120
            while time.monotonic() < end and not on_worker[0].inflight:
                time.sleep(0.01)
            cluster.remove_node(worker)  # kills that node's raylet and its workers
            removed.set()

        t = threading.Thread(target=remove_when_busy, daemon=True)
        t.start()
        run = rt.jobs.run_foreground("digest")
        t.join(30)
        assert removed.is_set() and run.status == "succeeded"
        rows, total = rt.jobs.results(run.id, limit=100)
        assert total == 10 and len({r.key for r in rows}) == 10
        assert all("gave up" not in (r.error or "") for r in rows)
        rt.close()
    finally:
        ray.shutdown()
        cluster.shutdown()


def _actor_nodes() -> dict[str, str]:
    """actor id (hex) -> node id, from the GCS."""
    from ray._private.state import actors

    return {aid: info["Address"]["NodeID"] for aid, info in actors().items()}


def test_reindex_embeds_on_the_actors(make_runtime, tmp_path):
    """Bulk embedding of a re-index goes to the actors (same model: the vectors match local ones);
    the owner keeps writing the index, and search finds every file afterwards."""
    import numpy as np
    from jobs_helpers import EMBED_CACHE

    from edge_agent.jobs.ray_backend import RemoteEmbedder

    (tmp_path / "var").mkdir(exist_ok=True)
    (tmp_path / "var" / "embedding-cache").symlink_to(EMBED_CACHE, target_is_directory=True)  # actors reuse the export
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for i in range(6):
        (docs / f"note-{i}.txt").write_text(doc_text(i, sentences=12) + f" The codeword is zebra{i}.", encoding="utf-8")
    rt = make_runtime(**RAY)
    emb = rt.documents.embedder
    assert isinstance(emb, RemoteEmbedder)
    emb._min = 1  # every call goes to the actors here (the default keeps small calls local)
    rt.jobs.create_job("walk", "reindex", {"folders": [str(docs)]})
    run = rt.jobs.run_foreground("walk")
    assert run.status == "succeeded" and run.counts["succeeded"] >= 6, run.counts
    assert emb.remote_texts > 0
    for i in range(6):
        hits = rt.documents.retrieve(f"zebra{i}", k=3, mode="hybrid")
        assert any(f"zebra{i}" in h.text for h in hits)
    texts = [doc_text(1), doc_text(2)]
    remote = emb.embed(texts)
    local = emb._local.embed(texts)
    assert float(np.min(np.sum(remote * local, axis=1))) > 0.99
