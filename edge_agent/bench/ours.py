"""Our engine's side of the benchmark: the daemon's configuration (max_batch slots) and a one-slot
engine beside it, measured one round at a time so the harness can pair each round with llama.cpp's.

Every prompt is cold (no prefix cache), so prefill and time to first token are real work.
"""
from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
from pathlib import Path


from edge_agent.bench.quality import reference_text
from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.prepacked import cache_folder
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import SamplingParams

SWEEP = (1, 4, 8, 16)


def prompt_ids(engine: OnnxEngine, n: int, offset: int = 0) -> list[int]:
    """n tokens of the reference text (BOS first when the model has one), starting `offset` tokens in."""
    ids = engine.encode(reference_text())
    bos = engine.bundle.bos_token_id is not None
    body = ids[1 + offset:] if bos else ids[offset:]
    while len(body) < n:
        body = body + body
    head = ids[:1] if bos else []
    return head + body[: n - len(head)]


def _greedy(n: int) -> SamplingParams:
    return SamplingParams(max_tokens=n, ignore_eos=True)


class OurEngines:
    """A `max_batch`-slot engine as the daemon runs it, and a one-slot engine, both loaded once."""

    def __init__(self, bundle_path: Path, threads: int, max_batch: int, prefill_chunk: int, device: str, quick: bool,
                 int4_head_max_rows: int | None = None):
        bundle = load_bundle(bundle_path, verify=True)
        self.name = bundle.name
        self.bundle = bundle
        self.max_batch = max_batch
        self.n_gen = 32 if quick else 128
        self.steps: list[tuple[int, float]] = []
        self.daemon = BatchScheduler(
            OnnxEngine(bundle, threads=threads, max_batch=max_batch, context_length=2048, device=device,
                       int4_head_max_rows=int4_head_max_rows),
            prefill_chunk=prefill_chunk, prefix_cache_bytes=0, on_step=lambda b, s: self.steps.append((b, s)),
        ).start()
        self.oneslot = BatchScheduler(
            OnnxEngine(bundle, threads=threads, max_batch=1, context_length=2048, device=device,
                       int4_head_max_rows=int4_head_max_rows),
            prefill_chunk=prefill_chunk, prefix_cache_bytes=0,
        ).start()
        self.threads = self.daemon.engine.threads
        for s in (self.daemon, self.oneslot):
            s.generate("Hello", _greedy(4))  # warm-up

    def close(self) -> None:
        self.daemon.stop()
        self.oneslot.stop()

    def _decode(self, sched: BatchScheduler) -> float:
        fin = sched.submit(prompt_ids(sched.engine, 32), _greedy(self.n_gen)).result()
        return fin.usage.decode_tok_s

    def batch(self, n: int, n_prompt: int = 128) -> float:
        """Total decode tokens/s while n sequences decode together (steps at full batch only)."""
        self.steps.clear()
        handles = [self.daemon.submit(prompt_ids(self.daemon.engine, n_prompt, offset=37 * i), _greedy(self.n_gen))
                   for i in range(n)]
        for h in handles:
            h.result()
        full = [s for b, s in self.steps if b == n]
        return n * len(full) / sum(full) if full else 0.0

    def round(self) -> dict[str, float]:
        """One round: decode in the daemon's configuration and in one slot, prefill 512, TTFT, 16 streams."""
        eng = self.daemon.engine
        prefill = self.daemon.submit(prompt_ids(eng, 512), _greedy(1)).result().usage
        ttft = self.daemon.submit(prompt_ids(eng, 128, offset=11), _greedy(1)).result().usage
        return {
            "decode_tok_s": self._decode(self.daemon),
            "decode_1slot_tok_s": self._decode(self.oneslot),
            "prefill_tok_s": 512 / prefill.prefill_s if prefill.prefill_s else 0.0,
            "ttft_ms": 1000 * ttft.ttft_s,
            f"batch{self.max_batch}_tok_s": self.batch(self.max_batch),
        }

    def sweep(self) -> dict[str, float]:
        """Total decode tokens/s at each batch size of SWEEP (below max_batch), once."""
        return {f"batch{n}_tok_s": self.batch(n) for n in SWEEP if n < self.max_batch}


def peak_rss_mb(bundle_path: Path, threads: int, max_batch: int, streams: int, prompt_len: int, n_gen: int,
                prefix_cache_mb: int = 0, int4_head_max_rows: int | None = None, prefix_cache_gives_way: bool = False) -> float:
    """Peak RSS of a fresh process that loads the bundle as the daemon does (max_batch slots, its prefix
    cache budget and whether live sequences take from it first) and runs `streams` sequences of prompt_len + n_gen tokens together (its own process:
    nothing else counts). The daemon's other parts (grammar tokenizer, embedder, HTTP) are not in it:
    scripts/bench_daemon_memory.py measures the daemon itself."""
    code = (f"from pathlib import Path; from edge_agent.bench.ours import _rss_child; "
            f"_rss_child(Path({str(bundle_path)!r}), {threads}, {max_batch}, {streams}, {prompt_len}, {n_gen}, {int(prefix_cache_mb)}, "
            f"{int4_head_max_rows!r}, {bool(prefix_cache_gives_way)!r})")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"memory probe failed: {out.stderr.strip().splitlines()[-1:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_mb"])


def _rss_child(bundle_path: Path, threads: int, max_batch: int, streams: int, prompt_len: int, n_gen: int,
               prefix_cache_mb: int = 0, int4_head_max_rows: int | None = None, prefix_cache_gives_way: bool = False) -> None:
    sched = BatchScheduler(
        OnnxEngine(load_bundle(bundle_path, verify=False), threads=threads, max_batch=max_batch, context_length=2048,
                   int4_head_max_rows=int4_head_max_rows, prepacked_cache=cache_folder(bundle_path)),  # as the daemon loads it
        prefill_chunk=256, prefix_cache_bytes=prefix_cache_mb << 20, prefix_cache_gives_way=prefix_cache_gives_way,
    ).start()
    handles = [sched.submit(prompt_ids(sched.engine, prompt_len, offset=29 * i), _greedy(n_gen)) for i in range(streams)]
    for h in handles:
        h.result()
    sched.stop()
    print(json.dumps({"peak_rss_mb": _vm_hwm_mb()}))


def _vm_hwm_mb() -> float:
    """This process's peak resident set (VmHWM). Not getrusage's ru_maxrss: Linux carries the
    parent's peak across fork + exec into it, so a child would report the benchmark's own."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def paired(ours: list[float], theirs: list[float]) -> dict[str, float]:
    """Median, min and max of the per-round ratios ours[i] / theirs[i]."""
    ratios = [a / b for a, b in zip(ours, theirs) if b]
    if not ratios:
        return {}
    return {"": statistics.median(ratios), "_min": min(ratios), "_max": max(ratios)}


def median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else 0.0


