"""Folder ingestion in the background: POST /v1/documents with a folder answers 202 and a task to poll.

A folder may hold thousands of files and take hours; on an HTTP thread it held a worker (and
the client) for all of it with no cap. One worker thread runs the tasks in order; a task reads at
most `max_files` files, and at most `max_waiting` tasks wait. Tasks live in memory: a restart
forgets them, and whatever they had added stays (each file is committed on its own).
"""
from __future__ import annotations

import collections
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_agent.services.document_results import DocumentError, IngestResult
from edge_agent.services.paths import walk_files
from edge_agent.services.storage import InsufficientStorageError

log = logging.getLogger(__name__)

STATES = ("queued", "running", "succeeded", "failed", "cancelled")


class TooManyTasksError(DocumentError):
    """Too many folder ingestions are waiting; retry when one has finished."""

    code = "too_many_tasks"


@dataclass
class FolderTask:
    """One folder ingestion: its state, the files it found and what happened to each."""

    id: str
    folder: Path
    shown: str  # the folder as clients may see it (relative to its ingest root)
    status: str = "queued"
    files_total: int | None = None
    results: list[IngestResult] = field(default_factory=list)
    error: str | None = None
    error_code: str | None = None
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None

    def counts(self) -> dict[str, int]:
        out = {s: 0 for s in ("added", "updated", "unchanged", "failed")}
        for r in list(self.results):
            out[r.status] = out.get(r.status, 0) + 1
        return out


class FolderTasks:
    """The queue of folder ingestions of one DocumentService and the thread that runs them."""

    def __init__(self, service: Any, max_files: int = 10_000, max_waiting: int = 8, keep_finished: int = 100):
        self.service = service
        self.max_files = max_files
        self.max_waiting = max_waiting
        self._tasks: collections.OrderedDict[str, FolderTask] = collections.OrderedDict()
        self._waiting: collections.deque[FolderTask] = collections.deque()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._keep = keep_finished
        self._thread = threading.Thread(target=self._run, name="folder-ingest", daemon=True)
        self._thread.start()

    def submit(self, folder: Path, shown: str) -> FolderTask:
        """Queue the ingestion of a folder (already resolved and checked); raises TooManyTasksError."""
        with self._cond:
            if len(self._waiting) >= self.max_waiting:
                raise TooManyTasksError(f"{len(self._waiting)} folder ingestions are already waiting: retry when one has finished",
                                        param="path")
            task = FolderTask(f"ingest_{uuid.uuid4().hex[:16]}", folder, shown)
            self._tasks[task.id] = task
            self._waiting.append(task)
            self._forget_old()
            self._cond.notify_all()
        return task

    def get(self, task_id: str) -> FolderTask | None:
        with self._cond:
            return self._tasks.get(task_id)

    def _forget_old(self) -> None:
        done = [t for t in self._tasks.values() if t.finished_at is not None]
        for t in done[: max(0, len(done) - self._keep)]:
            self._tasks.pop(t.id, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._stop.is_set():
                    self._cond.wait()
                if self._stop.is_set():
                    for t in self._waiting:
                        t.status, t.error, t.finished_at = "cancelled", "the server shut down before it started", time.time()
                    self._waiting.clear()
                    return
                task = self._waiting.popleft()
            self._execute(task)

    def _execute(self, task: FolderTask) -> None:
        task.status, task.started_at = "running", time.time()
        try:
            files = []
            for p in walk_files(task.folder):
                if len(files) >= self.max_files:
                    raise DocumentError(f"the folder holds more than {self.max_files} files: add its sub-folders one at a time "
                                        "or raise max_folder_files", param="path")
                files.append(p)
                if self._stop.is_set():
                    break
            task.files_total = len(files)
            self.service.add_files(files, confined=True, progress=task.results.append, stop=self._stop)
            task.status = "cancelled" if self._stop.is_set() and len(task.results) < len(files) else "succeeded"
            if task.status == "cancelled":
                task.error = "the server shut down before every file was read; the files listed were kept"
        except InsufficientStorageError as exc:
            task.status, task.error, task.error_code = "failed", f"{exc} (the files listed before it were kept)", exc.code
        except DocumentError as exc:
            task.status, task.error, task.error_code = "failed", str(exc), exc.code
        except Exception as exc:  # the task reports it; the worker lives on
            log.exception("folder ingestion %s failed", task.id)
            task.status, task.error, task.error_code = "failed", f"internal error ({type(exc).__name__}); see the daemon's log", "internal_error"
        finally:
            task.finished_at = time.time()

    def close(self, timeout: float = 30.0) -> None:
        """Stop after the file being read; waiting tasks are cancelled."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout)
