"""The one place that builds concrete parts from Settings."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from edge_agent.config import Settings
from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.services.chat import ChatService
from edge_agent.services.embeddings import EmbeddingService
from edge_agent.services.metrics import ServiceMetrics

log = logging.getLogger(__name__)


def build_engine(settings: Settings, max_batch: int | None = None, **scheduler_kw) -> BatchScheduler:
    """Load and verify the configured bundle; return a started scheduler over it.

    Raises BundleError (with what to run next) when the bundle is missing or damaged.
    """
    bundle = load_bundle(settings.bundle_path(), verify=True)
    engine = OnnxEngine(
        bundle,
        threads=settings.threads,
        max_batch=max_batch or settings.max_batch,
        context_length=settings.context_length,
        device=settings.device,
    )
    return BatchScheduler(
        engine, max_queue=settings.max_queue, prefill_chunk=settings.prefill_chunk,
        prefix_cache_bytes=settings.prefix_cache_mb << 20, **scheduler_kw,
    ).start()


@dataclass
class Runtime:
    """Everything the daemon serves with: settings, the scheduler and the services over it."""

    settings: Settings
    scheduler: BatchScheduler
    chat: ChatService
    embeddings: EmbeddingService
    metrics: ServiceMetrics
    documents: Any = None
    documents_status: str | None = None
    jobs: Any = None  # edge_agent.jobs.service.JobsService: runs, cron loop (started after the model loads)

    def begin_shutdown(self) -> None:
        """Refuse new generations (running ones continue)."""
        self.chat.accepting = False

    def close(self, grace_s: float = 0.0) -> None:
        """Stop the scheduler (running generations get grace_s to finish) and close the documents."""
        self.begin_shutdown()
        jobs, self.jobs = self.jobs, None
        if jobs is not None:  # runs stop at their next poll and stay running in SQLite: the next start resumes them
            jobs.close()
        self.scheduler.stop(grace_s)
        docs, self.documents = self.documents, None
        if docs is not None and hasattr(docs, "close"):
            try:
                docs.close()
            except Exception:  # pragma: no cover - closing is best effort at exit
                log.exception("closing the document service failed")


def build_runtime(settings: Settings, *, max_batch: int | None = None, documents: Any = None, load_documents: bool | None = None,
                  start_jobs: bool | None = None) -> Runtime:
    """Load the model and build the services the server needs.

    The document service (and with it the embedding model) loads in a background thread
    unless `documents` is given or load_documents (default: settings.serve_documents) is False,
    so the server is ready in seconds; until then /v1/embeddings, the document routes and
    requests with `rag` answer 503 (with Retry-After).
    Raises BundleError when the model bundle is missing.
    """
    if load_documents is None:
        load_documents = settings.serve_documents
    metrics = ServiceMetrics()
    scheduler = build_engine(settings, max_batch=max_batch, on_step=metrics.observe_step, on_finish=metrics.observe_finish)
    metrics.bind(lambda: scheduler.queue_depth, lambda: scheduler.active)
    chat = ChatService(
        scheduler, request_timeout_s=settings.request_timeout_s, default_max_tokens=settings.default_max_tokens,
        max_tokens_limit=settings.max_tokens_limit,
    )
    rt = Runtime(settings=settings, scheduler=scheduler, chat=chat, embeddings=None, metrics=metrics, documents=documents)  # type: ignore[arg-type]
    rt.embeddings = EmbeddingService(lambda: rt.documents, lambda: rt.documents_status)
    chat.attach_documents(lambda: rt.documents, lambda: rt.documents_status)
    if documents is None and load_documents:
        rt.documents_status = "still loading"
        threading.Thread(target=_load_documents, args=(rt,), name="edge-agent-documents", daemon=True).start()
    elif documents is None:
        rt.documents_status = "documents are disabled in this process"
    rt.jobs = _build_jobs(rt)
    if rt.jobs is not None and (settings.jobs_enabled if start_jobs is None else start_jobs):
        rt.jobs.start()  # resumes interrupted runs, starts the cron loop
    return rt


def _build_jobs(rt: Runtime) -> Any:
    """The jobs service over the daemon's database; None (logged) when the database cannot be opened."""
    from edge_agent.jobs.service import JobsService
    from edge_agent.services.documents import default_db_path
    from edge_agent.store import SqliteDatabase

    try:
        db = SqliteDatabase(default_db_path(rt.settings))
    except Exception as e:  # the daemon still serves chat without jobs
        log.error("jobs are off: the database could not be opened: %s: %s", type(e).__name__, e)
        return None
    return JobsService(rt.settings, db, rt.chat, rt.embeddings, lambda: rt.documents, rt.metrics)


def _load_documents(rt: Runtime) -> None:
    try:
        from edge_agent.services.documents import DocumentService, IndexInUseError

        rt.documents = DocumentService.from_settings(rt.settings)
        rt.documents_status = None
        log.info("document service ready")
    except IndexInUseError as e:  # responses name no paths; the log does
        rt.documents_status = f"another edge-agent process{f' (pid {e.pid})' if e.pid else ''} owns the document index"
        log.error("document service not loaded: %s", e)
    except Exception as e:  # the daemon still serves chat without documents
        rt.documents_status = f"it failed to load ({type(e).__name__}); see the daemon's log"
        log.error("document service failed to load: %s: %s", type(e).__name__, e)
