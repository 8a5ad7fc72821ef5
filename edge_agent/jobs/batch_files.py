"""OpenAI files and batches over the jobs service: uploads, batch objects, their output files, and offline runs.

A batch is a job of kind `batch` with one run; its state is the run's, mapped to OpenAI's statuses
(validating, in_progress, finalizing, completed, failed, cancelling, cancelled). When the run ends,
the kind's finish_run writes the output and error files (in input order) and links them here.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_agent.config import DB_FILE
from edge_agent.jobs.batch import (
    BatchKind,
    BatchRequestRunner,
    dump_line,
    endpoint_error,
    error_line_of,
    parse_batch,
    run_line,
)
from edge_agent.jobs.kinds import InvalidJobError, ItemError, JobContext, RunInfo
from edge_agent.services.errors import InvalidRequestError, ServiceError, UnavailableError
from edge_agent.store.db import SqliteDatabase
from edge_agent.store.files import BatchRecord, BatchStore, FileRecord, FileStore, FileTooLargeError, StorageFullError, new_id
from edge_agent.store.jobs import JobStore

BATCH_WINDOW_S = 24 * 3600
BATCH_SOURCE = "openai-batch"  # JobRecord.source of the job behind each POST /v1/batches


def is_openai_batch_job(job) -> bool:
    """True for the job behind an OpenAI batch (older ones were stored with source 'api' and a batch_id param)."""
    return job.source == BATCH_SOURCE or (job.kind == "batch" and "batch_id" in (job.params or {}))


class NotFoundError(ServiceError):
    """No file or batch with this id (404)."""

    status = 404
    code = "not_found"


class TooLargeError(ServiceError):
    """An upload over the size limit (413)."""

    status = 413
    code = "file_too_large"


class NotCancellableError(ServiceError):
    """A cancel of a batch that has finished (409, OpenAI's answer and wording; its code is null, as OpenAI's)."""

    status = 409

    def __init__(self, status: str):
        super().__init__(f"Cannot cancel a batch with status '{status}'.")


# a batch in one of these states has nothing left to cancel (finalizing: its run has ended, only its files are written)
FINISHED = frozenset({"finalizing", "completed", "failed", "expired", "cancelled"})


class InsufficientStorageError(ServiceError):
    """Not enough disk space for an upload (507); nothing was stored."""

    status = 507
    type = "server_error"
    code = "insufficient_storage"


@dataclass
class Stores:
    db: SqliteDatabase
    files: FileStore
    batches: BatchStore
    runs: JobStore


_STORES: dict[tuple[Path, int], Stores] = {}
_STORES_LOCK = threading.Lock()


def stores(settings: Any, db: SqliteDatabase | None = None) -> Stores:
    """The stores over db (the jobs service's database), or over data_dir's database opened once per process."""
    root = Path(settings.data_dir).resolve()
    key = (root, id(db))
    with _STORES_LOCK:
        s = _STORES.get(key)
        if s is None:
            db = db or SqliteDatabase(root / DB_FILE)
            files = FileStore(db, root / "files")
            files.sweep()
            s = _STORES[key] = Stores(db, files, BatchStore(db), JobStore(db))
        return s


# --- output files ---------------------------------------------------------------------
def run_lines(runs: JobStore, run_id: str) -> tuple[list[dict], list[dict]]:
    """The output lines and error lines of a run's finished items, in input order."""
    out, err = [], []
    offset = 0
    while True:
        items, total = runs.results(run_id, offset=offset, limit=500)
        for it in items:
            if it.status == "succeeded" and it.result is not None:
                out.append(it.result)
            elif it.status == "failed":
                err.append(error_line_of(it.error or "", it.payload))
        offset += len(items)
        if not items or offset >= total:
            return out, err


def write_run_outputs(run: RunInfo, settings: Any, db: SqliteDatabase | None = None) -> tuple[str | None, str | None]:
    """Store the run's output and error files (once) and link them to its batch; returns their ids."""
    st = stores(settings, db)
    batch_id = run.params.get("batch_id")
    rec = st.batches.get(batch_id) if batch_id else None
    if rec is not None and (rec.output_file_id or rec.error_file_id):
        return rec.output_file_id, rec.error_file_id
    out, err = run_lines(st.runs, run.id)
    name = batch_id or run.id
    out_id = st.files.create("batch_output", f"{name}_output.jsonl", _jsonl(out)).id
    err_id = st.files.create("batch_output", f"{name}_error.jsonl", _jsonl(err)).id if err else None
    if rec is not None:
        st.batches.set_outputs(rec.id, out_id, err_id)
    return out_id, err_id


def _jsonl(lines: Iterable[dict]) -> bytes:
    return "".join(dump_line(line) + "\n" for line in lines).encode("utf-8")


# --- offline runs (edge-agent batch run) -----------------------------------------------
def run_offline(ctx: JobContext, data: bytes, concurrency: int = 16,
                progress: Callable[[int, int], None] | None = None) -> list[tuple[bool, dict]]:
    """Run a batch file's requests through ctx's services without a daemon or a database.

    Returns (succeeded, line) per input line, in input order. Raises InvalidJobError for a file
    that is not UTF-8 JSONL or is too long.
    """
    kind = BatchKind()
    items = parse_batch(data)
    runner = BatchRequestRunner(ctx.chat, ctx.embeddings, ctx.settings, ctx.priority, ctx.cancelled)
    pool = kind._executor()
    results: list[tuple[bool, dict]] = [None] * len(items)  # type: ignore[list-item]
    done = 0
    inflight: dict[int, Any] = {}
    nxt = 0
    try:
        while done < len(items):
            while nxt < len(items) and len(inflight) < concurrency:
                inflight[nxt] = pool.submit(run_line, runner, items[nxt].payload)
                nxt += 1
            finished = [i for i, f in inflight.items() if f.done()]
            if not finished:
                time.sleep(0.01)
                continue
            for i in finished:
                fut = inflight.pop(i)
                try:
                    results[i] = (True, fut.result())
                except ItemError as e:
                    results[i] = (False, error_line_of(str(e), items[i].payload))
                except ServiceError as e:  # the process is shutting down
                    results[i] = (False, error_line_of(e.message, items[i].payload))
                done += 1
                if progress:
                    progress(done, len(items))
    finally:
        for f in inflight.values():
            f.cancel()
    return results


# --- the API's use cases ---------------------------------------------------------------------
class BatchService:
    """Files (/v1/files) and batches (/v1/batches) over the jobs service (`jobs`: H3a's JobsService)."""

    def __init__(self, settings: Any, jobs: Any):
        self.settings = settings
        self.jobs = jobs
        self.st = stores(settings, getattr(jobs, "db", None))

    # files
    def upload(self, purpose: str, filename: str, blocks: Iterable[bytes], length: int | None = None) -> dict:
        """Store an uploaded batch file. Raises InvalidRequestError, TooLargeError, InsufficientStorageError."""
        if purpose != "batch":
            raise InvalidRequestError("purpose must be batch: this server stores files for batches only", param="purpose")
        limit = int(self.settings.max_batch_file_bytes)
        if length is not None and length > limit:
            raise TooLargeError(_too_large(limit), param="file")
        name = (Path(filename or "batch.jsonl").name or "batch.jsonl")[:255]
        try:
            rec = self.st.files.create("batch", name, blocks, max_bytes=limit, expected_bytes=length)
        except FileTooLargeError:
            raise TooLargeError(_too_large(limit), param="file") from None
        except StorageFullError as e:
            raise InsufficientStorageError(str(e)) from None
        return rec.to_openai()

    def _file(self, file_id: str) -> FileRecord:
        rec = self.st.files.get(file_id)
        if rec is None:
            raise NotFoundError(f"no file with id {file_id!r}; see GET /v1/files", param="file_id")
        return rec

    def file(self, file_id: str) -> dict:
        return self._file(file_id).to_openai()

    def files(self, purpose: str | None = None, limit: int = 100, after: str | None = None, order: str = "desc") -> dict:
        recs = self.st.files.list(purpose, limit + 1, after, ascending=order == "asc")
        data = [r.to_openai() for r in recs[:limit]]
        return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None, "has_more": len(recs) > limit}

    def content(self, file_id: str) -> tuple[Path, FileRecord]:
        """The path of a file's bytes and its record (raises NotFoundError)."""
        rec = self._file(file_id)
        return self.st.files.path(rec.id), rec

    def delete_file(self, file_id: str) -> dict:
        self._file(file_id)
        self.st.files.delete(file_id)
        return {"id": file_id, "object": "file", "deleted": True}

    # batches
    def create_batch(self, input_file_id: str, endpoint: str, completion_window: str, metadata: dict | None) -> dict:
        """Create the batch's job and start its run. Raises InvalidRequestError, NotFoundError, UnavailableError."""
        if not getattr(self.jobs, "started", True):
            raise UnavailableError("batches run in the daemon's jobs service, which is off in this process (jobs_enabled); "
                                   "use `edge-agent batch run` offline")
        self._file(input_file_id)
        batch_id = new_id("batch_")
        params = {"input_file_id": input_file_id, "endpoint": endpoint, "completion_window": completion_window, "batch_id": batch_id}
        try:
            job = self.jobs.create_job(name=batch_id, kind="batch", params=params, source=BATCH_SOURCE)
        except InvalidJobError as e:
            raise InvalidRequestError(str(e), param=e.param) from None
        rec = BatchRecord(batch_id, job.id, None, input_file_id, endpoint, completion_window, metadata, None, None, time.time())
        self.st.batches.insert(rec)
        run = self.jobs.start_run(job.id, trigger="manual")
        self.st.batches.set_run(batch_id, run.id)
        return self.batch(batch_id)

    def _batch(self, batch_id: str) -> BatchRecord:
        rec = self.st.batches.get(batch_id)
        if rec is None:
            raise NotFoundError(f"no batch with id {batch_id!r}; see GET /v1/batches", param="batch_id")
        return rec

    def batch(self, batch_id: str) -> dict:
        return self._to_openai(self._batch(batch_id))

    def batches(self, limit: int = 20, after: str | None = None) -> dict:
        recs = self.st.batches.list(limit + 1, after)
        data = [self._to_openai(r) for r in recs[:limit]]
        return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None, "has_more": len(recs) > limit}

    def cancel(self, batch_id: str) -> dict:
        """Ask the batch's run to stop; the batch as it is then ("cancelling", or "cancelled" when nothing was running).
        Raises NotFoundError, NotCancellableError (it has finished: OpenAI answers 409)."""
        rec = self._batch(batch_id)
        status = self._to_openai(rec)["status"]
        if status in FINISHED:
            raise NotCancellableError(status)
        if rec.run_id:
            self.jobs.cancel_run(rec.run_id)
        return self.batch(batch_id)

    def _to_openai(self, rec: BatchRecord) -> dict[str, Any]:
        run = self.st.runs.get_run(rec.run_id) if rec.run_id else None
        created = int(rec.created_at)
        out: dict[str, Any] = {
            "id": rec.id, "object": "batch", "endpoint": rec.endpoint, "errors": None, "input_file_id": rec.input_file_id,
            "completion_window": rec.completion_window, "status": "validating", "output_file_id": rec.output_file_id,
            "error_file_id": rec.error_file_id, "created_at": created, "in_progress_at": None, "expires_at": created + BATCH_WINDOW_S,
            "finalizing_at": None, "completed_at": None, "failed_at": None, "expired_at": None, "cancelling_at": None,
            "cancelled_at": None, "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": rec.metadata,
        }
        if run is None:
            return out
        c = run.counts
        out["request_counts"] = {"total": int(run.total_items), "completed": int(c.get("succeeded", 0)), "failed": int(c.get("failed", 0))}
        if run.started_at:
            out["in_progress_at"] = int(run.started_at)
        ended = int(run.finished_at) if run.finished_at else None
        written = bool(rec.output_file_id)
        if run.status == "queued":
            out["status"] = "cancelling" if run.cancel_requested else "validating"
        elif run.status == "running":
            out["status"] = "cancelling" if run.cancel_requested else "in_progress"
        elif run.status == "succeeded":
            out["status"] = "completed" if written else "finalizing"
            out["finalizing_at"] = ended
            out["completed_at"] = ended if written else None
        elif run.status == "cancelled":
            out["status"] = "cancelled"
            out["cancelling_at"] = out["cancelled_at"] = ended
        else:
            out["status"] = "failed"
            out["failed_at"] = ended
            if run.error:
                err = endpoint_error(run.error) or {"code": "batch_failed", "message": run.error, "param": None, "line": None}
                out["errors"] = {"object": "list", "data": [err]}
        return out


def _too_large(limit: int) -> str:
    return f"the file is larger than {limit} bytes (max_batch_file_bytes): split the requests into several batch files"
