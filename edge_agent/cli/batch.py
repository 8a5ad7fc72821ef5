"""`edge-agent batch run IN.jsonl -o OUT.jsonl [--errors ERR.jsonl]`: an OpenAI batch file, offline, without a daemon."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from edge_agent.cli.common import settings_from


def register(sub) -> None:
    b = sub.add_parser("batch", help="OpenAI batch files (JSONL of requests) run offline")
    bsub = b.add_subparsers(dest="batch_cmd", required=True)
    r = bsub.add_parser("run", help="run every request of IN.jsonl and write the OpenAI-format results")
    r.add_argument("input", type=Path, help="JSONL file: one {custom_id, method, url, body} per line")
    r.add_argument("-o", "--output", type=Path, required=True, help="where the results go (JSONL, in input order)")
    r.add_argument("--errors", type=Path, default=None, help="where failed lines go (default: into the output file, as vllm run-batch)")
    r.add_argument("--concurrency", type=int, default=0, help="requests in flight at once (default: the engine's batch size)")
    r.add_argument("--quiet", action="store_true", help="no progress line")
    r.add_argument("--json", action="store_true", help="the summary as one JSON object (requests, completed, failed, seconds)")
    r.set_defaults(func=cmd_batch_run)


def _needs_embeddings(data: bytes) -> bool:
    return b"/v1/embeddings" in data


def _unwritable(path: Path) -> str | None:
    """Why the results cannot be written to path (a folder, no such folder above it, no permission), or None."""
    from edge_agent.fsutil import temp_path

    if path.is_dir():
        return "it is a folder: name a file"
    probe = temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
    except OSError as e:
        return e.strerror or type(e).__name__
    finally:
        with contextlib.suppress(OSError):  # under a file: no such probe
            probe.unlink(missing_ok=True)
    return None


def cmd_batch_run(args: argparse.Namespace) -> int:
    from edge_agent.engine.bundle import BundleError
    from edge_agent.jobs.batch import batch_lines, write_jsonl
    from edge_agent.jobs.batch_files import run_offline
    from edge_agent.jobs.kinds import InvalidJobError, JobContext
    from edge_agent.runtime import build_runtime

    s = settings_from(args)
    try:
        data = args.input.read_bytes()
    except OSError as e:
        print(f"error: cannot read {args.input}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        batch_lines(data)  # an empty, non-text or too long file: refused before the model loads, nothing written
    except InvalidJobError as e:
        print(f"error: {args.input}: {e}", file=sys.stderr)
        return 2
    if args.output.resolve() == args.input.resolve() or (args.errors and args.errors.resolve() == args.input.resolve()):
        print("error: the output and error files must differ from the input file", file=sys.stderr)
        return 2
    for target in (args.output, args.errors):  # before any request runs: found after them, the results were lost
        why = target and _unwritable(target)
        if why:
            print(f"error: cannot write {target}: {why}", file=sys.stderr)
            return 2
    documents = None
    if _needs_embeddings(data):
        from edge_agent.rag.embedder import build_embedder

        documents = build_embedder(s)
    try:
        rt = build_runtime(s, documents=documents, load_documents=False)
    except BundleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    last = [0.0]
    tty = sys.stderr.isatty()  # a terminal: one line redrawn; cron or a timer's journal: a whole line each minute

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if args.quiet or (now - last[0] < (0.5 if tty else 60.0) and done < total):
            return
        last[0] = now
        line = f"{done}/{total} requests, {now - t0:.1f} s"
        print(f"\r{line}" if tty else line, end="" if tty and done < total else "\n", file=sys.stderr, flush=True)

    ctx = JobContext(chat=rt.chat, embeddings=rt.embeddings, documents=lambda: None, settings=s, priority=0)
    try:
        results = run_offline(ctx, data, concurrency=args.concurrency or rt.scheduler.max_batch, progress=progress)
    except InvalidJobError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        rt.close()
    out = [line for ok, line in results if ok]
    err = [line for ok, line in results if not ok]
    writes = [(args.output, out), (args.errors, err)] if args.errors is not None else [(args.output, [line for _, line in results])]
    for target, lines in writes:
        try:
            write_jsonl(target, lines)
        except OSError as e:  # e.g. the disk filled while the requests ran
            print(f"error: cannot write {target}: {e.strerror or type(e).__name__}", file=sys.stderr)
            return 2
    summary = {"requests": len(out) + len(err), "completed": len(out), "failed": len(err), "seconds": round(time.monotonic() - t0, 2)}
    if args.json:
        print(json.dumps(summary))
    else:
        where = f"results in {args.output}" + (f", failed lines in {args.errors}" if args.errors is not None else "")
        print(f"{summary['requests']} requests: {summary['completed']} completed, {summary['failed']} failed "
              f"in {summary['seconds']} s; {where}")
    return 0 if not err else 1
