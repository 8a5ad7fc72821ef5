"""Upkeep of the document index: the start-up check against SQLite, the FAISS cache's saves, rebuilds and
re-embedding, and the free disk it reports (a mixin of DocumentService, split from it for size)."""
from __future__ import annotations

import json
import logging
import time
from types import SimpleNamespace
from typing import Any

import numpy as np

from edge_agent.rag.index import IndexFileError, clean_leftovers, move_aside
from edge_agent.rag.reader_version import READER_VERSIONS, is_current, reader_version
from edge_agent.services.document_results import CheckResult, ReadOnlyError
from edge_agent.services.storage import InsufficientStorageError, disk_status, ensure_room, free_bytes

log = logging.getLogger("edge_agent.services.documents")

META_MODEL = "embedding_model"
META_VARIANT = "embedding_variant"  # fp32 or an int8 file (rag.embedding_variants): a switch re-embeds
META_STORE_ID = "store_id"  # ties files derived from this database (the BM25 snapshot) to it
# the chunking parameters the documents are cut with (JSON; chunking_params): a writer that opens the index with other
# ones has every document read again (re-chunked) by the coming reindex runs; the previous ones, kept for the stats
META_CHUNKING = "chunking"
META_CHUNKING_BEFORE = "chunking_before"


class IndexUpkeep:
    """check(), save_index(), rebuild() and disk_status() of DocumentService (which provides store, index,
    embedder, _writing, _dirty, _loaded, _save_lock, min_free_bytes, data_dir and the helpers used here)."""

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

    def check(self, repair: bool = True) -> CheckResult:
        """Compare the FAISS index (at open: the saved file) and BM25 with SQLite; with `repair`, bring what
        disagrees up to date from SQLite.

        Problems are logged and returned; a corrupt index file is never served: it is moved aside (one kept,
        and only when the disk has room for it and a new file) or deleted.
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
            stored_variant, variant = self.store.get_meta(META_VARIANT), getattr(self.embedder, "variant", None)
            if not reembed and stored_variant is not None and variant is not None and stored_variant != variant:
                res.problems.append(f"stored vectors come from the {stored_variant} variant of {stored_model}, the embedder runs {variant}")
                reembed = True
            missing = self.store.missing_vectors()
            if missing:
                res.problems.append(f"{len(missing)} chunks have no stored vector")
                reembed = True
            rebuild_dense = reembed
            corrupt = False
            if not self._loaded:  # at open: the file the last run saved; later checks look at the index in memory
                try:
                    self.index.load_dense()
                    self._loaded = True
                except IndexFileError as exc:
                    if self.index.path.exists() or len(ids):
                        res.problems.append(str(exc))
                    corrupt = self.index.path.exists()
                    rebuild_dense = True
            index_ids = self.index.ids()
            res.index_vectors = len(index_ids)
            stale = not rebuild_dense and not np.array_equal(index_ids, ids)
            if stale:
                extra = len(np.setdiff1d(index_ids, ids))
                lacking = len(np.setdiff1d(ids, index_ids))
                res.problems.append(
                    f"the FAISS index holds {len(index_ids)} ids, SQLite {len(ids)} chunks "
                    f"({lacking} missing from the index, {extra} not in SQLite)"
                )
            res.ok = not res.problems
            for p in res.problems:
                log.warning("document index check: %s", p)
            if not repair:
                return res
            if corrupt:
                self._set_aside(res)
            if reembed:
                n = self._reembed()
                res.actions.append(f"re-embedded {n} chunks with {self.embedder.model_id}")
            if rebuild_dense:
                n = self.index.rebuild_dense(self.store.iter_vectors(self.index.dim), save=False)
                self._loaded, self._dirty = True, True
                res.index_vectors = n
                if res.problems:
                    res.actions.append(f"rebuilt the FAISS index from SQLite ({n} vectors)")
            elif stale:
                added, removed = self.index.catch_up_dense(ids, lambda m: self.store.vectors_by_ids(m, self.index.dim))
                self._dirty = True
                res.index_vectors = len(ids)
                res.actions.append(f"brought the FAISS index up to date from SQLite ({added} vectors added, {removed} removed)")
            how = self.index.restore_bm25(self._store_id(), ids, self._texts_of)
            log.info("BM25 over %d chunks %s", len(ids), how)
            if len(ids):
                self._ensure_model_recorded()
            self.last_check = res
            return res

    def _set_aside(self, res: CheckResult) -> None:
        """Move a corrupt index file aside for inspection when the disk can spare it, else delete it."""
        path = self.index.path
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return
        if free_bytes(path.parent) - 2 * size >= self.min_free_bytes:  # the kept file and the new one
            moved = move_aside(path)
            if moved is not None:
                res.moved_aside.append(str(moved))
                res.actions.append(f"moved the bad index file aside to {moved.name}")
                clean_leftovers(path.parent, keep_bad=1)
        else:
            path.unlink(missing_ok=True)
            res.actions.append("deleted the bad index file (too little free disk to keep it aside)")

    def save_index(self) -> bool:
        """Write the FAISS file if the index changed since the last save; False (logged, retried later) when
        the disk has no room for it: SQLite holds every vector, so a missing save costs only start-up time."""
        if self.read_only:
            return True
        with self._save_lock:
            if not self._dirty:
                return True
            need = self.index.dense.ntotal * self.index.dim * 4 + (1 << 20)
            try:
                ensure_room(self.index.index_dir, need, self.min_free_bytes, "saving the FAISS index")
                self._dirty = False
                self.index.save()
            except (InsufficientStorageError, OSError) as exc:
                self._dirty = True
                self.index_save_error = str(exc)
                log.warning("FAISS index not saved (SQLite has every vector; retried later): %s", exc)
                return False
            self.index_save_error = None
            return True

    def _save_loop(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self.save_index()
            except Exception:  # pragma: no cover - never let the saver die silently; the next round retries
                log.exception("saving the FAISS index failed")

    def disk_status(self) -> dict[str, Any]:
        """Free space of the data and index disks (see services.storage.disk_status) and the last FAISS save."""
        out = disk_status(SimpleNamespace(data_dir=self.data_dir, index_dir=self.index.index_dir, min_free_bytes=self.min_free_bytes))
        out["index_saved"] = self.index_save_error is None
        return out

    def reader_status(self) -> dict[str, Any]:
        """Ready documents by whether the reader that runs would read them as they were read (rag.reader_version):
        `outdated_files` (by kind in `outdated_by_kind`) are read again by the next reindex or ingest of their file;
        `outdated_uploads` only when uploaded again (the server keeps no copy); text added as text has no reader.
        `chunking`: the parameters this service cuts with, those recorded with the index and the ones before (a change
        makes every document read by an older reader: _record_chunking), and where this (read-only) view's differ
        from the recorded ones, how many documents a writer opening the index with them would read again."""
        out: dict[str, Any] = {"versions": {k: reader_version(k) for k in READER_VERSIONS}, "current": 0,
                               "outdated_files": 0, "outdated_by_kind": {}, "outdated_uploads": 0}
        counts = self.store.reader_counts()
        for kind, stored, source, n in counts:
            if source == "text" or is_current(kind, stored):
                out["current"] += n
            elif source == "file":
                out["outdated_files"] += n
                out["outdated_by_kind"][kind] = out["outdated_by_kind"].get(kind, 0) + n
            else:
                out["outdated_uploads"] += n
        chunking = out["chunking"] = self._chunking_status()
        if chunking["recorded"] is not None and chunking["recorded"] != chunking["current"]:
            # a read-only view with other settings than the writer's: opened by a writer with these, every document
            # from a file or an upload would be read again
            out["chunking"]["pending_if_opened"] = sum(n for _, _, source, n in counts if source != "text")
        return out

    def chunking_params(self) -> dict[str, int]:
        """What decides where this service's chunker cuts, beyond the code (a change there bumps every reader
        version): the chunk size in tokens it uses (chunk_tokens, capped by the embedder) and the overlap."""
        return {"chunk_tokens": int(self.chunker.chunk_tokens), "chunk_overlap": int(self.chunker.overlap)}

    def _record_chunking(self) -> None:
        """At a writer's open: record the chunking parameters; other ones than recorded (a changed chunk_tokens or
        chunk_overlap) make every ready document read by an older reader (store.DocumentStore.record_chunking), so
        the coming reindex runs read them again, at most reread_limit a run, and re-chunk them."""
        value = json.dumps(self.chunking_params(), sort_keys=True)
        before, marked = self.store.record_chunking(META_CHUNKING, value, META_CHUNKING_BEFORE)
        if before is not None and before != value:
            log.warning("the chunking changed (%s, was %s): %d documents are read again and re-chunked by the coming "
                        "reindex runs (at most reread_limit a run)", value, before, marked)

    def _chunking_status(self) -> dict[str, Any]:
        """The chunking this service cuts with, the one recorded with the index and the one before it (None: none)."""

        def parsed(key: str) -> dict | None:
            raw = self.store.get_meta(key)
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                return None

        return {"current": self.chunking_params(), "recorded": parsed(META_CHUNKING), "before": parsed(META_CHUNKING_BEFORE)}

    def outdated_files(self, folder: str) -> set[str]:
        """Paths of the ready documents from files under folder that an older reader read (a reindex reads them again)."""
        return {path for path, (kind, stored) in self.store.readers_under(folder).items() if not is_current(kind, stored)}

    def rebuild(self, reembed: bool = False) -> dict[str, Any]:
        """Rebuild FAISS (and BM25) from SQLite; with `reembed`, compute every vector again first."""
        with self._write():
            t0 = time.monotonic()
            if reembed:
                self._reembed()
            n = self.index.rebuild_dense(self.store.iter_vectors(self.index.dim))
            self._dirty = False
            self.index.rebuild_bm25(self._texts_of(None))
            return {"vectors": n, "reembedded": reembed, "seconds": round(time.monotonic() - t0, 2)}

    def _reembed(self) -> int:
        n = 0
        for ids, texts in self.store.iter_texts(batch=512):
            self.store.replace_vectors(ids.tolist(), self.embedder.embed(texts))
            n += len(ids)
        self.store.set_meta(META_MODEL, self.embedder.model_id)
        if getattr(self.embedder, "variant", None) is not None:
            self.store.set_meta(META_VARIANT, self.embedder.variant)
        return n
