"""`edge-agent serve`: run the daemon (register(subparsers) adds the subcommand; also runnable as a module)."""
from __future__ import annotations

import argparse
import logging
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default=None, help="address to bind (default 127.0.0.1; anything else needs an API key)")
    p.add_argument("--port", type=int, default=None, help="TCP port (default 8080; 0 = any free port)")
    p.add_argument("--model", dest="serve_model", default=None, help="bundle name or path to serve (default: default)")


def register(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("serve", help="run the daemon: OpenAI-compatible HTTP API on 127.0.0.1:8080")
    add_arguments(p)
    p.set_defaults(func=cmd_serve)
    return p


def cmd_serve(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from edge_agent.config import load_settings
    from edge_agent.engine.bundle import BundleError
    from edge_agent.server import ServeError, serve

    overrides = {}
    model = getattr(args, "serve_model", None) or getattr(args, "model", None)
    for key, value in (("model", model), ("host", args.host), ("port", args.port),
                       ("models_dir", getattr(args, "models_dir", None)), ("threads", getattr(args, "threads", None))):
        if value is not None:
            overrides[key] = value
    settings = None
    try:
        settings = load_settings(**overrides)
        return serve(settings)
    except (ServeError, BundleError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValidationError as e:
        print(f"error: invalid setting: {e.errors()[0]['loc'][0]}: {e.errors()[0]['msg']}", file=sys.stderr)
        return 2
    except OSError as e:  # e.g. the port is taken
        where = f"{settings.host}:{settings.port}" if settings is not None else "the configured address"  # env or file may set them
        print(f"error: cannot listen on {where}: {e.strerror or e}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="edge-agent serve", description="Run the edge-agent daemon.")
    parser.add_argument("-v", "--verbose", action="store_true")
    parser.add_argument("--models-dir", default=None)
    parser.add_argument("--threads", type=int, default=None)
    add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return cmd_serve(args)


if __name__ == "__main__":
    sys.exit(main())
