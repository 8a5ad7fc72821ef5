"""Static scales of a quantized key/value cache, calibrated on real text at build time.

onnxruntime's GroupQueryAttention stores the cache as int8 (or packed int4) with one fixed scale per kv
head and channel (PER_CHANNEL); a value beyond 127 (7) steps of its scale is clipped. The scales come from
the fp32 checkpoint's keys and values on calibration text (models.smoothing's documents):
- keys are stored after RoPE (non-interleaved: channel c is rotated with channel c + head_dim/2). A
  rotation keeps the pair's norm and moves it between the two channels with the position, so both channels
  of a pair get the largest pair norm seen: no position can then clip a key that calibration did not.
  That norm is position-independent, so it is read before RoPE (after the k norm where the model has one);
- values per channel, by their largest |value|.
Both times a margin (KV_MARGIN) for text unlike the calibration's; clip_fraction says how often held-out
text would still clip.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from edge_agent.models.spec import ArchSpec

QMAX = {"int8": 127, "int4": 7}
# The scales' headroom over the calibration maxima. Gemma 3 270M, held-out text (the bench's 2048 tokens):
# see importer.DEFAULT_KV_CACHE for what clips and what it costs in perplexity.
KV_MARGIN = 1.25


@contextmanager
def kv_hooks(model: Any, spec: ArchSpec, on_kv: Callable[[int, np.ndarray, np.ndarray], None]) -> Iterator[None]:
    """While open, every forward pass of the transformers model calls on_kv(layer, keys, values) with its keys
    (after the k norm, before RoPE) and values as float32 [tokens, kv_heads, head_dim].

    Raises ValueError when the model has no layers.N.self_attn.k_proj / v_proj modules.
    """
    nkv, hd = spec.num_kv_heads, spec.head_dim
    seen: dict[tuple[int, str], np.ndarray] = {}
    key_module = "k_norm" if spec.qk_norm else "k_proj"

    def got(layer: int, kind: str, x: np.ndarray) -> None:  # the k norm may run after v_proj (Gemma 3)
        seen[(layer, kind)] = x
        if (layer, "k") in seen and (layer, "v") in seen:
            on_kv(layer, seen.pop((layer, "k")), seen.pop((layer, "v")))

    def keys(layer: int):
        def hook(_m, _i, out):
            x = out.detach().float()
            if key_module == "k_norm":  # [b, kv_heads, s, head_dim]
                x = x.transpose(1, 2)
            got(layer, "k", x.reshape(-1, nkv, hd).numpy())
        return hook

    def values(layer: int):
        def hook(_m, _i, out):
            got(layer, "v", out.detach().float().reshape(-1, nkv, hd).numpy())
        return hook

    hooks = []
    modules = dict(model.named_modules())
    for name, module in modules.items():
        parts = name.split(".")
        if len(parts) >= 4 and parts[-2] == "self_attn" and parts[-3].isdigit() and parts[-4] == "layers":
            layer = int(parts[-3])
            if parts[-1] == key_module:
                hooks.append(module.register_forward_hook(keys(layer)))
            elif parts[-1] == "v_proj":
                hooks.append(module.register_forward_hook(values(layer)))
    if len(hooks) != 2 * spec.num_layers:
        for h in hooks:
            h.remove()
        raise ValueError(f"the model has no layers.N.self_attn.{key_module} / v_proj modules to calibrate the cache on")
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


def _run(model: Any, sequences: list[list[int]]) -> None:
    import torch

    with torch.no_grad():
        for ids in sequences:
            if ids:
                model(torch.tensor([ids]))


def pair_norms(k: np.ndarray) -> np.ndarray:
    """|(k_c, k_c+h/2)| for both channels of every RoPE pair: [.., head_dim] -> [.., head_dim]."""
    half = k.shape[-1] // 2
    n = np.sqrt(k[..., :half] ** 2 + k[..., half:2 * half] ** 2)
    out = np.concatenate([n, n], axis=-1)
    if k.shape[-1] % 2:  # an odd head (none known) has one unrotated channel
        out = np.concatenate([out, np.abs(k[..., -1:])], axis=-1)
    return out


class AbsmaxCollector:
    """kv_hooks' callback that keeps, per layer, the largest key pair norm and |value| ([kv_heads, head_dim] each)."""

    def __init__(self, spec: ArchSpec):
        self.layers = spec.num_layers
        self._out: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, layer: int, k: np.ndarray, v: np.ndarray) -> None:
        km, vm = pair_norms(k).max(0), np.abs(v).max(0)
        old = self._out.get(layer)
        self._out[layer] = (km, vm) if old is None else (np.maximum(old[0], km), np.maximum(old[1], vm))

    def result(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per layer (key pair norm max, |value| max). Raises KeyError for a layer that never ran."""
        return [self._out[i] for i in range(self.layers)]


def kv_absmax(model: Any, spec: ArchSpec, sequences: list[list[int]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per layer (largest key pair norm, largest |value|), each [kv_heads, head_dim], over sequences.

    Raises ValueError when the model has no attention modules to hook.
    """
    collect = AbsmaxCollector(spec)
    with kv_hooks(model, spec, collect):
        _run(model, sequences)
    return collect.result()


def kv_scales(absmax: list[tuple[np.ndarray, np.ndarray]], fmt: str, margin: float = KV_MARGIN,
              value_divisor: list[np.ndarray] | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per layer (key scale, value scale) [kv_heads, head_dim] for a cache of format fmt ("int8" or "int4").

    value_divisor: per layer, what the graph's values are divided by against the calibrated model's
    (SmoothQuant's o_proj factors folded into v_proj, see value_divisor()). Raises KeyError for another format.
    """
    q = QMAX[fmt]
    out = []
    for i, (k, v) in enumerate(absmax):
        if value_divisor is not None:
            v = v / value_divisor[i]
        out.append(tuple((np.maximum(a, 1e-6) * margin / q).astype(np.float32) for a in (k, v)))
    return out


def value_divisor(spec: ArchSpec, before: Any, after: Any) -> list[np.ndarray]:
    """Per layer [kv_heads, head_dim]: the factor smoothing divided v_proj's output channels by, read from the
    o_proj weights (before: the calibrated checkpoint's getter, after: the smoothed one's; o_proj's input
    channel (h, c) was multiplied by the factor of kv head h // group, channel c, and by nothing else)."""
    group, nkv, hd = spec.num_heads // spec.num_kv_heads, spec.num_kv_heads, spec.head_dim
    out = []
    for i in range(spec.num_layers):
        name = f"layers.{i}.self_attn.o_proj.weight"
        a, b = np.abs(before(name)).max(0), np.abs(after(name)).max(0)  # [num_heads * head_dim]
        ratio = np.where(a > 0, b / np.maximum(a, 1e-30), 1.0).reshape(nkv, group, hd)[:, 0]
        out.append(ratio.astype(np.float32))
    return out


def clip_fraction(model: Any, spec: ArchSpec, sequences: list[list[int]], scales: list[tuple[np.ndarray, np.ndarray]],
                  fmt: str, value_divisor: list[np.ndarray] | None = None) -> tuple[float, float]:
    """(keys, values): the fraction of cached numbers of sequences that scales would clip (keys: pairs whose
    norm exceeds the range, which some position would clip). Raises ValueError as kv_absmax."""
    q = QMAX[fmt]
    counts = np.zeros(3, np.int64)

    def on_kv(layer: int, k: np.ndarray, v: np.ndarray) -> None:
        ks, vs = scales[layer]
        if value_divisor is not None:
            v = v / value_divisor[layer]
        counts[0] += int((pair_norms(k) > ks * q).sum())
        counts[1] += int((np.abs(v) > vs * q).sum())
        counts[2] += k.size

    with kv_hooks(model, spec, on_kv):
        _run(model, sequences)
    return float(counts[0] / max(counts[2], 1)), float(counts[1] / max(counts[2], 1))
