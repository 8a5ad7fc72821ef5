"""`edge-agent bench`: our engine beside llama.cpp, in paired rounds."""
from __future__ import annotations

import argparse

from edge_agent.cli.common import settings_from


def register(sub) -> None:
    b = sub.add_parser("bench", help="decode, prefill, batched throughput, memory and perplexity, beside llama.cpp")
    b.add_argument("--json", action="store_true", help="one JSON object with every figure")
    q = b.add_mutually_exclusive_group()
    q.add_argument("--quality", dest="quality", action="store_true", default=None,
                   help="compare perplexity with the fp32 model (the default, except with --quick)")
    q.add_argument("--no-quality", dest="quality", action="store_false", help="skip the perplexity comparison")
    b.add_argument("--quick", action="store_true", help="one round, fewer tokens (for smoke tests)")
    b.add_argument("--rounds", type=int, default=None, help="paired rounds (default 3; 1 with --quick)")
    b.set_defaults(func=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    from edge_agent.bench.harness import run_bench

    s = settings_from(args)
    quality = (not args.quick) if args.quality is None else args.quality
    return run_bench(s, as_json=args.json, quality=quality, quick=args.quick, rounds=args.rounds)
