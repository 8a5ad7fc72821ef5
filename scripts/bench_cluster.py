#!/usr/bin/env python
"""The same summarize run on the local backend and on Ray with 1 and 2 actors: items/s and the overhead per item.

64 documents (standard-library module docstrings, as scripts/bench_jobs.py uses) are summarized by
one job, run in alternating rounds: local (the daemon's own engine), ray with one actor (the same
threads as local), ray with two actors (the threads split between them). On one machine the point
is the overhead of Ray (target: one actor within 15% of local); more machines add actors.

Usage: .venv/bin/python scripts/bench_cluster.py [--docs 64] [--max-tokens 32] [--rounds 1] [--json]
Prints the load average before and after: compare ratios of one run, not figures of different runs.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default="models")
    ap.add_argument("--model", default="default")
    ap.add_argument("--threads", type=int, default=2, help="engine threads of the local run and of the one-actor pool")
    ap.add_argument("--docs", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    os.environ.setdefault("EDGE_AGENT_CONFIG", "/nonexistent/edge-agent-bench.toml")
    import ray

    from bench_jobs import stdlib_texts, store_documents
    from edge_agent.config import Settings
    from edge_agent.jobs.ray_backend import RayPool, wrap_kinds
    from edge_agent.jobs.service import JobsService
    from edge_agent.runtime import build_engine, build_job_worker
    from edge_agent.services.chat import ChatService
    from edge_agent.store import SqliteDatabase

    load_before = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    base = dict(models_dir=Path(args.models_dir).resolve(), model=args.model, max_batch=16, context_length=2048,
                data_dir=tmp, index_dir=tmp / "index", max_queue=256, jobs_concurrency=16)
    db = SqliteDatabase(tmp / "edge-agent.db")
    texts = stdlib_texts(args.docs, (120, 260))
    store_documents(db, texts)

    local_settings = Settings(**base, threads=args.threads)
    chat = ChatService(build_engine(local_settings), request_timeout_s=600, default_max_tokens=64)
    services = {"local": JobsService(local_settings, db, chat, None, lambda: None)}
    # one Ray instance for both pools: logical CPUs for three actors (the cores are the machine's either way)
    ray.init(num_cpus=args.threads * 2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    for name, actors in (("ray1", 1), ("ray2", 2)):
        cpus = max(1, args.threads // actors)
        s = Settings(**base, threads=cpus, jobs_backend="ray", ray_actors=actors, ray_actor_cpus=cpus, ray_inflight_per_actor=16)
        t0 = time.perf_counter()
        pool = RayPool(s, build_job_worker, expect_bundle=services["local"].ctx.bundle_id)
        svc = JobsService(s, db, chat, None, lambda: None)
        svc.kinds = wrap_kinds(svc.kinds, pool)
        svc.pool_start_s = time.perf_counter() - t0
        services[name] = svc
    for name, svc in services.items():
        svc.create_job(f"bench-{name}", "summarize", {"max_tokens": args.max_tokens, "force": True})
        svc.create_job(f"warm-{name}", "summarize", {"max_tokens": 8, "force": True})
        svc.run_foreground(f"warm-{name}", overrides={"max_items": 4})  # first steps of every engine are slow

    timings: dict[str, list[float]] = {name: [] for name in services}
    tokens: dict[str, list[int]] = {name: [] for name in services}
    failed: dict[str, list[str]] = {}
    for r in range(args.rounds):
        order = list(services.items())
        for name, svc in (order if r % 2 == 0 else order[::-1]):  # ABC, CBA, ...: no side always goes first
            t0 = time.perf_counter()
            run = svc.run_foreground(f"bench-{name}", overrides={"concurrency": 16 * (2 if name == "ray2" else 1)})
            timings[name].append(time.perf_counter() - t0)
            tokens[name].append(run.generated_tokens)
            assert run.status == "succeeded", (name, run.status, run.error)
            failed[name] = sorted({i.error for i in svc.results(run.id, status="failed")[0]})[:3]
    n = args.docs
    med = {k: statistics.median(v) for k, v in timings.items()}
    report = {
        "docs": n, "max_tokens": args.max_tokens, "threads": args.threads, "rounds": args.rounds,
        "items_per_s": {k: round(n / v, 3) for k, v in med.items()},
        "generated_tok_s": {k: round(statistics.median(tokens[k]) / med[k], 1) for k in med},
        "ray1_vs_local": round(med["local"] / med["ray1"], 3),
        "ray2_vs_local": round(med["local"] / med["ray2"], 3),
        "overhead_ms_per_item_ray1": round((med["ray1"] - med["local"]) / n * 1000, 1),
        "pool_start_s": {k: round(getattr(s, "pool_start_s", 0.0), 1) for k, s in services.items() if k != "local"},
        "failed_items": {k: v for k, v in failed.items() if v},
        "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
        "targets": {"ray1_within_15pct_of_local": med["ray1"] <= med["local"] * 1.15},
    }
    print(json.dumps(report, indent=None if args.json else 2))
    ray.shutdown()
    chat.scheduler.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
