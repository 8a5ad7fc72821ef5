#!/usr/bin/env python
"""The output projection alone: the int8 head as onnx_builder writes it against MatMulNBits int4 layouts.

    python scripts/bench_lm_head.py [BUNDLE] [BLOCK:SYM:LEVEL:PARTS ...]   e.g. 32:a:4:1 32:s:4:1 64:a:4:2

Weights: the bundle's (tied) embedding table, de-quantized. Prints each variant's error against
x @ W in fp32 for random rows, then the time at 1 and 16 rows as the median of paired alternating
rounds, as a ratio to the int8 head (absolute figures from a shared machine do not compare).
SYM is s (symmetric) or a (zero points); LEVEL is MatMulNBits' accuracy_level; PARTS splits the vocabulary.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge_agent.models import onnx_builder as ob  # noqa: E402
from edge_agent.models.int4 import quantize_int4  # noqa: E402


def graphs(w: np.ndarray, specs: list[str]) -> dict[str, ob._Graph]:
    d, v = w.shape
    out = {}
    g = ob._Graph(True)
    q, s = ob.quantize_columns(w)
    blocks = np.array_split(np.arange(v), max(1, -(-q.nbytes // ob.LM_HEAD_PART_BYTES)))
    ws = [g.init(f"w{i}", np.ascontiguousarray(q[:, b])) for i, b in enumerate(blocks)]
    ss = [g.init(f"s{i}", s[b]) for i, b in enumerate(blocks)]
    g.nodes.append(helper.make_node("Identity", [g.int8_matmul("inputs_embeds", ws, ss, d, v)], ["logits"]))
    out["int8"] = g
    for spec in specs:
        blk, sym, acc, parts = spec.split(":")
        g = ob._Graph(True)
        outs = []
        for i, b in enumerate(np.array_split(np.arange(v), int(parts))):
            p, sc, z = quantize_int4(w[:, b], int(blk), sym == "s")
            ins = ["inputs_embeds", g.init(f"b{i}", p), g.init(f"s{i}", sc)] + ([g.init(f"z{i}", z)] if z is not None else [])
            outs.append(g.op1("MatMulNBits", ins, domain=ob.MS, K=d, N=len(b), bits=4, block_size=int(blk), accuracy_level=int(acc)))
        g.nodes.append(helper.make_node("Identity", [outs[0] if len(outs) == 1 else g.op1("Concat", outs, axis=-1)], ["logits"]))
        out[spec] = g
    return out


def session(g: ob._Graph, d: int, v: int, folder: Path, name: str) -> ort.InferenceSession:
    graph = helper.make_graph(g.nodes, name, [helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT, ["b", d])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["r", v])], g.inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ob.OPSET), helper.make_opsetid(ob.MS, 1)])
    m.ir_version = 10
    path = folder / f"{name}.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, location=f"{name}.data", size_threshold=1024)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads, so.log_severity_level = 2, 1, 3
    so.add_session_config_entry("session.intra_op.allow_spinning", "1")
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def main() -> int:
    args = sys.argv[1:]
    bundle = Path(args.pop(0)) if args and ":" not in args[0] else Path("models/default")
    emb = np.load(bundle / "embed.npy", mmap_mode="r")
    scale = np.load(bundle / "embed_scale.npy")
    v, d = emb.shape
    w = np.ascontiguousarray((np.asarray(emb, np.float32) * scale[:, None]).T)  # [D, V]
    print("load before", open("/proc/loadavg").read().strip())
    with tempfile.TemporaryDirectory() as td:
        sess = {k: session(g, d, v, Path(td), f"m{i}") for i, (k, g) in enumerate(graphs(w, args or ["32:a:4:1"]).items())}
        rng = np.random.default_rng(0)
        xs = {r: rng.standard_normal((r, d)).astype(np.float32) for r in (1, 16)}
        for k, s in sess.items():
            y = s.run(None, {"inputs_embeds": xs[16]})[0][:16]
            ref = xs[16] @ w
            print(f"{k:12s} max |error| / max |logit| {np.abs(y - ref).max() / np.abs(ref).max():.4f}")
        res = {(k, r): [] for k in sess for r in (1, 16)}
        for _ in range(7):
            for r in (1, 16):
                for k, s in sess.items():
                    s.run(None, {"inputs_embeds": xs[r]})
                    t = time.perf_counter()
                    for _ in range(10):
                        s.run(None, {"inputs_embeds": xs[r]})
                    res[(k, r)].append((time.perf_counter() - t) / 10 * 1000)
    for r in (1, 16):
        for k in sess:
            ratios = [a / b for a, b in zip(res[(k, r)], res[("int8", r)])]
            print(f"rows {r:2d} {k:12s} {statistics.median(res[(k, r)]):7.2f} ms, time vs int8 median "
                  f"{statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f})")
    print("load after", open("/proc/loadavg").read().strip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
