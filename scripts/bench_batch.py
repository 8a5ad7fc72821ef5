"""Throughput of an OpenAI batch file of chat requests run by the batch kind (offline, as `edge-agent batch run`).

Builds N chat requests (questions about CPython's standard-library modules), runs them through the
same path as /v1/batches (validation with the route's models, ChatService, continuous batching),
checks that every line is answered with its own custom_id, and reports requests/s and generated
tokens/s; --baseline K also runs the first K one at a time (concurrency 1) for the batching ratio.

    .venv/bin/python scripts/bench_batch.py --requests 200 --max-tokens 32 --baseline 16 [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import pkgutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def make_batch(n: int, max_tokens: int) -> bytes:
    mods = sorted(m.name for m in pkgutil.iter_modules() if not m.name.startswith("_"))[: max(n, 1) * 3]
    lines = []
    for i in range(n):
        name = mods[(i * 7) % len(mods)]
        body = {"model": "default", "messages": [{"role": "user", "content": f"In one sentence, what is the Python module {name} used for?"}],
                "max_tokens": max_tokens, "temperature": 0}
        lines.append(json.dumps({"custom_id": f"req-{i:04d}", "method": "POST", "url": "/v1/chat/completions", "body": body}))
    return ("\n".join(lines) + "\n").encode()


def run(ctx, data: bytes, concurrency: int) -> dict:
    from edge_agent.jobs.batch_files import run_offline

    t0 = time.perf_counter()
    results = run_offline(ctx, data, concurrency=concurrency)
    secs = time.perf_counter() - t0
    want = [json.loads(x)["custom_id"] for x in data.decode().splitlines() if x.strip()]
    got = [line["custom_id"] for _, line in results]
    ok = [line for good, line in results if good]
    tokens = sum(line["response"]["body"]["usage"]["completion_tokens"] for line in ok)
    return {"requests": len(want), "answered": len(ok), "custom_ids_match": got == want, "seconds": round(secs, 2),
            "requests_per_s": round(len(want) / secs, 2), "completion_tokens": tokens, "tokens_per_s": round(tokens / secs, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=0, help="requests in flight (default: the engine's max_batch)")
    ap.add_argument("--baseline", type=int, default=0, help="also run the first K requests one at a time")
    ap.add_argument("--models-dir", default=str(REPO / "models"))
    ap.add_argument("--model", default="default")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from edge_agent.config import Settings
    from edge_agent.jobs.kinds import JobContext
    from edge_agent.runtime import build_runtime

    settings = Settings(models_dir=Path(args.models_dir), model=args.model, serve_documents=False)
    rt = build_runtime(settings, load_documents=False, start_jobs=False)
    try:
        ctx = JobContext(chat=rt.chat, embeddings=None, documents=lambda: None, settings=settings, priority=0)
        data = make_batch(args.requests, args.max_tokens)
        conc = args.concurrency or rt.scheduler.max_batch
        out = {"load_before": open("/proc/loadavg").read().split()[:3], "concurrency": conc, "batch": run(ctx, data, conc)}
        if args.baseline:
            head = b"".join(data.splitlines(keepends=True)[: args.baseline])
            out["batched_first_k"] = run(ctx, head, conc)
            out["one_at_a_time_first_k"] = run(ctx, head, 1)
            out["ratio_tokens_per_s"] = round(out["batched_first_k"]["tokens_per_s"] / max(out["one_at_a_time_first_k"]["tokens_per_s"], 1e-9), 2)
        out["load_after"] = open("/proc/loadavg").read().split()[:3]
    finally:
        rt.close()
    print(json.dumps(out, indent=2))
    b = out["batch"]
    return 0 if b["answered"] == b["requests"] and b["custom_ids_match"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
