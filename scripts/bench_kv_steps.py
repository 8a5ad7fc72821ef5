#!/usr/bin/env python
"""Raw engine steps of two bundles, alternating A/B step by step (medians of per-pair ratios B/A).

    python scripts/bench_kv_steps.py models/default /tmp/kv-int8
"""
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from edge_agent.engine.bundle import load_bundle  # noqa: E402
from edge_agent.engine.engine import OnnxEngine  # noqa: E402

print("load before", open("/proc/loadavg").read().split()[:3], flush=True)
engs = [OnnxEngine(load_bundle(p, verify=False), threads=2, max_batch=16, context_length=1024) for p in sys.argv[1:3]]
rng = np.random.default_rng(0)
ids = rng.integers(1000, 200000, (16, 512))
res = {}


def t(f):
    s = time.perf_counter()
    f()
    return time.perf_counter() - s



pre = {"prefill_chunk0": [], "prefill_chunk256": []}
for slot in range(16):
    for key, at in (("prefill_chunk0", 0), ("prefill_chunk256", 256)):
        pre[key].append([t(lambda e=e: e.model.prefill(slot, ids[slot, at:at + 256], at)) for e in engs])
res.update(pre)
for rows, key in ((16, "decode16_at512"), (1, "decode1_at512")):
    res[key] = []
    lengths = np.full(rows, 512)
    for step in range(24):
        tok = rng.integers(1000, 200000, rows)
        pair = []
        for e in (engs if step % 2 == 0 else engs[::-1]):
            pair.append(t(lambda e=e: e.model.decode(tok, lengths)))
        res[key].append(pair if step % 2 == 0 else pair[::-1])
        if rows == 1 or step % 2:
            lengths = lengths + (1 if rows == 16 and step % 2 else 0)
out = {"load_after": open("/proc/loadavg").read().split()[:3]}
for k, v in res.items():
    r = [b / a for a, b in v]
    out[k] = {"a_ms": round(statistics.median(a for a, _ in v) * 1e3, 2), "b_ms": round(statistics.median(b for _, b in v) * 1e3, 2),
              "time_ratio_b_a": round(statistics.median(r), 3), "min": round(min(r), 3), "max": round(max(r), 3), "n": len(r)}
print(json.dumps(out, indent=1))
