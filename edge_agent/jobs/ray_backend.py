"""Job runs across several machines on Ray: items go to a pool of actors, results come back to the owner.

The daemon that owns a run stays the only writer of SQLite. Each actor loads the model bundle once
(from a path every node can read; loading checks every file's sha256 against the manifest) and
runs many items at a time through its own engine's continuous batching (a threaded actor: one
thread per item in flight, all submitting to the same scheduler). The owner keeps at most
`ray_inflight_per_actor` items on each actor (backpressure) and commits each returned result
through the same conditional (run, item) commit as the local backend. A lost actor or node fails
its unfinished calls with UnavailableError, which the run loop retries on another actor: nothing
is done twice to completion and nothing is lost.

Items that name a document are made self-contained by the owner before they leave
(`remote_item`: the document's text goes in the payload), since workers have no database.
Ray is imported only here, and only when `jobs_backend = "ray"`.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edge_agent.jobs.kinds import Item, ItemError, JobContext, JobKind, RunInfo
from edge_agent.services.errors import BusyError, ServiceError, UnavailableError

log = logging.getLogger(__name__)

# kinds whose items can run away from the owner (reindex writes the owner's index: it stays local)
REMOTE_KINDS = ("summarize", "classify", "batch")
POLL_S = 0.01


class RayUnavailableError(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached; the message says what to do."""


def _ray():
    try:
        import ray
    except ImportError:
        raise RayUnavailableError("jobs_backend is 'ray' but Ray is not installed: pip install '.[cluster]'") from None
    return ray


class JobWorker:
    """The actor: one engine (and embedder) per actor, items run on its threads (see RayPool)."""

    def __init__(self, factory: Callable[[dict], JobContext], settings: dict):
        import os
        import socket

        from edge_agent.jobs.kinds import get_kinds

        self.ctx = factory(settings)
        self.kinds = get_kinds()
        self.node = socket.gethostname()
        self.pid = os.getpid()

    def where(self) -> dict:
        return {"node": self.node, "pid": self.pid, "bundle_id": self.ctx.bundle_id}

    def embed(self, texts: list[str]) -> tuple[str | None, Any]:
        """(embedding model name, vectors [len(texts), dim]) from this actor's embedder."""
        vecs, _ = self.ctx.embeddings.embed(texts)
        return self.ctx.embeddings.model_name, vecs

    def run(self, kind: str, key: str, payload: dict, params: dict) -> dict:
        """One item to its end: {"ok": result} or {"error": message} (an ItemError of the kind)."""
        try:
            pending = self.kinds[kind].start_item(Item(key, payload), params, self.ctx)
            while not pending.done():
                time.sleep(POLL_S)
            return {"ok": pending.result(0)}
        except ItemError as e:
            return {"error": str(e)}
        except (BusyError, UnavailableError) as e:
            return {"retry": e.message}
        except ServiceError as e:
            return {"error": e.message}


class RemoteEmbedder:
    """The document service's embedder with bulk work (ingestion, re-indexing) spread over the pool.

    Calls of at least `min_texts` texts are split into shards, one per live actor, and embedded
    there with the same model; queries and small calls stay local. A shard whose actor fails, or
    an actor whose model differs from ours, is embedded here instead: nothing is lost, and vectors
    of another model never enter the index. Every other attribute is the local embedder's.
    """

    def __init__(self, local: Any, pool: "RayPool", min_texts: int = 64, shard: int = 256):
        self._local, self._pool, self._min, self._shard = local, pool, min_texts, shard
        self._disabled: str | None = None
        self.remote_texts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._local, name)

    def embed(self, texts):
        texts = list(texts)
        slots = [s for s in self._pool.slots if s.usable(_ray())] if self._disabled is None else []
        if len(texts) < self._min or not slots:
            return self._local.embed(texts)
        import numpy as np

        ray = _ray()
        size = min(self._shard, -(-len(texts) // len(slots)))
        shards = [texts[i:i + size] for i in range(0, len(texts), size)]
        refs = [slots[i % len(slots)].actor.embed.remote(shard) for i, shard in enumerate(shards)]
        want = getattr(self._local, "name", None)
        out = []
        for shard, ref in zip(shards, refs):
            try:
                name, vecs = ray.get(ref)
            except Exception as e:  # a lost actor: this shard here
                log.warning("embedding a shard on a Ray actor failed (%s); embedding it locally", type(e).__name__)
                out.append(self._local.embed(shard))
                continue
            if name != want or vecs.shape != (len(shard), self._local.dim):
                self._disabled = f"the actors embed with {name!r}, this daemon with {want!r}"
                log.error("remote embedding off: %s; copy the same embedding model to every node", self._disabled)
                out.append(self._local.embed(shard))
                continue
            self.remote_texts += len(shard)
            out.append(np.asarray(vecs, np.float32))
        return np.concatenate(out) if out else self._local.embed([])


@dataclass
class _Slot:
    actor: Any
    index: int
    inflight: int = 0
    done: int = 0
    node: str = "?"
    probe: Any = None  # after a loss: a where() call that must answer before the slot takes items again

    def usable(self, ray: Any) -> bool:
        """False while a lost actor has not answered its probe (restarting, or its node is gone)."""
        if self.probe is None:
            return True
        ready, _ = ray.wait([self.probe], timeout=0)
        if not ready:
            return False
        try:
            where = ray.get(self.probe)
        except Exception:  # still dead: probe again on the next call
            self.probe = self.actor.where.remote()
            return False
        self.probe, self.node = None, where["node"]
        return True


class RayPool:
    """A pool of JobWorker actors on a Ray cluster, with a bound on the items in flight per actor.

    Raises RayUnavailableError when Ray is missing or the cluster cannot be reached.
    """

    def __init__(self, settings: Any, factory: Callable[[dict], JobContext], expect_bundle: str | None = None):
        ray = _ray()
        self.settings = settings
        if not ray.is_initialized():
            address = settings.ray_address or None
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False,
                         **({} if address else {"num_cpus": settings.ray_actor_cpus * max(1, settings.ray_actors or 1)}))
            except Exception as e:  # ConnectionError, RuntimeError, ...: say what to check
                raise RayUnavailableError(f"cannot reach the Ray cluster at {address or 'a new local instance'} "
                                          f"({type(e).__name__}); check ray_address and `ray status` on the head") from None
        self.per_actor = max(1, settings.ray_inflight_per_actor)
        count = settings.ray_actors or max(1, int(ray.cluster_resources().get("CPU", 1)) // settings.ray_actor_cpus)
        gpus = int(ray.cluster_resources().get("GPU", 0))
        cls = ray.remote(JobWorker).options(
            num_cpus=settings.ray_actor_cpus, num_gpus=1 if gpus >= count else 0,
            max_concurrency=self.per_actor + 1, max_restarts=2, max_task_retries=0,
        )
        snapshot = _snapshot(settings)
        self.slots = [_Slot(cls.remote(factory, snapshot), i) for i in range(count)]
        self._lock = threading.Lock()
        self.items_done = 0
        self.started = time.monotonic()
        try:
            places = ray.get([s.actor.where.remote() for s in self.slots], timeout=600)
        except Exception as e:  # an actor could not load the bundle (missing on its node, checksum mismatch)
            self.close()
            raise RayUnavailableError(f"the Ray actors could not load the model ({type(e).__name__}): every node needs the "
                                      f"bundle at {snapshot.get('models_dir')}; see the daemon's log") from None
        for s, where in zip(self.slots, places):
            s.node = where["node"]
            if expect_bundle and where["bundle_id"] != expect_bundle:
                self.close()
                raise RayUnavailableError(f"the model bundle on node {where['node']} differs from this daemon's "
                                          f"({where['bundle_id'][:12]} vs {expect_bundle[:12]}): copy the same bundle to every node")
        log.info("ray pool: %d actors on %s", count, ", ".join(sorted({s.node for s in self.slots})))

    @property
    def capacity(self) -> int:
        return len(self.slots) * self.per_actor

    def submit(self, kind: str, item: Item, params: dict) -> "RayPending":
        """Send one item to the least busy actor; raises BusyError when every actor is at its bound."""
        ray = _ray()
        with self._lock:
            live = [s for s in self.slots if s.usable(ray)]
            slot = min(live, key=lambda s: s.inflight) if live else None
            if slot is None or slot.inflight >= self.per_actor:
                why = "every Ray actor has its bound of items in flight" if live else "no Ray actor is alive (restarting?)"
                raise BusyError(why, 0.05 if live else 1.0)
            slot.inflight += 1
        try:
            ref = slot.actor.run.remote(kind, item.key, item.payload, params)
        except Exception:
            with self._lock:
                slot.inflight -= 1
            raise
        return RayPending(self, slot, ref)

    def _release(self, slot: _Slot, ok: bool, lost: bool = False) -> None:
        with self._lock:
            slot.inflight -= 1
            if ok:
                slot.done += 1
                self.items_done += 1
            if lost and slot.probe is None:  # no new items until the actor answers again
                slot.probe = slot.actor.where.remote()
                log.warning("ray actor %d on %s was lost; its items run again elsewhere", slot.index, slot.node)

    def status(self) -> dict:
        """Nodes, actors, items in flight per node and throughput since the pool started."""
        ray = _ray()
        nodes: dict[str, dict] = {}
        for n in ray.nodes():
            if n.get("Alive"):
                nodes[n.get("NodeManagerHostname", n.get("NodeID", "?"))] = {
                    "cpus": n.get("Resources", {}).get("CPU", 0), "gpus": n.get("Resources", {}).get("GPU", 0),
                    "actors": 0, "in_flight": 0, "items_done": 0,
                }
        for s in self.slots:
            row = nodes.setdefault(s.node, {"cpus": 0, "gpus": 0, "actors": 0, "in_flight": 0, "items_done": 0})
            row["actors"] += 1
            row["in_flight"] += s.inflight
            row["items_done"] += s.done
        elapsed = max(1e-9, time.monotonic() - self.started)
        return {"backend": "ray", "nodes": nodes, "actors": len(self.slots), "in_flight": sum(s.inflight for s in self.slots),
                "items_done": self.items_done, "items_per_s": round(self.items_done / elapsed, 3)}

    def close(self) -> None:
        ray = _ray()
        for s in self.slots:
            try:
                ray.kill(s.actor)
            except Exception:  # already gone
                pass
        self.slots = []


def _snapshot(settings: Any) -> dict:
    """The settings for the actors, with every path absolute (a worker's working folder is not ours)."""
    from pathlib import Path

    snap = settings.model_dump(mode="json")
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, Path):
            snap[name] = str(value.resolve())
    return snap


def register_metrics(registry: Any, pool: RayPool) -> None:
    """Cluster figures in /metrics: actors, items in flight per node, items done."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class _Collector:
        def collect(self):
            st = pool.status() if pool.slots else {"nodes": {}, "actors": 0, "items_done": 0}
            actors = GaugeMetricFamily("edge_agent_cluster_actors", "Ray actors running job items.")
            actors.add_metric([], st["actors"])
            inflight = GaugeMetricFamily("edge_agent_cluster_items_in_flight", "Job items on Ray actors, by node.", labels=["node"])
            for node, row in st["nodes"].items():
                inflight.add_metric([node], row["in_flight"])
            done = CounterMetricFamily("edge_agent_cluster_items", "Job items returned by Ray actors.")
            done.add_metric([], st["items_done"])
            yield from (actors, inflight, done)

        def describe(self):
            return []

    registry.register(_Collector())


class RayPending:
    """One item on an actor: done() never blocks; result() maps a lost actor to a retry."""

    def __init__(self, pool: RayPool, slot: _Slot, ref: Any):
        self.pool, self.slot, self.ref = pool, slot, ref
        self._value: dict | None = None
        self._released = False

    def _settle(self) -> dict:
        if self._value is None:
            ray = _ray()
            lost = False
            try:
                self._value = ray.get(self.ref)
            except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.ObjectLostError,
                    ray.exceptions.NodeDiedError, ray.exceptions.OwnerDiedError) as e:
                self._value, lost = {"retry": f"a Ray worker was lost ({type(e).__name__})"}, True
            except ray.exceptions.TaskCancelledError:
                self._value = {"retry": "cancelled"}
            if not self._released:
                self._released = True
                self.pool._release(self.slot, "ok" in self._value, lost)
        return self._value

    def done(self) -> bool:
        if self._value is not None:
            return True
        ready, _ = _ray().wait([self.ref], timeout=0)
        return bool(ready)

    def result(self, timeout: float | None = None) -> dict:
        if self._value is None and not self.done():
            ready, _ = _ray().wait([self.ref], timeout=timeout)
            if not ready:
                raise TimeoutError("the item is still running")
        value = self._settle()
        if "ok" in value:
            return value["ok"]
        if "retry" in value:
            raise UnavailableError(f"{value['retry']}; the item runs again on another actor")
        raise ItemError(value["error"])

    def cancel(self) -> None:
        if self._value is None:
            try:
                _ray().cancel(self.ref)
            except Exception:  # running on a threaded actor: it finishes and is not committed
                pass
            if not self._released:
                self._released = True
                self.pool._release(self.slot, False)


class RayKind:
    """A kind whose items run on the pool; listing, committing and finishing stay with the owner."""

    def __init__(self, kind: JobKind, pool: RayPool):
        self.kind = kind
        self.pool = pool
        self.name = kind.name
        self.prompt_version = kind.prompt_version

    def validate(self, params: dict, ctx: JobContext) -> dict:
        return self.kind.validate(params, ctx)

    def list_items(self, params: dict, ctx: JobContext, since: float | None):
        return self.kind.list_items(params, ctx, since)

    def start_item(self, item: Item, params: dict, ctx: JobContext) -> RayPending:
        prepare = getattr(self.kind, "remote_item", None)
        if prepare is not None:
            item = prepare(item, params, ctx)  # raises ItemError (e.g. the document is gone)
        return self.pool.submit(self.name, item, params)

    def prepare_run(self, run: RunInfo, items: list[Item], ctx: JobContext) -> dict | None:
        prepare = getattr(self.kind, "prepare_run", None)  # on the owner; the params it returns travel with each item
        return prepare(run, items, ctx) if prepare is not None else None

    def finish_run(self, run: RunInfo, ctx: JobContext) -> None:
        finish = getattr(self.kind, "finish_run", None)
        if finish is not None:
            finish(run, ctx)

    def commit_effect(self, item: Item, result: dict, run_id: str, ctx: JobContext):
        make = getattr(self.kind, "commit_effect", None)
        return make(item, result, run_id, ctx) if make else None


def wrap_kinds(kinds: dict[str, JobKind], pool: RayPool | None) -> dict[str, JobKind]:
    """The kinds a service runs: those in REMOTE_KINDS on the pool when there is one."""
    if pool is None:
        return dict(kinds)
    return {name: RayKind(k, pool) if name in REMOTE_KINDS else k for name, k in kinds.items()}


__all__ = ["RayPool", "RayKind", "RayPending", "RayUnavailableError", "JobWorker", "RemoteEmbedder", "wrap_kinds"]
