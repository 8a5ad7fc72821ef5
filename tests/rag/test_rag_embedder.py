"""The ONNX embedding model: the int8 file it chose stays close to torch; which nodes each candidate keeps in fp32."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from edge_agent.rag.embedding_variants import CANDIDATES, FP32_FILE, O2_FILE, kept_in_fp32, remove_stale


def _graph(layers: int = 6) -> list:
    nodes = []
    for i in range(layers):
        nodes.append(SimpleNamespace(name=f"Attention_{i}"))
        for part in ("attention/output", "intermediate", "output"):
            nodes.append(SimpleNamespace(name=f"/encoder/layer.{i}/{part}/dense/MatMul"))
    return nodes


def test_rules_name_the_nodes_kept_in_fp32():
    nodes = _graph()
    assert kept_in_fp32(nodes, "") == []
    assert kept_in_fp32(nodes, "early_ffn_out") == [f"/encoder/layer.{i}/output/dense/MatMul" for i in range(3)]
    assert len(kept_in_fp32(nodes, "ffn_out")) == 6
    outer = kept_in_fp32(nodes, "outer_layers")
    assert "Attention_0" in outer and "Attention_5" in outer and len(outer) == 8
    assert kept_in_fp32(_graph(2), "outer_layers") is None  # too few layers: no such candidate
    assert kept_in_fp32([SimpleNamespace(name="MatMul_1")], "ffn_out") is None


def test_stale_files_are_removed(tmp_path):
    (tmp_path / "onnx").mkdir()
    for name in (FP32_FILE, O2_FILE, CANDIDATES[0].file_name, "onnx/model_qint8_avx512_vnni.onnx", "onnx/model_old.onnx.tmp"):
        (tmp_path / name).write_bytes(b"x")
    assert remove_stale(tmp_path) == ["model_old.onnx.tmp", "model_qint8_avx512_vnni.onnx"]
    assert (tmp_path / CANDIDATES[0].file_name).is_file() and (tmp_path / FP32_FILE).is_file()


def test_chosen_file_stays_close_to_torch(embedder):
    """The decision the export recorded: the kept int8 file (or fp32) is within cosine 0.99 of torch on its checks."""
    d = embedder.decision
    assert d["version"] >= 3 and (embedder.folder / d["file_name"]).is_file()
    kept = [t for t in d["tried"] if t["file"] == d["file_name"]]
    assert d["variant"] == "fp32" or (kept and kept[0]["ok"] and kept[0]["cosine_min_vs_torch"] >= 0.99)
    v = embedder.embed(["The access code for the Zeeland archive is QX-7731-B.", "De vergadering is verplaatst."])
    assert v.shape == (2, embedder.dim) and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-4)
