"""SQL for jobs, their runs and run items (migration 2; document summaries: store/summaries.py).

Exactly once: a run's items are stored when the run starts (status 'pending'); an item's result
is committed by one conditional UPDATE (`... WHERE status = 'pending'`) in the same transaction
as its side effects (e.g. the document's summary), so a result is stored once or not at all.
Results that finish close together are committed as one group (commit_items): one transaction,
one fsync, all of the group or none of it.
A run has an owner (host:pid:token) and a heartbeat; another process takes it over only when
the owner is gone (a dead pid on this host, or a heartbeat older than the stale limit).
"""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from edge_agent.store.db import SqliteDatabase

ACTIVE = ("queued", "running")
FINISHED = ("succeeded", "failed", "cancelled")
CARRY_REASONS = ("deadline", "max_items")
ITEM_STATUSES = ("pending", "succeeded", "failed", "skipped", "cancelled")

Effect = Callable[[sqlite3.Connection], None]


class DuplicateJobError(ValueError):
    """A job with this name exists already."""


@dataclass
class JobRecord:
    """One row of `jobs` (params and limits decoded)."""

    id: str
    name: str
    kind: str
    params: dict = field(default_factory=dict)
    schedule_cron: str | None = None
    schedule_tz: str | None = None
    enabled: bool = True
    limits: dict = field(default_factory=dict)
    source: str = "api"
    next_run_at: float | None = None
    last_success_at: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass
class RunRecord:
    """One row of `job_runs` plus its item counts by status."""

    id: str
    job_id: str
    kind: str
    params: dict
    status: str
    trigger: str
    since: float | None
    total_items: int
    concurrency: int
    max_items: int | None
    deadline_at: float | None
    stop_reason: str | None
    cancel_requested: bool
    carried_from: str | None
    resumes: int
    error: str | None
    bundle_id: str | None
    prompt_version: str | None
    generated_tokens: int
    owner: str | None
    heartbeat_at: float | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    updated_at: float
    counts: dict = field(default_factory=dict)  # pending, succeeded, failed, skipped, cancelled
    deadline_tz: str | None = None  # the zone deadline_at was read in (an IANA name, 'UTC' or an offset)

    @property
    def done_items(self) -> int:
        return self.counts.get("succeeded", 0) + self.counts.get("failed", 0)


@dataclass
class ItemRecord:
    """One row of `run_items` (payload and result decoded)."""

    run_id: str
    key: str
    ordinal: int
    payload: dict
    status: str
    result: dict | None = None
    error: str | None = None
    bundle_id: str | None = None
    prompt_version: str | None = None
    attempts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    unfinished_starts: int = 0  # starts by processes that died before the item ended


@dataclass
class ItemOutcome:
    """One finished item, to be committed (commit_items): succeeded with its result, or failed with its error."""

    key: str
    status: str  # succeeded | failed
    result: dict | None = None
    error: str | None = None
    started_at: float = 0.0
    finished_at: float | None = None  # when the work ended (epoch s); None = at the commit
    effect: Effect | None = None  # run in the commit's transaction when the outcome is stored (succeeded only)
    tokens: int = 0  # generated tokens, added to the run's count


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def process_owner() -> str:
    """This process's owner tag: host:pid:token."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_alive(owner: str | None) -> bool | None:
    """Whether the owning process lives: True/False on this host, None when it is another host's."""
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    if host != socket.gethostname():
        return None
    try:
        pid = int(rest.split(":", 1)[0])
    except ValueError:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed child not yet reaped) is gone for our purposes
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _job(row: sqlite3.Row | None) -> JobRecord | None:
    if row is None:
        return None
    d = dict(row)
    d["params"] = json.loads(d["params"] or "{}")
    d["limits"] = json.loads(d["limits"] or "{}")
    d["enabled"] = bool(d["enabled"])
    return JobRecord(**d)


def _item(row: sqlite3.Row) -> ItemRecord:
    d = dict(row)
    return ItemRecord(
        run_id=d["run_id"], key=d["item_key"], ordinal=d["ordinal"], payload=json.loads(d["payload"]), status=d["status"],
        result=_loads(d["result"]), error=d["error"], bundle_id=d["bundle_id"], prompt_version=d["prompt_version"],
        attempts=d["attempts"], started_at=d["started_at"], finished_at=d["finished_at"],
        unfinished_starts=d.get("unfinished_starts", 0) or 0,
    )


_RUN_FIELDS = [f for f in RunRecord.__dataclass_fields__ if f != "counts"]  # (the columns of job_runs)


class JobStore:
    """Jobs, runs and run items in the daemon's SQLite database."""

    def __init__(self, db: SqliteDatabase):
        self.db = db

    # --- jobs -------------------------------------------------------------------
    def create_job(self, job: JobRecord) -> JobRecord:
        """Insert a job; raises DuplicateJobError when the name is taken."""
        now = time.time()
        job.created_at = job.updated_at = now
        try:
            with self.db.write() as conn:
                conn.execute(
                    "INSERT INTO jobs(id, name, kind, params, schedule_cron, schedule_tz, enabled, limits, source, next_run_at,"
                    " last_success_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (job.id, job.name, job.kind, json.dumps(job.params), job.schedule_cron, job.schedule_tz, int(job.enabled),
                     json.dumps(job.limits), job.source, job.next_run_at, job.last_success_at, now, now),
                )
        except sqlite3.IntegrityError:
            raise DuplicateJobError(f"a job named {job.name!r} exists already") from None
        return job

    def get_job(self, job_id: str) -> JobRecord | None:
        with self.db.read() as conn:
            return _job(conn.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

    def get_job_by_name(self, name: str) -> JobRecord | None:
        with self.db.read() as conn:
            return _job(conn.execute("SELECT * FROM jobs WHERE name = ?", (name,)).fetchone())

    def list_jobs(self) -> list[JobRecord]:
        return self.page_jobs(0, -1)[0]

    def page_jobs(self, offset: int = 0, limit: int = -1) -> tuple[list[JobRecord], int]:
        """Jobs oldest first from offset (at most limit; -1: all) and the total count: one page read, not the table."""
        with self.db.read() as conn:
            rows = conn.execute("SELECT * FROM jobs ORDER BY created_at, name LIMIT ? OFFSET ?", (limit, offset)).fetchall()
            total = conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
        return [_job(r) for r in rows], total  # type: ignore[misc]

    def update_job(self, job_id: str, **values: Any) -> JobRecord | None:
        """Set the given columns (params/limits as dicts); raises DuplicateJobError on a taken name."""
        if not values:
            return self.get_job(job_id)
        cols, args = [], []
        for k, v in values.items():
            if k not in JobRecord.__dataclass_fields__ or k in ("id", "created_at"):
                raise KeyError(k)
            cols.append(f"{k} = ?")
            args.append(json.dumps(v) if k in ("params", "limits") else int(v) if k == "enabled" else v)
        try:
            with self.db.write() as conn:
                conn.execute(f"UPDATE jobs SET {', '.join(cols)}, updated_at = ? WHERE id = ?", (*args, time.time(), job_id))
        except sqlite3.IntegrityError:
            raise DuplicateJobError(f"a job named {values.get('name')!r} exists already") from None
        return self.get_job(job_id)

    def delete_job(self, job_id: str) -> bool:
        """Delete a job with its runs and items; False when there was none."""
        with self.db.write() as conn:
            return conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,)).rowcount == 1

    def claim_schedule(self, job_id: str, expected: float | None, next_run_at: float | None) -> bool:
        """Move a job's next_run_at from `expected` to `next_run_at`; False if another process moved it first."""
        with self.db.write() as conn:
            cur = conn.execute(
                "UPDATE jobs SET next_run_at = ? WHERE id = ? AND next_run_at IS ?", (next_run_at, job_id, expected)
            )
            return cur.rowcount == 1

    # --- runs -------------------------------------------------------------------
    def create_run(self, job: JobRecord, params: dict, trigger: str, concurrency: int, max_items: int | None,
                   deadline_at: float | None, since: float | None, owner: str | None = None,
                   deadline_tz: str | None = None) -> RunRecord:
        """A queued run of the job (params as they are now); with owner, already held by that process."""
        now = time.time()
        run_id = new_id("run")
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO job_runs(id, job_id, kind, params, status, trigger, since, concurrency, max_items, deadline_at,"
                " deadline_tz, owner, heartbeat_at, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, job.id, job.kind, json.dumps(params), trigger, since, concurrency, max_items, deadline_at,
                 deadline_tz if deadline_at is not None else None, owner, now if owner else None, now, now),
            )
        run = self.get_run(run_id)
        assert run is not None
        return run

    def get_run(self, run_id: str) -> RunRecord | None:
        with self.db.read() as conn:
            row = conn.execute("SELECT * FROM job_runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                return None
            counts = {s: 0 for s in ITEM_STATUSES}
            for status, n in conn.execute("SELECT status, count(*) FROM run_items WHERE run_id = ? GROUP BY status", (run_id,)):
                counts[status] = n
        d = {k: row[k] for k in _RUN_FIELDS}
        d["params"] = json.loads(d["params"])
        d["cancel_requested"] = bool(d["cancel_requested"])
        return RunRecord(**d, counts=counts)

    def list_runs(self, job_id: str | None = None, offset: int = 0, limit: int = 20,
                  statuses: Iterable[str] | None = None) -> tuple[list[RunRecord], int]:
        """Runs newest first (of one job, or all) and their total count."""
        where, args = [], []
        if job_id is not None:
            where.append("job_id = ?")
            args.append(job_id)
        if statuses:
            st = list(statuses)
            where.append(f"status IN ({', '.join('?' * len(st))})")
            args += st
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        with self.db.read() as conn:
            ids = [r[0] for r in conn.execute(
                f"SELECT id FROM job_runs{clause} ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?", (*args, limit, offset))]
            total = conn.execute(f"SELECT count(*) FROM job_runs{clause}", args).fetchone()[0]
        return [r for r in (self.get_run(i) for i in ids) if r is not None], total

    def active_runs(self) -> list[RunRecord]:
        """Runs queued or running, oldest first."""
        with self.db.read() as conn:
            ids = [r[0] for r in conn.execute(
                "SELECT id FROM job_runs WHERE status IN ('queued', 'running') ORDER BY created_at, rowid")]
        return [r for r in (self.get_run(i) for i in ids) if r is not None]

    def claim_run(self, run_id: str, owner: str, stale_s: float) -> bool:
        """Take a queued or running run for `owner` when nobody alive holds it; True when taken."""
        now = time.time()
        with self.db.write() as conn:
            row = conn.execute("SELECT status, owner, heartbeat_at FROM job_runs WHERE id = ?", (run_id,)).fetchone()
            if row is None or row["status"] not in ACTIVE:
                return False
            if row["owner"] and row["owner"] != owner:
                alive = owner_alive(row["owner"])
                fresh = row["heartbeat_at"] is not None and now - row["heartbeat_at"] < stale_s
                if alive or (alive is None and fresh):
                    return False
            resumed = 1 if row["status"] == "running" and row["owner"] != owner else 0
            conn.execute(
                "UPDATE job_runs SET owner = ?, heartbeat_at = ?, resumes = resumes + ?, updated_at = ? WHERE id = ?",
                (owner, now, resumed, now, run_id),
            )
            return True

    def heartbeat(self, run_id: str, owner: str) -> bool:
        """Record a sign of life; False when the run is no longer ours (taken over or deleted)."""
        now = time.time()
        with self.db.write(durable=False) as conn:  # only a living owner's successor reads it
            return conn.execute(
                "UPDATE job_runs SET heartbeat_at = ?, updated_at = ? WHERE id = ? AND owner = ?", (now, now, run_id, owner)
            ).rowcount == 1

    def release_run(self, run_id: str, owner: str) -> None:
        """Give up ownership (the run stays active for another process to resume)."""
        with self.db.write() as conn:
            conn.execute("UPDATE job_runs SET owner = NULL, heartbeat_at = NULL WHERE id = ? AND owner = ?", (run_id, owner))

    def carry_source(self, job_id: str) -> RunRecord | None:
        """The job's latest finished run that stopped early (deadline, max_items) with items left and not yet carried on."""
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT r.id FROM job_runs r WHERE r.job_id = ? AND r.status = 'succeeded' AND r.stop_reason IN ('deadline', 'max_items')"
                " AND NOT EXISTS (SELECT 1 FROM job_runs c WHERE c.carried_from = r.id)"
                " AND EXISTS (SELECT 1 FROM run_items i WHERE i.run_id = r.id AND i.status = 'pending')"
                " ORDER BY r.created_at DESC LIMIT 1", (job_id,),
            ).fetchone()
        return self.get_run(row[0]) if row else None

    def start_items(self, run_id: str, owner: str, items: Iterable[tuple[str, dict]], bundle_id: str, prompt_version: str,
                    carried_from: str | None = None) -> int:
        """Store the run's items (pending) and mark it running, in one transaction; returns the item count.

        Items of `carried_from` that are still pending are marked skipped there (this run does them).
        Raises LookupError when the run is no longer ours or no longer queued.
        """
        now = time.time()
        with self.db.write() as conn:
            ok = conn.execute(
                "UPDATE job_runs SET status = 'running', started_at = ?, updated_at = ?, bundle_id = ?, prompt_version = ?,"
                " carried_from = ? WHERE id = ? AND owner = ? AND status = 'queued'",
                (now, now, bundle_id, prompt_version, carried_from, run_id, owner),
            ).rowcount
            if ok != 1:
                raise LookupError(f"run {run_id} is not queued for this process")
            n = 0
            for key, payload in items:
                cur = conn.execute(
                    "INSERT INTO run_items(run_id, item_key, ordinal, payload, status) VALUES (?, ?, ?, ?, 'pending')"
                    " ON CONFLICT(run_id, item_key) DO NOTHING", (run_id, key, n, json.dumps(payload)),
                )
                n += cur.rowcount
            if carried_from is not None:
                conn.execute(
                    "UPDATE run_items SET status = 'skipped', error = ?, finished_at = ? WHERE run_id = ? AND status = 'pending'",
                    (f"carried over to run {run_id}", now, carried_from),
                )
            conn.execute("UPDATE job_runs SET total_items = ? WHERE id = ?", (n, run_id))
        return n

    def pending_items(self, run_id: str, after: int = -1, limit: int = 256) -> list[ItemRecord]:
        """Pending items in order, from ordinal > after."""
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT * FROM run_items WHERE run_id = ? AND status = 'pending' AND ordinal > ? ORDER BY ordinal LIMIT ?",
                (run_id, after, limit),
            ).fetchall()
        return [_item(r) for r in rows]

    def mark_started(self, run_id: str, key: str) -> None:
        """Record, before the work begins, that this process starts a pending item (undone by unmark_started
        on a clean stop; a process that dies leaves it counted). Not fsynced: it is there for the process that
        resumes after this one died (a power loss may drop it, and the item was not to blame for that)."""
        with self.db.write(durable=False) as conn:
            conn.execute("UPDATE run_items SET unfinished_starts = unfinished_starts + 1 WHERE run_id = ? AND item_key = ?"
                         " AND status = 'pending'", (run_id, key))

    def unmark_started(self, run_id: str, keys: Iterable[str]) -> None:
        """Give back the starts of items a cleanly stopping process leaves pending."""
        with self.db.write(durable=False) as conn:
            conn.executemany("UPDATE run_items SET unfinished_starts = max(0, unfinished_starts - 1) WHERE run_id = ?"
                             " AND item_key = ? AND status = 'pending'", [(run_id, k) for k in keys])

    def commit_item(self, run_id: str, key: str, status: str, result: dict | None, error: str | None, bundle_id: str,
                    prompt_version: str, started_at: float, effect: Effect | None = None, tokens: int = 0) -> bool:
        """Store one item's outcome once: True when this call stored it, False when it was already stored.

        `effect(conn)` runs in the same transaction (only when the outcome is stored). Raises ValueError
        for an unknown status, sqlite3.Error (or the effect's error) with nothing stored.
        """
        return self.commit_items(run_id, [ItemOutcome(key, status, result, error, started_at, None, effect, tokens)],
                                 bundle_id, prompt_version)[0]

    def commit_items(self, run_id: str, outcomes: list[ItemOutcome], bundle_id: str, prompt_version: str) -> list[bool]:
        """Store a group of items' outcomes in one transaction (one fsync), each once; per outcome, True when this
        call stored it, False when it was stored already (its effect then does not run).

        All or nothing: each result, its item's done state, its effect and the run's counters commit together,
        and an error anywhere (an effect, the disk) rolls the whole group back. Raises ValueError for an
        unknown status, sqlite3.Error or the effect's error with nothing stored.
        """
        for o in outcomes:
            if o.status not in ("succeeded", "failed"):
                raise ValueError(o.status)
        if not outcomes:
            return []
        now = time.time()
        stored: list[bool] = []
        succeeded = failed = tokens = 0
        with self.db.write() as conn:
            for o in outcomes:
                cur = conn.execute(
                    "UPDATE run_items SET status = ?, result = ?, error = ?, bundle_id = ?, prompt_version = ?,"
                    " attempts = attempts + 1, unfinished_starts = 0, started_at = ?, finished_at = ?"
                    " WHERE run_id = ? AND item_key = ? AND status = 'pending'",
                    (o.status, None if o.result is None else json.dumps(o.result), o.error, bundle_id, prompt_version,
                     o.started_at, o.finished_at if o.finished_at is not None else now, run_id, o.key),
                )
                ok = cur.rowcount == 1
                stored.append(ok)
                if not ok:
                    continue
                if o.status == "succeeded":
                    succeeded += 1
                    if o.effect is not None:
                        o.effect(conn)
                else:
                    failed += 1
                tokens += int(o.tokens)
            if succeeded or failed:
                conn.execute(
                    "UPDATE job_runs SET succeeded_items = succeeded_items + ?, failed_items = failed_items + ?,"
                    " generated_tokens = generated_tokens + ?, updated_at = ? WHERE id = ?",
                    (succeeded, failed, tokens, now, run_id),
                )
        return stored

    def finish_run(self, run_id: str, status: str, stop_reason: str | None = None, error: str | None = None,
                   owner: str | None = None) -> bool:
        """End an active run; a complete success also moves the job's last_success_at to the run's start.

        A run ending cancelled or failed marks its items still pending 'cancelled' (with why) in the same
        transaction, so its counts add up: succeeded + failed + skipped + cancelled = total. (A run that
        stops early succeeded, at a deadline or max_items, keeps them pending: the next run carries them.)
        With owner, only when that owner holds it. False when the run was not active (or not ours).
        """
        if status not in FINISHED:
            raise ValueError(status)
        now = time.time()
        with self.db.write() as conn:
            args: list[Any] = [status, stop_reason, error, now, now, run_id]
            sql = ("UPDATE job_runs SET status = ?, stop_reason = ?, error = ?, finished_at = ?, updated_at = ?,"
                   " owner = NULL, heartbeat_at = NULL WHERE id = ? AND status IN ('queued', 'running')")
            if owner is not None:
                sql += " AND owner = ?"
                args.append(owner)
            if conn.execute(sql, args).rowcount != 1:
                return False
            if status in ("cancelled", "failed"):
                conn.execute(
                    "UPDATE run_items SET status = 'cancelled', error = ?, finished_at = ? WHERE run_id = ? AND status = 'pending'",
                    ("not done: the run was cancelled" if status == "cancelled" else "not done: the run failed", now, run_id),
                )
            if status == "succeeded" and stop_reason is None:
                conn.execute(
                    "UPDATE jobs SET last_success_at = (SELECT coalesce(started_at, created_at) FROM job_runs WHERE id = ?)"
                    " WHERE id = (SELECT job_id FROM job_runs WHERE id = ?)", (run_id, run_id),
                )
        return True

    def request_cancel(self, run_id: str) -> bool:
        """Ask a run to stop (its owner sees it within a heartbeat); False when it was not active."""
        with self.db.write() as conn:
            return conn.execute(
                "UPDATE job_runs SET cancel_requested = 1, updated_at = ? WHERE id = ? AND status IN ('queued', 'running')",
                (time.time(), run_id),
            ).rowcount == 1

    def cancel_requested(self, run_id: str) -> bool:
        with self.db.read() as conn:
            row = conn.execute("SELECT cancel_requested FROM job_runs WHERE id = ?", (run_id,)).fetchone()
        return row is None or bool(row[0])

    def results(self, run_id: str, offset: int = 0, limit: int = 100, status: str | None = None) -> tuple[list[ItemRecord], int]:
        """One page of a run's items in order, and how many there are (of that status)."""
        where, args = "run_id = ?", [run_id]
        if status:
            where += " AND status = ?"
            args.append(status)
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT * FROM run_items WHERE {where} ORDER BY ordinal LIMIT ? OFFSET ?",
                                (*args, limit, offset)).fetchall()
            total = conn.execute(f"SELECT count(*) FROM run_items WHERE {where}", args).fetchone()[0]
        return [_item(r) for r in rows], total
