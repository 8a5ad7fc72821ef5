#!/usr/bin/env python
"""Per-op profile of one prefill of a bundle (onnxruntime's profiler), grouped by what the time is for.

Each node's time is its minimum over --reps prefills (the run least disturbed by other work on a
shared machine); with --threads 1 a node's time is its CPU time, so the shares hold on a busy box.
Prints GOPS for the body matmuls (2 * rows * k * n per layer) to compare with the CPU's peak.
An If (the int8 cache's prompt branch) is shown but not added: its nodes are listed and counted one by one.

Usage: .venv/bin/python scripts/profile_prefill.py [models/default] [--tokens 512] [--reps 5] [--threads 1]
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GROUPS = {
    "GroupQueryAttention": "attention (GroupQueryAttention)",
    "MatMul": "fp32 matmuls (o_proj)",
    "MatMulNBits": "MatMulNBits (blocked o_proj / int4 head)",
    "SimplifiedLayerNormalization": "norms (RMS, skip + RMS)",
    "SkipSimplifiedLayerNormalization": "norms (RMS, skip + RMS)",
    "FastGelu": "activation, rotary", "RotaryEmbedding": "activation, rotary", "Sigmoid": "activation, rotary",
    "Split": "Split copies (qkv, gate/up)",
    "Mul": "Mul (row scales back, act * up)",
    "Abs": "per-row quantization (Abs, ReduceMax, Max, Div, QuantizeLinear)",
    "ReduceMax": "per-row quantization (Abs, ReduceMax, Max, Div, QuantizeLinear)",
    "Max": "per-row quantization (Abs, ReduceMax, Max, Div, QuantizeLinear)",
    "Div": "per-row quantization (Abs, ReduceMax, Max, Div, QuantizeLinear)",
    "QuantizeLinear": "per-row quantization (Abs, ReduceMax, Max, Div, QuantizeLinear)",
}


# An If's time (the int8 cache's prompt branch, models.kv_prompt) is that of the nodes inside it, which the profile
# also lists one by one: shown, not added to the total.
IF_GROUP = "If (the prompt branch: its nodes' time, already counted in the rows above)"


def group(op: str, shapes: str, vocab: int) -> str:
    if op == "MatMulIntegerToFloat":  # builder 2's body (a prefill's head is the int4 MatMulNBits)
        return "int8 body matmuls"
    if op == "If":
        return IF_GROUP
    if op == "DynamicQuantizeMatMul":  # builder 1
        return "int8 output projection (logits)" if str(vocab) in shapes or "[2, " in shapes or "[1, " in shapes else "int8 body matmuls"
    return GROUPS.get(op, f"other ({op})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundle", nargs="?", default="models/default")
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import numpy as np
    import onnxruntime as ort

    from edge_agent.engine.bundle import load_bundle
    from edge_agent.engine.runner import CacheShape, Embedding, OnnxModel

    b = load_bundle(Path(args.bundle), verify=False)
    arch = b.architecture
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
    so.enable_mem_pattern, so.log_severity_level = False, 3
    so.enable_profiling = True
    so.profile_file_prefix = str(Path(tempfile.mkdtemp(prefix="prefill-profile-")) / "profile")
    sess = ort.InferenceSession(str(b.model_file), so, providers=["CPUExecutionProvider"])
    window = int(arch.get("sliding_window") or 0)
    cache = CacheShape(layers=arch["num_layers"], kv_heads=arch["num_kv_heads"], head_dim=arch["head_dim"], slots=1,
                       max_len=args.tokens, windows=tuple(window if local else 0 for local in arch.get("layer_is_local") or []))
    model = OnnxModel(sess, cache, arch["vocab_size"], Embedding(b.path))
    ids = np.random.default_rng(0).integers(1000, min(100000, arch["vocab_size"]), args.tokens)
    for _ in range(args.reps + 1):  # the first is a warm-up
        model.prefill(0, ids, 0)
    path = sess.end_profiling()
    events = json.loads(Path(path).read_text())
    Path(path).unlink()
    first = sorted(e["ts"] for e in events if e.get("cat") == "Session" and e["name"] == "model_run")[1]
    times, where = collections.defaultdict(list), {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["ts"] >= first:
            times[e["name"]].append(e["dur"])
            where[e["name"]] = group(e["args"]["op_name"], json.dumps(e["args"].get("input_type_shape")), arch["vocab_size"])
    by = collections.defaultdict(float)
    for name, ts in times.items():
        by[where[name]] += min(ts)
    total = sum(v for k, v in by.items() if k != IF_GROUP)
    n = args.tokens
    print(f"{b.name}: prefill {n} tokens, {args.threads} thread(s), min of {args.reps} per node: {total / 1000:.1f} ms "
          f"({n / (total / 1e6):.0f} tok/s); load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    print("| what | ms | share |\n| --- | --- | --- |")
    for k, v in sorted(by.items(), key=lambda x: (x[0] == IF_GROUP, -x[1])):
        print(f"| {k} | {v / 1000:.1f} | {100 * v / total:.1f}% |")
    d, f, layers = arch["hidden_size"], arch["intermediate_size"], arch["num_layers"]
    qkv = (arch["num_heads"] + 2 * arch["num_kv_heads"]) * arch["head_dim"]
    o_ops = 2 * n * layers * arch["num_heads"] * arch["head_dim"] * d
    int8_ops = 2 * n * layers * (d * qkv + d * 2 * f + f * d)  # qkv, gate/up, down
    if not by.get("fp32 matmuls (o_proj)"):  # builder 2 quantizes o_proj too
        int8_ops += o_ops
    if by.get("int8 body matmuls"):
        print(f"int8 body matmuls: {int8_ops / (by['int8 body matmuls'] / 1e6) / 1e9:.0f} GOPS on {args.threads} thread(s)")
    if by.get("fp32 matmuls (o_proj)"):
        print(f"fp32 o_proj: {o_ops / (by['fp32 matmuls (o_proj)'] / 1e6) / 1e9:.0f} GFLOPS on {args.threads} thread(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
