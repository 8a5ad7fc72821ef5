"""`edge-agent generate`: stream a completion, or prompt after prompt interactively."""
from __future__ import annotations

import argparse
import json
import sys

from edge_agent.cli.common import add_sampling_flags, settings_from


def register(sub) -> None:
    g = sub.add_parser("generate", help="stream a completion (no prompt: interactive)")
    g.add_argument("prompt", nargs="?", default=None)
    g.add_argument("--json", action="store_true", help="print one JSON object with text, counts and timings")
    add_sampling_flags(g)
    g.set_defaults(func=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    from edge_agent.engine.bundle import BundleError
    from edge_agent.engine.types import EngineError, Finished, SamplingParams, TextDelta
    from edge_agent.runtime import build_engine

    s = settings_from(args)
    try:
        params = SamplingParams(
            max_tokens=args.max_tokens, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
            min_p=args.min_p, repetition_penalty=args.repetition_penalty, seed=args.seed, stop=args.stop,
        ).validate()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        scheduler = build_engine(s, max_batch=1)
    except BundleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    prompts = [args.prompt] if args.prompt is not None else None
    try:
        while True:
            if prompts is None:
                try:
                    prompt = input("> ")
                except EOFError:
                    return 0
                if not prompt.strip():
                    continue
            elif prompts:
                prompt = prompts.pop()
            else:
                return 0
            try:
                handle = scheduler.submit(scheduler.engine.encode(prompt), params)
            except (EngineError, ValueError) as e:
                print(f"error: {e}", file=sys.stderr)
                if prompts is not None:
                    return 2
                continue
            for ev in handle:
                if isinstance(ev, TextDelta) and not args.json:
                    sys.stdout.write(ev.text)
                    sys.stdout.flush()
                elif isinstance(ev, Finished):
                    if args.json:
                        print(json.dumps({"text": ev.text, "finish_reason": ev.finish_reason, "usage": ev.usage.as_dict()}))
                    else:
                        sys.stdout.write("\n")
                        u = ev.usage
                        print(
                            f"[{u.prompt_tokens} prompt + {u.completion_tokens} generated tokens, "
                            f"ttft {u.ttft_s * 1000:.0f} ms, {u.decode_tok_s:.1f} tok/s, {ev.finish_reason}]",
                            file=sys.stderr,
                        )
    except KeyboardInterrupt:
        return 130
    finally:
        scheduler.stop()


