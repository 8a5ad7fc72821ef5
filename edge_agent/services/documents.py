"""DocumentService: ingest, list, delete and retrieve private documents (store + rag, no HTTP)."""
from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from edge_agent.rag.chunking import TokenChunker
from edge_agent.rag.index import IndexFileError, move_aside
from edge_agent.rag.loaders import LoadedDocument, LoaderError, LoaderLimits, Section, detect_kind, load_bytes
from edge_agent.rag.owner import IndexBusyError, OwnerLock
from edge_agent.rag.retrieval import MODES, HybridIndex, IndexUpdate
from edge_agent.services.document_results import (
    CheckResult,
    DocumentError,
    DocumentNotFoundError,
    Filters,
    IndexInUseError,
    IngestResult,
    PathRefusedError,
    ReadOnlyError,
    ScoredChunk,
    location_label,
    make_snippet,
)
from edge_agent.services.paths import PathNotAllowedError, resolve_confined, walk_files
from edge_agent.store import ChunkRecord, DocumentStore, SqliteDatabase
from edge_agent.store.documents import DocumentMeta
from edge_agent.store.jobs import SummaryStore
from edge_agent.store.labels import LabelStore

log = logging.getLogger(__name__)

DB_FILE = "edge-agent.db"
META_MODEL = "embedding_model"
META_STORE_ID = "store_id"  # ties files derived from this database (the BM25 snapshot) to it


def default_db_path(settings: Any) -> Path:
    return Path(settings.data_dir) / DB_FILE


class DocumentService:
    """Private documents: ingestion into SQLite + FAISS + BM25, and hybrid retrieval.

    Every add/delete returns only after SQLite has committed and the FAISS file is saved.
    A writable service owns the index folder (`owner`, an OwnerLock, released by close());
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
        self.last_check: CheckResult | None = None
        if read_only:
            self._open_read_only()
        elif check_on_open:
            self.last_check = self.check()

    @classmethod
    def from_settings(
        cls, settings: Any, embedder: Any = None, db: SqliteDatabase | None = None, check_on_open: bool = True,
        read_only: bool = False,
    ) -> "DocumentService":
        """Build the service from Settings (the embedder is loaded unless given); checks the index on open.

        Unless read_only, the service owns the index folder: raises IndexInUseError at once when
        another process (a running daemon, another `edge-agent index` command) owns it.
        """
        owner = None
        if not read_only:
            try:
                owner = OwnerLock(Path(settings.index_dir)).acquire()
            except IndexBusyError as exc:
                raise IndexInUseError(str(exc), exc.pid) from None
        try:
            if embedder is None:
                from edge_agent.rag.embedder import build_embedder

                embedder = build_embedder(settings)
            db = db or SqliteDatabase(default_db_path(settings))
            chunk_tokens = min(settings.chunk_tokens, embedder.max_tokens - 2)
            return cls(
                DocumentStore(db),
                HybridIndex(Path(settings.index_dir), embedder.dim, ann_threshold=settings.ann_threshold,
                            dense_languages=getattr(embedder, "languages", None)),
                embedder,
                TokenChunker(embedder.tokenizer, chunk_tokens, settings.chunk_overlap),
                LoaderLimits(max_file_bytes=settings.max_file_bytes, time_budget_s=settings.ingest_time_budget_s),
                settings.ingest_roots,
                check_on_open=check_on_open,
                owner=owner,
                read_only=read_only,
            )
        except BaseException:
            if owner is not None:
                owner.release()
            raise

    # --- ingestion --------------------------------------------------------
    def add_file(self, path: str | os.PathLike, confined: bool = True) -> IngestResult:
        """Add or update one file. With `confined` (the default) it must lie under `ingest_roots`.

        Raises PathRefusedError (outside the roots, URL, `..`) or DocumentNotFoundError; a file
        that cannot be read gives status "failed" instead.
        """
        real = self._resolve(path, confined)
        if real.is_dir():
            raise DocumentError(f"{Path(path).name} is a folder: use add_path for folders", param="path")
        return self._ingest_file(real)

    def add_path(
        self, path: str | os.PathLike, confined: bool = True, progress: Callable[[IngestResult], None] | None = None
    ) -> list[IngestResult]:
        """Add a file or every file in a folder (recursively); see add_files."""
        real = self._resolve(path, confined)
        return self.add_files(walk_files(real), confined=confined, progress=progress)

    def add_files(
        self,
        paths: Iterable[str | os.PathLike],
        confined: bool = False,
        progress: Callable[[IngestResult], None] | None = None,
        save_every_s: float = 30.0,
    ) -> list[IngestResult]:
        """Add many files; the FAISS file is saved every `save_every_s` and at the end (then all are committed)."""
        results = []
        last_save = time.monotonic()
        dirty = False
        try:
            for p in paths:
                try:
                    real = self._resolve(p, confined)
                    res = self._ingest_file(real, save=False)
                except (DocumentError, OSError) as exc:
                    res = IngestResult("failed", str(p), error=str(exc))
                dirty |= res.status in ("added", "updated", "failed")
                results.append(res)
                if progress:
                    progress(res)
                if dirty and time.monotonic() - last_save > save_every_s:
                    self.index.save()
                    last_save, dirty = time.monotonic(), False
        finally:
            if dirty:
                self.index.save()
        return results

    def add_text(self, title: str, text: str) -> IngestResult:
        """Add or replace a text document identified by its title."""
        title = (title or "").strip()
        if not title:
            raise DocumentError("title is required", param="title")
        if not text or not text.strip():
            raise DocumentError("text is empty", param="text")
        data = text.encode("utf-8")
        if len(data) > self.limits.max_file_bytes:
            raise DocumentError(f"text is over the {self.limits.max_file_bytes}-byte limit", param="text")
        meta = DocumentMeta(f"text:{title}", title, "txt", _sha256(data), len(data), mime="text/plain")
        doc = LoadedDocument(title, "txt", [Section(text.strip())])
        return self._ingest(meta, lambda: doc)

    def add_upload(self, filename: str, data: bytes) -> IngestResult:
        """Add or replace an uploaded file identified by its (base) file name."""
        name = re.split(r"[\\/]", filename or "")[-1].strip()
        if not name or name in (".", ".."):
            raise DocumentError("upload needs a file name", param="file")
        if len(data) > self.limits.max_file_bytes:
            raise DocumentError(f"file is over the {self.limits.max_file_bytes}-byte limit", param="file")
        kind = detect_kind(name) or "unknown"
        meta = DocumentMeta(f"upload:{name}", Path(name).stem or name, kind, _sha256(data), len(data))
        return self._ingest(meta, lambda: load_bytes(data, name, self.limits))

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

    def _ingest_file(self, real: Path, save: bool = True) -> IngestResult:
        key = f"file:{real}"
        try:
            st = real.stat()
            if st.st_size > self.limits.max_file_bytes:
                raise LoaderError(f"file is {st.st_size} bytes, over the {self.limits.max_file_bytes}-byte limit")
            with open(real, "rb") as f:
                data = f.read(self.limits.max_file_bytes + 1)
        except (OSError, LoaderError) as exc:
            meta = DocumentMeta(key, real.stem, detect_kind(real.name) or "unknown", "", 0, path=str(real))
            return self._fail(meta, str(exc), save)
        meta = DocumentMeta(
            key, real.stem or real.name, detect_kind(real.name) or "unknown", _sha256(data), len(data),
            path=str(real), mtime=st.st_mtime,
        )
        return self._ingest(meta, lambda: load_bytes(data, real.name, self.limits), save)

    def _ingest(self, meta: DocumentMeta, load: Callable[[], LoadedDocument], save: bool = True) -> IngestResult:
        existing = self.store.get_by_key(meta.source_key)
        if existing is not None and existing.status == "ready" and existing.content_hash == meta.content_hash:
            return IngestResult("unchanged", meta.source_key, existing.id, existing.title, existing.chunk_count)
        try:
            loaded = load()
            meta.title = loaded.title or meta.title
            meta.mime = loaded.mime
            meta.kind = loaded.kind
            pieces = self.chunker.chunk(loaded.sections)
            if not pieces:
                raise LoaderError("no text to index")
            vectors = self.embedder.embed([c.text for c in pieces])
        except LoaderError as exc:
            return self._fail(meta, str(exc), save)
        records = [
            ChunkRecord(0, c.ordinal, c.text, c.char_start, c.char_end, c.token_count, c.page, c.heading, vector=v)
            for c, v in zip(pieces, vectors)
        ]
        out: dict[str, Any] = {}

        def commit() -> IndexUpdate:
            doc_id, old_ids, new_ids = self.store.replace(meta, records)
            out["id"] = doc_id
            return IndexUpdate(new_ids, vectors, [r.text for r in records], old_ids)

        with self._write():
            self._ensure_model_recorded()
            self.index.apply(commit, save=save)
        status = "added" if existing is None else "updated"
        return IngestResult(status, meta.source_key, out["id"], meta.title, len(records))

    def _fail(self, meta: DocumentMeta, error: str, save: bool = True) -> IngestResult:
        out: dict[str, Any] = {}

        def commit() -> IndexUpdate:
            doc_id, old_ids = self.store.record_failure(meta, error)
            out["id"] = doc_id
            return IndexUpdate(remove_ids=old_ids)

        with self._write():
            self.index.apply(commit, save=save)
        log.info("could not ingest %s: %s", meta.source_key, error)
        return IngestResult("failed", meta.source_key, out["id"], meta.title, 0, error)

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """The write lock of this process; raises ReadOnlyError on a read-only service."""
        if self.read_only:
            raise ReadOnlyError("the document index is open read-only here: another edge-agent process owns it")
        with self._writing:
            yield

    def _open_read_only(self) -> None:
        """Load the FAISS file and BM25 for searching without writing anything: where the file is
        missing, corrupt or behind SQLite (its owner saves in batches), build it in memory from SQLite."""
        ids = self.store.chunk_ids()
        try:
            self.index.load_dense()
            current = np.array_equal(self.index.ids(), ids)
        except IndexFileError:
            current = False
        if not current:
            self.index.rebuild_dense(self.store.iter_vectors(self.index.dim), save=False)
        self.index.restore_bm25(self.store.get_meta(META_STORE_ID) or "", ids, self._texts_of)

    def _store_id(self) -> str:
        """This database's identity (made once): a BM25 snapshot of another database is never used."""
        value = self.store.get_meta(META_STORE_ID)
        if value is None:
            value = uuid.uuid4().hex
            self.store.set_meta(META_STORE_ID, value)
        return value

    def _texts_of(self, ids: np.ndarray | None) -> Iterator[tuple[np.ndarray, list[str]]]:
        """(chunk ids, texts) batches of the given chunks, or of all of them."""
        if ids is None:
            yield from self.store.iter_texts()
            return
        for start in range(0, len(ids), 4096):
            part = [int(i) for i in ids[start : start + 4096]]
            rows = self.store.chunks_by_ids(part)
            keep = [i for i in part if i in rows]
            yield np.asarray(keep, dtype=np.int64), [rows[i][0].text for i in keep]

    def _ensure_model_recorded(self) -> None:
        if self.store.get_meta(META_MODEL) is None:
            self.store.set_meta(META_MODEL, self.embedder.model_id)

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
            raise DocumentNotFoundError(f"no document with id {document_id}", param="id")
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
            self.index.apply(commit)
        if not found["ok"]:
            raise DocumentNotFoundError(f"no document with id {document_id}", param="id")

    def retrieve(
        self, query: str, k: int = 5, filters: Filters | dict | None = None, mode: str = "hybrid"
    ) -> list[ScoredChunk]:
        """The k best chunks for a query (hybrid: dense + BM25 fused by reciprocal rank)."""
        if not query or not query.strip():
            raise DocumentError("query is empty", param="query")
        if not 1 <= k <= 100:
            raise DocumentError("k must be between 1 and 100", param="k")
        if mode not in MODES:
            raise DocumentError(f"mode must be one of {', '.join(MODES)}", param="mode")
        f = Filters.from_any(filters)
        allowed = None
        if f is not None and not f.empty():
            prefix = os.path.normpath(f.path_prefix) if f.path_prefix else None
            allowed = self.store.filter_chunk_ids(f.document_ids, prefix, f.types)
        qvec = self.embedder.embed_query(query) if mode != "bm25" else None
        hits = self.index.search(qvec, query, k, allowed, mode)
        rows = self.store.chunks_by_ids([h.chunk_id for h in hits])
        out = []
        for h in hits:
            if h.chunk_id not in rows:
                continue
            c, d = rows[h.chunk_id]
            out.append(
                ScoredChunk(
                    d.id, h.chunk_id, d.title, d.path, d.kind,
                    {"page": c.page, "heading": c.heading, "ordinal": c.ordinal, "char_start": c.char_start,
                     "char_end": c.char_end, "label": location_label(c.page, c.heading)},
                    round(h.score, 6), c.text, make_snippet(c.text, query), h.dense_rank, h.bm25_rank,
                )
            )
        return out

    # --- integrity ---------------------------------------------------------
    def check(self, repair: bool = True) -> CheckResult:
        """Compare the FAISS file and BM25 with SQLite; with `repair`, rebuild what disagrees from SQLite.

        Problems are logged and returned; a bad index file is moved aside, never served.
        Raises ReadOnlyError for a repair on a read-only service.
        """
        if repair and self.read_only:
            raise ReadOnlyError("the document index is open read-only here: another edge-agent process owns it")
        with self._writing:
            ids = self.store.chunk_ids()
            res = CheckResult(True, len(ids), 0)
            stored_model = self.store.get_meta(META_MODEL)
            reembed = stored_model is not None and stored_model != self.embedder.model_id
            if reembed:
                res.problems.append(f"stored vectors come from {stored_model}, the embedder is {self.embedder.model_id}")
            missing = self.store.missing_vectors()
            if missing:
                res.problems.append(f"{len(missing)} chunks have no stored vector")
                reembed = True
            rebuild_dense = reembed
            try:
                self.index.load_dense()
                index_ids = self.index.ids()
                res.index_vectors = len(index_ids)
                if not np.array_equal(index_ids, ids):
                    extra = len(np.setdiff1d(index_ids, ids))
                    lacking = len(np.setdiff1d(ids, index_ids))
                    res.problems.append(
                        f"index file holds {len(index_ids)} ids, SQLite {len(ids)} chunks "
                        f"({lacking} missing from the index, {extra} not in SQLite)"
                    )
                    rebuild_dense = True
            except IndexFileError as exc:
                if self.index.path.exists() or len(ids):
                    res.problems.append(str(exc))
                rebuild_dense = True
            res.ok = not res.problems
            for p in res.problems:
                log.warning("document index check: %s", p)
            if not repair:
                return res
            if rebuild_dense and res.problems and self.index.path.exists():
                moved = move_aside(self.index.path)
                if moved is not None:
                    res.moved_aside.append(str(moved))
                    res.actions.append(f"moved the bad index file aside to {moved.name}")
            if reembed:
                n = self._reembed()
                res.actions.append(f"re-embedded {n} chunks with {self.embedder.model_id}")
            if rebuild_dense:
                n = self.index.rebuild_dense(self.store.iter_vectors(self.index.dim))
                res.index_vectors = n
                if res.problems:
                    res.actions.append(f"rebuilt the FAISS index from SQLite ({n} vectors)")
            how = self.index.restore_bm25(self._store_id(), ids, self._texts_of)
            log.info("BM25 over %d chunks %s", len(ids), how)
            if len(ids):
                self._ensure_model_recorded()
            self.last_check = res
            return res

    def rebuild(self, reembed: bool = False) -> dict[str, Any]:
        """Rebuild FAISS (and BM25) from SQLite; with `reembed`, compute every vector again first."""
        with self._write():
            t0 = time.monotonic()
            if reembed:
                self._reembed()
            n = self.index.rebuild_dense(self.store.iter_vectors(self.index.dim))
            self.index.rebuild_bm25(self.store.iter_texts())
            return {"vectors": n, "reembedded": reembed, "seconds": round(time.monotonic() - t0, 2)}

    def _reembed(self) -> int:
        n = 0
        for ids, texts in self.store.iter_texts(batch=512):
            self.store.replace_vectors(ids.tolist(), self.embedder.embed(texts))
            n += len(ids)
        self.store.set_meta(META_MODEL, self.embedder.model_id)
        return n

    def stats(self) -> dict[str, Any]:
        """Counts from SQLite and the indexes, the embedder in use and the last check."""
        out = self.store.stats()
        out["index"] = self.index.stats()
        out["embedder"] = {
            "model": self.embedder.model_id, "backend": getattr(self.embedder, "backend", "?"),
            "variant": getattr(self.embedder, "variant", None),
        }
        out["last_check"] = self.last_check.to_dict() if self.last_check else None
        return out

    def wait_background(self, timeout: float = 300.0) -> None:
        """Wait for background index work (BM25 merge, HNSW build) to finish."""
        self.index.wait_background(timeout)

    def close(self) -> None:
        """Save the BM25 snapshot (the owner only: the next start loads it instead of re-encoding
        every chunk) and release the database and the index folder."""
        self.wait_background(30)
        if self.owner is not None and self.owner.held:
            try:
                with self._writing:
                    self.index.save_bm25(self._store_id())
            except Exception as exc:  # the snapshot is an optimisation; a failure costs the next start time
                log.warning("BM25 snapshot not saved: %s", exc)
        self.store.db.close()
        if self.owner is not None:
            self.owner.release()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
