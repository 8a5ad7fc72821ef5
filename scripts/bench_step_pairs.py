#!/usr/bin/env python
"""Raw decode steps of two bundles, paired step by step (the order alternating), with their logits compared.

    python scripts/bench_step_pairs.py BUNDLE_A BUNDLE_B [--steps 30] [--threads 1] [--cases 16x256,1x512,16x512,p512]

For each case (rows x context) both 16-slot engines prefill the same real text (the bench's reference
text, one offset a row) and then decode the same greedy tokens; prints per case the median step time of
each, the median of the per-step ratios A/B (a speed-up of B) with min and max, and whether every logit
of every step was bit-identical. A case "pN" times prefills of N tokens (one slot, in chunks of 256, as the
engine does; --steps rounds, paired the same way) and compares their last logits. With --threads 1 onnxruntime runs on the calling thread and the times
are that thread's CPU time (steady on a busy machine); otherwise wall time with spinning threads, as the daemon runs.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from edge_agent.bench.ours import prompt_ids  # noqa: E402
from edge_agent.engine.bundle import load_bundle  # noqa: E402
from edge_agent.engine.engine import OnnxEngine  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cases", default="16x256,1x512,16x512")
    args = ap.parse_args()
    clock = time.thread_time if args.threads == 1 else time.perf_counter
    load_before = open("/proc/loadavg").read().split()[:3]
    engs = [OnnxEngine(load_bundle(p, verify=False), threads=args.threads, spinning=args.threads > 1, max_batch=16,
                       context_length=2048, device="cpu") for p in (args.a, args.b)]
    out: dict[str, object] = {"a": str(args.a), "b": str(args.b), "threads": args.threads, "clock": clock.__name__,
                              "load_before": load_before}
    for case in args.cases.split(","):
        if case.startswith("p"):
            out[case] = _prefill_pairs(engs, int(case[1:]), args.steps, clock)
            print(case, json.dumps(out[case]), flush=True)
            continue
        rows, ctx = (int(x) for x in case.split("x"))
        for e in engs:
            e.model.shrink(0)
            e.model.release_slots(0)
        prompts = [np.array(prompt_ids(engs[0], ctx, offset=37 * i)) for i in range(rows)]
        firsts = []
        for e in engs:
            nxt = []
            for slot, p in enumerate(prompts):
                for at in range(0, ctx, 256):
                    logits = e.model.prefill(slot, p[at:at + 256], at)
                nxt.append(int(np.argmax(logits)))
            firsts.append(nxt)
        tok, lengths = np.array(firsts[0]), np.full(rows, ctx)
        pairs, identical = [], firsts[0] == firsts[1]
        for step in range(args.steps):
            ts, got = [0.0, 0.0], [None, None]
            for i in ((0, 1) if step % 2 == 0 else (1, 0)):
                t = clock()
                logits = engs[i].model.decode(tok, lengths)
                ts[i] = clock() - t
                got[i] = logits.copy()
            identical = identical and bool(np.array_equal(got[0], got[1]))
            pairs.append(ts)
            tok, lengths = got[0].argmax(axis=1), lengths + 1
        r = [a / b for a, b in pairs]
        out[case] = {"a_ms": round(1e3 * statistics.median(a for a, _ in pairs), 2),
                     "b_ms": round(1e3 * statistics.median(b for _, b in pairs), 2),
                     "a_over_b": round(statistics.median(r), 3), "min": round(min(r), 3), "max": round(max(r), 3),
                     "logits_identical": identical}
        print(case, json.dumps(out[case]), flush=True)
    out["load_after"] = open("/proc/loadavg").read().split()[:3]
    print(json.dumps(out))
    return 0


def _prefill_pairs(engs: list, n: int, rounds: int, clock) -> dict:
    """Paired prefills of n tokens (slot 0, chunks of 256) on both engines, the order alternating."""
    prompt = np.array(prompt_ids(engs[0], n, offset=11))
    pairs, identical = [], True
    for r in range(rounds):
        ts, got = [0.0, 0.0], [None, None]
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            engs[i].model.shrink(0)
            engs[i].model.release_slots(0)
            t = clock()
            for at in range(0, n, 256):
                logits = engs[i].model.prefill(0, prompt[at:at + 256], at)
            ts[i] = clock() - t
            got[i] = np.array(logits, copy=True)
        identical = identical and bool(np.array_equal(got[0], got[1]))
        pairs.append(ts)
    r = [a / b for a, b in pairs]
    return {"a_ms": round(1e3 * statistics.median(a for a, _ in pairs), 2),
            "b_ms": round(1e3 * statistics.median(b for _, b in pairs), 2),
            "a_over_b": round(statistics.median(r), 3), "min": round(min(r), 3), "max": round(max(r), 3),
            "logits_identical": identical}


if __name__ == "__main__":
    sys.exit(main())
