"""`edge-agent jobs ...`: list, add, run (in the foreground, with a progress bar), runs, results, cancel, delete.

These work on the database directly, so they work with or without a running daemon; a run
started here runs in this process (an operator may call `edge-agent jobs run NAME` from a
systemd timer or cron instead of the daemon's own schedule). A reindex needs the document index
to itself: while the daemon owns it, `jobs run` says so and exits 2.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from typing import Any


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `jobs` command and its subcommands to an argparse subparsers object."""
    p = subparsers.add_parser("jobs", help="nightly work: define, run and inspect jobs (summarize, reindex, classify, batch)")
    sub = p.add_subparsers(dest="jobs_cmd", required=True)

    ls = sub.add_parser("list", help="the jobs, with their schedules and next runs")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--all", action="store_true", help="also the jobs behind OpenAI batches (POST /v1/batches), hidden by default")
    ls.set_defaults(func=cmd_list)

    a = sub.add_parser("add", help="define a job")
    a.add_argument("name")
    a.add_argument("kind", help="summarize, reindex, classify or batch")
    a.add_argument("--params", default="{}", help="the kind's params as JSON, e.g. '{\"changed_only\": true}'")
    a.add_argument("--schedule", help="cron expression, e.g. '0 2 * * *' (02:00 every day)")
    a.add_argument("--timezone", help="IANA time zone of the schedule (default: jobs_timezone)")
    a.add_argument("--disabled", action="store_true", help="define it without its schedule running")
    _limit_flags(a)
    a.set_defaults(func=cmd_add)

    r = sub.add_parser("run", help="run a job now in this process, with a progress bar (Ctrl-C cancels)")
    r.add_argument("name")
    _limit_flags(r)
    r.add_argument("--no-progress", action="store_true")
    r.add_argument("--json", action="store_true", help="print the finished run as JSON")
    r.set_defaults(func=cmd_run)

    rs = sub.add_parser("runs", help="runs, newest first (of one job, or all)")
    rs.add_argument("name", nargs="?")
    rs.add_argument("--limit", type=int, default=20)
    rs.add_argument("--json", action="store_true")
    rs.set_defaults(func=cmd_runs)

    res = sub.add_parser("results", help="a run's results, in order")
    res.add_argument("run_id")
    res.add_argument("--offset", type=int, default=0)
    res.add_argument("--limit", type=int, default=100)
    res.add_argument("--status", choices=["pending", "succeeded", "failed", "skipped", "cancelled"])
    res.add_argument("--json", action="store_true", help="one JSON object per line")
    res.set_defaults(func=cmd_results)

    c = sub.add_parser("cancel", help="cancel a run (the daemon or process running it stops within seconds)")
    c.add_argument("run_id")
    c.set_defaults(func=cmd_cancel)

    d = sub.add_parser("delete", help="delete a job with its runs and results")
    d.add_argument("name")
    d.set_defaults(func=cmd_delete)
    return p


def _limit_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=int, help="items in flight at once (decoded together)")
    p.add_argument("--max-items", type=int, help="stop after this many items (the rest carry over to the next run)")
    p.add_argument("--deadline", help="stop at this time (the rest carry over): 'HH:MM' in the job's schedule zone, else "
                   "jobs_timezone (UTC unless set), or with a zone: '06:00 Europe/Amsterdam', '06:00+01:00'; or an ISO date-time")


def _limits(args: argparse.Namespace) -> dict | None:
    out = {k: v for k, v in (("concurrency", args.concurrency), ("max_items", args.max_items), ("deadline", args.deadline))
           if v is not None}
    return out or None


PROGRESS_LINE_S = 60.0  # without a terminal, `jobs run` writes a progress line at most this often (and at the end)


def _fail(message: str, code: int = 2) -> int:
    print(f"error: {message}", file=sys.stderr)
    return code


def _service(args: argparse.Namespace, with_model: bool = False, kind: str | None = None, read: bool = False):
    """A JobsService on the configured database (with the model loaded for a run that generates).

    read: for a command that only reads (list, runs, results): the database is opened read-only (a read-only
    file or mount works) and the config's [[jobs]] are not synced into it (config_jobs_view shows them).
    """
    from edge_agent.cli.common import settings_from
    from edge_agent.engine.types import BATCH_PRIORITY
    from edge_agent.jobs.service import JobsService
    from edge_agent.services.documents import default_db_path
    from edge_agent.store import SqliteDatabase

    settings = settings_from(args)
    chat = None
    if with_model:
        from edge_agent.runtime import build_engine
        from edge_agent.services.chat import ChatService

        scheduler = build_engine(settings)
        chat = ChatService.from_settings(scheduler, settings)
    documents = _Documents(settings, writable=kind == "reindex", job=getattr(args, "name", None) or "NAME")
    from edge_agent.services.embeddings import EmbeddingService

    embeddings = EmbeddingService(documents, lambda: documents.status)
    path = default_db_path(settings)
    db = _empty_database(path) if read and not path.exists() else SqliteDatabase(path, read_only=read)
    svc = JobsService(settings, db, chat, embeddings, documents, priority=BATCH_PRIORITY)
    if settings.jobs and not read:  # the config's [[jobs]], as the daemon syncs them at start: a timer-driven `jobs run` needs them too
        svc.sync_config_jobs()
    return svc


def config_error_lines(errors: dict[str, str]) -> list[str]:
    """What `jobs list`, `jobs run` and doctor say about refused [[jobs]] entries."""
    from edge_agent.config import _config_file

    return [f"job {name!r} in {_config_file()} is not loaded: {why}" for name, why in errors.items()]


_TEMPORARY: list = []  # the folders of _empty_database's databases, removed at exit


def _empty_database(path):
    """For a command that only reads, where no database exists yet: an empty one in a temporary folder, and a note on
    stderr. It used to create the database at `path`: in ./var of whatever folder it ran in, or, run by root before
    the daemon's first start, a file the daemon's own user could then not write."""
    import tempfile
    from pathlib import Path

    from edge_agent.store import SqliteDatabase

    print(f"note: no database yet at {path} (nothing is stored there yet): the daemon, or `edge-agent jobs add`, "
          "creates it; check data_dir (`edge-agent config show`) if you expected one", file=sys.stderr)
    tmp = tempfile.TemporaryDirectory(prefix="edge-agent-jobs-")
    _TEMPORARY.append(tmp)
    return SqliteDatabase(Path(tmp.name) / "empty.db")


class _Documents:
    """The DocumentService, opened on first use: writable when the job writes the index, else read-only if another owns it."""

    def __init__(self, settings, writable: bool, job: str = "NAME"):
        self.settings, self.writable, self.job = settings, writable, job
        self.svc = None
        self.status: str | None = None

    def __call__(self):
        if self.svc is None and self.status is None:
            from edge_agent.services.documents import DocumentService, IndexInUseError, IndexUnreadableError

            try:
                self.svc = DocumentService.from_settings(self.settings)
            except IndexInUseError as e:
                if self.writable:
                    raise SystemExit(_fail(f"{e}: run the job through the daemon (POST /v1/jobs/{self.job}/run) "
                                           "or stop the daemon first")) from None
                try:
                    self.svc = DocumentService.from_settings(self.settings, read_only=True)
                except IndexUnreadableError as e:
                    raise SystemExit(_fail(str(e))) from None
        return self.svc

    def close(self) -> None:
        if self.svc is not None:
            self.svc.close()


def local_time(ts: float | None) -> str:
    """Epoch seconds as this machine's local time (YYYY-MM-DD HH:MM), or "-"."""
    return "-" if ts is None else dt.datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M")


def _job_dict(job) -> dict:
    from edge_agent.api.jobs import job_object

    return job_object(job).model_dump()


def _run_dict(run) -> dict:
    from edge_agent.api.jobs import run_object

    return run_object(run).model_dump()


def _errors():
    from edge_agent.jobs.kinds import InvalidJobError
    from edge_agent.services.errors import ServiceError

    return (InvalidJobError, ServiceError)


def cmd_list(args: argparse.Namespace) -> int:
    from edge_agent.jobs.batch_files import is_openai_batch_job

    svc = _service(args, read=True)
    jobs, errors = svc.config_jobs_view()
    hidden = 0
    if not args.all:
        shown = [j for j in jobs if not is_openai_batch_job(j)]
        hidden, jobs = len(jobs) - len(shown), shown
    for line in config_error_lines(errors):  # a bad [[jobs]] entry: on stderr, and the exit status says so
        print(f"error: {line}", file=sys.stderr)
    if args.json:
        print(json.dumps([_job_dict(j) for j in jobs], indent=2))
        return 1 if errors else 0
    if not jobs:
        print("no jobs; add one with `edge-agent jobs add NAME KIND`")
    else:
        zone = dt.datetime.now().astimezone().strftime("%Z")  # local_time's times are this machine's; a schedule may name another zone
        rows = [("NAME", "KIND", "SCHEDULE", f"NEXT RUN ({zone})", f"LAST SUCCESS ({zone})")]
        for j in jobs:
            sched = f"{j.schedule_cron} {j.schedule_tz}" if j.schedule_cron else "-"
            rows.append((j.name, j.kind, sched + ("" if j.enabled else " (off)"), local_time(j.next_run_at), local_time(j.last_success_at)))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    if hidden:
        print(f"({hidden} OpenAI batch job{'s' if hidden != 1 else ''} not shown; see `edge-agent jobs list --all` or GET /v1/batches)")
    return 1 if errors else 0


def cmd_add(args: argparse.Namespace) -> int:
    try:
        params = json.loads(args.params)
    except ValueError as e:
        return _fail(f"--params is not valid JSON ({e})")
    if not isinstance(params, dict):
        return _fail("--params must be a JSON object")
    sched = {"cron": args.schedule, "timezone": args.timezone} if args.schedule else None
    svc = _service(args)
    try:
        job = svc.create_job(args.name, args.kind, params, sched, not args.disabled, _limits(args))
    except _errors() as e:
        return _fail(str(e))
    print(f"added job {job.name} ({job.id}), kind {job.kind}" + (f", next run {local_time(job.next_run_at)} ({dt.datetime.now().astimezone():%Z})" if job.next_run_at else ""))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from edge_agent.engine.bundle import BundleError

    try:
        probe = _service(args)
        if args.name in probe.config_errors:  # its [[jobs]] entry is refused: not the last good definition, silently
            return _fail(config_error_lines({args.name: probe.config_errors[args.name]})[0] + "; fix the entry")
        job = probe.get_job(args.name)
        probe.db.close()
        svc = _service(args, with_model=job.kind != "reindex", kind=job.kind)
        if job.kind == "reindex":
            svc.ctx.documents()  # exits 2, saying what to do, while the daemon owns the index
    except _errors() as e:
        return _fail(str(e))
    except BundleError as e:
        return _fail(str(e))
    bar = None
    shown = not args.no_progress and not args.json
    if shown and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=0, unit="item", desc=job.name, file=sys.stderr)
    last = {"at": time.monotonic(), "done": -1}

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.refresh()
        elif shown and total and done != last["done"] and (done >= total or time.monotonic() - last["at"] >= PROGRESS_LINE_S):
            last.update(at=time.monotonic(), done=done)  # no terminal (a timer's journal): a whole line now and then
            print(f"{job.name}: {done}/{total} items", file=sys.stderr, flush=True)

    import signal

    from edge_agent.jobs.runner import RunStopped

    # SIGTERM (systemctl stop of a timer's run, a shutdown): the run is given back, not cut off mid-item as before (its
    # items in flight then counted as crashes, and three such stops failed an item as poison); Ctrl-C still cancels
    signal.signal(signal.SIGTERM, lambda *_: svc.stopping.set())
    try:
        run = svc.run_foreground(job.id, progress=progress, overrides=_limits(args), resuming=lambda r: print(
            f"taking over run {r.id}, which no process was running ("
            + (f"{r.done_items} of {r.total_items} items done" if r.status == "running" else "queued, not started") + ")"
            + ("; its own limits hold, not the flags given" if _limits(args) else ""), file=sys.stderr, flush=True))
    except _errors() as e:
        return _fail(str(e))
    except RunStopped:
        print(f"stopped (SIGTERM): the run stays active with the items not yet done; the next `edge-agent jobs run "
              f"{job.name}` (or the daemon) resumes it", file=sys.stderr)
        return 143  # 128 + SIGTERM
    finally:
        if bar is not None:
            bar.close()
        svc.ctx.documents.close()
        if svc.ctx.chat is not None:
            svc.ctx.chat.scheduler.stop()
    if args.json:
        print(json.dumps(_run_dict(run), indent=2))
    else:
        c = run.counts
        extra = f" ({run.stop_reason})" if run.stop_reason else ""

        if run.status == "succeeded" and not run.total_items:
            skip = "; documents whose summary is current are skipped unless force" if job.kind == "summarize" else ""
            print(f"run {run.id}: succeeded: nothing to do (no items matched the job's selection{skip})")
            return 0
        not_done = f"{c['cancelled']} cancelled" if c.get("cancelled") else f"{c['pending']} left"
        print(f"run {run.id}: {run.status}{extra}: {c['succeeded']} succeeded, {c['failed']} failed, {not_done}"
              + (f"; error: {run.error}" if run.error else ""))
        if run.deadline_at is not None:  # the zone it was read in, and this machine's time (what the other commands show)
            from edge_agent.jobs.schedule import iso_in

            print(f"deadline: {iso_in(run.deadline_at, run.deadline_tz)} ({run.deadline_tz}), "
                  f"{local_time(run.deadline_at)} {dt.datetime.now().astimezone():%Z} here")
        if c["failed"]:
            print(f"see the failures: edge-agent jobs results {run.id} --status failed")
    return 0 if run.status == "succeeded" else 1


def cmd_runs(args: argparse.Namespace) -> int:
    svc = _service(args, read=True)
    try:
        runs, total = svc.list_runs(args.name, 0, args.limit)
    except _errors() as e:
        return _fail(str(e))
    if args.json:
        print(json.dumps([_run_dict(r) for r in runs], indent=2))
        return 0
    print(f"{'RUN':30} {'KIND':10} {'STATUS':10} {'DONE':>11} {'FAILED':>6} {'STARTED':17} {'NOTE'}")
    names: dict[str, str] = {}
    for r in runs:
        c = r.counts
        note = r.error or r.stop_reason or ""  # a failed run's stop_reason is just "error": the error says what happened
        if svc.orphaned(r):  # "running" alone read as busy, for a run whose process had died
            if r.job_id not in names:
                names[r.job_id] = svc.get_job(r.job_id).name
            note = (f"no process is running it: the daemon's next start or `edge-agent jobs run {names[r.job_id]}` "
                    "resumes it")
        print(f"{r.id:30} {r.kind:10} {r.status:10} {c['succeeded'] + c['failed']:>5}/{r.total_items:<5} {c['failed']:>6} "
              f"{local_time(r.started_at):17} {note}")
    if total > len(runs):
        print(f"({total - len(runs)} older runs not shown; --limit N)")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    svc = _service(args, read=True)
    try:
        items, total = svc.results(args.run_id, args.offset, args.limit, args.status)
    except _errors() as e:
        return _fail(str(e))
    for i in items:
        row = {"key": i.key, "status": i.status, "error": i.error, "result": i.result}
        if args.json:
            print(json.dumps(row, ensure_ascii=False))
        else:
            shown = i.error or json.dumps(i.result, ensure_ascii=False) if i.result or i.error else ""
            print(f"{i.key}\t{i.status}\t{shown}")
    if not args.json and total > args.offset + len(items):
        print(f"({total - args.offset - len(items)} more; --offset {args.offset + len(items)})", file=sys.stderr)
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    svc = _service(args)
    try:
        run = svc.cancel_run(args.run_id)
    except _errors() as e:
        return _fail(str(e))
    if run.status in ("queued", "running"):
        print(f"run {run.id}: cancel requested; the process running it stops it within seconds")
    else:
        print(f"run {run.id}: {run.status}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    svc = _service(args)
    try:
        job = svc.delete_job(args.name)
    except _errors() as e:
        return _fail(str(e))
    print(f"deleted job {job.name} ({job.id})")
    return 0
