#!/usr/bin/env python
"""Benchmark of nightly jobs on one engine: a summarize run in one batch vs one after another, and interactive TTFT while it runs.

1. Throughput: 64 documents of 100-450 words (the docstrings of Python standard-library
   modules: real text nobody on the team wrote, installed with Python) summarized as one run
   (`--concurrency` items in flight, decoded together) and the same 64 one after another
   (concurrency 1), on the same engine, in this process, alternating rounds; generated tokens/s.
   Target: batched >= 4x sequential.
   Each run also reports where its wall time went: model time in prefill calls, in decode steps,
   and the rest (Python, the job runner), with the decode-phase speed-up (sequential decode
   seconds per generated token / batched) and the Amdahl bound that follows: the ratio batching
   could reach if only decode got faster (prefill and the rest as in the sequential run).
2. Latency: time to first token of 20 interactive chat requests, idle and while a summarize run
   keeps the engine busy (p50, p95), in alternating rounds under the scheduler's user-first policy
   (interrupt batch steps for a user, keep a preempted batch prompt's cache) and the policy before
   (`--policies new,old`). Each request's TTFT is split into queue wait (submit -> admitted: the
   step in flight), its own prefill and the rest, with the step that was in flight. The batch run's
   generated tok/s during the busy window shows what the policy costs it.
   Target: busy p95 <= 2x idle p95.
   Each request asks for `--answer-tokens` tokens (ignore_eos: the same length idle and busy), so a round
   also gives the whole completion's time and the time per output token after the first (p50, p95, busy/idle):
   what a user waiting for the whole answer sees. Policies: new (user first, paced at the
   interactive_slowdown setting), unpaced (user first, interactive_slowdown 0: every step carries every
   row, the scheduler before pacing), old (users wait for the batch step in flight, unpaced),
   slowdownX (new, paced at X).

Usage: .venv/bin/python scripts/bench_jobs.py [--model default] [--docs 64] [--max-tokens 48] [--rounds 3] [--json]
       [--policies unpaced,new --interleave --answer-tokens 100] (completion time and time per token, the
       policies alternating request by request in each busy window) [--compare-unpaced] (also a batched run
       with pacing off: with no interactive traffic it should run the same steps)
       [--compare-chunk 64] (a batched run in the chunks batch prompts get while users are served)
       [--max-batch 40 --compare-concurrency 30] (also a batched run with more items in flight, on the
       same engine as the others: a step binds only the slots in use, so a larger max_batch does not
       slow the sequential run)
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


def ttft(chat, question: str, priority: int = 0, detail: list | None = None, tokens: int = 4) -> float:
    """Seconds to the first streamed text of a 4-token chat answer, or of a `tokens`-token completion of the same question
    (more than 4: "Question: ...\nAnswer:", ignore_eos and no stop strings, so it is that long idle and busy: the chat
    template's stop strings end the base model's answers after ~10 tokens); detail gets the server's split of it, the
    completion's seconds and its time per output token after the first."""
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.generation import ChoiceDelta

    t0 = time.perf_counter()
    if tokens > 4:
        gen = chat.complete([f"Question: {question}\nAnswer:"], SamplingOptions(max_tokens=tokens, temperature=0.0, ignore_eos=True),
                            priority=priority)
    else:
        gen = chat.chat([{"role": "user", "content": question}], SamplingOptions(max_tokens=tokens, temperature=0.0),
                        priority=priority)
    first = None
    for ev in gen.events():
        if isinstance(ev, ChoiceDelta) and first is None:
            first = time.perf_counter() - t0
    total = time.perf_counter() - t0
    first = first if first is not None else total
    fin = gen.choices[0].handle.finished
    if detail is not None and fin is not None:
        u = fin.usage
        n = u.completion_tokens
        detail.append({"ttft_ms": round(first * 1000, 1), "queue_ms": round(u.queue_s * 1000, 1),
                       "prefill_ms": round(u.prefill_s * 1000, 1),
                       "rest_ms": round((first - u.queue_s - u.prefill_s) * 1000, 1),
                       "prompt_tokens": u.prompt_tokens, "waited_for": getattr(u, "waited_for", ""),
                       "completion_tokens": n, "total_ms": round(total * 1000, 1),
                       "tpot_ms": round((total - first) * 1000 / max(1, n - 1), 2)})
    return first


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


QUESTIONS = [f"What is the capital of {c}?" for c in (
    "France", "Spain", "Italy", "Germany", "Portugal", "Austria", "Poland", "Greece", "Norway", "Sweden",
    "Finland", "Denmark", "Ireland", "Belgium", "Hungary", "Romania", "Croatia", "Estonia", "Latvia", "Iceland")]


def stats_delta(scheduler, before: dict) -> dict:
    now = dict(getattr(scheduler, "step_stats", {}))
    return {k: round(v - before.get(k, 0), 3) if isinstance(v, float) else v - before.get(k, 0) for k, v in now.items()}


def paired_ratios(a: list[dict], b: list[dict], name: str) -> dict:
    """Per-round ratios of a's runs to b's (each pair ran back to back): median, min, max of tok/s and of
    tok per CPU second (the process's CPU time: on a machine shared with other work it moves less than
    wall time; meaningful with --no-spinning, where a waiting thread burns none)."""
    out: dict = {}
    for key, label in (("tok_s", "paired"), ("tok_per_cpu_s", "cpu_paired")):
        rs = [x[key] / y[key] for x, y in zip(a, b) if y.get(key)]
        if rs:
            out[f"{label}_ratio_{name}"] = {"median": round(statistics.median(rs), 2), "min": round(min(rs), 2), "max": round(max(rs), 2)}
    return out


def time_split(r: dict) -> dict:
    """Shares of a run's wall time: prefill calls, decode steps, the rest."""
    wall, st = r["seconds"], r["steps"]
    if not st or not wall:
        return {}
    pre, dec = st.get("prefill_s", 0.0), st.get("decode_s", 0.0)
    return {"prefill_share": round(pre / wall, 3), "decode_share": round(dec / wall, 3),
            "other_share": round(max(0.0, wall - pre - dec) / wall, 3),
            "prefill_tok_s": round(st.get("prefill_tokens", 0) / pre, 1) if pre else 0.0,
            "tokens_per_prefill_call": round(st.get("prefill_tokens", 0) / max(1, st.get("prefill_calls", 0)), 1),
            "rows_per_decode_step": round(st.get("decode_rows", 0) / max(1, st.get("decode_steps", 0)), 2),
            "decode_s_per_token": round(dec / max(1, r["tokens"]), 5)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", default="models")
    ap.add_argument("--model", default="default")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--no-spinning", action="store_true", help="onnxruntime threads do not busy-wait (the thread_spinning "
                    "setting; for a machine that other busy work shares)")
    ap.add_argument("--docs", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=0, help="items in flight in the batched run (default: the engine's batch slots)")
    ap.add_argument("--rounds", type=int, default=1, help="alternating batched/sequential rounds (median reported)")
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--prefill-chunk", type=int, default=0, help="prompt tokens prefilled per step (default: the setting's 256)")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--skip-latency", action="store_true")
    ap.add_argument("--compare-chunk", type=int, default=0, help="also a batched run per round with this prefill chunk "
                    "(e.g. 64: the chunk batch prompts get while users are served) to show what chunk size costs")
    ap.add_argument("--compare-concurrency", type=int, default=0, help="also a batched run per round with this many items "
                    "in flight (at most the engine's batch slots: raise --max-batch), against the same sequential runs")
    ap.add_argument("--skip-sequential", action="store_true", help="no sequential runs (with --compare-*: batched variants only)")
    ap.add_argument("--policies", default="new,old", help="latency rounds alternate these scheduler policies "
                    "(new: user_first, paced; unpaced: user_first, interactive_slowdown 0; old: users wait for the batch "
                    "step in flight, unpaced; slowdownX: new at interactive_slowdown X)")
    ap.add_argument("--answer-tokens", type=int, default=4, help="tokens each interactive request asks for (ignore_eos "
                    "above 4): its completion time and time per output token are reported beside its TTFT")
    ap.add_argument("--interleave", action="store_true", help="the policies alternate request by request within each busy "
                    "window, against one idle baseline measured half before and half after it (pairs them under the same load)")
    ap.add_argument("--compare-unpaced", action="store_true", help="also a batched run per round with interactive_slowdown 0 "
                    "(no interactive traffic: pacing should change nothing)")
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
                        thread_spinning=not args.no_spinning,
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
    slots = int(getattr(scheduler, "batch_slots", args.max_batch))
    if args.compare_concurrency > slots:
        raise SystemExit(f"--compare-concurrency {args.compare_concurrency} exceeds the engine's {slots} batch slots: raise --max-batch")
    report: dict = {"model": args.model, "docs": args.docs, "words_per_doc": [min(words), int(statistics.median(words)), max(words)],
                    "max_tokens": args.max_tokens, "max_batch": args.max_batch, "concurrency": concurrency,
                    "prefill_chunk": settings.prefill_chunk, "thread_spinning": settings.thread_spinning,
                    "prefix_cache_mb": settings.prefix_cache_mb,
                    "loadavg_before": load_before}

    def one_run(c: int, slowdown: float | None = None) -> dict:
        # every run starts with an empty prefix cache: a large one would otherwise hand the next run
        # every prompt of this one (the same documents), and the prefill would not be measured
        scheduler.prefix_cache = type(scheduler.prefix_cache)(scheduler.prefix_cache.max_bytes)
        st0 = dict(getattr(scheduler, "step_stats", {}))
        hits0 = scheduler.prefix_cache.hits
        paced = getattr(scheduler, "interactive_slowdown", None)
        if slowdown is not None and paced is not None:
            scheduler.interactive_slowdown = slowdown
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            run = jobs.run_foreground("bench", overrides={"concurrency": c})
        finally:
            if paced is not None:
                scheduler.interactive_slowdown = paced
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert run.status == "succeeded", (run.status, run.counts, run.error)
        errors = sorted({i.error for i in jobs.results(run.id, status="failed")[0]})
        items = jobs.results(run.id, 0, 100000, "succeeded")[0]
        prompt = sum(int((i.result or {}).get("usage", {}).get("prompt_tokens", 0)) for i in items)
        return {"seconds": round(dt, 2), "tokens": run.generated_tokens, "tok_s": round(run.generated_tokens / dt, 1),
                "cpu_s": round(cpu, 2), "tok_per_cpu_s": round(run.generated_tokens / max(cpu, 1e-9), 2),
                "prompt_tokens": prompt, "prompt_and_generated_tok_s": round((prompt + run.generated_tokens) / dt, 1),
                "succeeded": run.counts["succeeded"], "failed": run.counts["failed"], "errors": errors[:3],
                "generations": sum(int((i.result or {}).get("usage", {}).get("generations", 0)) for i in items),
                "prefix_cache_hits": scheduler.prefix_cache.hits - hits0, "steps": stats_delta(scheduler, st0)}

    from edge_agent.engine.types import BATCH_PRIORITY

    if not args.skip_throughput:
        # at batch priority: an interactive warm-up would put the first run in the scheduler's
        # "users are being served" window (short batch prefill chunks) for interactive_window_s
        ttft(chat, "Warm up.", priority=BATCH_PRIORITY)
        batched, sequential, small, wide, unpaced = [], [], [], [], []
        for r in range(args.rounds):
            if args.compare_unpaced and r % 2:  # alternate which goes first
                unpaced.append(one_run(concurrency, slowdown=0.0))
                print(f"batched    (unpaced): {unpaced[-1]}", file=sys.stderr)
            batched.append(one_run(concurrency))
            print(f"batched    (concurrency {concurrency}): {batched[-1]}", file=sys.stderr)
            if args.compare_unpaced and not r % 2:
                unpaced.append(one_run(concurrency, slowdown=0.0))
                print(f"batched    (unpaced): {unpaced[-1]}", file=sys.stderr)
            if args.compare_chunk:
                full, scheduler.prefill_chunk = scheduler.prefill_chunk, args.compare_chunk
                try:
                    small.append(one_run(concurrency))
                finally:
                    scheduler.prefill_chunk = full
                print(f"batched    (prefill chunk {args.compare_chunk}): {small[-1]}", file=sys.stderr)
            if args.compare_concurrency:
                wide.append(one_run(args.compare_concurrency))
                print(f"batched    (concurrency {args.compare_concurrency}): {wide[-1]}", file=sys.stderr)
            if args.skip_sequential:
                continue
            sequential.append(one_run(1))
            print(f"sequential (concurrency 1): {sequential[-1]}", file=sys.stderr)
        b = statistics.median(r["tok_s"] for r in batched)
        s = statistics.median(r["tok_s"] for r in sequential) if sequential else float("nan")
        for r in batched + sequential:
            r.update(time_split(r))
        report.update(batched=batched, sequential=sequential, throughput_ratio=round(b / s, 2))
        report.update(paired_ratios(batched, sequential, "batched"))
        if wide:
            for r in wide:
                r.update(time_split(r))
            mine, name = statistics.median(r["tok_s"] for r in wide), f"concurrency{args.compare_concurrency}"
            report.update({f"batched_{name}": wide, f"throughput_ratio_{name}": round(mine / s, 2),
                           f"{name}_vs_batched": round(mine / b, 3)})
            report.update(paired_ratios(wide, sequential, name))
            report.update(paired_ratios(wide, batched, f"{name}_vs_batched"))
            if all(r["steps"] for r in wide):
                report[f"time_split_{name}"] = {k: statistics.median(r[k] for r in wide) for k in (
                    "prefill_share", "decode_share", "other_share", "prefill_tok_s", "rows_per_decode_step", "decode_s_per_token")}
        if unpaced:
            report.update(batched_unpaced=unpaced, batched_vs_unpaced=round(b / statistics.median(r["tok_s"] for r in unpaced), 3))
            report.update(paired_ratios(batched, unpaced, "paced_vs_unpaced"))
        if small:
            for r in small:
                r.update(time_split(r))
            mine, name = statistics.median(r["tok_s"] for r in small), f"chunk{args.compare_chunk}"
            report.update({f"batched_{name}": small, f"throughput_ratio_{name}": round(mine / s, 2),
                           f"batched_vs_{name}": round(b / mine, 3)})
        if sequential and all(r["steps"] for r in batched + sequential):
            med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
            seq_wall = med(sequential, "seconds")
            seq_dec = med(sequential, "decode_share") * seq_wall
            speedup = med(sequential, "decode_s_per_token") / max(1e-9, med(batched, "decode_s_per_token"))
            report["time_split"] = {
                "batched": {k: med(batched, k) for k in ("prefill_share", "decode_share", "other_share", "prefill_tok_s",
                                                         "tokens_per_prefill_call", "rows_per_decode_step")},
                "sequential": {k: med(sequential, k) for k in ("prefill_share", "decode_share", "other_share", "prefill_tok_s",
                                                               "tokens_per_prefill_call", "rows_per_decode_step")},
                "decode_speedup": round(speedup, 2),
                # if batching made only decode faster (by decode_speedup, or infinitely), prefill and the rest unchanged
                "amdahl_bound": round(seq_wall / (seq_wall - seq_dec + seq_dec / speedup), 2),
                "amdahl_bound_free_decode": round(seq_wall / max(1e-9, seq_wall - seq_dec), 2),
            }

    if not args.skip_latency:
        latency(args, report, scheduler, chat, jobs, concurrency)
    report["loadavg_after"] = Path("/proc/loadavg").read_text().split()[:3]
    scheduler.stop()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for k, v in report.items():
            print(f"{k}: {v}")
    return 0


def set_policy(scheduler, policy: str, paced: float | None) -> None:
    """Apply a --policies name: new, unpaced, old or slowdownX (the pacing names change nothing on a scheduler without pacing)."""
    scheduler.user_first = policy != "old"
    if paced is not None:
        scheduler.interactive_slowdown = (float(policy[len("slowdown"):]) if policy.startswith("slowdown")
                                          else paced if policy == "new" else 0.0)


def latency(args, report: dict, scheduler, chat, jobs, concurrency: int) -> None:
    """Interactive latency idle and while a run keeps the engine busy, alternating the policies round by round
    (--interleave: request by request within each busy window, beside one shared idle baseline)."""
    jobs.update_job("bench", {"params": {"max_tokens": 256, "force": True}})
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    rounds: dict[str, list[dict]] = {p: [] for p in policies}
    paced = getattr(scheduler, "interactive_slowdown", None)
    for r in range(max(1, args.rounds)):
        order = policies if r % 2 == 0 else policies[::-1]
        groups = [order] if args.interleave else [[p] for p in order]
        for group in groups:
            for policy, one in latency_round(args, scheduler, chat, jobs, concurrency, group, paced).items():
                one["round"] = r
                one["loadavg"] = Path("/proc/loadavg").read_text().split()[:3]
                rounds[policy].append(one)
                print(f"latency [{policy}] round {r}: idle p95 {one['ttft_idle_ms']['p95']} ms, busy p95 "
                      f"{one['ttft_busy_ms']['p95']} ms ({one['ttft_p95_ratio']}x), completion p95 {one['total_p95_ratio']}x, "
                      f"time per token p50 {one['tpot_p50_ratio']}x, batch {one['batch_gen_tok_s']} gen tok/s, "
                      f"load {' '.join(one['loadavg'])}", file=sys.stderr)
    set_policy(scheduler, "new", paced)
    summary = {}
    med = lambda rs, f: round(statistics.median(f(x) for x in rs), 2)  # noqa: E731
    for policy, rs in rounds.items():
        summary[policy] = {
            "total_p95_ratio": med(rs, lambda x: x["total_p95_ratio"]),
            "total_p50_ratio": med(rs, lambda x: x["total_p50_ratio"]),
            "tpot_p50_ratio": med(rs, lambda x: x["tpot_p50_ratio"]),
            "tpot_p95_ratio": med(rs, lambda x: x["tpot_p95_ratio"]),
            "total_idle_p95_ms": med(rs, lambda x: x["total_idle_ms"]["p95"]),
            "total_busy_p95_ms": med(rs, lambda x: x["total_busy_ms"]["p95"]),
            "tpot_idle_p50_ms": med(rs, lambda x: x["tpot_idle_ms"]["p50"]),
            "tpot_busy_p50_ms": med(rs, lambda x: x["tpot_busy_ms"]["p50"]),
            "ttft_p95_ratio": med(rs, lambda x: x["ttft_p95_ratio"]),
            "ttft_idle_p50_ms": med(rs, lambda x: x["ttft_idle_ms"]["p50"]),
            "ttft_idle_p95_ms": med(rs, lambda x: x["ttft_idle_ms"]["p95"]),
            "ttft_busy_p95_ms": med(rs, lambda x: x["ttft_busy_ms"]["p95"]),
            "ttft_busy_p50_ms": med(rs, lambda x: x["ttft_busy_ms"]["p50"]),
            "busy_queue_p50_ms": med(rs, lambda x: x["busy_split_p50_ms"]["queue_ms"]),
            "busy_prefill_p50_ms": med(rs, lambda x: x["busy_split_p50_ms"]["prefill_ms"]),
            "batch_gen_tok_s_while_busy": med(rs, lambda x: x["batch_gen_tok_s"]),
        }
    report.update(latency_rounds=rounds, latency=summary)
    main_policy = "new" if "new" in summary else policies[0]
    report.update(ttft_p95_ratio=summary[main_policy]["ttft_p95_ratio"],
                  ttft_idle_ms={"p50": summary[main_policy]["ttft_idle_p50_ms"], "p95": summary[main_policy]["ttft_idle_p95_ms"]},
                  ttft_busy_ms={"p50": summary[main_policy]["ttft_busy_p50_ms"], "p95": summary[main_policy]["ttft_busy_p95_ms"]})


def idle_requests(args, scheduler, chat, questions: list[str], detail: list) -> list[float]:
    end = time.monotonic() + 30
    while scheduler.busy and time.monotonic() < end:  # a cancelled run may still hold a step
        time.sleep(0.05)
    return [ttft(chat, q, detail=detail, tokens=args.answer_tokens) for q in questions]


def latency_round(args, scheduler, chat, jobs, concurrency: int, policies: list[str], paced: float | None) -> dict[str, dict]:
    """One idle phase and one busy window; in the window each request runs under the next of `policies` in turn.
    With --interleave half the idle requests come before the busy window and half after it."""
    questions = QUESTIONS[: args.requests]
    idle_detail: list = []
    before = questions[: len(questions) // 2] if args.interleave else questions
    idle = idle_requests(args, scheduler, chat, before, idle_detail)
    done, stop = threading.Event(), threading.Event()

    def background() -> None:
        try:
            while not stop.is_set():  # a run that ends before the busy window does is started again
                jobs.run_foreground("bench", overrides={"concurrency": concurrency})
        finally:
            done.set()

    threading.Thread(target=background, daemon=True).start()
    end = time.monotonic() + 60
    while scheduler.active < min(concurrency, getattr(scheduler, "batch_slots", concurrency)) and time.monotonic() < end:
        time.sleep(0.05)
    busy = {p: [] for p in policies}
    busy_active = {p: [] for p in policies}
    detail = {p: [] for p in policies}
    batch = {p: [0, 0.0] for p in policies}  # batch tokens generated and seconds, while a request of this policy ran
    st0 = dict(getattr(scheduler, "step_stats", {}))
    for i, q in enumerate(questions):
        for policy in policies if i % 2 == 0 else policies[::-1]:
            set_policy(scheduler, policy, paced)
            busy_active[policy].append(scheduler.active)
            tok0, t0 = scheduler.tokens_generated, time.perf_counter()
            busy[policy].append(ttft(chat, q, detail=detail[policy], tokens=args.answer_tokens))
            batch[policy][0] += scheduler.tokens_generated - tok0 - detail[policy][-1]["completion_tokens"]
            batch[policy][1] += time.perf_counter() - t0
            time.sleep(0.1)
    steps = stats_delta(scheduler, st0)
    alone_ms = round((getattr(scheduler, "_alone_s", None) or 0.0) * 1000, 1)  # users-only step (moving average)
    stop.set()
    for run in jobs.list_runs("bench", 0, 1)[0]:
        jobs.cancel_run(run.id)
    done.wait(120)
    set_policy(scheduler, "new", paced)
    if args.interleave:
        idle += idle_requests(args, scheduler, chat, questions[len(before):], idle_detail)

    def p(ds: list[dict], key: str) -> dict:
        v = [d[key] for d in ds]
        return {"p50": round(pct(v, 0.5), 1), "p95": round(pct(v, 0.95), 1)} if v else {"p50": 0.0, "p95": 0.0}

    def ratio(a: dict, b: dict, q: str) -> float:
        return round(a[q] / b[q], 2) if b[q] else 0.0

    split3 = lambda ds: {k: round(statistics.median(d[k] for d in ds), 1) for k in ("queue_ms", "prefill_ms", "rest_ms")} if ds else {}  # noqa: E731
    total_i, tpot_i = p(idle_detail, "total_ms"), p(idle_detail, "tpot_ms")
    out = {}
    for policy in policies:
        d, b = detail[policy], busy[policy]
        total_b, tpot_b = p(d, "total_ms"), p(d, "tpot_ms")
        out[policy] = {
            "total_idle_ms": total_i, "total_busy_ms": total_b,
            "total_p50_ratio": ratio(total_b, total_i, "p50"), "total_p95_ratio": ratio(total_b, total_i, "p95"),
            "tpot_idle_ms": tpot_i, "tpot_busy_ms": tpot_b,
            "tpot_p50_ratio": ratio(tpot_b, tpot_i, "p50"), "tpot_p95_ratio": ratio(tpot_b, tpot_i, "p95"),
            "busy_completion_tokens": [x["completion_tokens"] for x in d],
            "ttft_idle_ms": {"p50": round(pct(idle, 0.5) * 1000, 1), "p95": round(pct(idle, 0.95) * 1000, 1)},
            "ttft_busy_ms": {"p50": round(pct(b, 0.5) * 1000, 1), "p95": round(pct(b, 0.95) * 1000, 1)},
            "ttft_p95_ratio": round(pct(b, 0.95) / pct(idle, 0.95), 2),
            "busy_active_sequences": int(statistics.median(busy_active[policy])),
            "idle_split_p50_ms": split3(idle_detail),
            "busy_split_p50_ms": split3(d),
            "busy_requests": d,
            "batch_gen_tok_s": round(max(0, batch[policy][0]) / max(1e-9, batch[policy][1]), 1),
            "busy_steps": steps,
            "alone_step_ms": alone_ms,
        }
    return out


if __name__ == "__main__":
    sys.exit(main())
