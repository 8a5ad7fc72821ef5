"""Uploads that overlap or take long: one ingestion per source key at a time, and background processing.

Identical uploads sent at once (a client retrying, several tabs) each read, chunked and embedded the
bytes and all answered "added". `KeyedLocks` serialises the ingestions of one source key, so the first
adds the document and the others find it ("unchanged", the same document id); different documents
still load and embed in parallel.

A large upload (parse + chunk + embed: a long PDF takes minutes on a small CPU) held the client's
connection for all of it, and a client timeout lost track of it. `UploadQueue` finishes it in the
background, as OpenAI's files and vector stores do: the answer is 202 with the document id, and
GET /v1/documents/{id} shows processing -> ready or failed (with the reason).
"""
from __future__ import annotations

import collections
import contextlib
import hashlib
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from edge_agent.rag.loaders import detect_kind, load_bytes
from edge_agent.rag.reader_version import is_current
from edge_agent.rag.retrieval import IndexUpdate
from edge_agent.services.document_results import DocumentError, FileTooLargeError, IngestResult, ReadOnlyError, checked_name
from edge_agent.store.documents import DocumentMeta
from edge_agent.services.ingest_tasks import TooManyTasksError

log = logging.getLogger(__name__)
MAX_UPLOAD_NAME = 255  # characters of an uploaded file's name (NAME_MAX)


class KeyedLocks:
    """One lock per key, made on first use and dropped when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, list] = {}  # key -> [its lock, how many hold or wait for it]

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        """Hold the key's lock for the block (waits while another thread holds it)."""
        with self._guard:
            entry = self._locks.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._guard:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._locks[key]

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)


UPLOAD_INTERRUPTED = "the daemon stopped before it finished processing this upload: upload the file again"


class UploadIngest:
    """DocumentService's uploads (a mixin: it uses the service's store, index, locks and _ingest)."""

    def add_upload(self, filename: str, data: bytes) -> IngestResult:
        """Add or replace an uploaded file identified by its (base) file name.

        One that cannot be read gives status "failed" and stores nothing (a document of that name stays as it was):
        the client holds the bytes and gets the error, as OpenAI's files API refuses a bad file without keeping it.
        """
        meta, name = self._upload_meta(filename, data)
        return self._ingest(meta, lambda: load_bytes(data, name, self.limits), keep_failure=False)

    def start_upload(self, filename: str, data: bytes) -> IngestResult:
        """Add an upload in the background: status "processing" and the document's id (it becomes "ready" or "failed"
        with the reason), or the identical document already there. Raises DocumentError, TooManyTasksError, ReadOnlyError."""
        if self.read_only:
            raise ReadOnlyError("the document index is open read-only here: another edge-agent process owns it")
        meta, name = self._upload_meta(filename, data)
        return self.uploads.submit(meta, lambda: load_bytes(data, name, self.limits))

    def start_text(self, title: str, text: str) -> IngestResult:
        """add_text in the background, as start_upload: status "processing" and the document's id, or the identical
        document already there. Raises DocumentError, TooManyTasksError, ReadOnlyError."""
        if self.read_only:
            raise ReadOnlyError("the document index is open read-only here: another edge-agent process owns it")
        meta, doc = self._text_document(title, text)
        return self.uploads.submit(meta, lambda: doc)

    @property
    def uploads(self) -> Any:
        """The uploads being processed in the background (an UploadQueue, made on first use)."""
        with self._writing:
            if self._uploads is None:
                self._uploads = UploadQueue(self)
            return self._uploads

    def mark_processing(self, meta: DocumentMeta) -> int:
        """Record a document as processing (an older version's chunks leave the index); returns its id."""
        out: dict[str, Any] = {}

        def commit() -> IndexUpdate:
            out["id"], old_ids = self.store.mark_processing(meta)
            return IndexUpdate(remove_ids=old_ids)

        with self._write():
            self._commit(commit, 64 << 10, f"recording the upload of {meta.title!r}")
        return out["id"]

    def finish_upload(self, meta: DocumentMeta, load: Callable[[], Any]) -> IngestResult:
        """Process an upload recorded as processing (the background worker; load() reads it); one that cannot be read
        is recorded failed."""
        return self._ingest(meta, load, only_processing=True)

    def fail_upload(self, meta: DocumentMeta, reason: str) -> None:
        """Record a background upload as failed, unless it was replaced or deleted meanwhile."""
        with self._by_key.hold(meta.source_key):
            existing = self.store.get_by_key(meta.source_key)
            if existing is not None and existing.status == "processing" and existing.content_hash == meta.content_hash:
                self._fail(meta, reason)

    def _upload_meta(self, filename: str, data: bytes) -> tuple[DocumentMeta, str]:
        # NFC: "één.txt" from a Mac (e + U+0301) and from Windows (é) name one file, so one document
        name = checked_name(re.split(r"[\\/]", filename or "")[-1], "the file name", "file", "rename the file")
        if not name or name in (".", ".."):
            raise DocumentError("upload needs a file name", param="file")
        if len(name) > MAX_UPLOAD_NAME:  # no file system names a file so; the title would ride along with every chunk
            raise DocumentError(f"the file name is longer than {MAX_UPLOAD_NAME} characters: rename the file", param="file")
        if len(data) > self.limits.max_file_bytes:
            raise FileTooLargeError(f"file is over the {self.limits.max_file_bytes}-byte limit (max_file_bytes): split it, "
                                    "or raise the setting", param="file")
        kind = detect_kind(name) or "unknown"
        return DocumentMeta(f"upload:{name}", Path(name).stem or name, kind, hashlib.sha256(data).hexdigest(), len(data)), name


@dataclass
class _Job:
    meta: Any  # DocumentMeta
    load: Callable[[], Any]  # -> LoadedDocument (reads the held bytes, or the text as it came)
    document_id: int


class UploadQueue:
    """Uploads processed in the background (POST /v1/documents answers 202): one worker thread, in order.

    `submit` records the document as "processing" (SQLite) and queues the bytes; the worker loads, chunks and
    embeds them and the document becomes "ready", or "failed" with the reason. The bytes are held in memory
    only, so at most `max_waiting` uploads wait; a daemon that stops first leaves them "processing", and the
    next start marks them failed with UPLOAD_INTERRUPTED (DocumentService), never "processing" forever.
    """

    def __init__(self, service: Any, max_waiting: int = 8):
        self.service = service
        self.max_waiting = max_waiting
        self._waiting: collections.deque[_Job] = collections.deque()
        self._reserved = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="upload-ingest", daemon=True)
        self._thread.start()

    def submit(self, meta: Any, load: Callable[[], Any]) -> IngestResult:
        """Record the upload as processing and queue it; an identical one already ready or processing is returned instead.

        Raises TooManyTasksError (429) when max_waiting uploads wait, InsufficientStorageError, ReadOnlyError.
        """
        svc = self.service
        with svc._by_key.hold(meta.source_key):
            existing = svc.store.get_by_key(meta.source_key)
            if existing is not None and existing.content_hash == meta.content_hash and (
                    existing.status == "processing" or existing.status == "ready" and is_current(existing.kind, existing.reader_version)):
                status = "unchanged" if existing.status == "ready" else "processing"
                return IngestResult(status, meta.source_key, existing.id, existing.title, existing.chunk_count)
            # else new, changed, or read by an older reader (rag.reader_version): processed as a changed upload
            with self._cond:
                if len(self._waiting) + self._reserved >= self.max_waiting:
                    raise TooManyTasksError(f"{self.max_waiting} uploads are already waiting to be processed: retry when one "
                                            "is ready", param="file")
                self._reserved += 1
            try:
                doc_id = svc.mark_processing(meta)
            finally:
                with self._cond:
                    self._reserved -= 1
            log.debug("document %d is %s", doc_id, meta.source_key)  # file names are personal data: INFO lines name the id only
            with self._cond:
                self._waiting.append(_Job(meta, load, doc_id))
                self._cond.notify_all()
        return IngestResult("processing", meta.source_key, doc_id, meta.title, 0)

    @property
    def waiting(self) -> int:
        with self._cond:
            return len(self._waiting)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._stop.is_set():
                    self._cond.wait()
                if self._stop.is_set():
                    return  # what still waits stays "processing": close() marks it failed
                job = self._waiting.popleft()
            self._process(job)

    def _process(self, job: _Job) -> None:
        svc = self.service
        try:
            res = svc.finish_upload(job.meta, job.load)
            log.info("background upload of document %s: %s", job.document_id, res.status)
        except Exception as exc:  # the document says why; the worker lives on
            if isinstance(exc, DocumentError):
                reason = str(exc)
            else:
                log.exception("background upload of document %s failed", job.document_id)
                reason = f"internal error ({type(exc).__name__}) while processing the upload; see the daemon's log"
            try:
                svc.fail_upload(job.meta, reason)
            except Exception:  # e.g. the disk is full: the next start marks it failed
                log.exception("could not record that the upload of document %s failed", job.document_id)

    def close(self, timeout: float = 30.0) -> None:
        """Stop after the upload being processed; the ones still waiting are marked failed (upload them again)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout)
        with self._cond:
            dropped, self._waiting = len(self._waiting), collections.deque()
        if dropped:
            log.warning("%d uploads were still waiting at shutdown: marked failed", dropped)
