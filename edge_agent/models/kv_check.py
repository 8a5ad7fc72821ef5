"""The build's safety net for a quantized key/value cache (models.kv_cache): perplexity on held-out text with
the quantized cache against the same graph with an fp32 cache; the fp32 graph replaces it when it costs too much.

Raises what onnxruntime or onnx raise on a broken graph (the import fails as a whole then).
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edge_agent.models.spec import ArchSpec

# The build's safety net for a quantized cache: perplexity on held-out text (KV_CHECK_MODULES' docstrings, not
# the calibration's, KV_CHECK_TOKENS tokens each) with the quantized cache against the same graph with an fp32
# cache; above KV_CHECK_MAX_RATIO the bundle keeps the fp32 cache and its manifest says why. 1.015: the 3%
# perplexity budget less the int8 weights' 1.6% (Gemma 3 270M: held-out 1.0079x, the bench's 2048 tokens 1.0003x;
# an int4 cache 2.44x, so it falls back).
KV_CHECK_MAX_RATIO = 1.015
KV_CHECK_MODULES = ("pdb", "cmd", "unittest", "doctest", "tempfile", "sched")
KV_CHECK_TOKENS = 256


def docstring(module: str) -> str:
    """A standard-library module's docstring ("" where this install lacks the module)."""
    try:
        return importlib.import_module(module).__doc__ or ""
    except ImportError:
        return ""


def perplexity(folder: Path, model_file: Path, spec: ArchSpec, sequences: list[list[int]]) -> float:
    """Perplexity of the bundle's graph model_file over sequences (each at least 2 tokens), one token a step,
    the sequences decoding side by side (a row's numbers do not depend on its batch)."""
    from edge_agent.engine.runner import CacheShape, Embedding, OnnxModel, make_session

    seqs = sorted(sequences, key=len, reverse=True)  # the rows still running are always slots 0..rows-1
    model = OnnxModel(make_session(model_file, 0), CacheShape(spec.num_layers, spec.num_kv_heads, spec.head_dim, len(seqs), len(seqs[0]) + 1),
                      spec.vocab_size, Embedding(folder))

    def nll(logits: np.ndarray, targets: list[int]) -> float:
        x = logits.astype(np.float64)
        m = x.max(-1, keepdims=True)
        return float((m[:, 0] + np.log(np.exp(x - m).sum(-1)) - x[np.arange(len(targets)), targets]).sum())

    total = sum(nll(model.prefill(slot, np.array(s[:1], np.int64), 0)[None], [s[1]]) for slot, s in enumerate(seqs))
    for pos in range(1, len(seqs[0]) - 1):
        rows = sum(len(s) > pos + 1 for s in seqs)
        logits = model.decode(np.array([s[pos] for s in seqs[:rows]], np.int64), np.full(rows, pos, np.int64))
        total += nll(logits, [s[pos + 1] for s in seqs[:rows]])
    return float(np.exp(total / sum(len(s) - 1 for s in seqs)))


def check_kv_cache(folder: Path, spec: ArchSpec, kv: dict[str, Any], echo: Callable[[str], None]) -> dict[str, Any]:
    """Held-out perplexity of folder's graph (quantized cache) against the same graph with an fp32 cache;
    above KV_CHECK_MAX_RATIO the fp32 graph replaces it. Returns the manifest's kv_cache record."""
    import onnx

    from edge_agent.engine.gpu_graph import float_cache
    from edge_agent.models import kv_cache as kvc

    graph = folder / "model.onnx"
    model = onnx.load(str(graph), load_external_data=False)
    fmt = next(p.value for p in model.metadata_props if p.key == "edge_agent.kv_cache")
    float_cache(model)
    alt = folder / "model.fp32-cache.onnx"
    onnx.save_model(model, str(alt))
    del model
    seqs = [s for s in kv["held_out"] if len(s) > 1]
    ratio = perplexity(folder, graph, spec, seqs) / perplexity(folder, alt, spec, seqs)
    check = {"ppl_ratio": round(ratio, 5), "max_ratio": KV_CHECK_MAX_RATIO, "tokens": sum(len(s) for s in seqs),
             "text": f"docstrings of {', '.join(KV_CHECK_MODULES)}", "clip_keys": kv["clip"][0], "clip_values": kv["clip"][1]}
    if ratio > KV_CHECK_MAX_RATIO:
        os.replace(alt, graph)
        echo(f"      the {fmt} key/value cache raised held-out perplexity {ratio:.4f}x (limit {KV_CHECK_MAX_RATIO}x): keeping an fp32 cache")
        return {"format": "fp32", "rejected": {"format": fmt, **check}}
    alt.unlink()
    echo(f"      {fmt} key/value cache: held-out perplexity {ratio:.4f}x the fp32 cache's (limit {KV_CHECK_MAX_RATIO}x)")
    return {"format": fmt, "scales": "static, one per kv head and channel (keys: largest RoPE pair norm, values: largest |value|)",
            "margin": kvc.KV_MARGIN, "calibration": "the smoothing calibration text (models.smoothing)", "check": check}
