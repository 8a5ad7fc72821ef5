#!/usr/bin/env python
"""Benchmark of nightly jobs on one engine: a summarize run in one batch vs one after another, and interactive TTFT while it runs.

1. Throughput: 64 documents of 100-450 words (the docstrings of Python standard-library
   modules: real text nobody on the team wrote, installed with Python) summarized as one run
   (`--concurrency` items in flight, decoded together) and the same 64 one after another
   (concurrency 1), on the same engine, in this process, alternating rounds; generated tokens/s.
   Target: batched >= 4x sequential.
2. Latency: time to first token of 20 interactive chat requests, idle and while a summarize run
   keeps the engine busy (p50, p95). Target: busy p95 <= 2x idle p95.

Usage: .venv/bin/python scripts/bench_jobs.py [--model default] [--docs 64] [--max-tokens 48] [--json]
Prints `cat /proc/loadavg` before and after: on a shared machine, compare ratios, not absolute figures.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def stdlib_texts(n: int, words: tuple[int, int] = (100, 450)) -> list[tuple[str, str]]:
    """(title, text) of n standard-library module docstrings with at least words[0] words, cut to words[1]."""
    import sysconfig

    stdlib = sysconfig.get_paths()["stdlib"]
    names = []
    for m in pkgutil.iter_modules([stdlib]):
        if m.name.startswith("_") or m.name in ("antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test"):
            continue
        names.append(m.name)
        if m.ispkg:  # e.g. email.mime, concurrent.futures, xml.dom
            names += [f"{m.name}.{s.name}" for s in pkgutil.iter_modules([os.path.join(stdlib, m.name)]) if not s.name.startswith("_")]
    out = []
    for mod in sorted(names):
        try:
            doc = importlib.import_module(mod).__doc__ or ""
        except Exception:
            continue
        w = doc.split()
        if len(w) >= words[0]:
            out.append((mod, " ".join(w[: words[1]])))
        if len(out) == n:
            break
    if len(out) < n:
        raise SystemExit(f"only {len(out)} module docstrings are long enough; lower --docs")
    return out


def store_documents(db, texts: list[tuple[str, str]]) -> None:
    """The documents as the summarize kind reads them (one chunk each; the vectors are not used here)."""
    import hashlib

    import numpy as np

    from edge_agent.store import DocumentStore
    from edge_agent.store.documents import ChunkRecord, DocumentMeta

    store = DocumentStore(db)
    for title, text in texts:
        h = hashlib.sha256(text.encode()).hexdigest()
        meta = DocumentMeta(f"text:{title}", title, "txt", h, len(text))
        store.replace(meta, [ChunkRecord(0, 0, text, 0, len(text), len(text.split()), vector=np.zeros(4, np.float32))])


def ttft(chat, question: str, priority: int = 0) -> float:
    from edge_agent.services.chat import ChoiceDelta, SamplingOptions

    t0 = time.perf_counter()
    gen = chat.chat([{"role": "user", "content": question}], SamplingOptions(max_tokens=4, temperature=0.0), priority=priority)
    first = None
    for ev in gen.events():
        if isinstance(ev, ChoiceDelta) and first is None:
            first = time.perf_counter() - t0
    return first if first is not None else time.perf_counter() - t0


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


QUESTIONS = [f"What is the capital of {c}?" for c in (
    "France", "Spain", "Italy", "Germany", "Portugal", "Austria", "Poland", "Greece", "Norway", "Sweden",
    "Finland", "Denmark", "Ireland", "Belgium", "Hungary", "Romania", "Croatia", "Estonia", "Latvia", "Iceland")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default="models")
    ap.add_argument("--model", default="default")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--docs", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=0, help="items in flight in the batched run (default: the engine's batch slots)")
    ap.add_argument("--rounds", type=int, default=1, help="alternating batched/sequential rounds (median reported)")
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--prefill-chunk", type=int, default=0, help="prompt tokens prefilled per step (default: the setting's 256)")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    os.environ.setdefault("EDGE_AGENT_CONFIG", "/nonexistent/edge-agent-bench.toml")
    from edge_agent.config import Settings
    from edge_agent.jobs.service import JobsService
    from edge_agent.runtime import build_engine
    from edge_agent.services.chat import ChatService
    from edge_agent.store import SqliteDatabase

    load_before = Path("/proc/loadavg").read_text().split()[:3]
    tmp = Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    settings = Settings(models_dir=Path(args.models_dir), model=args.model, threads=args.threads, max_batch=args.max_batch,
                        context_length=2048, data_dir=tmp, index_dir=tmp / "index", max_queue=256,
                        **({"prefill_chunk": args.prefill_chunk} if args.prefill_chunk else {}))
    scheduler = build_engine(settings)
    chat = ChatService(scheduler, request_timeout_s=600, default_max_tokens=64)
    concurrency = args.concurrency or int(getattr(scheduler, "batch_slots", args.max_batch))
    db = SqliteDatabase(tmp / "edge-agent.db")
    texts = stdlib_texts(args.docs)
    store_documents(db, texts)
    jobs = JobsService(settings, db, chat, None, lambda: None)
    jobs.create_job("bench", "summarize", {"max_tokens": args.max_tokens, "force": True})
    words = [len(t.split()) for _, t in texts]
    report: dict = {"model": args.model, "docs": args.docs, "words_per_doc": [min(words), int(statistics.median(words)), max(words)],
                    "max_tokens": args.max_tokens, "max_batch": args.max_batch, "concurrency": concurrency,
                    "prefill_chunk": settings.prefill_chunk,
                    "loadavg_before": load_before}

    def one_run(c: int) -> dict:
        t0 = time.perf_counter()
        run = jobs.run_foreground("bench", overrides={"concurrency": c})
        dt = time.perf_counter() - t0
        assert run.status == "succeeded", (run.status, run.counts, run.error)
        errors = sorted({i.error for i in jobs.results(run.id, status="failed")[0]})
        items = jobs.results(run.id, 0, 100000, "succeeded")[0]
        prompt = sum(int((i.result or {}).get("usage", {}).get("prompt_tokens", 0)) for i in items)
        return {"seconds": round(dt, 2), "tokens": run.generated_tokens, "tok_s": round(run.generated_tokens / dt, 1),
                "prompt_tokens": prompt, "prompt_and_generated_tok_s": round((prompt + run.generated_tokens) / dt, 1),
                "succeeded": run.counts["succeeded"], "failed": run.counts["failed"], "errors": errors[:3]}

    if not args.skip_throughput:
        ttft(chat, "Warm up.")
        batched, sequential = [], []
        for _ in range(args.rounds):
            batched.append(one_run(concurrency))
            print(f"batched    (concurrency {concurrency}): {batched[-1]}", file=sys.stderr)
            sequential.append(one_run(1))
            print(f"sequential (concurrency 1): {sequential[-1]}", file=sys.stderr)
        b = statistics.median(r["tok_s"] for r in batched)
        s = statistics.median(r["tok_s"] for r in sequential)
        report.update(batched=batched, sequential=sequential, throughput_ratio=round(b / s, 2))

    # interactive TTFT: idle, then while a run keeps the engine busy
    idle = [ttft(chat, q) for q in QUESTIONS[: args.requests]]
    jobs.update_job("bench", {"params": {"max_tokens": 256, "force": True}})
    done = threading.Event()

    def background() -> None:
        try:
            jobs.run_foreground("bench", overrides={"concurrency": concurrency})
        finally:
            done.set()

    threading.Thread(target=background, daemon=True).start()
    end = time.monotonic() + 60
    while scheduler.active < min(concurrency, getattr(scheduler, "batch_slots", concurrency)) and time.monotonic() < end:
        time.sleep(0.05)
    busy, busy_active = [], []
    for q in QUESTIONS[: args.requests]:
        busy_active.append(scheduler.active)
        busy.append(ttft(chat, q))
        time.sleep(0.1)
    for run in jobs.list_runs("bench", 0, 1)[0]:
        jobs.cancel_run(run.id)
    done.wait(120)
    report.update(
        ttft_idle_ms={"p50": round(pct(idle, 0.5) * 1000, 1), "p95": round(pct(idle, 0.95) * 1000, 1)},
        ttft_busy_ms={"p50": round(pct(busy, 0.5) * 1000, 1), "p95": round(pct(busy, 0.95) * 1000, 1)},
        busy_active_sequences=int(statistics.median(busy_active)),
        ttft_p95_ratio=round(pct(busy, 0.95) / pct(idle, 0.95), 2),
        loadavg_after=Path("/proc/loadavg").read_text().split()[:3],
    )
    scheduler.stop()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for k, v in report.items():
            print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
