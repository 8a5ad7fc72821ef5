"""Architecture description of a decoder-only model, read from a Hugging Face config."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

SUPPORTED = ("llama", "qwen2", "gemma3")


class UnsupportedModelError(ValueError):
    """The checkpoint's architecture is not one this importer can build."""


@dataclass
class ArchSpec:
    """Everything the ONNX builder needs to know about the network's shape."""

    arch: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rms_eps: float
    max_positions: int
    attn_scale: float
    activation: str  # "silu" | "gelu_tanh"
    qkv_bias: bool = False
    qk_norm: bool = False
    sandwich_norm: bool = False  # Gemma: norms after attention and MLP too
    norm_offset: float = 0.0  # Gemma's RMSNorm multiplies by (1 + w)
    embed_scale: float = 1.0
    tie_embeddings: bool = True
    final_softcap: float | None = None
    attn_softcap: float | None = None
    sliding_window: int | None = None
    layer_is_local: list[bool] = field(default_factory=list)
    bos_token_id: int | None = None
    eos_token_ids: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _eos_list(value: Any) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]


def spec_from_config(config: Any) -> ArchSpec:
    """Build an ArchSpec from a transformers PretrainedConfig.

    Raises UnsupportedModelError for architectures other than Llama, Qwen2 and Gemma 3.
    """
    mt = getattr(config, "model_type", "")
    if mt == "gemma3":  # multimodal wrapper: use its text part
        config = config.get_text_config()
        mt = config.model_type
    arch = {"llama": "llama", "qwen2": "qwen2", "gemma3_text": "gemma3"}.get(mt)
    if arch is None:
        raise UnsupportedModelError(
            f"unsupported architecture {mt!r}: supported are Llama (SmolLM2), Qwen2 and Gemma 3"
        )
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    n_layers = config.num_hidden_layers
    common = dict(
        arch=arch,
        vocab_size=config.vocab_size,
        hidden_size=config.hidden_size,
        num_layers=n_layers,
        num_heads=heads,
        num_kv_heads=getattr(config, "num_key_value_heads", None) or heads,
        head_dim=head_dim,
        intermediate_size=config.intermediate_size,
        rms_eps=float(config.rms_norm_eps),
        max_positions=int(config.max_position_embeddings),
        tie_embeddings=bool(getattr(config, "tie_word_embeddings", True)),
        bos_token_id=getattr(config, "bos_token_id", None),
        eos_token_ids=_eos_list(getattr(config, "eos_token_id", None)),
    )
    if arch == "gemma3":
        types = getattr(config, "layer_types", None) or [
            "sliding_attention" if (i + 1) % config.sliding_window_pattern else "full_attention" for i in range(n_layers)
        ]
        return ArchSpec(
            **common,
            attn_scale=float(config.query_pre_attn_scalar) ** -0.5,
            activation="gelu_tanh",
            qk_norm=True,
            sandwich_norm=True,
            norm_offset=1.0,
            embed_scale=float(np.float32(config.hidden_size**0.5)),
            final_softcap=getattr(config, "final_logit_softcapping", None),
            attn_softcap=getattr(config, "attn_logit_softcapping", None),
            sliding_window=int(config.sliding_window),
            layer_is_local=[t == "sliding_attention" for t in types],
        )
    act = getattr(config, "hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise UnsupportedModelError(f"unsupported activation {act!r} for {arch}")
    window = None
    local = [False] * n_layers
    if arch == "qwen2" and getattr(config, "use_sliding_window", False) and config.sliding_window:
        window = int(config.sliding_window)
        start = getattr(config, "max_window_layers", n_layers)
        local = [i >= start for i in range(n_layers)]
    return ArchSpec(
        **common,
        attn_scale=head_dim**-0.5,
        activation="silu",
        qkv_bias=arch == "qwen2" or bool(getattr(config, "attention_bias", False)),
        sliding_window=window,
        layer_is_local=local,
    )


def rope_tables(config: Any, max_positions: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """cos/sin tables [max_positions, head_dim/2] for global ("global") and local ("local") layers.

    Uses transformers' own rope initialisers, so every scaling type it knows is honoured.
    """
    import copy

    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    if getattr(config, "model_type", "") == "gemma3":
        config = config.get_text_config()

    def table(cfg: Any) -> tuple[np.ndarray, np.ndarray]:
        scaling = getattr(cfg, "rope_scaling", None) or {}
        rope_type = scaling.get("rope_type", scaling.get("type", "default"))
        inv_freq, attention_scaling = ROPE_INIT_FUNCTIONS[rope_type](cfg, "cpu")
        inv = inv_freq.double().numpy()
        pos = np.arange(max_positions, dtype=np.float64)
        ang = np.outer(pos, inv)
        return (np.cos(ang) * attention_scaling).astype(np.float32), (np.sin(ang) * attention_scaling).astype(np.float32)

    tables = {"global": table(config)}
    local_base = getattr(config, "rope_local_base_freq", None)
    if local_base is not None:
        local_cfg = copy.deepcopy(config)
        local_cfg.rope_theta = local_base
        local_cfg.rope_scaling = None
        tables["local"] = table(local_cfg)
    else:
        tables["local"] = tables["global"]
    return tables
