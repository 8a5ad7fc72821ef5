#!/usr/bin/env python
"""Usage: python scripts/probe_decode_attention.py [L]

One layer's decode attention, 16 rows at 256 tokens (capacity 512), Gemma 3 270M shapes: onnxruntime's
GroupQueryAttention (share buffer, as the engine binds it) vs plain ops on the same cache (FusedMatMul transB,
mask, Softmax, MatMul), the 4 query heads of a row as one M=4 GEMM against its one kv head."""
import sys, time, statistics
import numpy as np, onnxruntime as ort
from onnx import helper, TensorProto as T

B, NH, NKV, HD, CAP = 16, 4, 1, 256, 512
L = int(sys.argv[1]) if len(sys.argv) > 1 else 256
MS = "com.microsoft"
threads = 2

def sess(nodes, ins, outs):
    g = helper.make_graph(nodes, "g", ins, outs)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "1")
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])

vi = helper.make_tensor_value_info
gqa = sess([helper.make_node("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "seqlens_k", "total"], ["o", "pko", "pvo"],
                              domain=MS, num_heads=NH, kv_num_heads=NKV, scale=1 / 16.0)],
           [vi("q", T.FLOAT, [B, 1, NH * HD]), vi("k", T.FLOAT, [B, 1, NKV * HD]), vi("v", T.FLOAT, [B, 1, NKV * HD]),
            vi("pk", T.FLOAT, [B, NKV, CAP, HD]), vi("pv", T.FLOAT, [B, NKV, CAP, HD]), vi("seqlens_k", T.INT32, [B]), vi("total", T.INT32, [])],
           [vi("o", T.FLOAT, [B, 1, NH * HD]), vi("pko", T.FLOAT, [B, NKV, CAP, HD]), vi("pvo", T.FLOAT, [B, NKV, CAP, HD])])

# plain: q [B,1,NH*HD] -> [B,NKV,NH,HD]; scores = q @ K^T over the first Lc positions (Slice of the cache view: a copy?)
plain = sess([
    helper.make_node("Reshape", ["q", "qs"], ["q4"]),
    helper.make_node("FusedMatMul", ["q4", "pk"], ["s"], domain=MS, transB=1, alpha=1 / 16.0),
    helper.make_node("Add", ["s", "mask"], ["sm"]),
    helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
    helper.make_node("MatMul", ["p", "pv"], ["o4"]),
    helper.make_node("Reshape", ["o4", "os"], ["o"]),
], [vi("q", T.FLOAT, [B, 1, NH * HD]), vi("pk", T.FLOAT, [B, NKV, CAP, HD]), vi("pv", T.FLOAT, [B, NKV, CAP, HD]),
    vi("mask", T.FLOAT, [B, 1, 1, CAP]), vi("qs", T.INT64, [4]), vi("os", T.INT64, [3])],
   [vi("o", T.FLOAT, [B, 1, NH * HD])])

rng = np.random.default_rng(0)
q = rng.standard_normal((B, 1, NH * HD), np.float32)
k = rng.standard_normal((B, 1, HD), np.float32); v = rng.standard_normal((B, 1, HD), np.float32)
pk = rng.standard_normal((B, NKV, CAP, HD), np.float32); pv = rng.standard_normal((B, NKV, CAP, HD), np.float32)
seq = np.full(B, L, np.int32)  # total length - 1
total = np.array(L + 1, np.int32)
mask = np.where(np.arange(CAP)[None, None, None, :] <= L, 0.0, -np.inf).astype(np.float32).repeat(B, 0)

def bound(s, feeds, share):
    io = s.io_binding()
    vals = {n: ort.OrtValue.ortvalue_from_numpy(a) for n, a in feeds.items()}
    for n, a in vals.items():
        io.bind_ortvalue_input(n, a)
    for o in s.get_outputs():
        if share and o.name in share:
            io.bind_ortvalue_output(o.name, vals[share[o.name]])
        else:
            io.bind_output(o.name)
    return io

io1 = bound(gqa, dict(q=q, k=k, v=v, pk=pk.copy(), pv=pv.copy(), seqlens_k=seq, total=total), {"pko": "pk", "pvo": "pv"})
io2 = bound(plain, dict(q=q, pk=pk, pv=pv, mask=mask, qs=np.array([B, NKV, NH, HD], np.int64), os=np.array([B, 1, NH * HD], np.int64)), None)
# correctness (attention over positions 0..L of the cache; GQA writes k/v at position L first, so put them there in the plain copy)
pk2, pv2 = pk.copy(), pv.copy(); pk2[:, 0, L] = k[:, 0]; pv2[:, 0, L] = v[:, 0]
io3 = bound(plain, dict(q=q, pk=pk2, pv=pv2, mask=mask, qs=np.array([B, NKV, NH, HD], np.int64), os=np.array([B, 1, NH * HD], np.int64)), None)
gqa.run_with_iobinding(io1); plain.run_with_iobinding(io3)
print("max |diff|", float(np.abs(io1.copy_outputs_to_cpu()[0] - io3.copy_outputs_to_cpu()[0]).max()))
ta, tb = [], []
for _ in range(200):
    t = time.perf_counter(); gqa.run_with_iobinding(io1); ta.append(time.perf_counter() - t)
    t = time.perf_counter(); plain.run_with_iobinding(io2); tb.append(time.perf_counter() - t)
ma, mb = statistics.median(ta) * 1e3, statistics.median(tb) * 1e3
print(f"L={L} B={B}: GQA {ma:.3f} ms, plain ops (over all {CAP} positions, masked) {mb:.3f} ms, ratio {ma/mb:.2f}x")
