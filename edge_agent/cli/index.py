"""`edge-agent index ...`: add, search, remove, rebuild, stats and check the document index."""
from __future__ import annotations

import argparse
import json
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

from edge_agent.cli.common import settings_from


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `index` command and its subcommands to an argparse subparsers object."""
    p = subparsers.add_parser("index", help="private-document index: add, search, remove, rebuild, stats, check")
    sub = p.add_subparsers(dest="index_cmd", required=True)

    a = sub.add_parser("add", help="add files or folders (recursively); changed files are re-indexed")
    a.add_argument("paths", nargs="+", metavar="PATH")
    a.add_argument("--no-progress", action="store_true", help="no progress bar")
    a.add_argument("--json", action="store_true", help="print one JSON object per document")
    a.set_defaults(func=cmd_index_add)

    s = sub.add_parser("search", help="hybrid search (dense + BM25)")
    s.add_argument("query")
    s.add_argument("-k", type=int, default=5, help="how many chunks (default 5)")
    s.add_argument("--mode", choices=["hybrid", "dense", "bm25"], default="hybrid")
    s.add_argument("--type", action="append", dest="types", help="only documents of this type (repeatable)")
    s.add_argument("--path-prefix", help="only documents under this folder")
    s.add_argument("--diversity", type=float, help="MMR, 0..1: how much each next hit should differ from those before it")
    s.add_argument("--neighbors", type=int, default=0, help="widen each hit by this many chunks either side (0..3)")
    s.add_argument("--documents", action="store_const", const="document", default="chunk", dest="group",
                   help="the k best documents, each by its best chunk")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_index_search)

    r = sub.add_parser("remove", help="remove a document by id")
    r.add_argument("id", type=int)
    r.set_defaults(func=cmd_index_remove)

    b = sub.add_parser("rebuild", help="rebuild FAISS and BM25 from SQLite")
    b.add_argument("--reembed", action="store_true", help="compute every vector again (after changing the model)")
    b.set_defaults(func=cmd_index_rebuild)

    st = sub.add_parser("stats", help="documents, chunks and vectors; search, languages, embedder, last check")
    st.add_argument("--json", action="store_true", help="one JSON object with every field instead of text")
    st.set_defaults(func=cmd_index_stats)

    c = sub.add_parser("check", help="check that the index file and SQLite agree (repairs unless --no-repair)")
    c.add_argument("--no-repair", action="store_true")
    c.add_argument("--json", action="store_true", help="one JSON object (ok, counts, problems, actions) instead of text")
    c.set_defaults(func=cmd_index_check)
    return p


BUSY_HINT = (
    "stop the daemon first, or add documents through it: "
    "POST /v1/documents with a file upload or {\"path\": ...} under an ingest root"
)


def _service(settings: Any, check: bool = True, write: bool = True, check_on_open: bool = True, busy_hint: str = BUSY_HINT):
    """The DocumentService over settings (the CLI's: `settings_from(args)`, global flags included). Writing
    commands need the index to themselves: while a daemon owns it they exit with status 2 saying what to do
    instead (busy_hint); reading ones fall back to a read-only view."""
    from edge_agent.services.documents import DocumentService, IndexInUseError, IndexUnreadableError

    try:
        svc = DocumentService.from_settings(settings, check_on_open=check_on_open)
    except IndexInUseError as e:
        if write:
            raise SystemExit(_fail(f"{e}: {busy_hint}")) from None
        print(f"note: {e}; reading it without changes", file=sys.stderr)
        try:
            return DocumentService.from_settings(settings, read_only=True)
        except IndexUnreadableError as e:
            raise SystemExit(_fail(str(e))) from None
    if check and svc.last_check is not None and not svc.last_check.ok:
        for problem in svc.last_check.problems:
            print(f"index check: {problem}", file=sys.stderr)
        for action in svc.last_check.actions:
            print(f"index check: {action}", file=sys.stderr)
    return svc


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def cmd_index_add(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from edge_agent.services.documents import DocumentError
    from edge_agent.services.paths import walk_files

    files: list[Path] = []
    for raw in args.paths:
        p = Path(raw).expanduser()
        if not p.exists():
            return _fail(f"{raw}: no such file or folder")
        files.extend(walk_files(p))
    with closing(_service(settings_from(args))) as svc:
        bar = tqdm(total=len(files), unit="file", disable=args.no_progress or args.json, file=sys.stderr)

        def progress(res) -> None:
            bar.update(1)
            bar.set_postfix_str(res.status)
            if args.json:
                print(json.dumps(res.to_dict()), flush=True)
            elif res.status == "failed":
                tqdm.write(f"failed: {res.source.split(':', 1)[-1]}: {res.error}", file=sys.stderr)

        try:
            results = svc.add_files(files, confined=False, progress=progress)
        except DocumentError as e:
            return _fail(str(e))
        finally:
            bar.close()
    counts = {s: sum(r.status == s for r in results) for s in ("added", "updated", "unchanged", "failed")}
    chunks = sum(r.chunks for r in results if r.status in ("added", "updated"))
    summary = ", ".join(f"{n} {s}" for s, n in counts.items())
    print(f"{summary} ({chunks} new chunks)", file=sys.stderr if args.json else sys.stdout)
    return 1 if counts["failed"] and counts["failed"] == len(results) else 0


def cmd_index_search(args: argparse.Namespace) -> int:
    from edge_agent.services.documents import DocumentError

    filters = {}
    if args.types:
        filters["types"] = args.types
    if args.path_prefix:
        filters["path_prefix"] = str(Path(args.path_prefix).expanduser().resolve())
    settings = settings_from(args)
    absent = _no_database(settings)
    if absent is not None:  # nothing to search, and nothing to create for it
        print(f"note: {_absent_note(absent)}", file=sys.stderr)
        print("[]" if args.json else "no results")
        return 0
    with closing(_service(settings, write=False)) as svc:
        try:
            hits = svc.retrieve(args.query, args.k, filters or None, args.mode, diversity=args.diversity,
                                neighbors=args.neighbors, group=args.group)
        except DocumentError as e:
            return _fail(str(e))
    if args.json:
        print(json.dumps([h.to_dict() for h in hits], indent=2))
    elif not hits:
        print("no results")
    for n, h in enumerate(hits if not args.json else [], start=1):
        where = h.location["label"]
        print(f"{n}. [{h.score:.4f}] doc {h.document_id} {h.title}" + (f" ({where})" if where else ""))
        print("   " + h.snippet.replace("\n", " "))
    return 0


def cmd_index_remove(args: argparse.Namespace) -> int:
    from edge_agent.services.documents import DocumentNotFoundError

    with closing(_service(settings_from(args), busy_hint=f"delete it through the daemon (DELETE /v1/documents/{args.id}) or stop the daemon first")) as svc:
        try:
            svc.delete(args.id)
        except DocumentNotFoundError as e:
            return _fail(str(e), 1)
    print(f"removed document {args.id}")
    return 0


def cmd_index_rebuild(args: argparse.Namespace) -> int:
    with closing(_service(settings_from(args), check=False, busy_hint="a rebuild needs the index to itself: stop the daemon first")) as svc:
        out = svc.rebuild(reembed=args.reembed)
    print(f"rebuilt {out['vectors']} vectors in {out['seconds']} s" + (" (re-embedded)" if out["reembedded"] else ""))
    return 0


def _no_database(settings: Any) -> Path | None:
    """The documents database's path where there is none yet (no document was ever added under these settings), for a
    command that only reads: it says so instead of opening the service, which creates the database, the index folder
    and its lock (in ./var and ./index of whatever folder it ran in, or, as root, files the daemon's user cannot write)."""
    from edge_agent.services.documents import default_db_path

    path = default_db_path(settings)
    return None if path.exists() else path


def _absent_note(path: Path) -> str:
    return (f"no index yet: no documents database at {path} (nothing is indexed there): the daemon, or `edge-agent index "
            "add`, creates it; check data_dir (`edge-agent config show`) if you expected one")


def cmd_index_stats(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    absent = _no_database(settings)
    if absent is not None:
        if args.json:  # the fields a script reads, all empty, and why
            print(json.dumps({"documents": 0, "documents_by_status": {}, "documents_by_kind": {}, "chunks": 0, "tokens": 0,
                              "bytes": 0, "index": None, "absent": _absent_note(absent)}, indent=2))
        else:
            print(f"index: none yet ({_absent_note(absent)})")
        return 0
    with closing(_service(settings, write=False)) as svc:
        stats = svc.stats()
    if args.json:
        print(json.dumps(stats, indent=2, default=str))
    else:
        print("\n".join(stats_lines(stats)))
    return 0


def stats_lines(ix: dict) -> list[str]:
    """The index's stats for a person (`index stats`, doctor; --json has every field): size, search, languages,
    BM25's n-grams, embedder, re-embedding, documents an older reader read, last check."""
    f = ix.get("index") or {}
    by_status = ", ".join(f"{n} {k}" for k, n in sorted((ix.get("documents_by_status") or {}).items()))
    ann = f.get("ann", "off")
    search = f"exact search up to {f['ann_threshold']:,} chunks" if ann == "off" else f"approximate search (HNSW: {ann})"
    lines = [f"index: {ix['documents']} documents{f' ({by_status})' if by_status else ''}, {ix['chunks']} chunks, "
             f"{f.get('vectors', 0)} vectors in {f.get('index_file', '?')}; {search}"]
    langs = f.get("languages") or {}
    if langs:
        uncovered = any(not v.get("embedder_covers") and code != "und" for code, v in langs.items())
        lines.append("  languages: " + ", ".join(
            f"{code}{'' if v.get('embedder_covers') or code == 'und' else '*'} {v['chunks']} chunk{'' if v['chunks'] == 1 else 's'}"
            for code, v in sorted(langs.items(), key=lambda kv: -kv[1]["chunks"])))
        if uncovered:
            lines.append("  * the embedder does not cover it: BM25 leads; `edge-agent model install-embedding` installs "
                         "multilingual-e5-small (offline), then set embedding_model to the folder it prints")
    subwords = (f.get("bm25_fields") or {}).get("subwords")
    if subwords:
        lines.append(f"  BM25: {subwords} character n-grams let compound words match their parts")
    emb = ix.get("embedder") or {}
    if emb:
        lines.append(f"  embedder: {emb.get('model')} ({', '.join(str(emb[k]) for k in ('backend', 'variant') if emb.get(k))})")
    if ix.get("reembed"):
        lines.append(f"  re-embedding: {json.dumps(ix['reembed'], default=str)}")
    lines += reader_lines(ix.get("reader") or {})
    last = ix.get("last_check") or {}
    if last:
        lines.append(f"  last check: {'ok' if last.get('ok') else 'MISMATCH'} {_counts(last)}")
    return lines


def reader_lines(reader: dict) -> list[str]:
    """Documents an older reader read (DocumentService.reader_status), as `index stats` and doctor show them."""
    from edge_agent.jobs.reindex import REREAD_LIMIT

    lines = []
    files, uploads = reader.get("outdated_files", 0), reader.get("outdated_uploads", 0)
    if files:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(reader.get("outdated_by_kind", {}).items(), key=lambda kv: (-kv[1], kv[0])))
        lines.append(f"  reader: {files} document{'s' if files != 1 else ''} read by an older reader ({kinds}): the next reindex "
                     f"reads them again (at most its reread_limit a run, {REREAD_LIMIT} unless set), as does `edge-agent index add` of them")
    if uploads:
        lines.append(f"  reader: {uploads} upload{'s' if uploads != 1 else ''} read by an older reader: upload "
                     f"{'them' if uploads != 1 else 'it'} again to read {'them' if uploads != 1 else 'it'} with the current one")
    lines += chunking_lines(reader.get("chunking") or {}, files + uploads)
    return lines


def chunking_lines(chunking: dict, outdated: int) -> list[str]:
    """The chunking parameters where they changed (DocumentService.reader_status): re-chunking pending, or this view's
    settings differing from the index's."""

    def params(p: dict) -> str:
        return f"chunk_tokens {p.get('chunk_tokens')}, chunk_overlap {p.get('chunk_overlap')}"

    current, recorded, before = chunking.get("current"), chunking.get("recorded"), chunking.get("before")
    if recorded is not None and current is not None and recorded != current:
        n = chunking.get("pending_if_opened", 0)
        return [f"  chunking: these settings cut chunks with {params(current)}, the index was cut with {params(recorded)}: "
                f"the daemon or an `edge-agent index` command started with them marks {n} document{'s' if n != 1 else ''} "
                "to be read again and re-chunked"]
    if before is not None and outdated:
        return [f"  chunking: changed from {params(before)} to {params(recorded or {})}: the documents read by an older "
                "reader above include those not cut anew yet"]
    return []


def cmd_index_check(args: argparse.Namespace) -> int:
    hint = "run `edge-agent index check --no-repair` (it checks a copy while the daemon runs) or stop the daemon first to repair"
    with closing(_service(settings_from(args), check=False, write=not args.no_repair, check_on_open=False, busy_hint=hint)) as svc:
        res = svc.check(repair=not args.no_repair)
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
    else:
        print(check_lines(res))
    return 0 if res.ok else 1


def _counts(check: dict) -> str:
    """What a check compared, as `index check` and the stats' last check show it."""
    return f"({check.get('sqlite_chunks')} chunks in SQLite, {check.get('index_vectors')} vectors in the index)"


def check_lines(res: Any) -> str:
    """A person's view of a CheckResult (as `index stats` and doctor show theirs)."""
    lines = [f"index check: {'OK' if res.ok else 'problems found'} {_counts(res.to_dict())}"]
    lines += [f"  problem: {p}" for p in res.problems]
    lines += [f"  done: {a}" for a in res.actions]
    lines += [f"  moved aside: {m}" for m in res.moved_aside]
    return "\n".join(lines)
