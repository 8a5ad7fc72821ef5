"""Switching the embedding model without downtime: re-embed every chunk in the background, then swap.

When the configured embedding model differs from the one the stored vectors come from, the
service keeps serving with the old model (queries are embedded with it, the old vectors stay in
FAISS) while `BackgroundReembed` embeds every chunk with the new one into a staging table
(store/vectors_next.py). Chunks added meanwhile are embedded with the old model for search now
and picked up by the task too. When every chunk has a new vector, under the ingestion lock, the
staged vectors replace the served ones in one transaction, FAISS is rebuilt from them and the
new model takes over. Staged vectors survive a restart, so the task resumes where it stopped.
Cost: both models in memory during the switch, and the old model's source must be known (it
is recorded when vectors are first stored; an index older than that re-embeds at start instead).
"""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from edge_agent.store.vectors_next import NextVectorStore

log = logging.getLogger(__name__)

META_MODEL = "embedding_model"  # the same key DocumentService uses
META_SOURCE = "embedding_source"  # how to load the model the stored vectors come from


def source_spec(embedder: Any) -> str:
    """What loads this embedder again: the packaged model's name, or its source folder."""
    from edge_agent.rag.embedder import PACKAGED_MODEL

    if embedder.name == PACKAGED_MODEL:
        return PACKAGED_MODEL
    return str(Path(getattr(embedder, "source", embedder.folder)).resolve())


def serving_embedder(settings: Any, store: Any, configured: Any, read_only: bool = False) -> tuple[Any, Any | None]:
    """(the embedder to serve with, the one to re-embed with in the background or None).

    The configured one serves unless the stored vectors come from another model that can still be
    loaded (its source recorded); then that one serves until the switch completes. Never raises:
    an old model that cannot be loaded means the start-up check re-embeds instead (the old way).
    """
    from edge_agent.rag.embedder import PACKAGED_MODEL, EmbedderError, OnnxEmbedder

    stored = store.get_meta(META_MODEL)
    if stored is None or stored == configured.model_id:
        if not read_only:
            if store.get_meta(META_SOURCE) != source_spec(configured):
                store.set_meta(META_SOURCE, source_spec(configured))  # so a later switch can keep serving with it
            if stored is not None:
                NextVectorStore(store.db).discard()  # a switch that was undone
        return configured, None
    source = store.get_meta(META_SOURCE) or (PACKAGED_MODEL if stored.split("/")[0] == PACKAGED_MODEL else None)
    if source is None:
        return configured, None
    try:
        old = OnnxEmbedder(source, cache_dir=Path(settings.data_dir) / "embedding-cache",
                           quantize=getattr(settings, "embedding_quantize", "auto"), batch_size=settings.embedding_batch,
                           threads=getattr(settings, "threads", 0), shared=True)
    except (EmbedderError, OSError) as exc:
        log.warning("the previous embedding model (%s) cannot be loaded (%s): re-embedding at start", source, exc)
        return configured, None
    if old.model_id != stored:
        return configured, None
    log.info("embedding model switch %s -> %s: serving with the old one while the index re-embeds", stored, configured.model_id)
    return old, configured


class BackgroundReembed:
    """Embeds every chunk with `embedder` in a background thread, then makes it the served model."""

    def __init__(self, service: Any, embedder: Any, batch: int = 64, pause_s: float = 0.0):
        self.service = service
        self.embedder = embedder
        self.model = embedder.model_id
        self.batch = batch
        self.pause_s = pause_s  # between batches: leaves the cores to chat requests
        self.store = NextVectorStore(service.store.db)
        self.state = "pending"
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "BackgroundReembed":
        self.state = "running"
        self._thread = threading.Thread(target=self._run, name="edge-agent-reembed", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the current batch (what is stored is kept: the next start resumes)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait(self, timeout: float = 300.0) -> bool:
        """Wait for the switch to complete; True when it has."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.state == "complete"

    def status(self) -> dict[str, Any]:
        done, total = self.store.progress(self.model) if self.state != "complete" else (0, 0)
        out: dict[str, Any] = {"to": self.model, "state": self.state}
        if self.state != "complete":
            out.update(done=done, total=total)
        if self.error:
            out["error"] = self.error
        return out

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                ids, texts = self.store.pending(self.model, self.batch)
                if not len(ids):
                    if self._promote():
                        self.state = "complete"
                        return
                    continue
                self.store.put(self.model, ids.tolist(), self.embedder.embed(texts))
                if self.pause_s:
                    self._stop.wait(self.pause_s)
            self.state = "stopped"
        except Exception as exc:  # the served index is untouched; the next start resumes
            log.exception("re-embedding with %s failed", self.model)
            self.state, self.error = "failed", f"{type(exc).__name__}: {str(exc)[:200]} (the next start resumes)"

    def _promote(self) -> bool:
        """Under the ingestion lock: staged vectors become the served ones, FAISS is rebuilt, the new model serves."""
        from edge_agent.rag.chunking import TokenChunker

        svc = self.service
        t0 = time.monotonic()
        with svc._writing:
            moved = self.store.promote(self.model, META_MODEL, self.model)
            if moved < 0:
                return False  # chunks were added meanwhile: embed them first
            svc.store.set_meta(META_SOURCE, source_spec(self.embedder))
            svc.index.dim = self.embedder.dim
            svc.index.rebuild_dense(svc.store.iter_vectors(self.embedder.dim))
            svc.embedder = self.embedder
            old = svc.chunker
            svc.chunker = TokenChunker(self.embedder.tokenizer, min(old.chunk_tokens, self.embedder.max_tokens - 2), old.overlap)
        log.info("embedding model switch to %s complete: %d vectors, swapped in %.1f s", self.model, moved, time.monotonic() - t0)
        return True
