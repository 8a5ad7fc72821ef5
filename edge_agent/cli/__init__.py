"""Command line: serve | generate | model | index | jobs | bench | doctor (one module per command group)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edge_agent.cli import batch, bench, cluster, doctor, generate, index, jobs, model, serve, setup


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edge-agent", description="Offline assistant daemon.")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--models-dir", type=Path, default=None, help="folder of model bundles (default models/)")
    parser.add_argument("--model", default=None, help="bundle name or path (default: default)")
    parser.add_argument("--threads", type=int, default=None)
    sub = parser.add_subparsers(dest="cmd", required=True)
    for module in (model, generate, bench, doctor, serve, index, batch, setup, jobs, cluster):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from pydantic import ValidationError

    from edge_agent.cli import logs
    from edge_agent.config import ConfigError, explain
    from edge_agent.hardware import DeviceError

    logs.configure(args.verbose, daemon=args.cmd == "serve")
    logs.warn_unknown_env()
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, not at exit: a reader that left (`| head`) is handled below
        return code
    except BrokenPipeError:  # `edge-agent jobs runs | head -3`: the reader left; a traceback to stderr said nothing useful
        import os

        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())  # Python's own flush at exit would fail again
        os.close(null)
        return 141  # 128 + SIGPIPE, as a program the signal ended
    except (ConfigError, DeviceError) as e:  # a bad config file, variable or flag, or device = cuda without a GPU: one clear line
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValidationError as e:  # Settings() built directly by a command
        print(f"error: {explain(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback through onnxruntime; writes are whole or not at all
        print("interrupted", file=sys.stderr)
        return 130
