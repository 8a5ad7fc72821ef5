"""Command line: serve | generate | model | index | jobs | bench | doctor."""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from edge_agent.config import Settings


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {}
    for key in ("model", "models_dir", "threads", "host", "port", "context_length"):
        value = getattr(args, key, None)
        if value is not None:
            overrides[key] = value
    return Settings(**overrides)


def _add_sampling_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-tokens", type=int, default=128, help="most tokens to generate (default 128)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--min-p", type=float, default=0.0)
    p.add_argument("--repetition-penalty", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")


def cmd_model(args: argparse.Namespace) -> int:
    from edge_agent.engine.bundle import BundleError, list_bundles, load_bundle
    from edge_agent.models.importer import ModelImportError, import_model, install_default
    from edge_agent.models.spec import UnsupportedModelError

    s = _settings(args)
    try:
        if args.model_cmd == "import":
            dest = import_model(Path(args.source), args.name, s.models_dir, context_length=args.context_length_import, force=args.force)
            print(f"imported {args.source} as {dest}")
        elif args.model_cmd == "install-default":
            dest = install_default(s.models_dir, force=args.force)
            print(f"default model installed at {dest} (Gemma 3 270M; Gemma Terms of Use apply)")
        elif args.model_cmd == "list":
            rows = list_bundles(s.models_dir)
            if args.json:
                print(json.dumps(rows, indent=2))
            elif not rows:
                print(f"no bundles in {s.models_dir}: run `edge-agent model install-default`")
            for r in rows if not args.json else []:
                if r["ok"]:
                    print(f"{r['name']:<20} {r['architecture']:<8} ctx {r['context_length']:<6} {r['quantization']:<5} {r['bytes'] / 1e6:7.0f} MB  {r['created']}  from {r['source']}")
                else:
                    print(f"{r['name']:<20} BROKEN: {r['error']}")
        elif args.model_cmd == "verify":
            b = load_bundle(s.bundle_path(), verify=True)
            print(f"{b.name}: {len(b.files)} files match the manifest")
    except (ModelImportError, UnsupportedModelError, BundleError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from edge_agent.engine.bundle import BundleError
    from edge_agent.engine.types import EngineError, Finished, SamplingParams, TextDelta
    from edge_agent.runtime import build_engine

    s = _settings(args)
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


def cmd_bench(args: argparse.Namespace) -> int:
    from edge_agent.engine.bench import run_bench

    s = _settings(args)
    quality = (not args.quick) if args.quality is None else args.quality
    return run_bench(s, as_json=args.json, quality=quality, quick=args.quick)


def cmd_doctor(args: argparse.Namespace) -> int:
    from edge_agent.engine.bundle import BundleError, load_bundle
    from edge_agent.hardware import detect

    s = _settings(args)
    for row in s.describe():
        print(f"{row['name']:<20} = {row['value']:<30} # {row['help']}")
    hw = detect(s.device)
    print(f"\nhardware: {hw.device} ({hw.reason}); providers {', '.join(hw.providers)}; {hw.physical_cores} physical cores")
    try:
        b = load_bundle(s.bundle_path(), verify=True)
        print(f"model: {b.name} OK ({b.architecture['arch']}, context {b.context_length})")
    except BundleError as e:
        print(f"model: {e}")
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edge-agent", description="Offline assistant daemon.")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--models-dir", type=Path, default=None, help="folder of model bundles (default models/)")
    parser.add_argument("--model", default=None, help="bundle name or path (default: default)")
    parser.add_argument("--threads", type=int, default=None)
    sub = parser.add_subparsers(dest="cmd", required=True)

    m = sub.add_parser("model", help="import, install and list model bundles")
    msub = m.add_subparsers(dest="model_cmd", required=True)
    imp = msub.add_parser("import", help="GGUF file or Hugging Face folder -> int8 ONNX bundle")
    imp.add_argument("source", help="a .gguf file or a checkpoint folder (config.json, *.safetensors, tokenizer.json)")
    imp.add_argument("--name", required=True)
    imp.add_argument("--context-length", dest="context_length_import", type=int, default=None, help="cap the bundle's context (default 8192)")
    imp.add_argument("--force", action="store_true", help="replace an existing bundle")
    inst = msub.add_parser("install-default", help="build models/default from the packaged Gemma 3 270M")
    inst.add_argument("--force", action="store_true")
    ls = msub.add_parser("list", help="the bundles in the models folder")
    ls.add_argument("--json", action="store_true")
    msub.add_parser("verify", help="check the selected bundle against its manifest")
    m.set_defaults(func=cmd_model)

    g = sub.add_parser("generate", help="stream a completion (no prompt: interactive)")
    g.add_argument("prompt", nargs="?", default=None)
    g.add_argument("--json", action="store_true", help="print one JSON object with text, counts and timings")
    _add_sampling_flags(g)
    g.set_defaults(func=cmd_generate)

    b = sub.add_parser("bench", help="measure decode, prefill and batched throughput (and llama.cpp beside)")
    b.add_argument("--json", action="store_true")
    q = b.add_mutually_exclusive_group()
    q.add_argument("--quality", dest="quality", action="store_true", default=None,
                   help="compare perplexity with the fp32 model (the default, except with --quick)")
    q.add_argument("--no-quality", dest="quality", action="store_false", help="skip the perplexity comparison")
    b.add_argument("--quick", action="store_true", help="fewer tokens (for smoke tests)")
    b.set_defaults(func=cmd_bench)

    d = sub.add_parser("doctor", help="show settings, hardware and check the model bundle")
    d.set_defaults(func=cmd_doctor)

    from edge_agent.cli_index import register as register_index
    from edge_agent.cli_serve import register as register_serve

    register_serve(sub)
    register_index(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return int(args.func(args) or 0)
