"""Per-token cost of constrained output (llguidance masks) at batch 1 and 16, in paired rounds.

Each round runs B sequences of the default bundle through the real ChatService twice, one
plain and one with response_format json_object (in alternating order), and records the time
of every full-batch decode step (the scheduler's on_step: model step + every sequence's
processor and sampling) and of every processor call. Reported: medians over rounds, the ratio
constrained / plain, and the mask's own time per token.

usage: .venv/bin/python scripts/bench_constrained.py [--bundle models/default] [--rounds 5] [--tokens 48]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", type=Path, default=Path("models/default"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--batches", default="1,16")
    args = ap.parse_args()

    from edge_agent.engine.bundle import load_bundle
    from edge_agent.engine.engine import OnnxEngine
    from edge_agent.engine.scheduler import BatchScheduler
    from edge_agent.services import constrained
    from edge_agent.services.chat import ChatService, SamplingOptions

    steps: list[tuple[int, float]] = []
    engine = OnnxEngine(load_bundle(args.bundle.resolve(), verify=False), max_batch=16, context_length=1024)
    sched = BatchScheduler(engine, on_step=lambda b, s: steps.append((b, s))).start()
    chat = ChatService(sched, default_max_tokens=args.tokens)
    calls: list[float] = []
    plain_call = constrained.GrammarLogitsProcessor.__call__

    def timed(self, ids, logits):
        t = time.perf_counter()
        out = plain_call(self, ids, logits)
        calls.append(time.perf_counter() - t)
        return out

    constrained.GrammarLogitsProcessor.__call__ = timed
    msgs = [{"role": "user", "content": "Describe a red fox (name, colour, habitat, diet, legs) as a JSON object."}]
    t = time.perf_counter()
    chat.chat(msgs, SamplingOptions(max_tokens=2), json_object=True).collect()  # builds the grammar tokenizer once
    print(f"grammar tokenizer + first request: {time.perf_counter() - t:.2f} s")

    def run(b: int, constrained_: bool) -> dict[int, float]:
        """Median step time per batch size seen in one run (ramp-up and tails included, compared size by size)."""
        steps.clear()
        opts = SamplingOptions(max_tokens=args.tokens, temperature=0.8, seed=7, ignore_eos=not constrained_)
        chat.chat(msgs, opts, n=b, json_object=constrained_).collect()
        by: dict[int, list[float]] = {}
        for n, sec in steps:
            by.setdefault(n, []).append(sec)
        return {n: statistics.median(v) for n, v in by.items()}

    report = {"loadavg_before": open("/proc/loadavg").read().split()[:3]}
    for b in (int(x) for x in args.batches.split(",")):
        plain: list[dict[int, float]] = []
        masked: list[dict[int, float]] = []
        calls.clear()
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            for c in order:
                (masked if c else plain).append(run(b, c))
        # the largest batch size that every run of both kinds reached: the same work per step on both sides
        size = max(set.intersection(*(set(d) for d in plain + masked)))
        pm = statistics.median(d[size] for d in plain)
        mm = statistics.median(d[size] for d in masked)
        report[f"batch{b}"] = {
            "batch_size_compared": size, "plain_step_ms": round(pm * 1e3, 2), "constrained_step_ms": round(mm * 1e3, 2),
            "ratio": round(mm / pm, 3), "mask_us_per_token_median": round(statistics.median(calls) * 1e6, 1),
            "mask_us_per_token_p99": round(sorted(calls)[int(len(calls) * 0.99)] * 1e6, 1), "mask_calls": len(calls),
        }
    report["loadavg_after"] = open("/proc/loadavg").read().split()[:3]
    print(json.dumps(report, indent=1))
    sched.stop()


if __name__ == "__main__":
    main()
