#!/usr/bin/env python
"""Where the engine's resident memory goes: libraries, tokenizer, weights, then the key/value cache and
the rest (onnxruntime's arena, logits) while N sequences of P prompt tokens decode G tokens together.

One fresh process, no scheduler and no prefix cache (bench_daemon_memory.py measures the daemon);
RSS from /proc/self/status, the cache's own share from /proc/self/smaps (its buffers are mappings of
their own; the weights mapped from the saved prepacked file: weights_mapped_mb), so nothing here relies on tracemalloc, which does not see onnxruntime. Prints one JSON object.

    python scripts/bench_memory_breakdown.py                       # models/default, 16 x (512 + 128)
    python scripts/bench_memory_breakdown.py --streams 1
    python scripts/bench_memory_breakdown.py --parts --streams 0   # the daemon's other parts, no decoding
    python scripts/bench_memory_breakdown.py --prepacked-cache none  # weights prepacked at load (before engine/prepacked.py)

--parts: also what the daemon's parts beside the engine cost, each an RSS delta after malloc_trim: the
plain-encoding twin of the tokenizer, the tokenizer's live heap (glibc's in-use bytes: the rest of its
RSS is fragmentation left by the JSON parse), and the two parts loaded on first use
(services/on_demand.py): llguidance's grammar tokenizer and the embedding model (its weights, its
chunking tokenizer), with their load times.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def resident_mb(starts: set[int]) -> float:
    """Resident MB of the mappings that begin at the given addresses."""
    total, current = 0, None
    for line in open("/proc/self/smaps"):
        parts = line.split()
        if not parts[0].endswith(":") and "-" in parts[0]:
            current = int(parts[0].split("-")[0], 16)
        elif parts[0] == "Rss:" and current in starts:
            total += int(parts[1])
    return total / 1024


def peak_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def mapped_weights_mb() -> float:
    """Resident MB of this process's mappings of graph weight files (*.data)."""
    total, current = 0, False
    for line in open("/proc/self/smaps"):
        parts = line.split()
        if not parts[0].endswith(":") and "-" in parts[0]:
            current = len(parts) > 5 and parts[-1].endswith(".data")
        elif parts[0] == "Rss:" and current:
            total += int(parts[1])
    return total / 1024


def heap_in_use_mb() -> float:
    """glibc's bytes in use (small chunks and mmapped ones), MB."""
    class Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Mallinfo2
    m = libc.mallinfo2()
    return (m.uordblks + m.hblkhd) / 2**20


def parts(engine, settings, trim) -> dict[str, float]:
    """RSS deltas (MB) and load times (s) of the daemon's parts beside the engine."""
    import time

    from edge_agent.engine.tokens import plain_twin
    from edge_agent.rag.embedder import build_embedder
    from edge_agent.services.constrained import grammar_tokenizer

    out: dict[str, float] = {}
    base = trim()
    plain_twin(engine.tokenizer)
    out["plain_twin_mb"] = trim() - base
    import llguidance  # noqa: F401  (the library itself is not the part)

    base = trim()
    t = time.perf_counter()
    grammar_tokenizer(engine.tokenizer, engine.vocab_size, engine.stop_token_ids)
    out["grammar_tokenizer_s"] = time.perf_counter() - t
    out["grammar_tokenizer_mb"] = trim() - base
    base = trim()
    emb = build_embedder(settings, load=False)
    out["embedder_checked_mb"] = trim() - base
    t = time.perf_counter()
    emb.embed(["The invoice is overdue."])
    out["embedder_first_embed_s"] = time.perf_counter() - t
    out["embedder_weights_mb"] = trim() - base - out["embedder_checked_mb"]
    base = trim()
    emb.tokenizer
    out["embedder_chunking_tokenizer_mb"] = trim() - base
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--parts", action="store_true", help="also the daemon's other parts (see above)")
    ap.add_argument("--prepacked-cache", default=None,
                    help="folder of the saved prepacked weights (default: the daemon's, engine/prepacked.py cache_folder; 'none': prepack at load)")
    ap.add_argument("--data-dir", default=None, help="data_dir with the prepared embedding model (default: the settings')")
    args = ap.parse_args()
    out: dict[str, float | str] = {"start_mb": rss_mb()}

    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    from edge_agent.config import Settings
    from edge_agent.engine.bundle import load_bundle
    from edge_agent.engine.engine import OnnxEngine

    def trim() -> float:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        return rss_mb()

    out["libraries_mb"] = trim() - out["start_mb"]
    bundle = load_bundle(Settings(model=args.model).bundle_path(), verify=False)
    base = trim()
    heap_before = heap_in_use_mb()
    tok = Tokenizer.from_file(str(bundle.tokenizer_file))
    out["tokenizer_mb"] = trim() - base
    if args.parts:
        out["tokenizer_heap_in_use_mb"] = heap_in_use_mb() - heap_before
    del tok
    base = trim()
    from edge_agent.engine.prepacked import cache_folder

    cache = None if args.prepacked_cache == "none" else Path(args.prepacked_cache) if args.prepacked_cache else cache_folder(bundle.path)
    engine = OnnxEngine(bundle, threads=args.threads, max_batch=args.streams, context_length=args.prompt_tokens + args.max_tokens + 1,
                        device="cpu", prepacked_cache=cache)
    loaded = trim()
    out["engine_loaded_mb"] = loaded
    out["weights_mb"] = loaded - base - out["tokenizer_mb"]  # the session's prepacked weights and what else it holds
    out["load_peak_mb"] = peak_mb()  # loading the session can peak above where it settles
    if args.parts:
        out.update(parts(engine, Settings(model=args.model, **({"data_dir": args.data_dir} if args.data_dir else {})), trim))
    if args.streams < 1:
        out["load"] = open("/proc/loadavg").read().split()[0]
        print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()}))
        return 0
    model = engine.model
    rng = np.random.default_rng(0)
    chunk = 256
    for slot in range(args.streams):
        ids = rng.integers(1000, engine.vocab_size - 1000, args.prompt_tokens)
        for at in range(0, args.prompt_tokens, chunk):
            model.prefill(slot, ids[at: at + chunk], at)
    lengths = np.full(args.streams, args.prompt_tokens)
    for _ in range(args.max_tokens):
        model.decode(rng.integers(1000, engine.vocab_size - 1000, args.streams), lengths)
        lengths += 1
    peak = rss_mb()
    out["weights_mapped_mb"] = mapped_weights_mb()  # saved prepacked weights (and graph data) the steps have read
    out["peak_mb"] = peak_mb()
    kv = resident_mb({b.ctypes.data for b in model.keys + model.values})
    out.update(
        streams=args.streams, prompt_tokens=args.prompt_tokens, max_tokens=args.max_tokens, onnxruntime=ort.__version__,
        at_end_mb=peak, kv_cache_mb=kv, kv_per_token_kb=model.host_position_bytes / 1024,
        logits_buffer_mb=model.logits.nbytes / 2**20, arena_and_rest_mb=peak - loaded - kv,
        load=open("/proc/loadavg").read().split()[0],
    )
    print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
