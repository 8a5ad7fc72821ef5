"""`edge-agent setup`: do at install time what a first start would otherwise do before it is ready.

Creates the data, index and models folders, builds the default model bundle when it is missing,
verifies the selected bundle, and exports the embedding model to ONNX and chooses its int8 variant
(the cache under data_dir that the daemon loads in seconds). Idempotent: a second run checks and
changes nothing. `--check` changes nothing at all and exits 1 when a first start would have work to do.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from edge_agent.cli.common import settings_from


def register(sub) -> None:
    p = sub.add_parser("setup", help="prepare folders, the model bundle and the embedding model (run at install time)")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if the daemon would have to build or export at start")
    p.add_argument("--no-build-model", action="store_true", help="do not build a missing default bundle (fail instead)")
    p.set_defaults(func=cmd_setup)


def cmd_setup(args: argparse.Namespace) -> int:
    from edge_agent.engine.bundle import BundleError, load_bundle
    from edge_agent.models.importer import ModelImportError, install_default
    from edge_agent.rag.embedder import EmbedderError, build_embedder, prepared_decision

    s = settings_from(args)
    todo: list[str] = []
    for name in ("data_dir", "index_dir", "models_dir"):
        folder = Path(getattr(s, name))
        if not folder.is_dir():
            if args.check:
                todo.append(f"{name} {folder} does not exist")
                continue
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                return _fail(f"cannot create {name} {folder}: {e.strerror or e}; create it (writable by the service user) or change {name}")
            print(f"created {name} {folder}")
    bundle = s.bundle_path()
    try:
        if not (bundle / "manifest.json").is_file() and s.model == "default" and not args.check and not args.no_build_model:
            t = time.monotonic()
            print(f"building the default model bundle in {bundle} (Gemma 3 270M, a few minutes; Gemma Terms of Use apply)", flush=True)
            install_default(s.models_dir)
            print(f"built in {time.monotonic() - t:.0f} s")
        b = load_bundle(bundle, verify=True)
        print(f"model: {b.name} OK ({len(b.files)} files match the manifest)")
    except (BundleError, ModelImportError) as e:
        if not args.check:
            return _fail(str(e))
        todo.append(f"model: {e}")
    if s.serve_documents:
        try:
            decision = prepared_decision(s)
            if decision is None and not args.check:
                t = time.monotonic()
                print("embedding model: exporting to ONNX and choosing the int8 variant (once; about a minute)", flush=True)
                build_embedder(s)
                decision = prepared_decision(s)
                print(f"embedding model: prepared in {time.monotonic() - t:.0f} s")
            if decision is None:
                todo.append("embedding model: not exported yet (the daemon would export it at start)")
            else:
                print(f"embedding model: {s.embedding_model} prepared ({decision['variant']}, {decision['file_name']})")
        except EmbedderError as e:
            if not args.check:
                return _fail(str(e))
            todo.append(f"embedding model: {e}")
    if todo:
        for line in todo:
            print(f"to do: {line}")
        print("run `edge-agent setup` (as the service user) to prepare them")
        return 1
    print("ready to serve: `edge-agent serve` (or `systemctl start edge-agent`)")
    return 0


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
