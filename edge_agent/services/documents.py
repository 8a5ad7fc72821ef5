"""DocumentService: ingest, list, delete and retrieve private documents (store + rag, no HTTP).

SQLite is the source of truth, vectors included (chunk_vectors); the FAISS file is a cache of
them, written by a background saver every `index_save_interval_s` and at close, never per
ingest (rewriting it per document filled disks at 79%). At open a lagging file is brought up to
date from SQLite and a corrupt one rebuilt from it.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import uuid
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Iterator, Sequence

import numpy as np

from edge_agent.config import DB_FILE
from edge_agent.rag.bm25 import chunk_header
from edge_agent.rag.chunking import TokenChunker
from edge_agent.rag.index import clean_leftovers
from edge_agent.rag.loaders import TEXT_KINDS, LoadedDocument, LoaderError, LoaderLimits, Section, detect_kind, load_bytes, not_text_reason
from edge_agent.rag.owner import IndexBusyError, OwnerLock
from edge_agent.rag.reader_version import is_current, reader_version
from edge_agent.rag.retrieval import HybridIndex, IndexUpdate
from edge_agent.services.document_search import DocumentSearch
from edge_agent.services.document_results import (
    CheckResult,
    DocumentError,
    DocumentNotFoundError,
    FileTooLargeError,
    IndexInUseError,
    IndexUnreadableError,
    escaped_name,
    file_name_error,
    IngestResult,
    PathRefusedError,
    ReadOnlyError,
    checked_name,
)
from edge_agent.services.paths import NotRegularFileError, PathNotAllowedError, open_regular, resolve_confined, shown_path, walk_files
from edge_agent.services.upload_tasks import UPLOAD_INTERRUPTED, KeyedLocks, UploadIngest
from edge_agent.services.storage import (  # disk_status: for /ready and doctor
    InsufficientStorageError,
    disk_full_error,
    disk_status,  # noqa: F401
    ensure_room,
    is_disk_full,
)
from edge_agent.store import ChunkRecord, DocumentStore, SqliteDatabase
from edge_agent.store.db import MigrationError
from edge_agent.store.documents import DocumentMeta
from edge_agent.store.summaries import SummaryStore
from edge_agent.store.labels import LabelStore

log = logging.getLogger(__name__)

from edge_agent.services.document_upkeep import META_MODEL, META_STORE_ID, META_VARIANT, IndexUpkeep  # noqa: E402,F401


def default_db_path(settings: Any) -> Path:
    return Path(settings.data_dir) / DB_FILE


class DocumentService(IndexUpkeep, UploadIngest, DocumentSearch):
    """Private documents: ingestion into SQLite + FAISS + BM25, and hybrid retrieval.

    Every add/delete returns only after SQLite has committed (the FAISS file follows within
    save_interval_s); one that finds too little free disk raises InsufficientStorageError and
    changes nothing. A writable service owns the index folder (`owner`, an OwnerLock, released by close());
    a read-only one (`read_only`) builds what it cannot load in memory and refuses writes.
    """

    def __init__(
        self,
        store: DocumentStore,
        index: HybridIndex,
        embedder: Any,
        chunker: TokenChunker,
        limits: LoaderLimits | None = None,
        ingest_roots: Sequence[Path] = (),
        check_on_open: bool = True,
        owner: OwnerLock | None = None,
        read_only: bool = False,
        min_free_bytes: int = 0,
        save_interval_s: float = 0.0,
    ):
        self.owner = owner
        self.read_only = read_only
        self.store = store
        self.index = index
        self.embedder = embedder
        self.chunker = chunker
        self.limits = limits or LoaderLimits()
        self.ingest_roots = [Path(r) for r in ingest_roots]
        self._writing = threading.RLock()
        self._by_key = KeyedLocks()  # one ingestion per source key at a time
        self.last_check: CheckResult | None = None
        self.min_free_bytes = int(min_free_bytes)
        self.data_dir = Path(store.db.path).parent
        self._dirty = False  # the in-memory FAISS index holds changes the file does not
        self._loaded = False  # the saved file was read (or found unusable) once
        self._save_lock = threading.Lock()
        self.index_save_error: str | None = None
        self._stop = threading.Event()
        self._saver: threading.Thread | None = None
        self._tasks = None  # FolderTasks, made on first use
        self._uploads = None  # UploadQueue, made on first use
        self.upload_async_bytes = 0  # uploads larger than this are processed in the background (0: when asked)
        self.max_folder_files = 10_000
        self.cleaned: list[str] = []
        self._guards = threading.local()  # this thread's write guard (guarded_writes)
        if read_only:
            self._open_read_only()
            self._loaded = True
            return
        self._record_chunking()
        self.cleaned = clean_leftovers(self.index.index_dir)
        if self.cleaned:
            log.info("removed leftovers of interrupted writes in the index folder: %s", ", ".join(self.cleaned))
        if check_on_open:
            self.last_check = self.check()
        stale = self.store.fail_processing(UPLOAD_INTERRUPTED)  # nothing works on them now: never "processing" forever
        if stale:
            log.warning("%d uploads were still processing when the daemon stopped: marked failed", stale)
        if save_interval_s > 0:
            self._saver = threading.Thread(target=self._save_loop, args=(save_interval_s,), name="faiss-saver", daemon=True)
            self._saver.start()

    @classmethod
    def from_settings(
        cls, settings: Any, embedder: Any = None, db: SqliteDatabase | None = None, check_on_open: bool = True,
        read_only: bool = False,
    ) -> "DocumentService":
        """Build the service from Settings (the embedder is loaded unless given); checks the index on open.

        Unless read_only, the service owns the index folder: raises IndexInUseError at once when
        another process (a running daemon, another `edge-agent index` command) owns it. read_only opens the
        database read-only too: raises IndexUnreadableError when there is none or when it lacks migrations that
        this version would apply (its owner has not applied them).
        """
        note = getattr(settings, "index_dir_note", lambda: None)()
        if note:
            log.warning("%s", note)
        owner = None
        if not read_only:
            try:
                owner = OwnerLock(Path(settings.index_dir)).acquire()
            except IndexBusyError as exc:
                raise IndexInUseError(str(exc), exc.pid) from None
        opened = svc = None
        try:
            if embedder is None:
                from edge_agent.rag.embedder import build_embedder

                embedder = build_embedder(settings)
            if db is None:  # a read-only view writes nothing, not even a migration (the owner, e.g. the daemon, applies them)
                try:
                    db = opened = SqliteDatabase(default_db_path(settings), read_only=read_only)
                except (FileNotFoundError, MigrationError) as e:
                    raise IndexUnreadableError(f"cannot read the documents database without changing it: {e}") from None
            from edge_agent.services.reembed import BackgroundReembed, serving_embedder

            embedder, switch_to = serving_embedder(settings, DocumentStore(db), embedder, read_only)  # old model serves during a switch
            chunk_tokens = min(settings.chunk_tokens, embedder.max_tokens - 2)
            svc = cls(
                DocumentStore(db),
                HybridIndex(Path(settings.index_dir), embedder.dim, ann_threshold=settings.ann_threshold,
                            dense_languages=getattr(embedder, "languages", None),
                            cross_language_gap=getattr(settings, "rag_cross_language_gap", 0.0)),
                embedder,
                TokenChunker(embedder.tokenizer, chunk_tokens, settings.chunk_overlap),
                LoaderLimits(max_file_bytes=settings.max_file_bytes, time_budget_s=settings.ingest_time_budget_s),
                settings.ingest_roots,
                check_on_open=check_on_open,
                owner=owner,
                read_only=read_only,
                min_free_bytes=getattr(settings, "min_free_bytes", 0),
                save_interval_s=getattr(settings, "index_save_interval_s", 60.0),
            )
            svc.max_folder_files = getattr(settings, "max_folder_files", svc.max_folder_files)
            svc.upload_async_bytes = getattr(settings, "upload_async_bytes", 0)
            if switch_to is not None and not read_only:
                svc.reembed = BackgroundReembed(svc, switch_to).start()
            return svc
        except BaseException:
            if svc is not None:  # built, then a later step failed: stop its threads, close what it opened
                svc.close()
            if opened is not None:  # a database this call opened is closed, not left behind a failed open
                opened.close()
            if owner is not None:
                owner.release()
            raise

    # --- ingestion --------------------------------------------------------
    def add_file(self, path: str | os.PathLike, confined: bool = True, reread: bool = True,
                 io: Callable[[], ContextManager[Any]] = contextlib.nullcontext) -> IngestResult:
        """Add or update one file. With `confined` (the default) it must lie under `ingest_roots`. A file whose bytes
        are unchanged is read again when an older reader read it (rag.reader_version), unless `reread` is False.
        `io()` is entered around the file-system calls (resolving, stat, open and read), not the parsing or
        embedding: a caller that watches for calls that hang (a reindex item on a share) marks them with it.

        Raises PathRefusedError (outside the roots, URL, `..`) or DocumentNotFoundError; a file
        that cannot be read gives status "failed" instead.
        """
        with io():
            real = self._resolve(path, confined)
            folder = real.is_dir()
        if folder:
            raise DocumentError(f"{Path(path).name} is a folder: use add_path for folders", param="path")
        return self._ingest_file(real, reread, io)

    def skip_reason(self, path: str | os.PathLike) -> str | None:
        """Why a file is not worth indexing now (empty, binary under a text extension, or no file at all: a named pipe,
        socket or device) when the answer will not change until the file does (a nightly reindex skips it, saying why,
        instead of failing on it, or waiting forever on a pipe, each night); None when it is to be read. Raises
        OSError when it cannot be read."""
        try:
            with open_regular(path) as f:
                head = f.read(64 << 10)
        except NotRegularFileError as e:
            return str(e)
        if len(head) < 64 << 10 and not head.strip():
            return "empty"
        kind = detect_kind(os.fspath(path))
        why = not_text_reason(head) if kind in TEXT_KINDS else None
        return f"not a {kind} file: {why}" if why else None

    def add_path(
        self, path: str | os.PathLike, confined: bool = True, progress: Callable[[IngestResult], None] | None = None
    ) -> list[IngestResult]:
        """Add a file or every file in a folder (recursively); see add_files."""
        real = self._resolve(path, confined)
        return self.add_files(walk_files(real), confined=confined, progress=progress)

    def is_folder(self, path: str | os.PathLike) -> bool:
        """Whether a path under an ingest root is a folder; raises PathRefusedError or DocumentNotFoundError."""
        return self._resolve(path, confined=True).is_dir()

    def start_folder(self, path: str | os.PathLike) -> Any:
        """Queue the ingestion of a folder under an ingest root in the background; returns its FolderTask.

        Raises PathRefusedError, DocumentNotFoundError, TooManyTasksError, or DocumentError for a file
        (add it with add_file) and on a read-only service.
        """
        if self.read_only:
            raise ReadOnlyError("the document index is open read-only here: another edge-agent process owns it")
        real = self._resolve(path, confined=True)
        if not real.is_dir():
            raise DocumentError(f"{Path(path).name} is a file: use add_file for files", param="path")
        return self.folder_tasks.submit(real, self.shown_path(str(real)) or ".")

    @property
    def folder_tasks(self) -> Any:
        """The background folder ingestions (edge_agent.services.ingest_tasks.FolderTasks)."""
        with self._writing:
            if self._tasks is None:
                from edge_agent.services.ingest_tasks import FolderTasks

                self._tasks = FolderTasks(self, max_files=self.max_folder_files)
            return self._tasks

    def add_files(
        self,
        paths: Iterable[str | os.PathLike],
        confined: bool = False,
        progress: Callable[[IngestResult], None] | None = None,
        stop: threading.Event | None = None,
    ) -> list[IngestResult]:
        """Add many files, each committed on its own; stops early when `stop` is set.

        Raises InsufficientStorageError when the disk fills (the files before it are kept: see `progress`).
        """
        results = []
        for p in paths:
            if stop is not None and stop.is_set():
                break
            try:
                real = self._resolve(p, confined)
                res = self._ingest_file(real)
            except InsufficientStorageError:
                raise
            except (DocumentError, OSError) as exc:
                res = IngestResult("failed", escaped_name(str(p)), error=str(exc))
            results.append(res)
            if progress:
                progress(res)
        return results

    def add_text(self, title: str, text: str) -> IngestResult:
        """Add or replace a text document identified by its title."""
        meta, doc = self._text_document(title, text)
        return self._ingest(meta, lambda: doc, keep_failure=False)

    def _text_document(self, title: str, text: str) -> tuple[DocumentMeta, LoadedDocument]:
        """The record and the loaded form of a text document; raises DocumentError for an empty or too long one."""
        title = checked_name(title, "the title", "title", "remove it from the title")  # identifies the document
        if not title:
            raise DocumentError("title is required", param="title")
        if not text or not text.strip():
            raise DocumentError("text is empty", param="text")
        data = text.encode("utf-8")
        if len(data) > self.limits.max_file_bytes:
            raise FileTooLargeError(f"text is over the {self.limits.max_file_bytes}-byte limit (max_file_bytes): split it", param="text")
        meta = DocumentMeta(f"text:{title}", title, "txt", _sha256(data), len(data), mime="text/plain")
        return meta, LoadedDocument(title, "txt", [Section(text.strip())])

    def _resolve(self, path: str | os.PathLike, confined: bool) -> Path:
        try:
            if confined:
                return resolve_confined(path, self.ingest_roots)
            text = os.fspath(path)
            if "://" in text:
                raise PathNotAllowedError("URLs are not accepted: give a plain file path")
            return Path(text).expanduser().resolve(strict=True)
        except PathNotAllowedError as exc:
            raise PathRefusedError(str(exc)) from None
        except (FileNotFoundError, NotADirectoryError):
            raise DocumentNotFoundError(f"file not found: {Path(os.fspath(path)).name}", param="path") from None
        except OSError as exc:  # a name too long, a symlink loop, no permission
            raise DocumentError(f"cannot open that path: {exc.strerror or type(exc).__name__}", param="path") from None

    def _ingest_file(self, real: Path, reread: bool = True,
                     io: Callable[[], ContextManager[Any]] = contextlib.nullcontext) -> IngestResult:
        why = file_name_error(self.shown_path(str(real)) or real.name)
        if why is not None:  # as an upload so named: it would forge or hide what a list shows (or not store at all)
            raise DocumentError(why, param="path")
        key = f"file:{real}"
        try:
            with io():
                st = real.stat()
                if st.st_size > self.limits.max_file_bytes:
                    raise LoaderError(f"file is {st.st_size} bytes, over the {self.limits.max_file_bytes}-byte limit")
                with open_regular(real) as f:
                    data = f.read(self.limits.max_file_bytes + 1)
        except (OSError, LoaderError) as exc:
            meta = DocumentMeta(key, real.stem, detect_kind(real.name) or "unknown", "", 0, path=str(real))
            return self._fail(meta, str(exc))
        meta = DocumentMeta(
            key, real.stem or real.name, detect_kind(real.name) or "unknown", _sha256(data), len(data),
            path=str(real), mtime=st.st_mtime,
        )
        return self._ingest(meta, lambda: load_bytes(data, real.name, self.limits), reread=reread)

    def _ingest(self, meta: DocumentMeta, load: Callable[[], LoadedDocument], keep_failure: bool = True,
                only_processing: bool = False, reread: bool = True) -> IngestResult:
        """Load, chunk, embed and commit one document. A failure to read it is recorded (status "failed", its old
        chunks removed) for a file the server reads from disk, which the record then mirrors (`keep_failure`);
        for bytes a client sent it changes nothing and only the result says it failed. Unchanged bytes that an
        older reader read are read again (the old chunks serve until the new ones commit), unless not `reread`."""
        with self._by_key.hold(meta.source_key):  # identical uploads at once: the first adds, the rest find it
            return self._ingest_now(meta, load, keep_failure, only_processing, reread)

    def _ingest_now(self, meta: DocumentMeta, load: Callable[[], LoadedDocument], keep_failure: bool,
                    only_processing: bool, reread: bool = True) -> IngestResult:
        existing = self.store.get_by_key(meta.source_key)
        if only_processing and (existing is None or existing.status != "processing" or existing.content_hash != meta.content_hash):
            return IngestResult("unchanged", meta.source_key, None, meta.title, 0)  # replaced or deleted meanwhile
        meta.reader_version = reader_version(meta.kind)
        if (existing is not None and existing.status == "ready" and existing.content_hash == meta.content_hash
                and (not reread or is_current(existing.kind, existing.reader_version))):
            return IngestResult("unchanged", meta.source_key, existing.id, existing.title, existing.chunk_count)
        try:
            loaded = load()
            meta.title = loaded.title or meta.title
            meta.mime = loaded.mime
            meta.kind = loaded.kind
            meta.reader_version = reader_version(loaded.kind)
            pieces = self.chunker.chunk(loaded.sections)
            if not pieces:
                raise LoaderError("no text to index")
            vectors = self.embedder.embed([c.text for c in pieces])
        except LoaderError as exc:
            if not keep_failure:
                log.info("refused a %s document of %d bytes: %s", meta.kind, meta.size, exc)
                log.debug("the refused document was %s", meta.source_key)
                if existing is not None and existing.status == "ready":  # say so: the client may fear it erased the old one
                    return IngestResult("failed", meta.source_key, existing.id, existing.title, 0,
                                        f"{exc} (the version already stored is kept)")
                return IngestResult("failed", meta.source_key, None, meta.title, 0, str(exc))
            return self._fail(meta, str(exc))
        records = [
            ChunkRecord(0, c.ordinal, c.text, c.char_start, c.char_end, c.token_count, c.page, c.heading, vector=v)
            for c, v in zip(pieces, vectors)
        ]
        out: dict[str, Any] = {}

        def commit() -> IndexUpdate:
            doc_id, old_ids, new_ids = self.store.replace(meta, records)
            out["id"] = doc_id
            return IndexUpdate(new_ids, vectors, [(chunk_header(meta.title, r.heading), r.text) for r in records], old_ids)

        # SQLite writes the text, the vectors and an index entry per chunk, then again into its WAL
        need = 3 * (sum(len(r.text.encode()) for r in records) + len(records) * (self.index.dim * 4 + 128)) + (64 << 10)
        with self._write():
            self._commit(commit, need, f"storing {meta.title!r}")
        status = "added" if existing is None else "updated"
        text = None if meta.text_changed is None else "changed" if meta.text_changed else "same"
        return IngestResult(status, meta.source_key, out["id"], meta.title, len(records), text=text)

    def _fail(self, meta: DocumentMeta, error: str) -> IngestResult:
        existing = self.store.get_by_key(meta.source_key)
        if existing is not None and existing.status == "ready":  # a damaged new version must not erase the searchable one
            log.info("could not ingest a new version of document %d: %s; the version already indexed is kept", existing.id, error)
            log.debug("document %d is %s", existing.id, meta.source_key)
            return IngestResult("failed", meta.source_key, existing.id, existing.title, 0,
                                f"{error} (the version already stored is kept)")
        out: dict[str, Any] = {}

        def commit() -> IndexUpdate:
            doc_id, old_ids = self.store.record_failure(meta, error)
            out["id"] = doc_id
            return IndexUpdate(remove_ids=old_ids)

        with self._write():
            self._commit(commit, 64 << 10, f"recording that {meta.title!r} could not be read")
        log.info("could not ingest document %d: %s", out["id"], error)
        log.debug("document %d is %s", out["id"], meta.source_key)
        return IngestResult("failed", meta.source_key, out["id"], meta.title, 0, error)

    def _commit(self, commit: Callable[[], IndexUpdate], need: int, what: str) -> None:
        """Check the room, commit to SQLite and apply to the in-memory indexes (caller holds the write lock).

        Raises InsufficientStorageError (507) before writing when the data disk is too full, or when the
        disk fills during the commit (SQLite rolled it back: nothing changed).
        """
        if need > 0:  # a delete is never refused: it frees space
            ensure_room(self.data_dir, need, self.min_free_bytes, what)
        guard = getattr(self._guards, "guard", None)
        with guard() if guard is not None else contextlib.nullcontext():
            try:
                self._ensure_model_recorded()
                self.index.apply(commit, save=False)
            except Exception as exc:
                if is_disk_full(exc):
                    raise disk_full_error(what, self.data_dir, self.min_free_bytes) from None
                raise
            self._dirty = True

    @contextlib.contextmanager
    def guarded_writes(self, guard: Callable[[], Any]) -> Iterator[None]:
        """Within it, every write this thread makes (an add, a failure recorded, a delete) is made inside guard(), a
        context manager that may raise to refuse it: a job item whose run gave up waiting on it (jobs.kinds.WriteGate)."""
        self._guards.guard = guard
        try:
            yield
        finally:
            self._guards.guard = None

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """The write lock of this process; raises ReadOnlyError on a read-only service."""
        if self.read_only:
            raise ReadOnlyError("the document index is open read-only here: another edge-agent process owns it")
        with self._writing:
            yield

    def _store_id(self) -> str:
        """This database's identity (made once): a BM25 snapshot of another database is never used."""
        value = self.store.get_meta(META_STORE_ID)
        if value is None:
            value = uuid.uuid4().hex
            self.store.set_meta(META_STORE_ID, value)
        return value

    def _texts_of(self, ids: np.ndarray | None) -> Iterator[tuple[np.ndarray, list[str]]]:
        """(chunk ids, [(title and heading, text)]) batches of the given chunks, or of all of them (what BM25 indexes)."""
        if ids is None:
            for batch_ids, rows in self.store.iter_index_texts():
                yield batch_ids, [(chunk_header(title, heading), text) for title, heading, text in rows]
            return
        for start in range(0, len(ids), 4096):
            part = [int(i) for i in ids[start : start + 4096]]
            rows = self.store.chunks_by_ids(part)
            keep = [i for i in part if i in rows]
            yield np.asarray(keep, dtype=np.int64), [(chunk_header(rows[i][1].title, rows[i][0].heading), rows[i][0].text) for i in keep]

    def _prefix_path(self, prefix: str) -> str:
        """A path_prefix filter as stored paths are: absolute, or relative to an ingest root (as responses show them)."""
        if os.path.isabs(prefix) or not self.ingest_roots:
            return os.path.normpath(prefix)
        roots = [Path(r).expanduser().resolve() for r in self.ingest_roots]
        def exists(p: Path) -> bool:
            try:
                return p.exists()
            except OSError:  # a name too long: no such folder
                return False

        found = next((r / prefix for r in roots if exists(r / prefix)), roots[0] / prefix)
        return os.path.normpath(found)

    def _ensure_model_recorded(self) -> None:
        if self.store.get_meta(META_MODEL) is None:
            self.store.set_meta(META_MODEL, self.embedder.model_id)
        variant = getattr(self.embedder, "variant", None)
        if variant is not None and self.store.get_meta(META_VARIANT) is None:
            self.store.set_meta(META_VARIANT, variant)

    # --- reading and deleting ----------------------------------------------
    def list(self, offset: int = 0, limit: int = 50) -> tuple[list[dict[str, Any]], int]:
        """One page of documents (oldest first) and the total count."""
        if offset < 0 or not 1 <= limit <= 1000:
            raise DocumentError("offset must be >= 0 and limit between 1 and 1000", param="limit")
        return [d.to_dict() for d in self.store.list(offset, limit)], self.store.count()

    def get(self, document_id: int) -> dict[str, Any]:
        """A document with its chunks' locations; raises DocumentNotFoundError."""
        doc = self.store.get(int(document_id))
        if doc is None:
            raise DocumentNotFoundError(f"no document with id {document_id}", param="document_id")
        out = doc.to_dict()
        out["summary"] = SummaryStore(self.store.db).get_summary(doc.id)  # written by summarize jobs
        out["labels"] = LabelStore(self.store.db).for_document(doc.id)  # written by classify jobs
        out["chunks"] = [
            {"id": c.id, "ordinal": c.ordinal, "page": c.page, "heading": c.heading, "char_start": c.char_start,
             "char_end": c.char_end, "token_count": c.token_count}
            for c in self.store.chunks_of(doc.id)
        ]
        return out

    def delete(self, document_id: int) -> None:
        """Delete a document, its chunks and vectors; raises DocumentNotFoundError."""
        found: dict[str, Any] = {}

        def commit() -> IndexUpdate:
            old = self.store.delete(int(document_id))
            found["ok"] = old is not None
            return IndexUpdate(remove_ids=old or [])

        with self._write():
            self._commit(commit, 0, f"deleting document {document_id}")
        if not found["ok"]:
            raise DocumentNotFoundError(f"no document with id {document_id}", param="document_id")

    def shown_path(self, path: str | None) -> str | None:
        """A server path as clients may see it: relative to the ingest root it lies under, else its file name."""
        return shown_path(path, self.ingest_roots)

    def shown_key(self, source_key: str) -> str:
        """A source key without server paths ("file:<path relative to its ingest root>")."""
        kind, sep, rest = source_key.partition(":")
        return f"file:{self.shown_path(rest)}" if sep and kind == "file" else source_key

    def stats(self) -> dict[str, Any]:
        """Counts from SQLite and the indexes, the embedder in use and the last check."""
        out = self.store.stats()
        out["index"] = self.index.stats()
        out["embedder"] = {
            "model": self.embedder.model_id, "backend": getattr(self.embedder, "backend", "?"),
            "variant": getattr(self.embedder, "variant", None),
        }
        out["reader"] = self.reader_status()
        out["last_check"] = self.last_check.to_dict() if self.last_check else None
        out["reembed"] = self.reembed.status() if getattr(self, "reembed", None) is not None else None
        return out

    def wait_background(self, timeout: float = 300.0) -> None:
        """Wait for background index work (BM25 merge, HNSW build) to finish."""
        self.index.wait_background(timeout)

    def close(self) -> None:
        """Save the FAISS file and the BM25 snapshot (the owner only: the next start loads them instead of
        rebuilding) and release the database and the index folder, whatever fails on the way."""
        self._stop.set()
        if getattr(self, "reembed", None) is not None:
            self.reembed.stop()  # after its current batch; the next start resumes
        try:
            if self._tasks is not None:
                self._tasks.close()
            if self._uploads is not None:
                self._uploads.close()
                if self.owner is not None and self.owner.held:
                    self.store.fail_processing(UPLOAD_INTERRUPTED)  # still waiting (or still running): upload again
            if self._saver is not None:
                self._saver.join(30)
            self.wait_background(30)
            if self.owner is not None and self.owner.held:
                with self._writing:
                    self.save_index()
                    try:
                        self.index.save_bm25(self._store_id())
                    except Exception as exc:  # the snapshot is an optimisation; a failure costs the next start time
                        log.warning("BM25 snapshot not saved: %s", exc)
        finally:
            try:
                self.store.db.close()
            finally:
                if self.owner is not None:
                    self.owner.release()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
