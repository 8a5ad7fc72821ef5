"""SmoothQuant scales folded into a checkpoint's weights: flatter int8 activations, the same network.

Activations are quantized per token (onnx_builder._Graph.int8_matmul): a row's few large channels
set its scale and the small ones lose their precision. For each linear layer's input channel c,
s_c = max|x_c|^alpha / max|W_c|^(1 - alpha) (x: the fp32 model's activations on calibration text);
the input is divided by s_c where a per-channel factor already sits upstream, and the weight's input
rows are multiplied by s_c, so in exact arithmetic nothing changes:
- q/k/v projections and gate/up projections: the RMSNorm weight before them ((w + offset) / s - offset);
- down_proj: up_proj's output rows (act(gate) * up / s);
- o_proj: v_proj's output rows (and bias). Attention output is softmax(q k^T) v for each query head,
  linear in v's channels, and nothing sits between it and o_proj (q/k norms and RoPE touch only q and
  k), so v's channel c of kv head j divided by s scales channel c of every query head that shares j.
The layers s is folded into are quantized per output channel, so their int8 weights are unchanged
(only their scales move). Gemma 3 270M, bench perplexity on 2048 tokens (fp32 5.932): see
importer.DEFAULT_SMOOTH_ALPHA for the measured effect.
"""
from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from edge_agent.models.spec import ArchSpec

# Calibration text: the docstrings of these standard-library modules (real prose and code that every
# install has, and none of the bench's perplexity text), up to CALIBRATION_TOKENS tokens each.
CALIBRATION_MODULES = ("statistics", "re", "configparser", "sys", "heapq", "csv", "ssl", "http.client",
                       "wave", "site", "socket", "hashlib", "copy", "uuid", "timeit", "pydoc")
CALIBRATION_TOKENS = 256
_HOOKED = re.compile(r"layers\.(\d+)\.(self_attn\.q_proj|self_attn\.o_proj|mlp\.gate_proj|mlp\.down_proj)$")
_KIND = {"self_attn.q_proj": "qkv", "self_attn.o_proj": "o", "mlp.gate_proj": "gate_up", "mlp.down_proj": "down"}


def calibration_texts() -> list[str]:
    """The calibration documents (standard-library docstrings)."""
    return [importlib.import_module(m).__doc__ or "" for m in CALIBRATION_MODULES]


def input_absmax(model: Any, sequences: list[list[int]]) -> dict[tuple[int, str], np.ndarray]:
    """max |input| per channel of every layer's qkv, o, gate_up and down projections over sequences.

    model: a transformers causal LM (float32); keys are (layer, "qkv" | "o" | "gate_up" | "down").
    Raises ValueError when the model has no such layers.
    """
    import torch

    amax: dict[tuple[int, str], np.ndarray] = {}

    def record(key: tuple[int, str]):
        def hook(_module, inputs):
            x = inputs[0].detach().abs().reshape(-1, inputs[0].shape[-1]).amax(0).to(torch.float32).numpy()
            amax[key] = np.maximum(amax[key], x) if key in amax else x
        return hook

    hooks = []
    for name, module in model.named_modules():
        m = _HOOKED.search(name)
        if m:
            hooks.append(module.register_forward_pre_hook(record((int(m.group(1)), _KIND[m.group(2)]))))
    if not hooks:
        raise ValueError("the model has no layers.N.self_attn / mlp projections to calibrate")
    try:
        with torch.no_grad():
            for ids in sequences:
                if ids:
                    model(torch.tensor([ids]))
    finally:
        for h in hooks:
            h.remove()
    return amax


def _scales(act: np.ndarray, wmax: np.ndarray, alpha: float) -> np.ndarray:
    s = np.maximum(act, 1e-5) ** alpha / np.maximum(wmax, 1e-5) ** (1.0 - alpha)
    return (s / np.exp(np.log(s).mean())).astype(np.float32)  # geometric mean 1: weights keep their size


KINDS = ("qkv", "o", "gate_up", "down")


def smooth_state(spec: ArchSpec, state: Mapping[str, np.ndarray], amax: Mapping[tuple[int, str], np.ndarray],
                 alpha: float | Mapping[str, float | None]) -> dict[str, np.ndarray]:
    """A copy of state (HF names, [out, in] layout) with the scales folded in; the untouched arrays are shared.

    alpha: one alpha for every kind of layer, or one per kind (KINDS; a kind missing or None is not smoothed).
    Raises KeyError when a weight the folding needs is missing, ValueError for alpha outside [0, 1].
    """
    alphas = dict.fromkeys(KINDS, alpha) if not isinstance(alpha, Mapping) else {k: alpha.get(k) for k in KINDS}
    for a in alphas.values():
        if a is not None and not 0.0 <= a <= 1.0:
            raise ValueError(f"smoothing alpha {a} is outside [0, 1]")
    amax = {key: v for key, v in amax.items() if alphas.get(key[1]) is not None}
    out = dict(state)
    prefix = next((p for p in ("model.", "model.language_model.", "language_model.model.", "")
                   if p + "layers.0.self_attn.v_proj.weight" in state), None)
    if prefix is None:
        raise KeyError("checkpoint has no weight 'layers.0.self_attn.v_proj.weight'")
    off = np.float32(spec.norm_offset)
    group = spec.num_heads // spec.num_kv_heads
    hd = spec.head_dim

    def w(name: str) -> np.ndarray:
        return np.asarray(out[prefix + name], np.float32)

    def put(name: str, arr: np.ndarray) -> None:
        out[prefix + name] = arr.astype(np.float32)

    for i in range(spec.num_layers):
        p = f"layers.{i}."
        norm_after_attn = "pre_feedforward_layernorm" if spec.sandwich_norm else "post_attention_layernorm"
        for kind, names, norm in (("qkv", ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], "input_layernorm"),
                                  ("gate_up", ["mlp.gate_proj", "mlp.up_proj"], norm_after_attn)):
            if (i, kind) not in amax:
                continue
            ws = [w(p + n + ".weight") for n in names]
            s = _scales(amax[(i, kind)], np.abs(np.concatenate(ws)).max(0), alphas[kind])
            for n, wt in zip(names, ws):
                put(p + n + ".weight", wt * s[None, :])
            put(p + norm + ".weight", (w(p + norm + ".weight") + off) / s - off)
        if (i, "down") in amax:
            down, up = w(p + "mlp.down_proj.weight"), w(p + "mlp.up_proj.weight")
            s = _scales(amax[(i, "down")], np.abs(down).max(0), alphas["down"])
            put(p + "mlp.down_proj.weight", down * s[None, :])
            put(p + "mlp.up_proj.weight", up / s[:, None])
        if (i, "o") in amax:
            o, v = w(p + "self_attn.o_proj.weight"), w(p + "self_attn.v_proj.weight")  # [d, nh*hd], [nkv*hd, d]
            # o_proj input channel (h, c) reads v channel (h // group, c): reduce over the heads sharing a kv head
            act = amax[(i, "o")].reshape(spec.num_kv_heads, group, hd).max(1).reshape(-1)
            wmax = np.abs(o).max(0).reshape(spec.num_kv_heads, group, hd).max(1).reshape(-1)
            s = _scales(act, wmax, alphas["o"])  # [nkv * hd]
            put(p + "self_attn.o_proj.weight", o * np.repeat(s.reshape(spec.num_kv_heads, 1, hd), group, axis=1).reshape(-1)[None, :])
            put(p + "self_attn.v_proj.weight", v / s[:, None])
            if prefix + p + "self_attn.v_proj.bias" in out:
                put(p + "self_attn.v_proj.bias", w(p + "self_attn.v_proj.bias") / s)
    return out
