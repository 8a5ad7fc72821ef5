#!/usr/bin/env python
"""Decode steps of two bundles side by side, finely interleaved: where a coarse (int4) head with exact top wins.

    python scripts/bench_rescore.py BUNDLE_A BUNDLE_B [--rounds 15] [--steps 8] [--threads 2] [--batches 1,16]
                                    [--margins 6]

Each bundle gets one engine with 16 slots (the daemon's configuration); every slot is prefilled with
128 tokens of the bench's text. A round runs `steps` greedy decode steps (the model's step plus the
argmax the scheduler does) at each batch size for A, then for B, in alternating order; each step
starts back at position 128 so every round sees the same cache lengths. Prints per batch size the
median step time of each side and the median, min and max of the per-round ratios B/A (a shared
machine moves absolute figures; paired ratios survive it), the load average before and after, and for
a bundle with a re-scored head the candidates per row. --margins re-runs B's rounds with other margins
(the re-scorer's attribute; the graph is the same), e.g. --margins 6,8,-inf (-inf: the raw int4 head).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_agent.bench.ours import prompt_ids  # noqa: E402
from edge_agent.engine.bundle import load_bundle  # noqa: E402
from edge_agent.engine.engine import OnnxEngine  # noqa: E402

PROMPT = 128


def load(path: Path, threads: int) -> OnnxEngine:
    e = OnnxEngine(load_bundle(path, verify=False), threads=threads, max_batch=16, context_length=1024, device="cpu")
    ids = np.array(prompt_ids(e, PROMPT), np.int64)
    for slot in range(16):
        e.model.prefill(slot, ids, 0)
    return e


def steps(e: OnnxEngine, b: int, n: int) -> float:
    """Seconds per decode step at batch b (n steps from position PROMPT), argmax included."""
    tok = np.full(b, 818, np.int64)
    t = time.perf_counter()
    for i in range(n):
        logits = e.model.decode(tok, np.full(b, PROMPT + i, np.int64))
        tok = np.fromiter((int(np.argmax(logits[r])) for r in range(b)), np.int64, b)
    return (time.perf_counter() - t) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--margins", default="")
    args = ap.parse_args()
    batches = [int(x) for x in args.batches.split(",")]
    print("load before", os.getloadavg(), flush=True)
    a, b = load(args.a, args.threads), load(args.b, args.threads)
    resc = b.model.rescorer
    variants = [("B", None)] + [(f"B margin {m}", float(m)) for m in args.margins.split(",") if m]
    if len(variants) > 1 and resc is None:
        raise SystemExit("--margins needs a bundle B with a re-scored head")
    for name, margin in variants:
        if margin is not None:
            resc.margin = margin
        for e in (a, b):
            steps(e, 1, 2)  # warm-up
        res: dict[tuple[str, int], list[float]] = {(k, n): [] for k in "ab" for n in batches}
        cand0 = (resc.candidates, resc.rows) if resc else (0, 0)
        for r in range(args.rounds):
            for n in batches:
                for k in ("ab" if r % 2 == 0 else "ba"):
                    res[(k, n)].append(steps(a if k == "a" else b, n, args.steps))
        for n in batches:
            ratios = [y / x for x, y in zip(res[("a", n)], res[(name and "b", n)])]
            print(f"{name:14s} batch {n:2d}: A {1000 * statistics.median(res[('a', n)]):7.2f} ms  B {1000 * statistics.median(res[('b', n)]):7.2f} ms"
                  f"  step time B/A median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})", flush=True)
        if resc and resc.rows > cand0[1]:
            print(f"{name:14s} re-scored candidates per row: {(resc.candidates - cand0[0]) / (resc.rows - cand0[1]):.1f}, rows read so far {resc.reads}")
    print("load after", os.getloadavg())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
