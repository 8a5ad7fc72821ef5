#!/usr/bin/env python
"""Two bundles side by side (e.g. an fp32 and an int8 key/value cache): paired alternating rounds of the
bench's engines (edge_agent.bench.ours.OurEngines), medians of per-round ratios B / A, load before and after.

    python scripts/bench_kv_cache.py models/default /tmp/kv-int8 --rounds 7
Per round and bundle: one stream decoding 128 tokens in the 16-slot engine, prefill 512, 16 streams of
128-token prompts decoding 128 tokens, 16 streams of 512-token prompts decoding 64 (total tok/s at full batch).
Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_agent.bench.ours import OurEngines, prompt_ids, _greedy  # noqa: E402


def one_round(e: OurEngines) -> dict[str, float]:
    eng = e.daemon.engine
    prefill = e.daemon.submit(prompt_ids(eng, 512), _greedy(1)).result().usage
    out = {"decode_tok_s": e._decode(e.daemon), "prefill_tok_s": 512 / prefill.prefill_s, "batch16_tok_s": e.batch(16)}
    n_gen, e.n_gen = e.n_gen, 64
    out["batch16_p512_tok_s"] = e.batch(16, n_prompt=512)
    e.n_gen = n_gen
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    load_before = open("/proc/loadavg").read().split()[:3]
    engines = [OurEngines(Path(p), args.threads, 16, 256, "cpu", quick=False) for p in (args.a, args.b)]
    rows: list[tuple[dict, dict]] = []
    for r in range(args.rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        res = {i: one_round(engines[i]) for i in order}
        rows.append((res[0], res[1]))
        print(json.dumps({"round": r, "a": res[0], "b": res[1]}), file=sys.stderr, flush=True)
    out = {"a": args.a, "b": args.b, "rounds": args.rounds, "load_before": load_before,
           "load_after": open("/proc/loadavg").read().split()[:3]}
    for key in rows[0][0]:
        ratios = [b[key] / a[key] for a, b in rows if a[key]]
        out[key] = {"a_median": round(statistics.median(a[key] for a, _ in rows), 1),
                    "b_median": round(statistics.median(b[key] for _, b in rows), 1),
                    "ratio_b_a": round(statistics.median(ratios), 3), "min": round(min(ratios), 3), "max": round(max(ratios), 3)}
    for e in engines:
        e.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
