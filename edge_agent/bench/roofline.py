"""The roofline of a decode step: weight bytes read per token, and this machine's memory bandwidth.

Decoding one token reads every weight once (the KV cache and activations are small beside
them at these lengths), so a memory-bound engine decodes at about bandwidth / bytes per token.
"""
from __future__ import annotations

import threading
import time

import numpy as np


def bytes_per_token(bundle) -> int:
    """Weight bytes one decode step reads: the graph's weights plus one embedding row (int8 + scale)."""
    graph = sum(p.stat().st_size for name, p in bundle.files.items() if name.startswith("model.onnx"))
    if bundle.lm_head == "dual":  # one stream takes the int4 head: the int8 one (int8 rows, a scale each) stays unread
        arch = bundle.architecture
        graph -= int(arch["vocab_size"]) * (int(arch["hidden_size"]) + 4)
    embed = bundle.files.get("embed.npy")
    row = 0
    if embed is not None:
        table = np.load(embed, mmap_mode="r")
        row = int(table.shape[1] * table.dtype.itemsize) + 4
    return int(graph + row)


def machine_gb_s(threads: int = 1, mbytes: int = 256, rounds: int = 5) -> float:
    """Copy bandwidth in GB/s (bytes read + written), `threads` threads each copying its share; best round."""
    n = (mbytes << 20) // 8
    src = np.ones(n, np.float64)
    dst = np.empty_like(src)
    parts = np.array_split(np.arange(n), max(1, threads))
    bounds = [(int(p[0]), int(p[-1]) + 1) for p in parts if p.size]

    def copy(lo: int, hi: int) -> None:
        np.copyto(dst[lo:hi], src[lo:hi])  # releases the GIL

    best = 0.0
    for _ in range(rounds):
        workers = [threading.Thread(target=copy, args=b) for b in bounds]
        t = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        best = max(best, 2 * src.nbytes / (time.perf_counter() - t) / 1e9)
    return best
