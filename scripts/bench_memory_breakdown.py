#!/usr/bin/env python
"""Where the engine's resident memory goes: libraries, tokenizer, weights, then the key/value cache and
the rest (onnxruntime's arena, logits) while N sequences of P prompt tokens decode G tokens together.

One fresh process, no scheduler and no prefix cache (bench_daemon_memory.py measures the daemon);
RSS from /proc/self/status, the cache's own share from /proc/self/smaps (its buffers are mappings of
their own), so nothing here relies on tracemalloc, which does not see onnxruntime. Prints one JSON object.

    python scripts/bench_memory_breakdown.py                       # models/default, 16 x (512 + 128)
    python scripts/bench_memory_breakdown.py --streams 1
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0)
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
    tok = Tokenizer.from_file(str(bundle.tokenizer_file))
    out["tokenizer_mb"] = trim() - base
    del tok
    base = trim()
    engine = OnnxEngine(bundle, threads=args.threads, max_batch=args.streams, context_length=args.prompt_tokens + args.max_tokens + 1,
                        device="cpu")
    loaded = trim()
    out["engine_loaded_mb"] = loaded
    out["weights_mb"] = loaded - base - out["tokenizer_mb"]  # the session's prepacked weights and what else it holds
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
