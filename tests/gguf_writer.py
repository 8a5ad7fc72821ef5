"""Write a tiny HF checkpoint as a GGUF file the way llama.cpp's converter does (F32 tensors)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k permutation for Llama (interleaved rotary layout)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(ckpt: Path, arch: str, out: Path) -> Path:
    import gguf
    from safetensors.numpy import load_file

    cfg = json.loads((ckpt / "config.json").read_text())
    state = load_file(str(ckpt / "model.safetensors"))
    tok = json.loads((ckpt / "tokenizer.json").read_text())
    n_layers, heads, kv = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads

    w = gguf.GGUFWriter(str(out), arch)
    w.add_name(f"tiny {arch}")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(n_layers)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
    w.add_vocab_size(cfg["vocab_size"])
    if arch == "llama":
        w.add_rope_dimension_count(head_dim)
    if arch == "gemma3":
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
        w.add_sliding_window(cfg["sliding_window"])

    vocab = tok["model"]["vocab"]
    for added in tok.get("added_tokens", []):
        vocab[added["content"]] = added["id"]
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv_: kv_[1])]
    special = {a["content"] for a in tok.get("added_tokens", [])}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_add_bos_token(True)

    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], n_layers)
    for name, arr in state.items():
        if name == "lm_head.weight" and cfg.get("tie_word_embeddings", True):
            continue
        new = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise KeyError(name)
        arr = arr.astype(np.float32)
        if arch == "llama" and name.endswith("q_proj.weight"):
            arr = _permute(arr, heads)
        elif arch == "llama" and name.endswith("k_proj.weight"):
            arr = _permute(arr, kv)
        if arch == "gemma3" and name.endswith("norm.weight"):
            arr = arr + 1.0
        w.add_tensor(new, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
