"""The one place that builds concrete parts from Settings."""
from __future__ import annotations

from edge_agent.config import Settings
from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.scheduler import BatchScheduler


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
    return BatchScheduler(engine, max_queue=settings.max_queue, prefill_chunk=settings.prefill_chunk, **scheduler_kw).start()
