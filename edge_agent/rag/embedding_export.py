"""The ONNX export of a sentence-transformers folder: the first step of rag/embedder.py's OnnxEmbedder (once per model,
into its cache folder, before the int8 choice), with a large word table set aside while torch traces."""
from __future__ import annotations

import json
import os
from pathlib import Path


def export_onnx(folder: Path) -> None:
    """Export the sentence-transformers model in folder to folder/onnx/model.onnx (optimum, through torch); the
    torch model and the session sentence-transformers opens on the export are freed on return.

    A large word-embedding table (multilingual-e5-small: 250k x 384, 384 MB of 470) is left out while torch exports:
    the model is exported with its first rows only (config vocab_size to match), and the table written into the ONNX
    file after (embedding_variants.put_back_word_table): the same files (but README.md, the model card, not written),
    without torch and the exporter holding several copies of it (multilingual-e5-small: 2.8 -> 1.2 GB at this step)."""
    from sentence_transformers import SentenceTransformer

    from edge_agent.rag.embedding_variants import put_back_word_table, release_memory

    table, full = set_aside_torch_table(folder)
    try:
        # no model card with a table set aside: writing one runs the model on example sentences, whose words the
        # stand-in lacks (onnxruntime logs an error); nothing reads that README
        SentenceTransformer(str(folder), device="cpu", backend="onnx", local_files_only=True).save_pretrained(
            str(folder), create_model_card=table is None)
        release_memory()
        if table is not None:
            put_back_word_table(folder / "onnx" / "model.onnx", table)
            config = json.loads((folder / "config.json").read_text())
            config["vocab_size"] = table.dims[0]
            (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")  # as transformers writes it
    finally:
        if full is not None:
            os.replace(full, folder / "model.safetensors")
    release_memory()


_TABLE_KEY = "embeddings.word_embeddings.weight"
_STAND_IN_ROWS = 64


def set_aside_torch_table(folder: Path):
    """(the word table as an embedding_variants.WordTable, the full model.safetensors moved beside folder) with a
    model.safetensors and config.json of _STAND_IN_ROWS words in folder; (None, None) when the model has no table of
    TABLE_INT8_MIN_ELEMENTS or more under _TABLE_KEY (a BERT saved by transformers) or is not one safetensors file."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    from edge_agent.rag.embedding_variants import TABLE_INT8_MIN_ELEMENTS, WordTable

    weights, config_path = folder / "model.safetensors", folder / "config.json"
    try:
        config = json.loads(config_path.read_text())
        with safe_open(str(weights), framework="numpy") as f:
            if _TABLE_KEY not in f.keys():
                return None, None
            shape = f.get_slice(_TABLE_KEY).get_shape()
            if len(shape) != 2 or shape[0] != config.get("vocab_size") or shape[0] * shape[1] < TABLE_INT8_MIN_ELEMENTS:
                return None, None
            light = {k: f.get_tensor(k) for k in f.keys() if k != _TABLE_KEY}
            light[_TABLE_KEY] = f.get_slice(_TABLE_KEY)[:_STAND_IN_ROWS]
            metadata = f.metadata()
            table = WordTable(_TABLE_KEY, list(shape), f.get_tensor(_TABLE_KEY).tobytes())
    except (OSError, ValueError):
        return None, None
    full = folder.with_name(folder.name + ".full.safetensors")
    os.replace(weights, full)
    save_file(light, str(weights), metadata=metadata)
    config_path.write_text(json.dumps({**config, "vocab_size": _STAND_IN_ROWS}, indent=2, sort_keys=True) + "\n")
    return table, full
