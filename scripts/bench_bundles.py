#!/usr/bin/env python
"""Two model bundles side by side: the bench's own rounds (edge_agent.bench.ours), alternating, paired.

    python scripts/bench_bundles.py BUNDLE_A BUNDLE_B [--rounds 3] [--threads 2] [--max-batch 16]

Each round measures, for each bundle, one stream in the max_batch-slot engine and in a one-slot
engine, prefill 512, TTFT and max_batch streams together; the order alternates every round. Prints
every round and, per figure, the median of B/A over the rounds with min and max, and the load
average before and after (absolute figures from a shared machine do not compare; ratios do).
Optional --perplexity adds each bundle's perplexity on the bench's 2048 tokens.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_agent.bench.ours import OurEngines  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--perplexity", action="store_true")
    args = ap.parse_args()
    print("load before", os.getloadavg(), flush=True)
    engines = [OurEngines(p, args.threads, args.max_batch, 256, "cpu", False) for p in (args.a, args.b)]
    rounds: list[list[dict[str, float]]] = [[], []]
    try:
        for i in range(args.rounds):
            for k in ((0, 1) if i % 2 == 0 else (1, 0)):
                rounds[k].append(engines[k].round())
            print(f"round {i}", *(json.dumps({k: round(v, 1) for k, v in r[-1].items()}) for r in rounds), flush=True)
    finally:
        for e in engines:
            e.close()
    for key in rounds[0][0]:
        r = [y[key] / x[key] for x, y in zip(*rounds) if x[key]]
        a = statistics.median(x[key] for x in rounds[0])
        b = statistics.median(y[key] for y in rounds[1])
        print(f"{key:20s} A {a:9.1f}  B {b:9.1f}  B/A median {statistics.median(r):.3f} (min {min(r):.3f}, max {max(r):.3f})")
    if args.perplexity:
        from edge_agent.bench.quality import perplexity_ours

        for p in (args.a, args.b):
            ppl, ids = perplexity_ours(p, args.threads, 2048)
            print(f"perplexity {p.name}: {ppl:.4f} on {len(ids)} tokens")
    print("load after", os.getloadavg())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
