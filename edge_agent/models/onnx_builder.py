"""Write a decoder-only transformer as one ONNX graph built for our engine.

The graph takes `inputs_embeds` (see embedding_table), `position_ids`, `seqlens_k` (total length - 1 per row),
`total_seq_len` and one key/value buffer per layer of shape [batch, kv_heads,
max_len, head_dim]. Attention is onnxruntime's GroupQueryAttention, which
writes new keys and values into that same buffer in place (the engine binds
past and present to one OrtValue), so no step copies the cache. Only the last
position's logits leave the graph: [batch, vocab].

Linear layers are int8 with one scale per output channel; activations are
quantized per row (per token) on the fly, so results do not depend on batch
composition (see _Graph.int8_matmul). The output projection may instead be int4 blocks
(build_model's lm_head="int4": onnxruntime's MatMulNBits, layout in models/int4.py), which
reads 107 MB per token instead of 168 MB on Gemma 3 270M but alone raised perplexity from 1.024x
to 1.072x fp32; tied to the embedding, the graph also returns the hidden state so that the engine
re-scores the logits that matter from the exact int8 rows (engine.rescore). The
embedding table is an int8 array with one scale per row, kept outside the
graph and read row by row by the engine (see engine.runner.Embedding).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edge_agent.models.int4 import quantize_int4
from edge_agent.models.kv_prompt import split_prompt_attention
from edge_agent.models.spec import ArchSpec

OPSET = 21
MS = "com.microsoft"
DATA_FILE = "model.onnx.data"


def quantize_columns(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per column of w [in, out]: returns (q int8 [in, out], scale float32 [out])."""
    amax = np.abs(w).max(axis=0)
    scale = (amax / 127.0).astype(np.float32)
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return q, scale


# Linear layers kept out of the per-channel int8 scheme unless keep_fp32_format is "int8". The
# attention output feeding o_proj has outlier channels that per-token int8 quantization crushes: on
# Gemma 3 270M (512 tokens of CPython's licence) all-int8 perplexity was +2.9% over fp32, +0.5% with
# o_proj in fp32 (+0.8% with down_proj instead); fp32 costs 35 MB and about 3 ms per decode step.
# New bundles smooth the activations instead (models.smoothing) and keep every layer int8.
KEEP_FP32 = ("self_attn.o_proj",)
# How those layers are stored (a bundle build option, recorded in the manifest):
#   "fp32": a plain MatMul (bundles built before the option);
#   "int8-block32": onnxruntime's MatMulNBits with 8-bit weights in blocks of 32 input rows (one scale
#   each) and accuracy_level 4, which quantizes the activations to int8 per block of 32 as well, so
#   an outlier channel spoils only its own block (and a row never depends on the other rows);
#   "int8": per output channel like every other linear layer (with its input smoothed, see models.smoothing).
KEEP_FP32_FORMATS = ("fp32", "int8-block32", "int8")
BLOCK8 = 32
# Largest block of the int8 output projection (see build_model). Blocks cost kernel
# start-ups: Gemma 3's projection profiled at ~16 ms per decode step in 4 blocks against
# ~15 ms whole (onnxruntime profiler, 60 steps, 2 threads, same machine).
LM_HEAD_PART_BYTES = 48 << 20
# The int4 head's blocks (MatMulNBits): Gemma 3's 84 MB of packed weights as one node. Two 42 MB halves
# made a 16-row decode step slower (scripts/bench_rescore.py, 2 parts vs 1, 9 paired rounds at load 12-14:
# 1 part 0.91x the step time at 16 rows, 1.01x at 1 row; bench_lm_head.py, head alone: 1.18x against
# 0.99x of the int8 head at 16 rows). Peak RSS (bench.ours.peak_rss_mb, 512 + 128 tokens): 1 stream
# 538 MB in 1 part, 523 in 2, 533 for the int8 head; 16 streams 849 / 862 / 892 MB.
LM_HEAD_INT4_PART_BYTES = 128 << 20
# (The dual head's int4 half in 48 MB parts lowered the peak while loading by 10 MB only: 704 against
# 715 MB, Gemma 3 270M; one part it is.)
# The output projection's formats (build_model's lm_head): "int8" per column as every other linear
# layer, or "int4" blocks through MatMulNBits (see edge_agent.models.int4) with int8 compute
# (accuracy_level 4: the activations are quantized per row and per block, so a row's logits do
# not depend on the other rows of its batch).
# "dual" stores both, tied to the embedding, behind an If node on the boolean input HEAD_SELECT: the
# engine takes the int4 head (its top logits re-scored exactly) for steps of few rows, where reading
# fewer bytes wins, and the int8 head for many rows, where MatMulNBits is the slower kernel; the body
# runs once either way and each head's weights are loaded (and prepacked) once.
LM_HEAD_FORMATS = ("int8", "int4", "dual")
INT4_ACCURACY_LEVEL = 4
HEAD_SELECT = "lm_head_int4"
# Transformer-body layers that may be stored as int4 blocks instead of int8 per channel (build_model's
# int4_layers; the kinds of models.smoothing): MatMulNBits like the int4 head, accuracy_level 4, so each row's
# activations are quantized per block of its own and a row's result does not depend on the other rows
# (Gemma 3 270M, gate_up and down int4: 16 sequences x 40 greedy tokens, the final hidden state bit-identical
# alone and in one 16-row step; scripts/probe_int4_body.py invariance). Not the default, measured on Gemma 3 270M
# (bench perplexity, 2048 tokens, fp32 5.932; real bundles with the dual head, the default 1.016x): gate_up int4
# 1.073x, down 1.085x, both 1.141x, o_proj 1.026x. Weight-only emulation (probe_int4_body.py emulate; all-int8
# 1.006x there), cost in perplexity for bytes saved per token: gate_up +4.0% at best for 17 MB (scale search;
# blocks of 16 +3.3% for 10 MB), down +3.8% for 8.5 MB (unsmoothed; smoothed +6.7%), qkv +2.2% for 6.3 MB,
# o_proj +1.0% for 4.2 MB, against a 3% budget of which the default uses 1.6%. The GGUF's gate/up are 5-bit
# (Q5_0) and half its down layers Q6_K: int4 drops bits the source has. Speed against the default
# (probe_int4_body.py speed, 15 paired rounds, load 1.1 -> 2.1): gate_up + down int4 1-row step 0.92x
# (0.69-2.1), 16 rows 1.08x, prefill 512 1.36x (MatMulNBits is the slower kernel for many rows); o_proj int4
# alone (9 rounds, load 5.4 -> 5.8): 1.06x, 1.13x, 1.29x.
INT4_LAYERS = {"qkv": "self_attn.qkv", "o": "self_attn.o_proj", "gate_up": "mlp.gate_up", "down": "mlp.down_proj"}
# The key/value cache's formats (build_model's kv_cache): "fp32", or quantized by GroupQueryAttention itself
# (onnxruntime >= 1.32, CPU): "int8" one byte a value, "int4" two values a byte (uint8, low nibble first,
# stored as value + 8), each with one static scale per kv head and channel (PER_CHANNEL, inputs k_scale and
# v_scale) calibrated at build time (models.kv_cache). Element type and last dimension of the cache buffers:
KV_CACHE_FORMATS = {"fp32": (TensorProto.FLOAT, 1), "int8": (TensorProto.INT8, 1), "int4": (TensorProto.UINT8, 2)}
KV_CACHE_BITS = {"int8": 8, "int4": 4}
# The activations of every int8 matmul, each row divided by its own max |value| (so in [-1, 1]), are quantized
# with this fixed scale and zero point: the parameters DynamicQuantizeLinear derives from the range [-1, 1].
# Graphs of builder 1 pinned that range with a constant guard row [-1, 1, 0, ..] appended to the rows of a
# DynamicQuantizeMatMul (and sliced off after it; the int8 head kept it as an extra row of logits); a static
# QuantizeLinear + MatMulIntegerToFloat gives bit-identical outputs (default model: every logit of 16-row and
# 1-row decode steps at 256 and 512 tokens) with 1050 -> 815 nodes and no extra row to multiply. Gemma 3 270M,
# decode step CPU time, 1 thread, 30 paired steps (scripts/bench_step_pairs.py, load 8 -> 6.7): 1 row at 512
# tokens 1.126x faster (1.08-1.18), 16 rows at 256 1.021x (0.99-1.06), 16 rows at 512 1.026x (0.98-1.09).
A_SCALE = np.float32(2.0) / np.float32(255.0)
A_ZERO = 127  # 0 - (-1) / A_SCALE = 127.49999 in float32 (128 gives the same: no value reaches the clip)


class _Graph:
    def __init__(self, quantize: bool, keep_fp32: tuple[str, ...] = KEEP_FP32, keep_fp32_format: str = "fp32", prefix: str = "",
                 int4_layers: tuple[str, ...] = (), int4_block: int = 32, int4_symmetric: bool = False):
        if keep_fp32_format not in KEEP_FP32_FORMATS:
            raise ValueError(f"unknown format {keep_fp32_format!r} for {', '.join(keep_fp32)}: use one of {', '.join(KEEP_FP32_FORMATS)}")
        unknown = [k for k in int4_layers if k not in INT4_LAYERS]
        if unknown:
            raise ValueError(f"unknown int4 layer kind {unknown[0]!r}: use some of {', '.join(INT4_LAYERS)}")
        self.int4_layers = tuple(INT4_LAYERS[k] for k in int4_layers)
        self.int4_block = int4_block
        self.int4_symmetric = int4_symmetric
        self.quantize = quantize
        self.keep_fp32 = keep_fp32
        self.keep_fp32_format = keep_fp32_format
        self.prefix = prefix  # before every name: a branch's names must differ from the outer graph's
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0
        self._row_q: dict[str, tuple[str, str]] = {}
        self._c: dict[str, str] = {}

    def name(self, base: str) -> str:
        self._n += 1
        return f"{self.prefix}{base}_{self._n}"

    def init(self, name: str, arr: np.ndarray) -> str:
        name = self.prefix + name
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, domain: str = "", **attrs) -> list[str]:
        outs = [self.name(op_type) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name(op_type + "_node"), domain=domain, **attrs))
        return outs

    def op1(self, op_type: str, inputs: list[str], domain: str = "", **attrs) -> str:
        return self.op(op_type, inputs, 1, domain, **attrs)[0]

    def const(self, arr: np.ndarray, base: str = "const") -> str:
        return self.init(self.name(base), arr)

    def _consts(self) -> dict[str, str]:
        if not self._c:
            self._c = {
                "axis": self.init("q.axis", np.array([-1], np.int64)),
                "eps": self.init("q.eps", np.array(1e-12, np.float32)),
                # the activations' fixed quantization: values in [-1, 1] (each row scaled by its max |v|) to uint8
                "a_scale": self.init("q.a_scale", A_SCALE),
                "a_zero": self.init("q.a_zero", np.array(A_ZERO, np.uint8)),
            }
        return self._c

    def normalized_rows(self, x: str) -> tuple[str, str]:
        """x [.., k] as uint8 with each row (last axis) scaled to max |v| = 1, and the row scales [.., 1]."""
        if x not in self._row_q:
            c = self._consts()
            amax = self.op1("Max", [self.op1("ReduceMax", [self.op1("Abs", [x]), c["axis"]], keepdims=1), c["eps"]])
            xq = self.op1("QuantizeLinear", [self.op1("Div", [x, amax]), c["a_scale"], c["a_zero"]])
            self._row_q[x] = (xq, amax)
        return self._row_q[x]

    def int8_matmul(self, x: str, qweight: str | list[str], wscale: str | list[str], k: int, n: int) -> str:
        """x [.., k] float @ int8 weight [k, n] (per-column scales) -> float [.., n].

        Activations are quantized per row (per token), so a sequence's numbers do not
        depend on which other sequences share its batch, and one outlier token cannot
        crush the rest: every row is divided by its own max |value|, quantized with the
        fixed scale A_SCALE and zero point A_ZERO (QuantizeLinear), multiplied by one
        MatMulIntegerToFloat (prepacked u8 x s8 GEMM with fused scaling) and scaled back.
        Lists of weights and scales are column blocks of one matrix, multiplied one by one
        and concatenated (see LM_HEAD_PART_BYTES).
        """
        c = self._consts()
        xq, amax = self.normalized_rows(x)
        ws = zip(qweight, wscale) if isinstance(qweight, list) else [(qweight, wscale)]
        parts = [self.op1("MatMulIntegerToFloat", [xq, w, c["a_scale"], s, c["a_zero"]], domain=MS) for w, s in ws]
        y = parts[0] if len(parts) == 1 else self.op1("Concat", parts, axis=-1)
        return self.op1("Mul", [y, amax])

    def block8_matmul(self, x: str, w: np.ndarray, base: str) -> str:
        """x [.., k] @ w [k, n] as MatMulNBits: 8-bit symmetric weights, one scale per block of BLOCK8 inputs."""
        k, n = w.shape
        blocks = -(-k // BLOCK8)
        wt = np.zeros((n, blocks * BLOCK8), np.float32)
        wt[:, :k] = w.T
        wt = wt.reshape(n, blocks, BLOCK8)
        scale = (np.abs(wt).max(axis=-1) / 127.0).astype(np.float32)
        scale[scale == 0] = 1.0
        q = (np.clip(np.rint(wt / scale[..., None]), -127, 127) + 128).astype(np.uint8)  # zero point 128 (the default)
        return self.op1(
            "MatMulNBits", [x, self.init(base + ".q8", q), self.init(base + ".q8scale", scale.reshape(-1))], domain=MS,
            K=k, N=n, bits=8, block_size=BLOCK8, accuracy_level=4,
        )

    def int4_matmul(self, x: str, w: np.ndarray, base: str, block: int | None = None, symmetric: bool | None = None) -> str:
        """x [.., k] @ w [k, n] as MatMulNBits int4 blocks of `block` inputs (default int4_block; layout: models.int4),
        with a zero point per block unless symmetric (default int4_symmetric), int8 compute."""
        k, n = w.shape
        block = block or self.int4_block
        packed, scales, zp = quantize_int4(w, block, self.int4_symmetric if symmetric is None else symmetric)
        ins = [x, self.init(base + ".qweight4", packed), self.init(base + ".scale", scales)]
        if zp is not None:
            ins.append(self.init(base + ".zero_point", zp))
        return self.op1("MatMulNBits", ins, domain=MS, K=k, N=n, bits=4, block_size=block, accuracy_level=INT4_ACCURACY_LEVEL)

    def linear(self, x: str, w: np.ndarray, bias: np.ndarray | None, base: str) -> str:
        """x @ w (+ bias), w given as [in, out] float32."""
        kept = self.keep_fp32_format != "int8" and any(base.endswith(k) for k in self.keep_fp32)
        if self.quantize and any(base.endswith(k) for k in self.int4_layers):
            y = self.int4_matmul(x, w, base)
        elif self.quantize and not kept:
            q, scale = quantize_columns(w)
            y = self.int8_matmul(x, self.init(base + ".qweight", q), self.init(base + ".scale", scale), w.shape[0], w.shape[1])
        elif self.quantize and self.keep_fp32_format == "int8-block32":
            y = self.block8_matmul(x, w, base)
        else:
            y = self.op1("MatMul", [x, self.init(base + ".weight", w.astype(np.float32))])
        if bias is not None:
            y = self.op1("Add", [y, self.init(base + ".bias", bias.astype(np.float32))])
        return y

    def rms(self, x: str, w: np.ndarray, eps: float, base: str) -> str:
        return self.op1("SimplifiedLayerNormalization", [x, self.init(base, w.astype(np.float32))], axis=-1, epsilon=eps)

    def skip_rms(self, x: str, skip: str, w: np.ndarray, eps: float, base: str) -> tuple[str, str]:
        """Returns (rms(x + skip) * w, x + skip)."""
        out, _, _, total = self.op(
            "SkipSimplifiedLayerNormalization", [x, skip, self.init(base, w.astype(np.float32))], 4, MS, epsilon=eps
        )
        return out, total


def _weights_getter(state: Mapping[str, np.ndarray]) -> Callable[[str], np.ndarray | None]:
    prefixes = ["model.", "model.language_model.", "language_model.model.", ""]

    def get(name: str) -> np.ndarray | None:
        for p in prefixes:
            if p + name in state:
                return np.asarray(state[p + name], dtype=np.float32)
        return None

    return get


def build_model(
    spec: ArchSpec,
    state: Mapping[str, np.ndarray],
    rope: dict[str, tuple[np.ndarray, np.ndarray]],
    quantize: bool = True,
    lm_head_part_bytes: int | None = None,
    lm_head: str = "int8",
    int4_block: int = 32,
    int4_symmetric: bool = False,
    keep_fp32_format: str = "fp32",
    rescore: dict[str, float] | None = None,
    int4_layers: tuple[str, ...] = (),
    kv_cache: str = "fp32",
    kv_scales: list[tuple[np.ndarray, np.ndarray]] | None = None,
) -> onnx.ModelProto:
    """Build the ONNX graph from HF-named weights (numpy, [out, in] linear layout).

    The int8 output projection is stored as column blocks of at most
    lm_head_part_bytes: onnxruntime holds a weight's file copy and its prepacked copy
    at once while it loads, so one 168 MB block (Gemma 3) added 160 MB to the peak
    resident memory of every start; 48 MB blocks add 42 MB.
    lm_head "int4" stores it as MatMulNBits blocks of int4_block input values instead (with a
    zero point per block unless int4_symmetric), in parts of LM_HEAD_INT4_PART_BYTES; the graph then has no
    guard row of logits. lm_head "dual" stores both (tied heads only) and takes the boolean input
    HEAD_SELECT: true runs the int4 head, false the int8 one (both [batch, vocab] logits).
    Ignored without quantize.

    keep_fp32_format: how the KEEP_FP32 layers of an int8 graph are stored (KEEP_FP32_FORMATS).
    int4_layers: kinds of body layers (INT4_LAYERS' keys) stored as MatMulNBits int4 blocks like the int4
    head (int4_block, int4_symmetric) instead of int8 per channel; ignored without quantize.

    An int4 (or dual) head tied to the embedding makes the graph also return "hidden" (the final normed state
    of each row's last position, [batch, hidden_size]) for the engine's re-scoring (engine.rescore);
    rescore ({"margin": .., "max_candidates": ..}) is written into the graph's metadata for it.

    kv_cache: the key/value cache's format (KV_CACHE_FORMATS); a quantized one takes kv_scales, per layer
    (key scale, value scale), each [kv_heads, head_dim] float32 (a stored value times its scale is the key or
    value; keys after RoPE, see models.kv_cache).

    Raises KeyError naming the first weight the checkpoint lacks, ValueError for an unknown format, an
    untied dual head or missing cache scales.
    """
    if lm_head not in LM_HEAD_FORMATS:
        raise ValueError(f"unknown output projection format {lm_head!r}: use one of {', '.join(LM_HEAD_FORMATS)}")
    if kv_cache not in KV_CACHE_FORMATS:
        raise ValueError(f"unknown key/value cache format {kv_cache!r}: use one of {', '.join(KV_CACHE_FORMATS)}")
    cache_type, per_byte = KV_CACHE_FORMATS[kv_cache]
    if kv_cache != "fp32" and (kv_scales is None or len(kv_scales) != spec.num_layers
                               or any(np.shape(a) != (spec.num_kv_heads, spec.head_dim) for ks in kv_scales for a in ks)):
        raise ValueError(f"a {kv_cache} key/value cache needs a key and a value scale [kv_heads, head_dim] for each of the {spec.num_layers} layers")
    g = _Graph(quantize, keep_fp32_format=keep_fp32_format, int4_layers=tuple(int4_layers), int4_block=int4_block, int4_symmetric=int4_symmetric)
    get = _weights_getter(state)

    def need(name: str) -> np.ndarray:
        w = get(name)
        if w is None:
            raise KeyError(f"checkpoint has no weight {name!r}")
        return w

    off = spec.norm_offset
    d, hd, nh, nkv = spec.hidden_size, spec.head_dim, spec.num_heads, spec.num_kv_heads
    vocab = spec.vocab_size

    cos_g = g.init("rope.global.cos", rope["global"][0])
    sin_g = g.init("rope.global.sin", rope["global"][1])
    if rope["local"] is rope["global"]:
        cos_l, sin_l = cos_g, sin_g
    else:
        cos_l = g.init("rope.local.cos", rope["local"][0])
        sin_l = g.init("rope.local.sin", rope["local"][1])

    # --- embedding: looked up outside the graph (see Embedding), so the output
    # projection's int8 matrix has a single user and onnxruntime can drop it after prepacking
    embed = need("embed_tokens.weight")[:vocab]  # [V, D]
    lm_w_f = get("lm_head.weight")
    lm = embed if spec.tie_embeddings or lm_w_f is None else lm_w_f[:vocab]
    h = "inputs_embeds"
    int4_head = quantize and lm_head == "int4"
    dual = quantize and lm_head == "dual"
    if dual and lm is not embed:
        raise ValueError("the dual output projection needs a head tied to the embedding (its int4 logits are re-scored from the int8 rows): use int8")

    if spec.qk_norm:
        shape_q = g.const(np.array([0, 0, nh, hd], np.int64))
        shape_k = g.const(np.array([0, 0, nkv, hd], np.int64))
        shape_flat_q = g.const(np.array([0, 0, nh * hd], np.int64))
        shape_flat_k = g.const(np.array([0, 0, nkv * hd], np.int64))
    split_qkv = g.const(np.array([nh * hd, nkv * hd, nkv * hd], np.int64))
    split_mlp = g.const(np.array([spec.intermediate_size, spec.intermediate_size], np.int64))

    inputs = [
        helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT, ["batch", "seq", d]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["batch"]),
        helper.make_tensor_value_info("total_seq_len", TensorProto.INT32, []),
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["logit_rows", vocab])]
    # an int4 head tied to the (int8, per-row scaled) embedding: the engine re-scores the logits that can
    # matter from those exact rows and the final hidden state (see engine.rescore), so the graph returns it
    rescored = (int4_head and lm is embed) or dual
    if dual:
        inputs.append(helper.make_tensor_value_info(HEAD_SELECT, TensorProto.BOOL, []))
    if rescored:
        outputs.append(helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", d]))

    x = g.rms(h, need("layers.0.input_layernorm.weight") + off, spec.rms_eps, "layers.0.input_layernorm")
    for i in range(spec.num_layers):
        p = f"layers.{i}."
        local = bool(spec.layer_is_local[i]) if spec.layer_is_local else False
        # attention projections, fused into one matmul
        wq, wk, wv = need(p + "self_attn.q_proj.weight"), need(p + "self_attn.k_proj.weight"), need(p + "self_attn.v_proj.weight")
        bias = None
        if spec.qkv_bias:
            bq, bk, bv = (get(p + f"self_attn.{n}_proj.bias") for n in "qkv")
            if bq is not None:
                bias = np.concatenate([bq, bk, bv])
        qkv = g.linear(x, np.concatenate([wq, wk, wv], axis=0).T, bias, p + "self_attn.qkv")
        q, k, v = g.op("Split", [qkv, split_qkv], 3, axis=-1)
        if spec.qk_norm:
            q = g.op1("Reshape", [g.rms(g.op1("Reshape", [q, shape_q]), need(p + "self_attn.q_norm.weight") + off, spec.rms_eps, p + "q_norm"), shape_flat_q])
            k = g.op1("Reshape", [g.rms(g.op1("Reshape", [k, shape_k]), need(p + "self_attn.k_norm.weight") + off, spec.rms_eps, p + "k_norm"), shape_flat_k])
        cos, sin = (cos_l, sin_l) if local else (cos_g, sin_g)
        q = g.op1("RotaryEmbedding", [q, "position_ids", cos, sin], domain=MS, num_heads=nh, interleaved=0)
        k = g.op1("RotaryEmbedding", [k, "position_ids", cos, sin], domain=MS, num_heads=nkv, interleaved=0)
        pk, pv = f"past_key_{i}", f"past_value_{i}"
        for name in (pk, pv):
            inputs.append(helper.make_tensor_value_info(name, cache_type, ["batch", nkv, "max_len", hd // per_byte]))
        attrs = dict(num_heads=nh, kv_num_heads=nkv, scale=float(spec.attn_scale))
        gqa_in = [q, k, v, pk, pv, "seqlens_k", "total_seq_len"]
        if kv_cache != "fp32":
            ks, vs = (np.asarray(a, np.float32).reshape(1, nkv, 1, hd) for a in kv_scales[i])
            gqa_in += ["", "", "", "", "", g.init(f"{p}k_scale", ks), g.init(f"{p}v_scale", vs)]
            attrs.update(k_quant_type="PER_CHANNEL", v_quant_type="PER_CHANNEL", kv_cache_bit_width=KV_CACHE_BITS[kv_cache])
        if local and spec.sliding_window:
            attrs["local_window_size"] = int(spec.sliding_window)
        if spec.attn_softcap:
            attrs["softcap"] = float(spec.attn_softcap)
        attn, present_k, present_v = g.op(
            "GroupQueryAttention", gqa_in, 3, MS, **attrs
        )
        g.nodes[-1].output[1] = f"present_key_{i}"
        g.nodes[-1].output[2] = f"present_value_{i}"
        for name in (f"present_key_{i}", f"present_value_{i}"):
            outputs.append(helper.make_tensor_value_info(name, cache_type, ["batch", nkv, "max_len", hd // per_byte]))
        o = g.linear(attn, need(p + "self_attn.o_proj.weight").T, None, p + "self_attn.o_proj")
        if spec.sandwich_norm:
            o = g.rms(o, need(p + "post_attention_layernorm.weight") + off, spec.rms_eps, p + "post_attention_layernorm")
            x, h = g.skip_rms(o, h, need(p + "pre_feedforward_layernorm.weight") + off, spec.rms_eps, p + "pre_feedforward_layernorm")
        else:
            x, h = g.skip_rms(o, h, need(p + "post_attention_layernorm.weight") + off, spec.rms_eps, p + "post_attention_layernorm")
        # MLP: gate and up fused
        gu = np.concatenate([need(p + "mlp.gate_proj.weight"), need(p + "mlp.up_proj.weight")], axis=0).T
        gate, up = g.op("Split", [g.linear(x, gu, None, p + "mlp.gate_up"), split_mlp], 2, axis=-1)
        if spec.activation == "gelu_tanh":
            act = g.op1("FastGelu", [gate], domain=MS)
        else:
            act = g.op1("Mul", [gate, g.op1("Sigmoid", [gate])])
        m = g.linear(g.op1("Mul", [act, up]), need(p + "mlp.down_proj.weight").T, None, p + "mlp.down_proj")
        if spec.sandwich_norm:
            m = g.rms(m, need(p + "post_feedforward_layernorm.weight") + off, spec.rms_eps, p + "post_feedforward_layernorm")
        if i + 1 < spec.num_layers:
            nxt = f"layers.{i + 1}.input_layernorm"
            x, h = g.skip_rms(m, h, need(nxt + ".weight") + off, spec.rms_eps, nxt)
        else:
            x, h = g.skip_rms(m, h, need("norm.weight") + off, spec.rms_eps, "norm")

    # only the last position of each row leaves the graph
    last = g.op1(
        "Slice",
        [x, g.const(np.array([-1], np.int64)), g.const(np.array([np.iinfo(np.int64).max], np.int64)), g.const(np.array([1], np.int64))],
    )
    last = g.op1("Squeeze", [last, g.const(np.array([1], np.int64))])  # [B, D]
    if rescored:
        g.nodes.append(helper.make_node("Identity", [last], ["hidden"], name="hidden_out"))
    int4_args = (last, lm, d, int4_block, int4_symmetric, lm_head_part_bytes or LM_HEAD_INT4_PART_BYTES, spec.final_softcap)
    int8_args = (last, lm, d, vocab, lm_head_part_bytes or LM_HEAD_PART_BYTES, spec.final_softcap)
    if dual:
        # the heads' weights are the outer graph's initializers, used from the branches: onnxruntime 1.32 prepacks
        # them either way, but frees the file copy only of an outer one (Gemma 3 270M: 880 MB resident after
        # loading with the weights inside the branches, 634 MB outside, 485 MB for the int8 head alone)
        g4, g8 = _Graph(True, prefix="head4/"), _Graph(True, prefix="head8/")
        branches = ((g4, _int4_head(g4, *int4_args), "lm_head_int4"), (g8, _int8_head(g8, *int8_args), "lm_head_int8"))
        for sub, _, _ in branches:
            g.inits.extend(sub.inits)
        then_g, else_g = (helper.make_graph(sub.nodes, name, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)])
                          for sub, out, name in branches)
        g.nodes.append(helper.make_node("If", [HEAD_SELECT], ["logits"], name="lm_head_select", then_branch=then_g, else_branch=else_g))
    else:
        if int4_head:
            logits = _int4_head(g, *int4_args)
        elif quantize:
            logits = _int8_head(g, *int8_args)
        else:
            logits = _softcap(g, g.op1("MatMul", [last, g.init("lm_head.weight", np.ascontiguousarray(lm.T))]), spec.final_softcap)
        g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits_out"))

    graph = helper.make_graph(g.nodes, f"edge_agent_{spec.arch}", inputs, outputs, g.inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(MS, 1)], producer_name="edge-agent"
    )
    model.ir_version = 10
    int4_name = f"int4-b{int4_block}" + ("-sym" if int4_symmetric else "")
    # graphs of builder 1 appended a guard row to the int8 head's logits (see A_SCALE); none has one now
    props = {"edge_agent.logit_guard_row": "0",
             "edge_agent.lm_head": int4_name if int4_head else f"dual:{int4_name}+int8" if dual else ("int8" if quantize else "fp32"),
             "edge_agent.kv_cache": kv_cache}
    if quantize and int4_layers:
        props["edge_agent.int4_layers"] = f"{','.join(int4_layers)}:{int4_name}"
    if rescored:
        # exact head row n = embed.npy row n * embed_scale.npy[n] / rescore_divisor (Gemma folds sqrt(d) into the scale)
        props["edge_agent.rescore_divisor"] = repr(float(np.float32(spec.embed_scale)))
        if spec.final_softcap:
            props["edge_agent.final_softcap"] = repr(float(spec.final_softcap))
        for key, value in (rescore or {}).items():
            props[f"edge_agent.rescore_{key}"] = repr(value)
    onnx.helper.set_model_props(model, props)
    if kv_cache == "int8":
        split_prompt_attention(model)  # prompt steps attend in fp32 (models.kv_prompt)
    return model


def _softcap(g: _Graph, logits: str, cap: float | None) -> str:
    """cap * tanh(logits / cap), or logits without a cap."""
    if not cap:
        return logits
    c = g.const(np.array(cap, np.float32))
    return g.op1("Mul", [g.op1("Tanh", [g.op1("Div", [logits, c])]), c])


def _int4_head(g: _Graph, last: str, lm: np.ndarray, d: int, block: int, symmetric: bool, part: int, cap: float | None) -> str:
    """Logits [B, V] of last [B, D] through lm [V, D] as MatMulNBits int4 blocks (in parts of `part` bytes)."""
    vocab = lm.shape[0]
    blocks = np.array_split(np.arange(vocab), max(1, -(-(vocab * -(-d // block) * block // 2) // part)))
    names = ["lm_head"] if len(blocks) == 1 else [f"lm_head.{i}" for i in range(len(blocks))]
    outs = [g.int4_matmul(last, lm[b].T, n, block, symmetric) for n, b in zip(names, blocks)]
    return _softcap(g, outs[0] if len(outs) == 1 else g.op1("Concat", outs, axis=-1), cap)


def _int8_head(g: _Graph, last: str, lm: np.ndarray, d: int, vocab: int, part: int, cap: float | None) -> str:
    """Logits [B, V] of last [B, D] through lm [V, D] as int8 per row, in column blocks of `part` bytes."""
    lm_q, lm_scale = quantize_columns(lm.T)  # [D, V], [V]
    blocks = np.array_split(np.arange(vocab), max(1, -(-lm_q.nbytes // part)))
    names = ["lm_head"] if len(blocks) == 1 else [f"lm_head.{i}" for i in range(len(blocks))]
    lm_w = [g.init(f"{n}.qweight", np.ascontiguousarray(lm_q[:, b])) for n, b in zip(names, blocks)]
    lm_s = [g.init(f"{n}.scale", lm_scale[b]) for n, b in zip(names, blocks)]
    return _softcap(g, g.int8_matmul(last, lm_w, lm_s, d, vocab), cap)


def embedding_table(spec: ArchSpec, state: Mapping[str, np.ndarray], quantize: bool = True) -> dict[str, np.ndarray]:
    """The token embedding as arrays for the engine: int8 rows + per-row scale (Gemma's sqrt(d) folded in), or fp32."""
    embed = _weights_getter(state)("embed_tokens.weight")
    if embed is None:
        raise KeyError("checkpoint has no weight 'embed_tokens.weight'")
    embed = embed[: spec.vocab_size]
    if not quantize:
        return {"embed": (embed * np.float32(spec.embed_scale)).astype(np.float32)}
    q, scale = quantize_columns(embed.T)
    return {"embed": np.ascontiguousarray(q.T), "embed_scale": (scale * np.float32(spec.embed_scale)).astype(np.float32)}


def save_embedding(arrays: dict[str, np.ndarray], folder: Path) -> list[Path]:
    """Write each embedding array as `<name>.npy` (the engine reads rows of it with pread)."""
    paths = []
    for name, arr in arrays.items():
        paths.append(folder / f"{name}.npy")
        np.save(paths[-1], arr)
    return paths


def save_model(model: onnx.ModelProto, folder: Path) -> list[Path]:
    """Write model.onnx plus its weights file into folder; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location=DATA_FILE, size_threshold=1024)
    return [path, folder / DATA_FILE]
