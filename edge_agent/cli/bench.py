"""`edge-agent bench`: the engine benchmark."""
from __future__ import annotations

import argparse

from edge_agent.cli.common import settings_from


def register(sub) -> None:
    b = sub.add_parser("bench", help="measure decode, prefill and batched throughput (and llama.cpp beside)")
    b.add_argument("--json", action="store_true")
    q = b.add_mutually_exclusive_group()
    q.add_argument("--quality", dest="quality", action="store_true", default=None,
                   help="compare perplexity with the fp32 model (the default, except with --quick)")
    q.add_argument("--no-quality", dest="quality", action="store_false", help="skip the perplexity comparison")
    b.add_argument("--quick", action="store_true", help="fewer tokens (for smoke tests)")
    b.set_defaults(func=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    from edge_agent.engine.bench import run_bench

    s = settings_from(args)
    quality = (not args.quick) if args.quality is None else args.quality
    return run_bench(s, as_json=args.json, quality=quality, quick=args.quick)


