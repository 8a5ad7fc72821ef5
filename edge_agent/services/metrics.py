"""Prometheus metrics of one runtime, in its own registry (no global state)."""
from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_TOKEN_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28)
_BATCH_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 64, 128, 256)


class ServiceMetrics:
    """Counters and histograms of requests and generation; render() gives the Prometheus text format."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("edge_agent_http_requests", "HTTP requests by route, method and status.", ["route", "method", "status"], registry=r)
        self.request_seconds = Histogram(
            "edge_agent_http_request_seconds", "Time to the response headers, by route.", ["route"], buckets=_LATENCY_BUCKETS, registry=r
        )
        self.in_flight = Gauge("edge_agent_http_requests_in_flight", "HTTP requests being served (streams included).", registry=r)
        self.tokens = Counter("edge_agent_generated_tokens", "Completion tokens generated.", registry=r)
        self.prompt_tokens = Counter("edge_agent_prompt_tokens", "Prompt tokens processed.", registry=r)
        self.generations = Counter("edge_agent_generations", "Finished generations by finish reason.", ["reason"], registry=r)
        self.ttft = Histogram("edge_agent_time_to_first_token_seconds", "Submission to first token.", buckets=_LATENCY_BUCKETS, registry=r)
        self.token_latency = Histogram(
            "edge_agent_token_latency_seconds", "Time of one decode step (per-token latency of every sequence in it).",
            buckets=_TOKEN_BUCKETS, registry=r,
        )
        self.batch_size = Histogram("edge_agent_batch_size", "Sequences decoded together in one step.", buckets=_BATCH_BUCKETS, registry=r)
        self.queue_depth = Gauge("edge_agent_queue_depth", "Generations waiting for a batch slot.", registry=r)
        self.active = Gauge("edge_agent_active_sequences", "Generations holding a batch slot.", registry=r)
        self.rejected = Counter("edge_agent_rejected_requests", "Requests refused with 429 (queue full or too many connections).", registry=r)
        self.device = Info(
            "edge_agent_device", "Device serving the language model, why, and the GPU failure that sent it to the CPU (empty when none).", registry=r
        )

    def set_device(self, device: str, reason: str, fallback_reason: str | None) -> None:
        """Publish the device (cuda | cpu) and, after a GPU failure, why the CPU serves."""
        self.device.info({"device": device, "reason": reason[:200], "fallback_reason": (fallback_reason or "")[:200]})

    def bind(self, queue_depth: Callable[[], float], active: Callable[[], float]) -> None:
        """Read the queue depth and the active count from these functions at scrape time."""
        self.queue_depth.set_function(queue_depth)
        self.active.set_function(active)

    # called by the scheduler thread -------------------------------------------------
    def observe_step(self, batch_size: int, seconds: float) -> None:
        self.batch_size.observe(batch_size)
        self.token_latency.observe(seconds)

    def observe_finish(self, fin) -> None:
        u = fin.usage
        self.tokens.inc(u.completion_tokens)
        self.prompt_tokens.inc(u.prompt_tokens)
        self.generations.labels(fin.finish_reason).inc()
        if u.completion_tokens and u.ttft_s > 0:
            self.ttft.observe(u.ttft_s)

    # called by the HTTP layer -------------------------------------------------------
    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        if status == 429:
            self.rejected.inc()
        self.request_seconds.labels(route).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
