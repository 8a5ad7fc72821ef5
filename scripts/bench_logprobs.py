#!/usr/bin/env python
"""What a request with logprobs costs the batch it decodes in: scheduler decode steps with and without one logprobs row.

    python scripts/bench_logprobs.py BUNDLE [--rounds 7] [--rows 8] [--tokens 40] [--top 5] [--threads 2]

One BatchScheduler (the daemon's) over BUNDLE. A round submits `rows` greedy generations of `tokens` tokens at
once (ignore_eos) and records the duration of every scheduler decode step that had all `rows` rows (the model
call plus the per-row choice: argmax, and for a logprobs row engine.sampling.token_logprob); rounds alternate
plain (no row asks) and mixed (one row asks for logprobs with `top` alternatives). Prints the median step of
each kind, the median / min / max of the per-round ratios mixed / plain, the cost of token_logprob on one
real logits row against the argmax the greedy path does, what scoring a prompt (echo with logprobs: one forced
decode step per token) costs against prefilling it, and the load average before and after.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_agent.engine.bundle import load_bundle  # noqa: E402
from edge_agent.engine.engine import OnnxEngine  # noqa: E402
from edge_agent.engine.sampling import token_logprob  # noqa: E402
from edge_agent.engine.scheduler import BatchScheduler  # noqa: E402
from edge_agent.engine.types import SamplingParams  # noqa: E402
from edge_agent.services.logprobs import start_prompt_scores  # noqa: E402

PROMPT = "Question: What is the capital of France, and what is it known for?\nAnswer:"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=40)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--score-tokens", type=int, default=128, help="prompt length for the echo-scoring measurement")
    args = ap.parse_args()
    print("load before", open("/proc/loadavg").read().strip(), flush=True)
    e = OnnxEngine(load_bundle(args.bundle, verify=False), threads=args.threads, max_batch=args.rows, context_length=1024,
                   device="cpu", spinning=False)
    steps: list[float] = []
    sched = BatchScheduler(e, on_step=lambda rows, dt: steps.append(dt) if rows == args.rows else None).start()
    ids = e.encode(PROMPT)

    def round_(mixed: bool) -> float:
        steps.clear()
        handles = [sched.submit(ids, SamplingParams(max_tokens=args.tokens, ignore_eos=True,
                                                    logprobs=args.top if mixed and i == 0 else None)) for i in range(args.rows)]
        fins = [h.result(600) for h in handles]
        assert (fins[0].logprobs is not None) == mixed and all(f.logprobs is None for f in fins[1:])
        return statistics.median(steps)

    round_(False)  # warm-up
    plain, mixed, ratios = [], [], []
    for r in range(args.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        got = {m: round_(m) for m in order}
        plain.append(got[False])
        mixed.append(got[True])
        ratios.append(got[True] / got[False])
    text = (PROMPT + " ") * 64
    long_ids = e.encode(text)[: args.score_tokens]
    one, split, prefill = [], [], []
    for r in range(3):  # a new prompt each time (its second token changes): no prefix cache between them
        prompt = long_ids[:1] + [long_ids[1] + r] + long_ids[2:]
        for most, out in ((1, one), (8, split)):
            t = time.monotonic()
            start_prompt_scores(sched, prompt, 1, most=most).wait(600)
            out.append(time.monotonic() - t)
            prompt = prompt[:1] + [prompt[1] + 10] + prompt[2:]
        t = time.monotonic()
        sched.submit(prompt[:1] + [prompt[1] + 10] + prompt[2:], SamplingParams(max_tokens=1)).result(600)
        prefill.append(time.monotonic() - t)
    sched.stop()
    row = e.model.prefill(0, np.array(ids, np.int64), 0).copy()
    tok = int(np.argmax(row))

    def timed(f, n: int = 200) -> float:
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts) * 1000

    print(f"{args.rows} rows, {args.tokens} tokens, {args.rounds} paired rounds, vocab {row.shape[0]}")
    print(f"decode step median: plain {statistics.median(plain) * 1000:.2f} ms, one logprobs row {statistics.median(mixed) * 1000:.2f} ms")
    print(f"ratio mixed/plain: median {statistics.median(ratios):.4f}, min {min(ratios):.4f}, max {max(ratios):.4f}")
    print(f"per row: argmax {timed(lambda: np.argmax(row)):.3f} ms, token_logprob top 0 {timed(lambda: token_logprob(row, tok, 0)):.3f} ms, "
          f"top {args.top} {timed(lambda: token_logprob(row, tok, args.top)):.3f} ms, top 20 {timed(lambda: token_logprob(row, tok, 20)):.3f} ms")
    print(f"a {len(long_ids)}-token prompt scored (echo + logprobs): in one forced generation {statistics.median(one) * 1000:.0f} ms, "
          f"in up to 8 segments side by side {statistics.median(split) * 1000:.0f} ms; prefilled + 1 token "
          f"{statistics.median(prefill) * 1000:.0f} ms (medians of 3, alone in the engine)")
    print("load after", open("/proc/loadavg").read().strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
