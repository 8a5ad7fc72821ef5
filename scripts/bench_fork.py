#!/usr/bin/env python
"""What starting n > 1 choices from a sibling's cache saves: n choices of one prompt, with and without the fork.

    python scripts/bench_fork.py BUNDLE [--rounds 7] [--n 4] [--prompt-tokens 48] [--tokens 16] [--threads 2]

One BatchScheduler over BUNDLE. A round submits n sampled choices of one prompt at once (as the API does for n)
and waits for all; rounds alternate fork on (engine.admission's _fork) and off (the prefix cache alone, whole
64-token blocks). Prints per kind the median wall time of a round and of the last choice's time to first token,
the median per-round ratio off / on, the prefill tokens per round, and the load average before and after.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_agent.engine.bundle import load_bundle  # noqa: E402
from edge_agent.engine.engine import OnnxEngine  # noqa: E402
from edge_agent.engine.scheduler import BatchScheduler  # noqa: E402
from edge_agent.engine.types import SamplingParams  # noqa: E402

TEXT = ("The committee met on Tuesday to review the budget for the coming year. After a long discussion about the costs of "
        "the new building, the members agreed to postpone the decision until the next meeting, when the architect's report "
        "will be available. ") * 8


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--prompt-tokens", type=int, default=48)
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    print("load before", open("/proc/loadavg").read().strip(), flush=True)
    e = OnnxEngine(load_bundle(args.bundle, verify=False), threads=args.threads, max_batch=max(8, args.n), context_length=1024,
                   device="cpu", spinning=False)
    sched = BatchScheduler(e, prefix_cache_bytes=0).start()  # the prefix cache off: each round's prompt is new anyway
    fork = sched._fork
    ids = e.encode(TEXT)

    def round_(on: bool, r: int) -> tuple[float, float, int]:
        sched._fork = fork if on else (lambda seq: None)
        prompt = ids[: args.prompt_tokens - 1] + [ids[args.prompt_tokens + r]]  # a new prompt every round
        before = sched.step_stats["prefill_tokens"]
        t = time.monotonic()
        hs = [sched.submit(prompt, SamplingParams(max_tokens=args.tokens, temperature=1.0, seed=i, ignore_eos=True)) for i in range(args.n)]
        fins = [h.result(600) for h in hs]
        return time.monotonic() - t, max(f.usage.ttft_s for f in fins), sched.step_stats["prefill_tokens"] - before

    round_(True, 0)
    got: dict[bool, list] = {True: [], False: []}
    ratios = []
    for r in range(args.rounds):
        pair = {on: round_(on, 1 + 2 * r + on) for on in ((True, False) if r % 2 == 0 else (False, True))}
        for on, v in pair.items():
            got[on].append(v)
        ratios.append(pair[False][0] / pair[True][0])
    sched.stop()
    for on in (True, False):
        wall, ttft, pre = (statistics.median(x) for x in zip(*got[on]))
        print(f"fork {'on ' if on else 'off'}: round {wall * 1000:.1f} ms, last choice's TTFT {ttft * 1000:.1f} ms, prefill tokens {pre:.0f}")
    print(f"{args.n} choices, {args.prompt_tokens}-token prompt, {args.tokens} tokens, {args.rounds} paired rounds: "
          f"round time off/on median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")
    print("load after", open("/proc/loadavg").read().strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
