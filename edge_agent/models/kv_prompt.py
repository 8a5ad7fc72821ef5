"""Prompt steps over an int8 key/value cache at the speed of an fp32 one.

onnxruntime 1.32's CPU GroupQueryAttention attends a multi-token query to a quantized cache far more slowly
than to an fp32 one (README: prompts prefilled at 0.64-0.74x, TTFT 109-137 ms against 83-88 ms), while a one-token
decode step is as fast or faster on it. `split_prompt_attention` puts each quantized GroupQueryAttention behind an
If on the boolean input PROMPT_STEP (bound true by the engine for a prompt step of one sequence and more than one
token):
- false (decode steps): the node as it was;
- true (prompt steps): the filled part of the past dequantized to fp32, the new keys and values rounded to the
  cache's int8 grid (so they attend as the cache will hold them), fp32 GroupQueryAttention, and the new
  positions' int8 values scattered into the cache in place (ScatterND with its output bound to its input buffer
  writes only those positions: no other page of the cache is touched).
Both branches leave the same bytes in the cache, and attention that differs from the int8 kernel's only in the
order of its sums. The prompt branch takes one row (B = 1), the new positions ending at total_seq_len.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PROMPT_STEP = "prompt_step"
_QUANT_ATTRS = ("k_quant_type", "v_quant_type", "kv_cache_bit_width")
_K_SCALE, _V_SCALE = 12, 13  # GroupQueryAttention's k_scale and v_scale inputs


def _int8_gqa(node: onnx.NodeProto) -> bool:
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return node.op_type == "GroupQueryAttention" and attrs.get("kv_cache_bit_width") == 8


def split_prompt_attention(model: onnx.ModelProto) -> bool:
    """Put every int8-cache GroupQueryAttention of `model` behind an If on PROMPT_STEP, in place (module doc).
    Returns whether the graph had one (False: unchanged). Its scales must be initializers [1, kv_heads, 1, head_dim]."""
    g = model.graph
    at = [i for i, n in enumerate(g.node) if _int8_gqa(n)]
    if not at:
        return False
    inits = {t.name: t for t in g.initializer}
    nkv, hd = numpy_helper.to_array(inits[g.node[at[0]].input[_K_SCALE]]).shape[1::2]

    def init(name: str, arr: np.ndarray) -> str:
        g.initializer.append(numpy_helper.from_array(np.array(arr), name))  # np.array keeps a 0-d scalar 0-d
        return name

    def node(op: str, ins: list[str], out: str, nodes: list, **attrs) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out + "_node", **attrs))
        return out

    # shared by every layer, in the outer graph: where the new positions go (one row)
    top: list[onnx.NodeProto] = []
    one64, axis2 = init("kvp.one", np.array(1, np.int64)), init("kvp.axis2", np.array([2], np.int64))
    zero1 = init("kvp.zero1", np.array([0], np.int64))
    n_new = node("Gather", [node("Shape", [g.node[at[0]].input[0]], "kvp.qshape", top), one64], "kvp.n_new", top, axis=0)
    total = node("Cast", ["total_seq_len"], "kvp.total", top, to=TensorProto.INT64)
    start = node("Sub", [total, n_new], "kvp.start", top)
    pos = node("Range", [start, total, one64], "kvp.pos", top)  # [S]
    # indices [1, kv_heads, S, 3] of (0, head, position): ScatterND's updates are [1, kv_heads, S, head_dim]
    shape = node("Concat", [init("kvp.nkv", np.array([nkv], np.int64)), node("Unsqueeze", [n_new, zero1], "kvp.s1", top),
                            init("kvp.one1", np.array([1], np.int64))], "kvp.ishape", top, axis=0)  # [kv_heads, S, 1]
    heads = node("Expand", [init("kvp.heads", np.arange(nkv, dtype=np.int64).reshape(nkv, 1, 1)), shape], "kvp.h", top)
    posx = node("Expand", [node("Unsqueeze", [pos, init("kvp.ax02", np.array([0, 2], np.int64))], "kvp.pos3", top), shape], "kvp.p", top)
    zeros = node("Expand", [init("kvp.z3", np.zeros((1, 1, 1), np.int64)), shape], "kvp.z", top)
    idx = node("Unsqueeze", [node("Concat", [zeros, heads, posx], "kvp.idx3", top, axis=-1), zero1], "kvp.idx", top)
    start1 = node("Unsqueeze", [start, zero1], "kvp.start1", top)
    one_f, z8 = init("kvp.one_f", np.array(1.0, np.float32)), init("kvp.z8", np.array(0, np.int8))
    bhsd = init("kvp.bhsd", np.array([0, 0, nkv, hd], np.int64))

    new_nodes = list(g.node[:at[0]]) + top
    for j, n in enumerate(g.node[at[0]:], at[0]):
        if j not in at:
            new_nodes.append(n)
            continue
        p = f"kvp{j}."
        ins = list(n.input) + [""] * (14 - len(n.input))
        q, k, v, past_k, past_v = ins[:5]
        scales = {}
        for kind, i in (("k", _K_SCALE), ("v", _V_SCALE)):
            s = numpy_helper.to_array(inits[ins[i]])
            scales[kind] = (ins[i], init(p + kind + "_flat", s.reshape(-1)))
        body: list[onnx.NodeProto] = []
        deq, fq, upd = {}, {}, {}
        for kind, past, new in (("k", past_k, k), ("v", past_v, v)):
            full, flat = scales[kind]
            filled = node("Slice", [past, zero1, start1, axis2], p + kind + "_filled", body)
            deq[kind] = node("Mul", [node("Cast", [filled], p + kind + "_f", body, to=TensorProto.FLOAT), full], p + kind + "_deq", body)
            # Div and a per-tensor QuantizeLinear: onnxruntime 1.32's per-axis QuantizeLinear is ~20x slower
            qn = node("QuantizeLinear", [node("Div", [new, flat], p + kind + "_div", body), one_f, z8], p + kind + "_q", body)
            fq[kind] = node("Mul", [node("Cast", [qn], p + kind + "_qf", body, to=TensorProto.FLOAT), flat], p + kind + "_fq", body)
            upd[kind] = node("Transpose", [node("Reshape", [qn, bhsd], p + kind + "_q4", body)], p + kind + "_upd", body, perm=[0, 2, 1, 3])
        attrs = [a for a in n.attribute if a.name not in _QUANT_ATTRS]
        gqa_in = [q, fq["k"], fq["v"], deq["k"], deq["v"]] + ins[5:12]
        while gqa_in and not gqa_in[-1]:
            gqa_in.pop()
        fp = helper.make_node("GroupQueryAttention", gqa_in, [p + "attn", p + "pk", p + "pv"], name=p + "gqa", domain=n.domain)
        fp.attribute.extend(attrs)
        body.append(fp)
        out_k = node("ScatterND", [past_k, idx, upd["k"]], p + "present_k", body)
        out_v = node("ScatterND", [past_v, idx, upd["v"]], p + "present_v", body)
        then_out = [p + "attn", out_k, out_v]
        kernel = helper.make_node(n.op_type, list(n.input), [p + "kattn", p + "kpk", p + "kpv"], name=p + "int8_gqa", domain=n.domain)
        kernel.attribute.extend(n.attribute)
        else_out = [p + "kattn", p + "kpk", p + "kpv"]
        outs = lambda names: [helper.make_tensor_value_info(x, TensorProto.FLOAT if x.endswith("attn") else TensorProto.INT8, None) for x in names]
        new_nodes.append(helper.make_node(
            "If", [PROMPT_STEP], list(n.output), name=p + "select",
            then_branch=helper.make_graph(body, p + "prompt", [], outs(then_out)),
            else_branch=helper.make_graph([kernel], p + "decode", [], outs(else_out))))
    del g.node[:]
    g.node.extend(new_nodes)
    g.input.append(helper.make_tensor_value_info(PROMPT_STEP, TensorProto.BOOL, []))
    return True
