"""Parts the daemon loads when a request first needs them, and gives back after an idle period.

A plain chat request needs neither llguidance's view of the tokenizer (structured outputs and
grounded answers: ~110 MB resident and ~1.6-2.5 s holding the GIL to build for Gemma's 262k
vocabulary) nor the embedding model's weights (retrieval, /v1/embeddings, ingestion: ~70 MB,
~0.35 s to load). At start-up the daemon only checks that they can load (llguidance imports; the
embedding model's files exist, its export and int8 choice are done), so /ready does not claim what
is not there; the first request that needs one loads it, once, under a lock (concurrent first
requests wait for that one load). A load that fails answers 503 and turns the part's readiness
state to failed (embedder) or degraded (grammar: chat goes on), with the reason in the log.

`IdleReleaser` gives loaded parts back after `idle_unload_s` seconds unused (Ollama's keep_alive,
for these parts; 0, the default, keeps them until exit): requests in flight keep their reference,
and the next request loads the part again and pays the load time again.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edge_agent.services.errors import UnavailableError

log = logging.getLogger(__name__)

StateSink = Callable[[str, "str | None"], None]  # (state, detail) for /ready's part


class OnDemandEmbedder:
    """An embedder whose weights load on first embed (rag.embedder.OnnxEmbedder built with load=False).

    Every other attribute (dim, max_tokens, model_id, tokenizer, variant, ...) is the inner one's, known
    without loading. embed/embed_query raise UnavailableError (503, no paths) when the model cannot load.
    """

    def __init__(self, inner: Any, on_state: StateSink = lambda state, detail: None):
        self.inner = inner
        self.on_state = on_state
        self.failure: BaseException | None = None

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not yet set (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    def describe(self) -> str:
        """What /ready says about the embedder: its model and variant, and whether its weights are loaded."""
        e = self.inner
        what = f"{e.model_id} ({getattr(e, 'variant', None) or getattr(e, 'backend', '?')})"
        if getattr(e, "loaded", True):
            took = getattr(e, "load_seconds", None)
            return what + (f", loaded on first use in {took:.2f} s" if took is not None else "")
        return what + ", loads on first use"

    def embed(self, texts: Any) -> Any:
        return self._call(self.inner.embed, texts)

    def embed_query(self, text: str) -> Any:
        return self._call(self.inner.embed_query, text)

    def _call(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        from edge_agent.rag.embedder import EmbedderError

        was_loaded = getattr(self.inner, "loaded", True)
        try:
            out = fn(arg)
        except EmbedderError as e:
            self.failure = e
            log.error("the embedding model failed to load on first use: %s", e)
            self.on_state("failed", f"{type(e).__name__} on first use; see the daemon's log (`edge-agent doctor` names the fix)")
            raise UnavailableError("the embedding model could not be loaded; see the daemon's log, and run `edge-agent doctor` "
                                   "for the fix") from None
        if not was_loaded:
            from edge_agent.engine.engine import release_free_heap

            release_free_heap()  # creating the session leaves freed heap mapped
            log.info("embedding model loaded on first use in %.2f s", getattr(self.inner, "load_seconds", None) or 0.0)
            self.failure = None
            self.on_state("ready", self.describe())
        return out

    def release(self) -> bool:
        """Give the weights back (they load again on next use); True when they were loaded."""
        released = bool(getattr(self.inner, "release", lambda: False)())
        if released:
            self.on_state("ready", self.describe())
        return released

    @property
    def last_used(self) -> float:
        return float(getattr(self.inner, "last_used", time.monotonic()))


@dataclass
class _Part:
    name: str
    loaded: Callable[[], bool]
    last_used: Callable[[], float]
    release: Callable[[], bool]


class IdleReleaser:
    """A background thread that gives back on-demand parts unused for keep_s seconds (see the module docstring)."""

    def __init__(self, keep_s: float, after_release: Callable[[], None] = lambda: None):
        self.keep_s = float(keep_s)
        self.after_release = after_release
        self._parts: dict[str, _Part] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.released: dict[str, int] = {}

    def watch(self, name: str, loaded: Callable[[], bool], last_used: Callable[[], float], release: Callable[[], bool]) -> None:
        """Watch one part (a later call with the same name replaces it)."""
        self._parts[name] = _Part(name, loaded, last_used, release)

    def start(self) -> "IdleReleaser":
        if self.keep_s > 0 and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="edge-agent-idle-release", daemon=True)
            self._thread.start()
        return self

    def sweep(self, now: float | None = None) -> list[str]:
        """Release every loaded part idle for keep_s or longer; returns their names."""
        now = time.monotonic() if now is None else now
        done = []
        for part in list(self._parts.values()):
            try:
                if part.loaded() and now - part.last_used() >= self.keep_s and part.release():
                    done.append(part.name)
                    self.released[part.name] = self.released.get(part.name, 0) + 1
            except Exception:  # pragma: no cover - a release that fails leaves the part loaded
                log.exception("giving back %s failed", part.name)
        if done:
            self.after_release()
            log.info("gave back %s after %.0f s unused (idle_unload_s)", ", ".join(done), self.keep_s)
        return done

    def _run(self) -> None:
        period = min(30.0, max(0.05, self.keep_s / 4))
        while not self._stop.wait(period):
            self.sweep()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
