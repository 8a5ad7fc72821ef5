#!/usr/bin/env python
"""Is onnxruntime's MatMulNBits (accuracy_level 4) batch invariant, and what does a row cost? One node with random
weights per shape: each row's output alone and among 3, 5, 7 and 16 rows must be bit-identical (the engine's rule:
a sequence decodes the same tokens alone and in a batch), and the median time of 1, 2, 4 and 16 rows.

    python scripts/probe_nbits_invariance.py [--bits 8] [--blocks 16,32,64,128,256] [--threads 2]

Why it exists: the body as 8-bit blocks (one node a projection instead of the per-row scaling's seven) made a
one-row decode step 1.26x faster with blocks of 128/256, but those blocks are not batch invariant here
(onnxruntime 1.32, AVX512-VNNI: an odd last row goes through another kernel); the invariant blocks (<= 64) gain
little (README, Performance: "Tried and not adopted"). Run it again on a new onnxruntime.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

SHAPES = ((640, 1536), (640, 4096), (1024, 640), (2048, 640), (128, 96))  # Gemma 3 270M's qkv, gate_up, o, down; a tiny one


def session(k: int, n: int, block: int, bits: int, threads: int, rng: np.random.Generator) -> ort.InferenceSession:
    blocks = -(-k // block)
    q = rng.integers(0, 256, (n, blocks, block * bits // 8), dtype=np.uint8)
    s = rng.random(n * blocks).astype(np.float32) * 0.01 + 0.001
    node = helper.make_node("MatMulNBits", ["x", "w", "s"], ["y"], domain="com.microsoft", K=k, N=n, bits=bits,
                            block_size=block, accuracy_level=4)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", n])],
                          [numpy_helper.from_array(q, "w"), numpy_helper.from_array(s, "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    return ort.InferenceSession(m.SerializeToString(), o, providers=["CPUExecutionProvider"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", type=int, default=8, choices=(4, 8))
    ap.add_argument("--blocks", default="16,32,64,128,256")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"onnxruntime {ort.__version__}, {args.bits}-bit, {args.threads} threads, load {open('/proc/loadavg').read().split()[0]}")
    for block in (int(b) for b in args.blocks.split(",")):
        for k, n in SHAPES:
            if k % block:
                continue
            se = session(k, n, block, args.bits, args.threads, rng)
            x = rng.standard_normal((16, k)).astype(np.float32)
            full = se.run(None, {"x": x})[0]
            diff = max(float(np.abs(se.run(None, {"x": x[i:i + 1]})[0] - full[i]).max()) for i in range(16))
            diff = max(diff, *(float(np.abs(se.run(None, {"x": x[:m]})[0] - full[:m]).max()) for m in (3, 5, 7)))
            us = {}
            for m in (1, 2, 4, 16):
                for _ in range(10):
                    se.run(None, {"x": x[:m]})
                ts = []
                for _ in range(100):
                    t = time.perf_counter()
                    se.run(None, {"x": x[:m]})
                    ts.append(time.perf_counter() - t)
                us[m] = round(1e6 * statistics.median(ts), 1)
            print(f"block {block:3d}  K {k:4d} N {n:4d}  {'invariant' if diff == 0 else f'NOT invariant (max diff {diff:.3g})':34s}"
                  f"  us at 1/2/4/16 rows: {us[1]} / {us[2]} / {us[4]} / {us[16]}")


if __name__ == "__main__":
    main()
