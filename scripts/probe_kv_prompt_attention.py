"""Probe (models/kv_prompt.py): one layer's attention over an int8 cache behind an If: the prompt branch dequantizes the past and runs fp32
GQA (new keys/values fake-quantized first), the decode branch is onnxruntime's int8 GQA. In place? Overhead? Equal?"""
import sys, time, numpy as np, onnxruntime as ort
from onnx import helper, TensorProto, numpy_helper
NH, NKV, HD, MAXLEN = 4, 1, 256, 640
MS = "com.microsoft"
r0 = np.random.default_rng(0)
ks = (r0.random((1, NKV, 1, HD)).astype(np.float32) * 0.05 + 0.01)
vs = (r0.random((1, NKV, 1, HD)).astype(np.float32) * 0.05 + 0.01)
CT = TensorProto.INT8
ATTRS = dict(num_heads=NH, kv_num_heads=NKV, scale=0.0625)

def vi(n, t, shape): return helper.make_tensor_value_info(n, t, shape)

def int8_nodes(outs):
    return [helper.make_node("GroupQueryAttention", ["q", "k", "v", "past_key", "past_value", "seqlens_k", "total_seq_len", "", "", "", "", "", "ks", "vs"], outs, domain=MS,
                             k_quant_type="PER_CHANNEL", v_quant_type="PER_CHANNEL", kv_cache_bit_width=8, **ATTRS)]

def deq_nodes(outs, tag):
    n = []
    for p, s in (("past_key", "ks"), ("past_value", "vs")):
        n += [helper.make_node("Cast", [p], [p + tag + "_f"], to=TensorProto.FLOAT), helper.make_node("Mul", [p + tag + "_f", s], [p + tag + "_d"])]
    for x, s in (("k", "ks_flat"), ("v", "vs_flat")):  # fake-quantize the new keys/values as the cache will hold them
        n += [helper.make_node("QuantizeLinear", [x, s, "z8v"], [x + tag + "_q"], axis=-1), helper.make_node("DequantizeLinear", [x + tag + "_q", s, "z8v"], [x + tag + "_fq"], axis=-1)]
    n.append(helper.make_node("GroupQueryAttention", ["q", "k" + tag + "_fq", "v" + tag + "_fq", "past_key" + tag + "_d", "past_value" + tag + "_d", "seqlens_k", "total_seq_len"], [outs[0], "pk" + tag, "pv" + tag], domain=MS, **ATTRS))
    for x, s, o in (("pk" + tag, "ks", outs[1]), ("pv" + tag, "vs", outs[2])):
        n += [helper.make_node("Div", [x, s], [x + "_s"]), helper.make_node("QuantizeLinear", [x + "_s", "one", "z8"], [o])]
    return n

def model(mode):
    ins = [vi("q", TensorProto.FLOAT, ["b", "s", NH * HD]), vi("k", TensorProto.FLOAT, ["b", "s", NKV * HD]), vi("v", TensorProto.FLOAT, ["b", "s", NKV * HD]),
           vi("past_key", CT, ["b", NKV, "m", HD]), vi("past_value", CT, ["b", NKV, "m", HD]), vi("seqlens_k", TensorProto.INT32, ["b"]), vi("total_seq_len", TensorProto.INT32, [])]
    outs = [vi("attn", TensorProto.FLOAT, ["b", "s", NH * HD]), vi("present_key", CT, ["b", NKV, "m", HD]), vi("present_value", CT, ["b", NKV, "m", HD])]
    inits = [numpy_helper.from_array(ks, "ks"), numpy_helper.from_array(vs, "vs"), numpy_helper.from_array(ks.reshape(-1), "ks_flat"), numpy_helper.from_array(vs.reshape(-1), "vs_flat"),
             numpy_helper.from_array(np.array(1.0, np.float32), "one"), numpy_helper.from_array(np.array(0, np.int8), "z8"), numpy_helper.from_array(np.zeros(HD, np.int8), "z8v")]
    O = ["attn", "present_key", "present_value"]
    if mode == "int8":
        nodes = int8_nodes(O)
    else:
        ins.append(vi("prompt", TensorProto.BOOL, []))
        sub_o = lambda t: [vi(f"a{t}", TensorProto.FLOAT, None), vi(f"k{t}", CT, None), vi(f"v{t}", CT, None)]
        then_g = helper.make_graph(deq_nodes([f"aT", "kT", "vT"], "T"), "then", [], sub_o("T"))
        else_g = helper.make_graph(int8_nodes(["aE", "kE", "vE"]), "else", [], sub_o("E"))
        nodes = [helper.make_node("If", ["prompt"], O, then_branch=then_g, else_branch=else_g)]
    g = helper.make_graph(nodes, mode, ins, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])

so = ort.SessionOptions(); so.intra_op_num_threads = 2
so.log_severity_level = 3
S = {m: ort.InferenceSession(model(m).SerializeToString(), so, providers=["CPUExecutionProvider"]) for m in ("int8", "if")}

def state(b, past, seed):
    r = np.random.default_rng(seed)
    pk = np.zeros((b, NKV, MAXLEN, HD), np.int8); pv = np.zeros_like(pk)
    pk[:, :, :past] = r.integers(-100, 100, (b, NKV, past, HD)); pv[:, :, :past] = r.integers(-100, 100, (b, NKV, past, HD))
    return pk, pv

def step(mode, pk, pv, past, new, seed, prompt=None):
    b = pk.shape[0]; r = np.random.default_rng(seed + 1)
    q = r.standard_normal((b, new, NH * HD)).astype(np.float32); k = r.standard_normal((b, new, HD)).astype(np.float32); v = r.standard_normal((b, new, HD)).astype(np.float32)
    s = S[mode]; io = s.io_binding()
    ko = ort.OrtValue.ortvalue_from_numpy(pk); vo = ort.OrtValue.ortvalue_from_numpy(pv)
    io.bind_cpu_input("q", q); io.bind_cpu_input("k", k); io.bind_cpu_input("v", v)
    io.bind_ortvalue_input("past_key", ko); io.bind_ortvalue_input("past_value", vo)
    io.bind_cpu_input("seqlens_k", np.full(b, past + new - 1, np.int32)); io.bind_cpu_input("total_seq_len", np.array(past + new, np.int32))
    if prompt is not None: io.bind_cpu_input("prompt", np.array(prompt))
    io.bind_ortvalue_output("present_key", ko); io.bind_ortvalue_output("present_value", vo); io.bind_output("attn", "cpu")
    t = time.process_time(); s.run_with_iobinding(io); dt = time.process_time() - t
    return dt, io.get_outputs()[2].numpy()

if __name__ == "__main__":
    for b, past, new in ((1, 0, 256), (1, 256, 256), (1, 0, 512), (16, 512, 1), (1, 512, 1)):
        res = {}
        for mode, prompt in (("int8", None), ("if", new > 1), ("if", False)):
            ts = []
            for rep in range(9):
                pk, pv = state(b, past, 7)
                dt, attn = step(mode, pk, pv, past, new, 7, prompt)
                ts.append(dt)
            res[(mode, prompt)] = (np.median(ts) * 1e3, attn, pk.copy(), pv.copy())
        base = res[("int8", None)]
        pk, pv = base[2], base[3]
        r = np.random.default_rng(8); q = r.standard_normal((b, new, NH * HD)).astype(np.float32)
        K = pk[:, 0, :past + new].astype(np.float32) * ks[0, 0]; V = pv[:, 0, :past + new].astype(np.float32) * vs[0, 0]
        qh = q.reshape(b, new, NH, HD)
        sc = np.einsum("bshd,btd->bhst", qh, K) * 0.0625
        mask = np.arange(past + new)[None, :] > (past + np.arange(new))[:, None]
        sc = np.where(mask[None, None], -np.inf, sc); p = np.exp(sc - sc.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
        ref = np.einsum("bhst,btd->bshd", p, V).reshape(b, new, NH * HD)
        print("  ref vs " + ", ".join(f"{k[0]}/{k[1]} {np.abs(v[1] - ref).max():.1e}" for k, v in res.items()))
        msg = []
        for key, (t, attn, pk, pv) in res.items():
            msg.append(f"{key[0]}/{key[1]} {t:.2f} ms cpu, attn diff {np.abs(attn - base[1]).max():.1e}, cache k equal {(pk == base[2]).mean():.5f} v {(pv == base[3]).mean():.5f}")
        print(f"b {b} past {past} new {new}:\n  " + "\n  ".join(msg), flush=True)
