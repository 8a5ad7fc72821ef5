"""The durable run loop: a run's items fed into the engine `concurrency` at a time, each result committed once.

A run starts by listing its items and storing them (pending) in the same transaction that marks
it running, so a resumed run needs no re-listing. Items then start without blocking (the kind
submits generations to the scheduler) and up to `concurrency` are in flight, so they decode
together in the engine's continuous batching. Each finished item is committed by one conditional
UPDATE with its side effects (JobStore.commit_items): after a crash (kill -9, power loss) the
process that takes the run over runs only the items still pending.

Group commit: items that finish close together are committed in one transaction (one fsync, about
6 ms here, instead of one per item), the group written when it holds `commit_max_items` results or
its oldest has waited `commit_max_s`, whichever comes first, and whenever the loop stops (end,
cancel, deadline, shutdown). A group is all or nothing, so a kill -9 loses at most the results not
yet committed (those items run again), never part of a group; a run's counts (GET /v1/runs/{id})
are the committed ones, at most `commit_max_s` behind. A group that fails to commit is retried
item by item, so one item whose effect cannot be stored fails alone (recorded as failed).

How a run ends (status, stop_reason):
- every item done: succeeded (items that failed are counted; one bad item never fails the run);
- cancel: cancelled/cancelled, within one poll; the items not done stay pending;
- deadline reached, or max_items done: succeeded with stop_reason deadline / max_items; the
  next run of the same job takes over the items left (its `carried_from` names this run);
- listing impossible (a folder gone, no model): failed with the reason.
A process shutting down leaves its runs running and releases them; the next start resumes them.

An item that may kill the process (a crash in native code, the OOM killer) must not stop every
restart: each start is recorded before the work begins and given back on a clean stop, so an item
the resumed run finds with unfinished starts was in flight when a process died. Such suspects run
alone (nothing else in flight), and one with POISON_STARTS unfinished starts is failed with the
reason instead of being started again, so the run, and the daemon, go on.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from edge_agent.jobs.kinds import InvalidJobError, Item, ItemError, JobContext, JobKind, ListingStopped, RunInfo
from edge_agent.services.errors import BusyError, ServiceError, UnavailableError
from edge_agent.store.jobs import ItemOutcome, JobStore, RunRecord

log = logging.getLogger(__name__)

POLL_S = 0.01
COMMIT_MAX_ITEMS = 64  # results committed in one transaction at most
COMMIT_MAX_S = 0.2  # the longest a finished item's result waits for its group's commit
HEARTBEAT_S = 2.0
RETRY_LIMIT = 3  # transient failures (engine busy or restarting) of one item before it is failed
POISON_STARTS = 3  # unfinished starts (process deaths with the item in flight) before the item is failed
LIST_WAIT_S = 120.0  # how long a run waits for a part that is still loading (e.g. documents) before failing


class RunStopped(Exception):
    """The process is shutting down or lost the run: the run stays active for the next owner."""


class RunLoop:
    """Executes one run to its end (or until the process stops)."""

    def __init__(self, store: JobStore, kind: JobKind, ctx: JobContext, owner: str, stopping: threading.Event,
                 on_item: Callable[[RunRecord, str, float, int], None] | None = None,
                 progress: Callable[[int, int], None] | None = None, cancel_event: threading.Event | None = None,
                 commit_max_items: int = COMMIT_MAX_ITEMS, commit_max_s: float = COMMIT_MAX_S):
        self.store = store
        self.kind = kind
        self.ctx = ctx
        self.owner = owner
        self.stopping = stopping
        self.on_item = on_item  # (run, status, seconds, tokens) after each committed item (metrics)
        self.progress = progress  # (done, total) after each committed item (a CLI progress bar)
        self.cancel_event = cancel_event or threading.Event()
        self.commit_max_items = max(1, int(commit_max_items))
        self.commit_max_s = max(0.0, float(commit_max_s))
        self._last_beat = 0.0

    # --- helpers ------------------------------------------------------------------
    def _cancelled(self, run_id: str) -> bool:
        if self.cancel_event.is_set():
            return True
        now = time.monotonic()
        if now - self._last_beat >= HEARTBEAT_S:
            self._last_beat = now
            if not self.store.heartbeat(run_id, self.owner):
                raise RunStopped("the run was taken over or deleted")
            if self.store.cancel_requested(run_id):
                self.cancel_event.set()
        return self.cancel_event.is_set()

    def _list(self, run: RunRecord) -> RunRecord:
        """Store the run's items and mark it running (carrying over what a stopped earlier run left)."""
        job = self.store.get_job(run.job_id)
        since = run.since if run.since is not None else (job.last_success_at if job else None)
        # a long listing (reindex waits on folders in threads of their own) polls this: a cancel ends the run, a lost
        # heartbeat raises RunStopped
        ctx = dataclasses.replace(self.ctx, cancelled=lambda: self.stopping.is_set() or self._cancelled(run.id))
        deadline = time.monotonic() + LIST_WAIT_S
        while True:
            try:
                listed = list(self.kind.list_items(run.params, ctx, since))
                break
            except ListingStopped:
                if self.stopping.is_set():
                    raise RunStopped("shutting down") from None
                return run  # still queued: execute ends it cancelled
            except UnavailableError:
                if time.monotonic() > deadline:
                    raise
                if self.stopping.wait(1.0):
                    raise RunStopped("shutting down") from None
                if self._cancelled(run.id):
                    return run
        carried = self.store.carry_source(run.job_id)
        items: list[tuple[str, dict]] = []
        if carried is not None:
            left, _ = self.store.results(carried.id, 0, 1 << 30, "pending")
            items = [(i.key, i.payload) for i in left]
        keys = {k for k, _ in items}
        items += [(i.key, i.payload) for i in listed if i.key not in keys]
        self.store.start_items(run.id, self.owner, items, self.ctx.bundle_id, self.kind.prompt_version,
                               carried.id if carried else None)
        out = self.store.get_run(run.id)
        assert out is not None
        return out

    def _finish(self, run: RunRecord, status: str, stop_reason: str | None = None, error: str | None = None) -> RunRecord:
        hook = getattr(self.kind, "finish_run", None)
        if hook is not None and status != "failed":
            current = self.store.get_run(run.id) or run
            try:
                hook(RunInfo(current.id, current.job_id, current.kind, current.params, status, dict(current.counts)), self.ctx)
            except (InvalidJobError, ItemError, ServiceError) as e:
                status, stop_reason, error = "failed", "error", str(e)
            except Exception as e:  # the run ends failed; the log has the trace
                log.exception("finishing run %s failed", run.id)
                status, stop_reason, error = "failed", "error", f"finishing the run failed ({type(e).__name__})"
        self.store.finish_run(run.id, status, stop_reason, error, owner=self.owner)
        out = self.store.get_run(run.id) or run  # (gone when its job was deleted meanwhile)
        job = self.store.get_job(run.job_id)  # the journal's reader knows the job by its name, not by the run's id
        took = f" in {out.finished_at - out.started_at:.1f} s" if out.finished_at and out.started_at else ""
        log.info("run %s of job %s %s%s%s: %s", run.id, job.name if job else run.job_id, status,
                 f" ({stop_reason})" if stop_reason else "", took, out.counts)
        return out

    def _commit_alone(self, run_id: str, o: ItemOutcome) -> bool:
        """Commit one outcome in its own transaction; a success whose result or effect cannot be stored is
        committed as failed with the reason. Raises when even that fails (e.g. the disk is full)."""
        bundle, version = self.ctx.bundle_id, self.kind.prompt_version
        try:
            return self.store.commit_items(run_id, [o], bundle, version)[0]
        except Exception as e:
            if o.status != "succeeded":
                raise
            log.exception("storing the result of item %s of run %s failed", o.key, run_id)
            o.status, o.result, o.effect, o.tokens = "failed", None, None, 0
            o.error = f"storing the result failed ({type(e).__name__}); see the daemon's log"
            return self.store.commit_items(run_id, [o], bundle, version)[0]

    # --- the loop -----------------------------------------------------------------
    def execute(self, run: RunRecord) -> RunRecord:
        """Run to the end; returns the final record. Raises RunStopped when the process stops first."""
        if run.status == "queued":
            if self.store.cancel_requested(run.id):
                return self._finish(run, "cancelled", "cancelled")
            try:
                run = self._list(run)
            except RunStopped:
                raise
            except (InvalidJobError, ItemError, ServiceError) as e:
                return self._finish(run, "failed", "error", f"listing the items failed: {e}")
            except Exception as e:
                log.exception("listing the items of run %s failed", run.id)
                return self._finish(run, "failed", "error", f"listing the items failed ({type(e).__name__}); see the daemon's log")
            if run.status == "queued":  # cancelled while waiting for a part to load
                return self._finish(run, "cancelled", "cancelled")
        return self._process(run)

    def _prepared_params(self, run: RunRecord) -> dict:
        """The params the run's items start with: a kind's optional prepare_run(run, items, ctx) may adapt
        them to all of the run's items (in memory, e.g. classify's self-trained prototypes); on its
        failure the run goes on with its own params."""
        prepare = getattr(self.kind, "prepare_run", None)
        if prepare is None:
            return run.params
        records, _ = self.store.results(run.id, 0, 1 << 30)
        info = RunInfo(run.id, run.job_id, run.kind, run.params, run.status, dict(run.counts))
        # a long preparation polls this now and then: it keeps the run's heartbeat (raises RunStopped when lost)
        ctx = dataclasses.replace(self.ctx, cancelled=lambda: self.stopping.is_set() or self._cancelled(run.id))
        try:
            got = prepare(info, [Item(r.key, r.payload) for r in records], ctx)
        except RunStopped:
            raise
        except Exception:
            if self.stopping.is_set():
                raise RunStopped("shutting down") from None
            log.warning("preparing run %s failed; its items start with the job's own params", run.id, exc_info=True)
            return run.params
        if self.stopping.is_set():
            raise RunStopped("shutting down")
        return got if got is not None else run.params

    def _process(self, run: RunRecord) -> RunRecord:
        params = self._prepared_params(run)
        # a kind whose items run in threads of their own (reindex) may keep fewer in flight than the run allows
        concurrency = max(1, min(int(run.concurrency), getattr(self.kind, "max_inflight", None) or int(run.concurrency)))
        done_before = run.done_items
        total = run.total_items
        queue: deque[tuple[Item, int]] = deque()  # (item, transient failures so far)
        cursor = -1
        exhausted = False
        inflight: dict[str, tuple[Item, object, float, int]] = {}
        started = 0
        stop_reason: str | None = None
        backoff_until = 0.0
        suspects: dict[str, int] = {}  # key -> unfinished starts by processes that died (run these alone)
        marked: set[str] = set()  # keys this process recorded as started and has not committed

        def refill() -> None:
            nonlocal cursor, exhausted
            if queue or exhausted:
                return
            page = self.store.pending_items(run.id, cursor, 256)
            if not page:
                exhausted = True
            for rec in page:
                cursor = rec.ordinal
                if rec.unfinished_starts and rec.key not in marked:
                    suspects[rec.key] = rec.unfinished_starts
                queue.append((Item(rec.key, rec.payload), 0))

        group: list[ItemOutcome] = []  # finished items not yet committed (see flush)
        group_since = 0.0  # monotonic time the oldest of them finished

        def commit(item: Item, status: str, result: dict | None, error: str | None, t0: float) -> None:
            """Add a finished item to the group (committed by flush)."""
            nonlocal group_since
            effect = None
            tokens = 0
            if status == "succeeded" and result is not None:
                make = getattr(self.kind, "commit_effect", None)
                effect = make(item, result, run.id, self.ctx) if make else None
                usage = result.get("usage") if isinstance(result, dict) else None
                tokens = int(usage.get("completion_tokens", 0)) if isinstance(usage, dict) else 0
            if not group:
                group_since = time.monotonic()
            group.append(ItemOutcome(item.key, status, result, error, t0, time.time(), effect, tokens))
            suspects.pop(item.key, None)
            if len(group) >= self.commit_max_items:
                flush()

        def flush() -> None:
            """Commit the group in one transaction; if that fails, item by item (raises when even one alone cannot be stored)."""
            nonlocal done_before
            if not group:
                return
            bundle, version = self.ctx.bundle_id, self.kind.prompt_version
            try:
                stored = self.store.commit_items(run.id, group, bundle, version)
            except Exception:
                log.warning("committing %d results of run %s together failed; committing them one by one",
                            len(group), run.id, exc_info=True)
                stored = [self._commit_alone(run.id, o) for o in group]
            for o, ok in zip(group, stored):
                marked.discard(o.key)
                if not ok:
                    continue
                done_before += 1
                if self.on_item:
                    self.on_item(run, o.status, (o.finished_at or time.time()) - o.started_at, o.tokens)
                if self.progress:
                    self.progress(done_before, total)
            group.clear()

        def due() -> bool:
            return bool(group) and time.monotonic() - group_since >= self.commit_max_s

        def retry(item: Item, failures: int, why: str, t0: float) -> None:
            nonlocal backoff_until
            backoff_until = time.monotonic() + 0.5
            chat = self.ctx.chat
            if chat is not None and not getattr(chat, "accepting", True):  # shutting down: not the item's fault
                queue.appendleft((item, failures))
            elif failures + 1 >= RETRY_LIMIT:
                commit(item, "failed", None, f"gave up after {RETRY_LIMIT} tries: {why}", t0)
            else:
                queue.appendleft((item, failures + 1))

        try:
            while True:
                busy = False  # something started or finished in this round: go round again without waiting
                if self.stopping.is_set():
                    raise RunStopped("shutting down")
                if self._cancelled(run.id):
                    stop_reason = "cancelled"
                    break
                if run.deadline_at is not None and time.time() >= run.deadline_at:
                    stop_reason = "deadline"
                    break
                # start items while there is room
                now = time.monotonic()
                while len(inflight) < concurrency and now >= backoff_until:
                    if run.max_items is not None and run.done_items + started >= run.max_items:
                        break
                    if any(key in suspects for key in inflight):
                        break  # a suspect runs alone
                    refill()
                    if not queue:
                        break
                    item, failures = queue.popleft()
                    t0 = time.time()
                    deaths = suspects.get(item.key, 0)
                    if deaths >= POISON_STARTS:
                        log.error("item %s of run %s was in flight at %d process deaths: failed, not started again",
                                  item.key, run.id, deaths)
                        commit(item, "failed", None, f"the daemon stopped unexpectedly {deaths} times while this item "
                               "was being processed; it was failed so the run could go on (see the daemon's log)", t0)
                        started += 1
                        continue
                    if deaths and inflight:
                        queue.appendleft((item, failures))
                        break  # wait until the others are done
                    if item.key not in marked:
                        self.store.mark_started(run.id, item.key)
                        marked.add(item.key)
                    try:
                        pending = self.kind.start_item(item, params, self.ctx)
                    except ItemError as e:
                        commit(item, "failed", None, str(e), t0)
                        started += 1
                        continue
                    except (BusyError, UnavailableError) as e:
                        if self.stopping.is_set():
                            raise RunStopped("shutting down") from None
                        queue.appendleft((item, failures))
                        backoff_until = time.monotonic() + (e.retry_after if isinstance(e, BusyError) else 0.5)
                        break
                    except InvalidJobError as e:
                        commit(item, "failed", None, str(e), t0)
                        started += 1
                        continue
                    except Exception as e:
                        log.exception("starting item %s of run %s failed", item.key, run.id)
                        commit(item, "failed", None, f"internal error ({type(e).__name__}); see the daemon's log", t0)
                        started += 1
                        continue
                    inflight[item.key] = (item, pending, t0, failures)
                    started += 1
                    busy = True
                # collect finished items
                for key, (item, pending, t0, failures) in list(inflight.items()):
                    if not pending.done():  # type: ignore[attr-defined]
                        continue
                    del inflight[key]
                    busy = True
                    try:
                        result = pending.result(0)  # type: ignore[attr-defined]
                    except ItemError as e:
                        commit(item, "failed", None, str(e), t0)
                    except (BusyError, UnavailableError) as e:
                        if self.stopping.is_set():
                            raise RunStopped("shutting down") from None
                        started -= 1
                        retry(item, failures, e.message, t0)
                    except ServiceError as e:
                        commit(item, "failed", None, e.message, t0)
                    except Exception as e:
                        log.exception("item %s of run %s failed", item.key, run.id)
                        commit(item, "failed", None, f"internal error ({type(e).__name__}); see the daemon's log", t0)
                    else:
                        commit(item, "succeeded", result, None, t0)
                if due():
                    flush()
                if not inflight:
                    refill()
                    if not queue:
                        break  # nothing left to start (all done, or max_items reached)
                    if run.max_items is not None and run.done_items + started >= run.max_items:
                        stop_reason = "max_items"
                        break
                if not busy:
                    self.stopping.wait(POLL_S)
        except BaseException:
            for _, pending, _, _ in inflight.values():
                pending.cancel()  # type: ignore[attr-defined]
            try:
                flush()  # what is finished is kept (a failing database: those items run again)
            except Exception:
                log.warning("run %s: %d finished results could not be committed; they run again", run.id, len(group),
                            exc_info=True)
            self.store.unmark_started(run.id, marked)  # a clean stop is not the items' fault
            self.store.release_run(run.id, self.owner)
            raise
        for _, pending, _, _ in inflight.values():
            pending.cancel()  # type: ignore[attr-defined]
        flush()
        self.store.unmark_started(run.id, marked)
        if stop_reason == "cancelled":
            return self._finish(run, "cancelled", "cancelled")
        current = self.store.get_run(run.id)
        left = current.counts.get("pending", 0) if current else 0
        if stop_reason is None and left:
            stop_reason = "max_items" if run.max_items is not None else "incomplete"
        return self._finish(run, "succeeded", stop_reason if left else None)
