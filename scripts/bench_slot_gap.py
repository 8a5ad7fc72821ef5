#!/usr/bin/env python
"""Is one stream slower in the daemon's 16-slot engine than in a one-slot engine? Paired rounds, medians.

    python scripts/bench_slot_gap.py [BUNDLE] [--rounds 10] [--threads 2] [--fresh]

Default: as `edge-agent bench` runs it (edge_agent/bench/ours.py OurEngines: both engines in one
process, each round a 512-token prefill and a 128-token time-to-first-token request on the 16-slot
engine, then one stream of 32 + 128 tokens on each engine), with the order of the two decodes
alternating between rounds, so an ordering effect shows as a difference between the two orders.
--fresh: each measurement in a fresh process of its own (one engine, warm-up, 3 decodes, median),
alternating which engine goes first. Prints per round and the median, min and max of the per-round
ratios 16-slot / 1-slot decode tok/s, with the load average before and after.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def load() -> str:
    return open("/proc/loadavg").read().split()[0]


def child(bundle: Path, slots: int, threads: int) -> None:
    """One engine of `slots` slots: median decode tok/s of 3 streams of 32 + 128 tokens (prints JSON)."""
    from edge_agent.bench.ours import _greedy, prompt_ids
    from edge_agent.engine.bundle import load_bundle
    from edge_agent.engine.engine import OnnxEngine
    from edge_agent.engine.scheduler import BatchScheduler

    e = OnnxEngine(load_bundle(bundle, verify=False), threads=threads, max_batch=slots, context_length=2048, device="cpu")
    s = BatchScheduler(e, prefill_chunk=256, prefix_cache_bytes=0).start()
    s.generate("Hello", _greedy(4))
    vals = [s.submit(prompt_ids(e, 32), _greedy(128)).result().usage.decode_tok_s for _ in range(3)]
    s.stop()
    print(json.dumps({"tok_s": statistics.median(vals)}))


def fresh(bundle: Path, rounds: int, threads: int) -> list[float]:
    ratios = []
    for r in range(rounds):
        got = {}
        for slots in ((1, 16) if r % 2 == 0 else (16, 1)):
            out = subprocess.run([sys.executable, __file__, str(bundle), "--child", str(slots), "--threads", str(threads)],
                                 capture_output=True, text=True, check=True)
            got[slots] = json.loads(out.stdout.strip().splitlines()[-1])["tok_s"]
        ratios.append(got[16] / got[1])
        print(f"round {r}: 1-slot {got[1]:.1f}  16-slot {got[16]:.1f}  ratio {ratios[-1]:.3f}  load {load()}", flush=True)
    return ratios


def in_process(bundle: Path, rounds: int, threads: int) -> list[float]:
    from edge_agent.bench.ours import OurEngines, _greedy, prompt_ids

    o = OurEngines(bundle, threads=threads, max_batch=16, prefill_chunk=256, device="cpu", quick=False)
    by_order: dict[str, list[float]] = {"16-slot first": [], "1-slot first": []}
    try:
        for r in range(rounds):
            eng = o.daemon.engine
            o.daemon.submit(prompt_ids(eng, 512), _greedy(1)).result()
            o.daemon.submit(prompt_ids(eng, 128, offset=11), _greedy(1)).result()
            if r % 2 == 0:
                order, d, s = "16-slot first", o._decode(o.daemon), o._decode(o.oneslot)
            else:
                order, s, d = "1-slot first", o._decode(o.oneslot), o._decode(o.daemon)
            by_order[order].append(d / s)
            print(f"round {r} ({order}): 16-slot {d:.1f}  1-slot {s:.1f}  ratio {d / s:.3f}  load {load()}", flush=True)
    finally:
        o.close()
    for order, v in by_order.items():
        if v:
            print(f"{order}: median {statistics.median(v):.3f} (min {min(v):.3f}, max {max(v):.3f})")
    return by_order["16-slot first"] + by_order["1-slot first"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path, nargs="?", default=REPO / "models" / "default")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fresh", action="store_true", help="every measurement in a fresh process")
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.bundle, args.child, args.threads)
        return 0
    print("load before", open("/proc/loadavg").read().strip(), flush=True)
    ratios = (fresh if args.fresh else in_process)(args.bundle, args.rounds, args.threads)
    print(f"16-slot / 1-slot decode: median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}) over {len(ratios)} rounds")
    print("load after", open("/proc/loadavg").read().strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
