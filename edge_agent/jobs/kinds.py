"""The job-kind interface: what every kind (summarize, reindex, classify, batch) implements.

A kind lists a run's items once (they are stored with the run, so a resumed run needs no
re-listing), then the runner starts each item without blocking (`start_item` submits work to
the engine through the chat or embedding service) and keeps up to `concurrency` of them in
flight, so many items decode together in the engine's continuous batching. Each item's result
is committed once per (run, item key).
"""
from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover - types only
    from edge_agent.config import Settings
    from edge_agent.services.chat import ChatService
    from edge_agent.services.embeddings import EmbeddingService


class InvalidJobError(ValueError):
    """A job's definition or params are invalid (the API answers 400 with this message)."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param


DOCUMENT_TYPES = ("txt", "md", "html", "pdf", "docx", "eml", "csv", "unknown")


def flag(params: dict, name: str) -> bool:
    """A true/false param (default false). Raises InvalidJobError for anything else ("ja", 1)."""
    value = params.get(name, False)
    if not isinstance(value, bool):
        raise InvalidJobError(f"{name} must be true or false", param=f"params.{name}")
    return value


def document_filters(params: dict, ctx: Any) -> dict[str, Any]:
    """The document selection of a summarize or classify job, normalised: path_prefix as documents are stored
    (a relative one, as replies show paths, under the ingest roots), types lower-cased, changed_only.

    Raises InvalidJobError for a bad prefix (`..`, a URL), an unknown type or a changed_only that is no boolean.
    """
    from edge_agent.services.paths import PathNotAllowedError, prefix_under_roots

    out: dict[str, Any] = {}
    prefix = params.get("path_prefix")
    if prefix is not None:
        if not isinstance(prefix, str) or not prefix.strip() or "\x00" in prefix:
            raise InvalidJobError("path_prefix must be a non-empty folder path", param="params.path_prefix")
        try:  # relative: under the ingest roots, as the jobs and documents APIs show paths
            out["path_prefix"] = prefix_under_roots(prefix, getattr(ctx.settings, "ingest_roots", None) or [])
        except PathNotAllowedError as e:
            raise InvalidJobError(f"path_prefix: {e}", param="params.path_prefix") from None
        except OSError:  # a name too long, a loop of links: the error's text would name server paths
            raise InvalidJobError("path_prefix is not a usable folder path", param="params.path_prefix") from None
    types = params.get("types")
    if types is not None:
        if isinstance(types, str):
            types = [types]
        if not isinstance(types, list) or not types or not all(isinstance(t, str) for t in types):
            raise InvalidJobError("types must be a list of document types", param="params.types")
        bad = [t for t in types if t.lower() not in DOCUMENT_TYPES]
        if bad:
            raise InvalidJobError(f"unknown document type {bad[0]!r}; known: {', '.join(DOCUMENT_TYPES)}", param="params.types")
        out["types"] = sorted({t.lower() for t in types})
    out["changed_only"] = flag(params, "changed_only")
    return out


class ListingStopped(Exception):
    """A run was cancelled while its items were being listed (the run loop ends it cancelled)."""


class ItemError(Exception):
    """One item failed (recorded as failed with this message; the run goes on)."""


@dataclass
class Item:
    """One unit of work; `key` is unique within a run and stable across restarts."""

    key: str  # e.g. "doc:42", "line:17:<custom_id>", "row:5"
    payload: dict = field(default_factory=dict)  # JSON-serialisable; stored in run_items


@dataclass
class JobContext:
    """What a kind may use (built by the jobs service from the Runtime's services)."""

    chat: "ChatService | None"
    embeddings: "EmbeddingService | None"
    documents: Callable[[], Any]  # -> DocumentService | None (None while loading or disabled)
    settings: "Settings"
    priority: int = 0  # engine.types.BATCH_PRIORITY when the engine has it; job items use it
    cancelled: Callable[[], bool] = lambda: False
    bundle_id: str = ""  # manifest hash of the model bundle (recorded with each result)
    db: Any = None  # store.db.SqliteDatabase of the daemon (documents, jobs, summaries, files)
    # classify's embedding method, where Settings.classify_embedding_model is another model than the documents' (None: the same)
    classify_embeddings: "EmbeddingService | None" = None

    @property
    def label_embeddings(self) -> "EmbeddingService | None":
        """The embedding service classify labels with."""
        return self.classify_embeddings if self.classify_embeddings is not None else self.embeddings


@dataclass
class RunInfo:
    """What finish_run sees of a run (ids, params and counts)."""

    id: str
    job_id: str
    kind: str
    params: dict
    status: str
    counts: dict


class PendingItem(Protocol):
    """An item in flight."""

    def done(self) -> bool:
        """True when result() would not block."""

    def result(self, timeout: float | None = None) -> dict:
        """The result row (JSON-serialisable dict). Raises ItemError for a per-item failure,
        TimeoutError when it is not done within `timeout` seconds."""

    def cancel(self) -> None:
        """Stop the work (frees its engine slots)."""


class DonePending:
    """A PendingItem that is already finished: for kinds whose items run synchronously (e.g. reindex)."""

    def __init__(self, fn: Callable[[], dict]):
        try:
            self._value: dict | None = fn()
            self._error: Exception | None = None
        except ItemError as e:
            self._value, self._error = None, e

    def done(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> dict:
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value

    def cancel(self) -> None:
        pass


class ItemAbandoned(Exception):
    """The item's run no longer waits for it (cancelled, past its deadline, shutting down): its work writes nothing."""


class WriteGate:
    """Lets an item's work write only while its run still waits for it. write() holds the gate for one write (a context
    manager) and raises ItemAbandoned once close() was called; close() waits for a write in progress, so after it
    returns no write of the item begins or is under way."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.closed = False
        self.io_since: float | None = None  # monotonic start of a file-system call in progress (io())

    @contextlib.contextmanager
    def io(self) -> Iterator[None]:
        """Marks a file-system call (a stat, an open, a read) that may hang on a network share: a ThreadPending with a
        stall_s fails the item once one has lasted that long."""
        self.io_since = time.monotonic()
        try:
            yield
        finally:
            self.io_since = None

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        with self._lock:
            if self.closed:
                raise ItemAbandoned("the run stopped waiting for this item: its work is not stored")
            yield

    def close(self) -> None:
        with self._lock:
            self.closed = True


class ThreadPending:
    """A PendingItem whose work runs in a thread of its own, for kinds whose items block (reindex: a file read on a
    network share that hangs, a slow loader): the run loop keeps polling, so its cancel and deadline still stop the run.
    fn gets the item's WriteGate and makes every write through it; cancel() closes the gate, so work the run gave up
    on (a read that returns hours later) stores nothing and the item stays pending for the next run."""

    def __init__(self, fn: Callable[[WriteGate], dict], name: str = "job-item", stall_s: float | None = None,
                 on_stall: Callable[["ThreadPending"], str] | None = None):
        """stall_s: a file-system call of the work (marked with gate.io()) that lasts this long makes the item done:
        result() closes the gate and raises ItemError with on_stall(self)'s message, so the run goes on without it."""
        self.gate = WriteGate()
        self._finished = threading.Event()
        self._value: dict | None = None
        self._error: BaseException | None = None
        self.stall_s = stall_s
        self._on_stall = on_stall
        threading.Thread(target=self._work, args=(fn,), name=name, daemon=True).start()

    def stalled(self) -> bool:
        """Whether a file-system call of the unfinished work has lasted stall_s or more."""
        since = self.gate.io_since
        return (self.stall_s is not None and since is not None and not self._finished.is_set()
                and time.monotonic() - since >= self.stall_s)

    def alive(self) -> bool:
        """Whether the work is still running (a stalled call may return hours later, or never)."""
        return not self._finished.is_set()

    def _work(self, fn: Callable[[WriteGate], dict]) -> None:
        try:
            self._value = fn(self.gate)
        except BaseException as e:  # handed to result() in the run loop's thread
            self._error = e
        finally:
            self._finished.set()

    def done(self) -> bool:
        return self._finished.is_set() or self.stalled()

    def result(self, timeout: float | None = None) -> dict:
        if not self._finished.is_set() and self.stalled():
            self.gate.close()  # what the work does if the call returns stores nothing
            raise ItemError(self._on_stall(self) if self._on_stall else
                            f"a file-system call did not answer within {self.stall_s:g} s")
        if not self._finished.wait(timeout):
            raise TimeoutError("the item is still running")
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value

    def cancel(self) -> None:
        self.gate.close()


@runtime_checkable
class JobKind(Protocol):
    """A kind of job."""

    name: str  # "summarize" | "classify" | "reindex" | "batch"
    prompt_version: str  # recorded with each result

    def validate(self, params: dict, ctx: JobContext) -> dict:
        """Normalised params; raises InvalidJobError (-> 400)."""

    def list_items(self, params: dict, ctx: JobContext, since: float | None) -> Iterator[Item]:
        """The run's items; `since` is the job's last successful run start (epoch s) or None."""

    def start_item(self, item: Item, params: dict, ctx: JobContext) -> PendingItem:
        """Start one item without blocking (submit to the engine) and return at once."""

    # Optional: prepare_run(run: RunInfo, items: list[Item], ctx) -> dict | None: called before a run's
    # first item (again when a run resumes) with all its items; the params returned (in memory, not
    # stored) are those its items start with, e.g. classify's prototypes self-trained on the run.

    def finish_run(self, run: RunInfo, ctx: JobContext) -> None:
        """Optional: called once when a run ends (e.g. batch writes its output files); may be
        called again after a crash between it and the run's final status, so make it idempotent."""

    # Optional too: commit_effect(item, result, run_id, ctx) -> Callable[[sqlite3.Connection], None] | None
    # A function (from edge_agent.store) run inside the transaction that commits the item's result,
    # e.g. SummaryStore.save_effect(...) stores the summary with the document: both or neither.


class GenerationPoll:
    """Non-blocking view of a services.chat.Generation: poll() drains its events without waiting.

    poll() returns True when every choice has finished; then texts / finish_reasons /
    completion_tokens hold the outcome. Raises ItemError for a timed-out or failed generation and
    services.errors.UnavailableError when the engine cancelled it (shutdown: the item stays pending).
    """

    def __init__(self, generation: Any):
        self.generation = generation
        self.finished: dict[int, Any] = {}

    def poll(self) -> bool:
        for c in self.generation.choices:
            if c.index in self.finished:
                continue
            while True:
                ev = c.handle.next_event(0)
                if ev is None:
                    break
                if hasattr(ev, "finish_reason"):  # the engine's Finished event (jobs does not import the engine)
                    self._check(ev)
                    self.finished[c.index] = ev
                    break
        return len(self.finished) == len(self.generation.choices)

    @staticmethod
    def _check(fin: Any) -> None:
        from edge_agent.services.errors import UnavailableError

        if fin.finish_reason == "timeout":
            raise ItemError("the generation ran past the request time limit (request_timeout_s)")
        if fin.finish_reason == "error":
            raise ItemError("the generation failed in the engine")
        if fin.finish_reason == "cancelled":
            raise UnavailableError("the generation was cancelled")

    @property
    def texts(self) -> list[str]:
        return [self.finished[i].text for i in sorted(self.finished)]

    @property
    def finish_reasons(self) -> list[str]:
        return [self.finished[i].finish_reason for i in sorted(self.finished)]

    @property
    def completion_tokens(self) -> int:
        return sum(f.usage.completion_tokens for f in self.finished.values())

    @property
    def prompt_tokens(self) -> int:
        return sum(f.usage.prompt_tokens for f in self.finished.values())

    def cancel(self) -> None:
        self.generation.cancel()


def _registry() -> dict[str, JobKind]:
    kinds: dict[str, JobKind] = {}
    from edge_agent.jobs.summarize import SummarizeKind

    kinds["summarize"] = SummarizeKind()
    from edge_agent.jobs.reindex import ReindexKind

    kinds["reindex"] = ReindexKind()
    # H3b: one line per kind below, e.g.
    # from edge_agent.jobs.batch import BatchKind; kinds["batch"] = BatchKind()
    from edge_agent.jobs.batch import BatchKind

    kinds["batch"] = BatchKind()
    from edge_agent.jobs.classify import ClassifyKind

    kinds["classify"] = ClassifyKind()
    return kinds


KINDS: dict[str, JobKind] = {}


def get_kinds() -> dict[str, JobKind]:
    """The registered kinds by name (imported on first use, so importing this module is cheap)."""
    if not KINDS:
        KINDS.update(_registry())
    return KINDS
