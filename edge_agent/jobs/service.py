"""JobsService: job definitions, runs, the run threads and the cron loop (what api/ and cli/ call).

In the daemon, start() takes over runs left active by a process that is gone (kill -9, power
loss: their items not yet committed run again, the others never), syncs the jobs defined in the
config, and starts the cron loop and a dispatcher that runs queued runs (at most
`jobs_max_parallel_runs` at a time) in threads. stop() lets the runs go (they stay running in
SQLite, released, and the next start resumes them). The CLI runs one run in the foreground with
run_foreground() instead.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from edge_agent.jobs import schedule
from edge_agent.jobs.kinds import InvalidJobError, JobContext, JobKind, get_kinds
from edge_agent.jobs.runner import RunLoop, RunStopped
from edge_agent.services.errors import ServiceError
from edge_agent.services.storage import write_blocked_reason
from edge_agent.store.jobs import (ACTIVE, DuplicateJobError, ItemRecord, JobRecord, JobStore, RunRecord, new_id, owner_alive,
                               process_owner)

log = logging.getLogger(__name__)

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
STALE_S = 30.0  # a run whose owner on another host has not beaten for this long is taken over
LIMITS = ("concurrency", "max_items", "deadline", "max_duration_s")
DEFAULT_BATCH_PRIORITY = 10  # = engine.types.BATCH_PRIORITY, for services built without the runtime (tests)
DISPATCH_POLL_S = 1.0  # the dispatcher looks for runs to start at least this often
BLOCKED_RETRY_S = 30.0
MISSED_S = 60.0  # a scheduled run this late was missed while no daemon ran (the log says so)  # a full or read-only data disk: the dispatcher and cron loop try to write again after this


class JobNotFoundError(ServiceError):
    status = 404
    type = "not_found_error"
    code = "job_not_found"


class RunNotFoundError(ServiceError):
    status = 404
    type = "not_found_error"
    code = "run_not_found"


class JobConflictError(ServiceError):
    """A duplicate job name, or a run asked for while one of the job is active (409)."""

    status = 409
    type = "invalid_request_error"
    code = "conflict"


def bundle_id_of(manifest: dict | None) -> str:
    """A model bundle's id: sha256 of its manifest (which holds every file's sha256)."""
    if not manifest:
        return "none"
    return "sha256:" + hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:16]


class JobsService:
    """Jobs and their runs over one SQLite database and the runtime's chat / embedding / document services."""

    def __init__(self, settings: Any, db: Any, chat: Any = None, embeddings: Any = None,
                 documents: Callable[[], Any] = lambda: None, metrics: Any = None, priority: int | None = None,
                 classify_embeddings: Any = None):
        self.settings = settings
        self.db = db
        self.store = JobStore(db)
        self.kinds: dict[str, JobKind] = get_kinds()
        if priority is None:  # the runtime passes engine.types.BATCH_PRIORITY (jobs does not import the engine)
            priority = DEFAULT_BATCH_PRIORITY
        manifest = getattr(getattr(getattr(chat, "engine", None), "bundle", None), "manifest", None)
        self.ctx = JobContext(chat=chat, embeddings=embeddings, documents=documents, settings=settings, priority=priority,
                              bundle_id=bundle_id_of(manifest), db=db, classify_embeddings=classify_embeddings)
        self.owner = process_owner()
        self.stopping = threading.Event()
        self.metrics = JobMetrics(getattr(metrics, "registry", None), self)
        self._runs: dict[str, tuple[threading.Thread, threading.Event]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self.failing: dict[str, BaseException] = {}  # the loops failing now (FAILING_AFTER tries in a row), with the last error
        self.waiting: str | None = None  # why runs wait (the data disk is full or read-only); /ready shows it
        self._blocked_until = 0.0  # monotonic time before which the dispatcher and cron loop do not try to write
        self.started = False
        self.config_errors: dict[str, str] = {}  # [[jobs]] entries the last sync refused, and why

    # --- state ---------------------------------------------------------------------
    @property
    def failure(self) -> BaseException | None:
        """The last error of a loop that is failing now (None when both work)."""
        return next(iter(self.failing.values()), None)

    @property
    def alive(self) -> bool:
        """False while the cron loop or the dispatcher fails try after try, or when one died (readiness goes down)."""
        return self.failure is None and (not self.started or all(t.is_alive() for t in self._threads) or self.stopping.is_set())

    def _streak(self, name: str) -> schedule.FailureStreak:
        return schedule.FailureStreak(name, lambda e: self.failing.__setitem__(name, e), lambda: self.failing.pop(name, None))

    def _blocked(self, e: BaseException, where: str) -> bool:
        """True (and runs wait: BLOCKED_RETRY_S, then a new try) when `e` is a full or read-only data disk. It killed
        the dispatcher after ten tries, so nightly runs stopped until a restart although an operator made room."""
        why = write_blocked_reason(e)
        if why is None:
            return False
        if self.waiting is None:
            log.warning("%s cannot write the database: %s (%s); job runs wait and are tried again every %.0f s",
                        where, why, e, BLOCKED_RETRY_S)
        self.waiting = f"{why}: job runs wait until it can be written (free space, or make it writable); tried every {BLOCKED_RETRY_S:.0f} s"
        self._blocked_until = time.monotonic() + BLOCKED_RETRY_S
        return True

    def _cron_tick(self, now: float) -> list[str]:
        """tick() for the cron loop: a full or read-only disk makes it wait (see _blocked), not fail."""
        if time.monotonic() < self._blocked_until:
            return []
        try:
            return self.tick(now)
        except Exception as e:
            if not self._blocked(e, "the cron loop"):
                raise
            return []

    # --- jobs ----------------------------------------------------------------------
    def _kind(self, name: str) -> JobKind:
        kind = self.kinds.get(name)
        if kind is None:
            raise InvalidJobError(f"unknown job kind {name!r}; known: {', '.join(sorted(self.kinds))}", param="kind")
        return kind

    def _limits(self, limits: dict | None, param: str = "limits") -> dict:
        limits = dict(limits or {})
        unknown = set(limits) - set(LIMITS)
        if unknown:
            raise InvalidJobError(f"unknown limits: {', '.join(sorted(unknown))}; allowed: {', '.join(LIMITS)}", param=param)
        out = {}
        for name, lo, hi in (("concurrency", 1, 256), ("max_items", 1, 1 << 40), ("max_duration_s", 1, 366 * 86400)):
            v = limits.get(name)
            if v is None:
                continue
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise InvalidJobError(f"{param}.{name} must be an integer from {lo} to {hi}", param=f"{param}.{name}")
            out[name] = v
        if limits.get("deadline") is not None:
            schedule.deadline_at(limits["deadline"], "UTC", time.time(), param=f"{param}.deadline")  # checks the form
            out["deadline"] = limits["deadline"]
        return out

    def _schedule(self, sched: dict | str | None, zone: str | None = None) -> tuple[str | None, str | None]:
        """(cron, timezone) of a schedule; one without a timezone takes `zone` (the job's own), else jobs_timezone."""
        if sched is None:
            return None, None
        if isinstance(sched, str):
            sched = {"cron": sched}
        if not isinstance(sched, dict) or set(sched) - {"cron", "timezone"}:
            raise InvalidJobError("schedule must be {\"cron\": \"0 2 * * *\", \"timezone\": \"Europe/Amsterdam\"}", param="schedule")
        return schedule.check_cron(sched.get("cron"), sched.get("timezone") or zone or self.settings.jobs_timezone)

    def _new_job(self, name: str, kind: str, params: dict | None = None, schedule_: dict | str | None = None,
                 enabled: bool = True, limits: dict | None = None, source: str = "api") -> JobRecord:
        """A job checked and built, not stored; raises InvalidJobError."""
        if not isinstance(name, str) or not NAME.match(name):
            raise InvalidJobError("name must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit", param="name")
        k = self._kind(kind)
        params = k.validate(params or {}, self.ctx)
        cron, tz = self._schedule(schedule_)
        job = JobRecord(id=new_id("job"), name=name, kind=kind, params=params, schedule_cron=cron, schedule_tz=tz,
                        enabled=bool(enabled), limits=self._limits(limits), source=source)
        if cron and job.enabled:
            job.next_run_at = schedule.next_run(cron, tz, time.time())
        return job

    def create_job(self, name: str, kind: str, params: dict | None = None, schedule_: dict | str | None = None,
                   enabled: bool = True, limits: dict | None = None, source: str = "api") -> JobRecord:
        """A new job; raises InvalidJobError (400) or JobConflictError (409, the name is taken)."""
        job = self._new_job(name, kind, params, schedule_, enabled, limits, source)
        try:
            return self.store.create_job(job)
        except DuplicateJobError as e:
            raise JobConflictError(str(e), param="name") from None

    def get_job(self, ref: str) -> JobRecord:
        """A job by id or name; raises JobNotFoundError."""
        job = self.store.get_job(ref) or self.store.get_job_by_name(ref)
        if job is None:
            raise JobNotFoundError(f"no job {ref!r}; see GET /v1/jobs (or `edge-agent jobs list`)", param="job_id")
        return job

    def list_jobs(self) -> list[JobRecord]:
        return self.store.list_jobs()

    def page_jobs(self, offset: int = 0, limit: int = -1) -> tuple[list[JobRecord], int]:
        """Jobs oldest first from offset (at most limit; -1: all) and how many there are in all."""
        return self.store.page_jobs(offset, limit)

    def update_job(self, ref: str, changes: dict) -> JobRecord:
        """Change name, params, schedule (None removes it), enabled or limits; raises InvalidJobError / JobConflictError."""
        job = self.get_job(ref)
        unknown = set(changes) - {"name", "params", "schedule", "enabled", "limits"}
        if unknown:
            raise InvalidJobError(f"these fields cannot be changed: {', '.join(sorted(unknown))}", param=sorted(unknown)[0])
        values: dict[str, Any] = {}
        if "name" in changes:
            if not isinstance(changes["name"], str) or not NAME.match(changes["name"]):
                raise InvalidJobError("name must be 1-100 letters, digits, '.', '_' or '-'", param="name")
            values["name"] = changes["name"]
        if "params" in changes:
            values["params"] = self._kind(job.kind).validate(changes["params"] or {}, self.ctx)
        if "limits" in changes:
            values["limits"] = self._limits(changes["limits"])
        if "enabled" in changes:
            if not isinstance(changes["enabled"], bool):
                raise InvalidJobError("enabled must be true or false", param="enabled")
            values["enabled"] = changes["enabled"]
        cron, tz = job.schedule_cron, job.schedule_tz
        if "schedule" in changes:
            cron, tz = self._schedule(changes["schedule"], job.schedule_tz)  # a new time keeps the job's zone
            values["schedule_cron"], values["schedule_tz"] = cron, tz
        if "schedule" in changes or "enabled" in changes:
            on = values.get("enabled", job.enabled)
            values["next_run_at"] = schedule.next_run(cron, tz, time.time()) if cron and on else None
        try:
            out = self.store.update_job(job.id, **values)
        except DuplicateJobError as e:
            raise JobConflictError(str(e), param="name") from None
        assert out is not None
        return out

    def delete_job(self, ref: str) -> JobRecord:
        """Delete a job, its runs and their results (active runs are cancelled first)."""
        job = self.get_job(ref)
        for run in self.store.list_runs(job.id, 0, 1000, ACTIVE)[0]:
            self.cancel_run(run.id)
        self.store.delete_job(job.id)
        return job

    # --- runs ----------------------------------------------------------------------
    def start_run(self, ref: str, trigger: str = "manual", overrides: dict | None = None, hold: bool = False) -> RunRecord:
        """Queue a run of the job (the dispatcher starts it; with hold, this process holds it to run it itself).

        Raises JobNotFoundError, InvalidJobError, or JobConflictError while a run of the job is active.
        """
        job = self.get_job(ref)
        active = self.store.list_runs(job.id, 0, 1, ACTIVE)[0]
        if active:
            raise JobConflictError(f"job {job.name!r} already has an active run ({active[0].id}); wait for it or cancel it",
                                   param="job_id")
        limits = dict(job.limits)
        limits.update(self._limits(overrides, param="body") if overrides else {})
        now = time.time()
        tz = job.schedule_tz or self.settings.jobs_timezone  # a deadline's 'HH:MM' without a zone of its own is in this
        deadline = schedule.deadline_at(limits.get("deadline"), tz, now)
        shown_tz = schedule.deadline_zone(limits.get("deadline"), tz) or tz
        if limits.get("max_duration_s"):
            end = now + limits["max_duration_s"]
            deadline = min(deadline, end) if deadline else end
        run = self.store.create_run(job, job.params, trigger, limits.get("concurrency") or self.settings.jobs_concurrency,
                                    limits.get("max_items"), deadline, None, self.owner if hold else None, deadline_tz=shown_tz)
        self.metrics.run_created(job.kind)
        self._wake.set()
        return run

    def get_run(self, run_id: str) -> RunRecord:
        run = self.store.get_run(run_id)
        if run is None:
            raise RunNotFoundError(f"no run {run_id!r}", param="run_id")
        return run

    def list_runs(self, ref: str | None = None, offset: int = 0, limit: int = 20) -> tuple[list[RunRecord], int]:
        job_id = self.get_job(ref).id if ref is not None else None
        return self.store.list_runs(job_id, offset, limit)

    def results(self, run_id: str, offset: int = 0, limit: int = 100, status: str | None = None) -> tuple[list[ItemRecord], int]:
        self.get_run(run_id)
        return self.store.results(run_id, offset, limit, status)

    def cancel_run(self, run_id: str) -> RunRecord:
        """Ask a run to stop; one that no living process holds (queued, or left running by a process that died) is
        cancelled at once (`jobs cancel` said "stops within seconds" of a run nothing ran, which then ended cancelled
        only at some later start). Returns the run as it is now."""
        run = self.get_run(run_id)
        if run.status not in ACTIVE:
            return run
        self.store.request_cancel(run_id)
        with self._lock:
            entry = self._runs.get(run_id)
        if entry is not None:
            entry[1].set()
        elif run.owner != self.owner and self.store.claim_run(run_id, self.owner, STALE_S):
            self.store.finish_run(run_id, "cancelled", "cancelled", owner=self.owner)
            self.metrics.run_finished(run.kind, "cancelled")
        return self.get_run(run_id)

    @staticmethod
    def orphaned(run: RunRecord) -> bool:
        """Whether an active run waits with no living process on it (one that died, or queued where no daemon runs
        jobs): the daemon's next start or the next `jobs run` of its job takes it over. A run held on another host
        counts as held."""
        return run.status in ACTIVE and owner_alive(run.owner) is False

    def wait_run(self, run_id: str, timeout: float) -> RunRecord:
        """The run once it has finished, or as it is after timeout seconds."""
        end = time.monotonic() + timeout
        while True:
            run = self.get_run(run_id)
            if run.status not in ACTIVE or time.monotonic() > end:
                return run
            time.sleep(0.05)

    def _loop_for(self, run: RunRecord, cancel: threading.Event, progress=None) -> RunLoop:
        kind = self._kind(run.kind)
        ctx = dataclasses.replace(self.ctx, cancelled=cancel.is_set)
        return RunLoop(self.store, kind, ctx, self.owner, self.stopping, on_item=self.metrics.item_done,
                       progress=progress, cancel_event=cancel,
                       commit_max_items=getattr(self.settings, "jobs_commit_max_items", 64),
                       commit_max_s=getattr(self.settings, "jobs_commit_max_ms", 200) / 1000)

    def run_foreground(self, ref: str, progress: Callable[[int, int], None] | None = None,
                       overrides: dict | None = None, resuming: Callable[[RunRecord], None] | None = None) -> RunRecord:
        """Create a run and execute it in this thread (the CLI); Ctrl-C cancels it. Returns the finished run.

        An active run of the job that no living process holds (a `jobs run` killed mid-run, a run queued where no
        dispatcher runs: jobs_enabled = false, a systemd timer's setup) is taken over and resumed instead, with only
        its items not yet done (`resuming(run)` is told first): it used to stay active for good, and every later
        `jobs run` of the job was refused while it did. Raises JobConflictError while a living process holds one.
        """
        job = self.get_job(ref)
        active = self.store.list_runs(job.id, 0, 1, ACTIVE)[0]
        if active and active[0].cancel_requested and self.store.claim_run(active[0].id, self.owner, STALE_S):
            self._loop_for(active[0], threading.Event()).execute(active[0])  # a cancel asked while none ran it: done now
            active = []
        if active and self.store.claim_run(active[0].id, self.owner, STALE_S):
            run = self.get_run(active[0].id)
            log.info("resuming run %s of job %s (%s items pending) in the foreground", run.id, job.name, run.counts.get("pending"))
            if resuming is not None:
                resuming(run)
        else:
            run = self.start_run(job.id, "manual", overrides, hold=True)
        loop = self._loop_for(run, threading.Event(), progress)
        try:
            final = loop.execute(run)
        except KeyboardInterrupt:
            if self.store.claim_run(run.id, self.owner, STALE_S):
                self.store.request_cancel(run.id)
                self.store.finish_run(run.id, "cancelled", "cancelled", owner=self.owner)
            final = self.get_run(run.id)
        self.metrics.run_finished(final.kind, final.status)
        return final

    # --- the daemon's threads ------------------------------------------------------
    def start(self) -> "JobsService":
        """Sync config jobs, then start the dispatcher (resumes active runs) and the cron loop."""
        if self.started:
            return self
        self.started = True
        self.sync_config_jobs()
        d = threading.Thread(target=self._dispatch_loop, name="edge-agent-jobs", daemon=True)
        d.start()
        self._threads.append(d)
        self._threads.append(schedule.CronLoop(self._cron_tick, self.stopping, self._streak("the cron loop")).start().thread)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop starting runs; running ones stop at their next poll, stay running in SQLite and are released."""
        self.stopping.set()
        self._wake.set()
        end = time.monotonic() + timeout
        for t in list(self._threads) + [t for t, _ in list(self._runs.values())]:
            t.join(max(0.0, end - time.monotonic()))

    def close(self) -> None:
        """stop(), then close the database connections."""
        self.stop()
        self.db.close()

    def _dispatch_loop(self) -> None:
        streak = self._streak("the job dispatcher")
        while not self.stopping.is_set():
            wait = DISPATCH_POLL_S
            try:
                if time.monotonic() >= self._blocked_until:
                    self.dispatch()
                    if self.waiting is not None:
                        log.info("the database can be written again: job runs go on")
                    self.waiting = None
                streak.succeeded()
            except Exception as e:
                if not self._blocked(e, "the job dispatcher"):
                    wait = streak.failed(e, DISPATCH_POLL_S)
            self._wake.wait(wait)
            self._wake.clear()

    def dispatch(self) -> list[str]:
        """Start threads for active runs nobody alive holds, up to jobs_max_parallel_runs; returns their ids."""
        started = []
        for run in self.store.active_runs():
            with self._lock:
                if run.id in self._runs:
                    continue
                if len(self._runs) >= self.settings.jobs_max_parallel_runs:
                    break
            if run.kind not in self.kinds:
                if self.store.claim_run(run.id, self.owner, STALE_S):
                    self.store.finish_run(run.id, "failed", "error", f"unknown job kind {run.kind!r}", owner=self.owner)
                continue
            if not self.store.claim_run(run.id, self.owner, STALE_S):
                continue
            job = self.store.get_job(run.job_id)
            name = job.name if job else run.job_id
            if run.status == "running":
                log.info("resuming run %s of job %s (%s items pending)", run.id, name, run.counts.get("pending"))
            else:
                log.info("starting run %s of job %s (%s)", run.id, name, run.trigger)
            cancel = threading.Event()
            t = threading.Thread(target=self._run_thread, args=(run.id, cancel), name=f"edge-agent-run-{run.id[-6:]}", daemon=True)
            with self._lock:
                self._runs[run.id] = (t, cancel)
            t.start()
            started.append(run.id)
        return started

    def _run_thread(self, run_id: str, cancel: threading.Event) -> None:
        try:
            run = self.get_run(run_id)
            final = self._loop_for(run, cancel).execute(run)
            self.metrics.run_finished(final.kind, final.status)
        except RunStopped:
            pass
        except Exception as e:
            if not self._blocked(e, f"run {run_id}"):
                log.exception("run %s stopped by an error; it stays active and is resumed at the next start", run_id)
            try:
                self.store.release_run(run_id, self.owner)
            except Exception:  # pragma: no cover - the database itself is failing
                pass
        finally:
            with self._lock:
                self._runs.pop(run_id, None)
            self._wake.set()

    def tick(self, now: float) -> list[str]:
        """Start the scheduled runs that are due (one per job however many were missed); returns the run ids."""
        out = []
        for job in self.store.list_jobs():
            if not job.enabled or not job.schedule_cron or job.next_run_at is None or job.next_run_at > now:
                continue
            nxt = schedule.next_run(job.schedule_cron, job.schedule_tz, now)
            if not self.store.claim_schedule(job.id, job.next_run_at, nxt):
                continue  # another process started it
            try:
                out.append(self.start_run(job.id, "schedule").id)
                if now - job.next_run_at > MISSED_S:
                    log.info("job %s was due at %s, while no daemon ran: it runs now, once (not once per missed time)",
                             job.name, schedule.iso(job.next_run_at))
            except JobConflictError:
                log.info("job %s is due but its previous run is still active: skipped until %s", job.name, schedule.iso(nxt))
        return out

    # --- jobs from the config ----------------------------------------------------------
    def plan_config_jobs(self) -> tuple[list[tuple[JobRecord | None, JobRecord]], dict[str, str]]:
        """The config's [[jobs]] checked against the database, nothing written: (stored or None, as configured) per
        good entry, and why each bad one is refused (by its name, or "[[jobs]] entry N" when it has none)."""
        planned, errors = [], {}
        for n, spec in enumerate(self.settings.jobs or [], 1):
            named = spec.get("name") if isinstance(spec, dict) else None
            label = named if isinstance(named, str) and named else f"[[jobs]] entry {n}"
            try:
                if not isinstance(spec, dict):
                    raise InvalidJobError("an entry must be a table (name, kind, schedule, params, limits)")
                planned.append(self._plan_one(dict(spec)))
            except KeyError as e:
                errors[label] = f"{e.args[0]} is missing"
            except (InvalidJobError, ServiceError, TypeError, ValueError) as e:
                errors[label] = str(e)
        return planned, errors

    def _plan_one(self, spec: dict) -> tuple[JobRecord | None, JobRecord]:
        unknown = set(spec) - {"name", "kind", "schedule", "timezone", "params", "limits", "enabled"}
        if unknown:
            raise InvalidJobError(f"unknown fields {', '.join(sorted(unknown))}; allowed: name, kind, schedule, timezone, "
                                  "params, limits, enabled")
        name, kind = spec["name"], spec["kind"]
        sched = spec.get("schedule")
        if isinstance(sched, str):
            sched = {"cron": sched, "timezone": spec.get("timezone")}
        enabled = spec.get("enabled", True)
        if not isinstance(enabled, bool):
            raise InvalidJobError("enabled must be true or false")
        job = self._new_job(name, kind, spec.get("params"), sched, enabled, spec.get("limits"), source="config")
        existing = self.store.get_job_by_name(name)
        if existing is not None and existing.source != "config":
            raise InvalidJobError(f"a job named {name!r} was created through the API; rename one of them")
        if existing is not None and existing.kind == kind:  # the stored job, with the config's values
            same_time = (job.schedule_cron, job.schedule_tz, job.enabled) == (existing.schedule_cron, existing.schedule_tz, existing.enabled)
            job = dataclasses.replace(existing, params=job.params, limits=job.limits, schedule_cron=job.schedule_cron,
                                      schedule_tz=job.schedule_tz, enabled=job.enabled,
                                      next_run_at=existing.next_run_at if same_time else job.next_run_at)
        return existing, job

    def config_jobs_view(self) -> tuple[list[JobRecord], dict[str, str]]:
        """The jobs as the next sync of the config will leave them, and the config's errors; nothing written (a read)."""
        planned, errors = self.plan_config_jobs()
        wanted = {job.name: job for _, job in planned}
        out = []
        for job in self.store.list_jobs():
            if job.source == "config" and job.name in wanted:
                out.append(wanted.pop(job.name))
            elif job.source != "config" or job.name in errors:
                out.append(job)
        return out + list(wanted.values()), errors

    def sync_config_jobs(self) -> dict[str, str]:
        """Create or update the jobs of settings.jobs (source 'config'); drop config jobs no longer there.

        A bad entry is logged and skipped (the daemon still starts); a job stored under its name keeps its last good
        definition. Returns the errors (also kept in config_errors, for `jobs list`, `jobs run` and doctor).
        """
        planned, errors = self.plan_config_jobs()
        for label, why in errors.items():
            log.error("job %r in the config is skipped: %s", label, why)
        self.config_errors = errors
        for existing, job in planned:
            if existing is not None and existing.kind != job.kind:
                self.store.delete_job(existing.id)
                existing = None
            if existing is None:
                self.store.create_job(job)
                continue
            values = {k: getattr(job, k) for k in ("params", "limits", "schedule_cron", "schedule_tz", "enabled", "next_run_at")
                      if getattr(job, k) != getattr(existing, k)}
            if values:
                self.store.update_job(existing.id, **values)
        keep = {job.name for _, job in planned} | set(errors)
        for job in self.store.list_jobs():
            if job.source == "config" and job.name not in keep:
                self.store.delete_job(job.id)
        return errors


class JobMetrics:
    """Prometheus series of runs and items, in the runtime's registry (none: counted nowhere)."""

    def __init__(self, registry: Any, service: JobsService):
        self.enabled = registry is not None
        if not self.enabled:
            return
        from prometheus_client import Counter, Gauge, Histogram

        self.runs = Counter("edge_agent_job_runs", "Job runs by kind and final status (created: queued).", ["kind", "status"],
                            registry=registry)
        self.items = Counter("edge_agent_job_items", "Job items committed, by kind and status.", ["kind", "status"], registry=registry)
        self.item_seconds = Histogram("edge_agent_job_item_seconds", "Time from an item's start to its commit.", ["kind"],
                                      buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300), registry=registry)
        self.tokens = Counter("edge_agent_job_generated_tokens", "Completion tokens generated by job items.", ["kind"],
                              registry=registry)
        self.active = Gauge("edge_agent_job_runs_active", "Runs this process is executing.", registry=registry)
        self.active.set_function(lambda: len(service._runs))

    def run_created(self, kind: str) -> None:
        if self.enabled:
            self.runs.labels(kind, "queued").inc()

    def run_finished(self, kind: str, status: str) -> None:
        if self.enabled:
            self.runs.labels(kind, status).inc()

    def item_done(self, run: RunRecord, status: str, seconds: float, tokens: int) -> None:
        if self.enabled:
            self.items.labels(run.kind, status).inc()
            self.item_seconds.labels(run.kind).observe(seconds)
            if tokens:
                self.tokens.labels(run.kind).inc(tokens)
