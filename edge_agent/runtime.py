"""The one place that builds concrete parts from Settings."""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edge_agent.config import Settings
from edge_agent.engine import prepacked
from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine, release_free_heap
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.services.chat import ChatService
from edge_agent.services.grounding import GroundingPolicy
from edge_agent.services.embeddings import EmbeddingService
from edge_agent.services.metrics import ServiceMetrics
from edge_agent.services.on_demand import IdleReleaser

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
        spinning=settings.thread_spinning,
        int4_head_max_rows=settings.int4_head_max_rows,
        prepacked_cache=prepacked.cache_folder(bundle.path) if settings.prepacked_weights else None,
    )
    return BatchScheduler(
        engine, max_queue=settings.max_queue, prefill_chunk=settings.prefill_chunk,
        prefix_cache_bytes=settings.prefix_cache_mb << 20, reserved_interactive_slots=settings.reserved_interactive_slots,
        prefix_cache_gives_way=settings.prefix_cache_gives_way, interactive_slowdown=settings.interactive_slowdown, **scheduler_kw,
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
    cluster: Any = None  # edge_agent.jobs.ray_backend.RayPool when jobs_backend = "ray"
    db: Any = None  # the SQLite database, opened once (store.SqliteDatabase); each service using it holds a share
    releaser: Any = None  # services.on_demand.IdleReleaser: gives the on-demand parts back after idle_unload_s
    # state of the parts that load in the background: name -> (loading | ready | failed | disabled, detail)
    parts: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    closed: bool = False
    _docs_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def adopt_documents(self, svc: Any) -> bool:
        """Install a document service loaded in the background; if close() came first, close it instead
        (its index lock and database would otherwise stay held). True when installed."""
        with self._docs_lock:
            if not self.closed:
                self.documents = svc
                return True
        svc.close()
        return False

    def liveness(self) -> tuple[bool, str | None]:
        """(alive, why not): False only when the process is broken (the decode loop died) and needs a restart."""
        if getattr(self.scheduler, "alive", True) or not self.chat.accepting:  # a stopped loop during shutdown is no failure
            return True, None
        return False, f"the decode loop stopped ({_failure_text(getattr(self.scheduler, 'failure', None))}); restart the daemon"

    def readiness(self) -> tuple[bool, dict[str, dict[str, Any]]]:
        """(ready, parts): ready only when every enabled part answers; each part says ready, loading, failed or stopping."""
        parts: dict[str, dict[str, Any]] = {}
        alive, why = self.liveness()
        engine = getattr(self.scheduler, "engine", None)
        model: dict[str, Any] = {"state": "ready", "detail": self.chat.model_name}
        if getattr(engine, "device", None):
            model["device"] = str(engine.device)
        if getattr(engine, "fallback_reason", None):
            model["fallback"] = str(engine.fallback_reason)
        if not self.chat.accepting:
            model.update(state="stopping", detail="shutting down")
        elif not alive:
            model.update(state="failed", detail=why)
        parts["model"] = model
        for name, (state, detail) in self.parts.items():
            parts[name] = {"state": state, "detail": detail}
        jobs = getattr(self, "jobs", None)
        if jobs is None and getattr(self.settings, "jobs_enabled", False):
            parts["jobs"] = {"state": "failed", "detail": "the jobs database could not be opened; see the daemon's log"}
        elif jobs is not None and not getattr(jobs, "alive", True):
            failure = getattr(jobs, "failure", None)
            detail = (f"the job scheduler fails try after try ({_failure_text(failure)}); it keeps trying, see the daemon's log"
                      if failure is not None else "the job scheduler stopped; restart the daemon")
            parts["jobs"] = {"state": "failed", "detail": detail}
        elif jobs is not None and getattr(jobs, "waiting", None):  # a full or read-only data disk: runs wait, serving goes on
            parts["jobs"] = {"state": "degraded", "detail": jobs.waiting}
        elif jobs is not None:
            started = getattr(jobs, "started", True)
            parts["jobs"] = {"state": "ready" if started else "disabled", "detail": "cron loop running" if started else "not started in this process"}
        parts["disk"] = _disk_part(self.settings)
        return all(p["state"] in ("ready", "degraded", "disabled") for p in parts.values()), parts

    def begin_shutdown(self) -> None:
        """Refuse new generations (running ones continue)."""
        self.chat.accepting = False

    def close(self, grace_s: float = 0.0) -> None:
        """Stop the scheduler (running generations get grace_s to finish) and close the documents."""
        self.begin_shutdown()
        jobs, self.jobs = self.jobs, None
        if jobs is not None:  # runs stop at their next poll and stay running in SQLite: the next start resumes them
            jobs.close()
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            cluster.close()
        if self.releaser is not None:
            self.releaser.close()
        self.scheduler.stop(grace_s)
        with self._docs_lock:  # a background load that finishes after this closes its own service
            self.closed = True
            docs, self.documents = self.documents, None
        if docs is not None and hasattr(docs, "close"):
            try:
                docs.close()
            except Exception:  # pragma: no cover - closing is best effort at exit
                log.exception("closing the document service failed")
        db, self.db = self.db, None
        if db is not None:
            db.close()  # the runtime's share: the connections close with the last user


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
    metrics.set_device(**scheduler.engine.device_status())
    chat = ChatService.from_settings(scheduler, settings)
    chat.grounding = GroundingPolicy.from_settings(settings)
    rt = Runtime(settings=settings, scheduler=scheduler, chat=chat, embeddings=None, metrics=metrics, documents=documents)  # type: ignore[arg-type]
    rt.embeddings = EmbeddingService(lambda: rt.documents, lambda: rt.documents_status, aliases=settings.embedding_model_aliases)
    rt.releaser = IdleReleaser(settings.idle_unload_s, release_free_heap).start()  # before the parts it watches load
    chat.attach_documents(lambda: rt.documents, lambda: rt.documents_status)
    if documents is None and load_documents:
        rt.documents_status = "still loading"
        rt.parts.update(embedder=("loading", "waiting to start"), index=("loading", "opens after the embedding model"))
        threading.Thread(target=_load_documents, args=(rt,), name="edge-agent-documents", daemon=True).start()
    elif documents is None:
        rt.documents_status = "documents are disabled in this process"
        rt.parts.update(embedder=("disabled", "serve_documents is off"), index=("disabled", "serve_documents is off"))
    _watch_grammar(rt)
    rt.jobs = _build_jobs(rt)
    if rt.jobs is not None and (settings.jobs_enabled if start_jobs is None else start_jobs):
        rt.jobs.start()  # resumes interrupted runs, starts the cron loop
    return rt


def _build_jobs(rt: Runtime) -> Any:
    """The jobs service over the daemon's database; None (logged) when the database cannot be opened."""
    from edge_agent.engine.types import BATCH_PRIORITY
    from edge_agent.jobs.service import JobsService

    try:
        db = _database(rt).share()  # one writer per process (convention 3): the document service shares it
    except Exception as e:  # the daemon still serves chat without jobs
        log.error("jobs are off: the database could not be opened: %s: %s", type(e).__name__, e)
        return None
    svc = JobsService(rt.settings, db, rt.chat, rt.embeddings, lambda: rt.documents, rt.metrics, priority=BATCH_PRIORITY,
                      classify_embeddings=_classify_embeddings(rt.settings, rt.releaser))
    if rt.settings.jobs_backend == "ray":
        from edge_agent.jobs.ray_backend import RayPool, RayUnavailableError, register_metrics, wrap_kinds

        try:
            rt.cluster = RayPool(rt.settings, build_job_worker, expect_bundle=svc.ctx.bundle_id)
        except RayUnavailableError as e:  # chat still serves; runs stay local, and `cluster status` says why
            log.error("jobs run locally: %s", e)
            rt.parts["cluster"] = ("failed", "the Ray pool could not start: check ray_address, the cluster and the "
                                             "model bundle on every node (the daemon's log says which)")
        else:
            svc.kinds = wrap_kinds(svc.kinds, rt.cluster)
            register_metrics(rt.metrics.registry, rt.cluster)
            _share_embedding(rt)
    return svc


def _database(rt: Runtime) -> Any:
    """The daemon's SQLite database, opened once; the jobs and the document service each hold a share."""
    from edge_agent.services.documents import default_db_path
    from edge_agent.store import SqliteDatabase

    with getattr(rt, "_docs_lock", None) or threading.Lock():
        if getattr(rt, "closed", False):
            raise RuntimeError("the daemon is shutting down")
        if getattr(rt, "db", None) is None:
            rt.db = SqliteDatabase(default_db_path(rt.settings))
        return rt.db


def _share_embedding(rt: Runtime) -> None:
    """With a Ray pool and documents both loaded: bulk embedding (ingestion, re-indexing) on the actors."""
    docs, pool = rt.documents, rt.cluster
    if docs is None or pool is None or rt.settings.jobs_backend != "ray":
        return
    from edge_agent.jobs.ray_backend import RemoteEmbedder

    with rt._docs_lock:
        if not isinstance(docs.embedder, RemoteEmbedder):
            docs.embedder = RemoteEmbedder(docs.embedder, pool)


def _lazy_embedder(settings: Settings, source: str | None = None, releaser: Any = None, name: str = "") -> Callable[[], Any]:
    """A callable that builds the embedder (the configured one, or source's) on its first call and then returns it.
    releaser (an IdleReleaser): from that build on, its weights are given back after idle_unload_s unused (watched
    as name) and load again on its next embed."""
    from edge_agent.rag.embedder import build_embedder

    lock, held = threading.Lock(), []

    def embedder() -> Any:
        with lock:
            if not held:
                held.append(build_embedder(settings, source=source))
                if releaser is not None:
                    e = held[0]
                    releaser.watch(name, lambda: e.loaded, lambda: e.last_used, e.release)
            return held[0]

    return embedder


def _classify_embeddings(settings: Settings, releaser: Any = None) -> Any:
    """classify's own EmbeddingService (its model loaded by its first run; with the daemon's releaser given back after
    idle_unload_s like the documents' embedder, ~70 MB) when classify_embedding_model names another model than the
    documents' embedding_model, else None (classify uses the documents' one)."""
    from edge_agent.rag.embedder import configured_model

    source = settings.classify_embedding_source()
    if source == configured_model(settings):
        return None
    return EmbeddingService(_lazy_embedder(settings, source, releaser, "classify_embedder"))


def build_job_worker(snapshot: dict) -> Any:
    """A Ray actor's JobContext: its own engine and chat service over the same bundle (every file's
    sha256 checked on load), an embedder loaded on first use, and no database (the owner writes)."""
    from edge_agent.engine.types import BATCH_PRIORITY
    from edge_agent.jobs.kinds import JobContext
    from edge_agent.jobs.service import bundle_id_of

    settings = Settings(**snapshot)
    scheduler = build_engine(settings, max_batch=settings.max_batch)
    chat = ChatService.from_settings(scheduler, settings)
    return JobContext(chat=chat, embeddings=EmbeddingService(_lazy_embedder(settings), aliases=settings.embedding_model_aliases),
                      documents=lambda: None, settings=settings, priority=BATCH_PRIORITY,
                      bundle_id=bundle_id_of(scheduler.engine.bundle.manifest), db=None,
                      classify_embeddings=_classify_embeddings(settings))


def _disk_part(settings: Settings) -> dict[str, Any]:
    """The data and index disks: degraded (still ready: reads and chat go on, writes answer 507) below min_free_bytes."""
    from edge_agent.services.storage import disk_status

    st = disk_status(settings)
    free = [d["free_bytes"] for d in st["disks"].values() if d.get("free_bytes") is not None]
    low = min(free) if free else None
    if st["ok"]:
        return {"state": "ready", "detail": f"{low // (1 << 20)} MiB free" if low is not None else None, "free_bytes": low}
    return {"state": "degraded", "detail": st["message"], "free_bytes": low}


def _failure_text(failure: Any) -> str:
    """A failure for a response: an exception's type (its message may hold paths; the log has it), or a short text."""
    if failure is None:
        return "no reason recorded; see the daemon's log"
    if isinstance(failure, BaseException):
        return f"{type(failure).__name__}; see the daemon's log"
    return str(failure)[:200]


def _set_part(rt: Any, name: str, state: str, detail: str | None) -> None:
    parts = getattr(rt, "parts", None)
    if parts is not None:
        parts[name] = (state, detail)


def _watch_grammar(rt: Runtime) -> None:
    """The grammar tokenizer (structured outputs, grounded answers) is built by the first request that needs it
    (services/on_demand.py: ~110 MB a chat-only daemon never holds); here only whether it can be, and the idle release."""
    import importlib.util

    from edge_agent.services.constrained import grammar_last_used, grammar_loaded, release_grammar

    rt.chat.on_grammar = lambda state, detail: _set_part(rt, "grammar", state, detail)
    if importlib.util.find_spec("llguidance") is None:
        rt.parts["grammar"] = ("degraded", "llguidance is not installed: structured outputs are refused (reinstall edge-agent)")
    elif getattr(rt.settings, "preload_parts", False):
        rt.parts["grammar"] = ("loading", "building the grammar tokenizer (preload_parts)")
        threading.Thread(target=_preload_grammar, args=(rt,), name="edge-agent-grammar", daemon=True).start()
    else:
        rt.parts["grammar"] = ("ready", "loads on the first structured-output request")
    tok = rt.chat.engine.tokenizer

    def release() -> bool:
        done = release_grammar(tok)
        if done:
            _set_part(rt, "grammar", "ready", "given back after idle_unload_s; loads on the next structured-output request")
        return done

    rt.releaser.watch("grammar", lambda: grammar_loaded(tok), lambda: grammar_last_used(tok), release)


def _preload_grammar(rt: Runtime) -> None:
    """Background thread (preload_parts): build the grammar tokenizer now; a failure only degrades (the part says so)."""
    try:
        rt.chat.prepare_grammar()
    except Exception as e:  # prepare_grammar logged it and set the part
        log.debug("preloading the grammar tokenizer failed: %s", e)


def _on_demand_embedder(rt: Runtime) -> Any:
    """The configured embedder with its files checked (export done) and its weights loaded on first use
    (now with preload_parts); raises EmbedderError."""
    from edge_agent.rag.embedder import build_embedder
    from edge_agent.services.on_demand import OnDemandEmbedder

    inner = build_embedder(rt.settings, load=bool(getattr(rt.settings, "preload_parts", False)))
    emb = OnDemandEmbedder(inner, lambda state, detail: _set_part(rt, "embedder", state, detail))
    if rt.releaser is not None:
        rt.releaser.watch("embedder", lambda: bool(getattr(emb.inner, "loaded", False)), lambda: emb.last_used, emb.release)
    return emb


def _load_documents(rt: Runtime) -> None:
    """Load the embedding model and the document index (background thread); readiness follows each step."""
    try:
        from edge_agent.rag.embedder import prepared_decision
        from edge_agent.services.documents import DocumentService, IndexInUseError

        try:
            prepared = prepared_decision(rt.settings) is not None
        except Exception:  # the load below reports it
            prepared = True
        _set_part(rt, "embedder", "loading", "loading the prepared ONNX model" if prepared else
                  "exporting to ONNX and choosing the int8 variant (first start: `edge-agent setup` does this at install time)")
        if not prepared:
            log.warning("embedding model not prepared: exporting it now; run `edge-agent setup` at install time to skip this")
        db = _database(rt).share()
        try:
            svc = DocumentService.from_settings(rt.settings, embedder=_on_demand_embedder(rt), db=db)
        except BaseException:
            db.close()  # this share only: the jobs keep theirs
            raise
        adopt = getattr(rt, "adopt_documents", None)
        if adopt is None:
            rt.documents = svc
        elif not adopt(svc):
            log.info("the document service finished loading after shutdown began: closed it")
            return
        rt.documents_status = None
        _share_embedding(rt)
        emb = rt.documents.embedder
        describe = getattr(emb, "describe", None)  # an OnDemandEmbedder (also through the Ray pool's wrapper)
        _set_part(rt, "embedder", "ready", describe() if describe else
                  f"{emb.model_id} ({getattr(emb, 'variant', None) or getattr(emb, 'backend', '?')})")
        _set_part(rt, "index", "ready", None)
        release_free_heap()
        log.info("document service ready")
    except IndexInUseError as e:  # responses name no paths; the log does
        rt.documents_status = f"another edge-agent process{f' (pid {e.pid})' if e.pid else ''} owns the document index"
        _set_part(rt, "embedder", "failed", "not loaded: the document index is owned by another process")
        _set_part(rt, "index", "failed", rt.documents_status + "; stop it, or point index_dir elsewhere")
        log.error("document service not loaded: %s", e)
    except Exception as e:  # the daemon still serves chat without documents
        rt.documents_status = f"it failed to load ({type(e).__name__}); see the daemon's log"
        failed = "embedder" if type(e).__name__ == "EmbedderError" else "index"  # no import: that may be what failed
        _set_part(rt, failed, "failed", f"{type(e).__name__}; see the daemon's log")
        if failed == "embedder":
            _set_part(rt, "index", "failed", "not loaded: the embedding model failed")
        log.error("document service failed to load: %s: %s", type(e).__name__, e)
