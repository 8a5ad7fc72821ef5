#!/usr/bin/env python
"""Where the int4 head stops paying: decode steps of a dual-head bundle with each head, by rows per step.

    python scripts/bench_head_rows.py BUNDLE [--rounds 9] [--steps 8] [--threads 2] [--rows 1,2,4,8,16] [--no-spinning]

BUNDLE has both output heads (`--lm-head dual`). One engine with 16 slots (the daemon's configuration),
every slot prefilled with 128 tokens of the bench's text; a round runs `steps` greedy decode steps
(the step, the int4 head's re-scoring and the argmax the scheduler does) at each row count with the
int4 head and with the int8 head, in alternating order, on the same session (so the same weights),
each step starting back at position 128. Prints per row count the median step time of each head and
the median, min and max of the per-round ratios int8/int4 (above 1: the int4 head is faster), with the
load average before and after: the largest row count where the int4 head still wins is the setting
int4_head_max_rows.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_agent.bench.ours import prompt_ids  # noqa: E402
from edge_agent.engine.bundle import load_bundle  # noqa: E402
from edge_agent.engine.engine import OnnxEngine  # noqa: E402

from bench_rescore import PROMPT, steps  # noqa: E402  (scripts/ is on the path when run as a script)


def use_head(e: OnnxEngine, int4: bool) -> None:
    """Every step of e takes the int4 head (True) or the int8 head (False)."""
    e.model.int4_head_max_rows = 256 if int4 else 0
    e.model._decode_bindings.clear()  # they hold the head choice


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", default="1,2,4,8,16")
    ap.add_argument("--no-spinning", action="store_true", help="onnxruntime threads sleep between ops (a machine shared with busy work)")
    args = ap.parse_args()
    rows = [int(x) for x in args.rows.split(",")]
    print("load before", open("/proc/loadavg").read().strip(), flush=True)
    e = OnnxEngine(load_bundle(args.bundle, verify=False), threads=args.threads, max_batch=max(rows), context_length=1024, device="cpu",
                   spinning=not args.no_spinning)
    if not e.model.dual_head:
        raise SystemExit(f"{args.bundle} has one output head: build it with `--lm-head dual`")
    ids = np.array(prompt_ids(e, PROMPT), np.int64)
    for slot in range(max(rows)):
        e.model.prefill(slot, ids, 0)
    for int4 in (True, False):
        use_head(e, int4)
        for n in rows:
            steps(e, n, 2)  # warm-up: bindings made, pages touched
    res: dict[tuple[bool, int], list[float]] = {(h, n): [] for h in (True, False) for n in rows}
    for r in range(args.rounds):
        for int4 in ((True, False) if r % 2 == 0 else (False, True)):
            use_head(e, int4)
            for n in rows:
                res[(int4, n)].append(steps(e, n, args.steps))
    for n in rows:
        ratios = [y / x for x, y in zip(res[(True, n)], res[(False, n)])]
        print(f"rows {n:2d}: int4 {1000 * statistics.median(res[(True, n)]):7.2f} ms  int8 {1000 * statistics.median(res[(False, n)]):7.2f} ms"
              f"  int8/int4 median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})", flush=True)
    resc = e.model.rescorer
    print(f"re-scored candidates per row: {resc.candidates / max(1, resc.rows):.1f}")
    print("load after", open("/proc/loadavg").read().strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
