"""A model's parameter count from its bundle's architecture, and Ollama's way of writing it ("268.10M", "3.2B").

/api/tags and /api/show give it (details.parameter_size, model_info's general.parameter_count) as Ollama does;
chat front ends show it beside the model's name. Counted as the checkpoint's weights: embeddings (once when tied to
the output head), per layer the attention and MLP projections and norms, the final norm; gemma3-270m gives
268,098,176, Ollama's "268.10M".
"""
from __future__ import annotations

from typing import Any


def parameter_count(arch: dict[str, Any]) -> int | None:
    """The weights of a decoder described by a bundle's architecture (manifest "architecture"), or None when it lacks a
    size this needs."""
    try:
        vocab, hidden, layers = int(arch["vocab_size"]), int(arch["hidden_size"]), int(arch["num_layers"])
        heads, kv, inter = int(arch["num_heads"]), int(arch["num_kv_heads"]), int(arch["intermediate_size"])
    except (KeyError, TypeError, ValueError):
        return None
    head_dim = int(arch.get("head_dim") or hidden // heads)
    q, k = heads * head_dim, kv * head_dim
    attention = hidden * (q + 2 * k) + q * hidden + (q + 2 * k if arch.get("qkv_bias") else 0)
    norms = hidden * (4 if arch.get("sandwich_norm") else 2) + (2 * head_dim if arch.get("qk_norm") else 0)
    embeddings = vocab * hidden * (1 if arch.get("tie_embeddings", True) else 2)
    return embeddings + layers * (attention + 3 * hidden * inter + norms) + hidden


def human_number(n: int) -> str:
    """n as Ollama writes a parameter count (its format.HumanNumber): "268.10M", "3.2B", "8B", "512K"."""
    for size, unit, places in ((10**9, "B", 1), (10**6, "M", 2)):
        if n >= size:
            v = n / size
            return f"{v:.0f}{unit}" if v == int(v) else f"{v:.{places}f}{unit}"
    return f"{n / 1000:.0f}K" if n >= 1000 else str(n)
