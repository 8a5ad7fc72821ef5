"""The ONNX embedding model: the int8 file it chose stays close to torch; which nodes each candidate keeps in fp32."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from edge_agent.rag.embedding_variants import CANDIDATES, FP32_FILE, O2_FILE, nodes_by_rule, remove_stale


def _graph(layers: int = 6) -> list:
    nodes = []
    for i in range(layers):
        nodes.append(SimpleNamespace(name=f"Attention_{i}"))
        for part in ("attention/output", "intermediate", "output"):
            nodes.append(SimpleNamespace(name=f"/encoder/layer.{i}/{part}/dense/MatMul"))
    return nodes


def test_rules_name_the_nodes_nodes_by_rule():
    nodes = _graph()
    assert nodes_by_rule(nodes, "") == []
    assert nodes_by_rule(nodes, "early_ffn_out") == [f"/encoder/layer.{i}/output/dense/MatMul" for i in range(3)]
    assert len(nodes_by_rule(nodes, "ffn_out")) == 6
    outer = nodes_by_rule(nodes, "outer_layers")
    assert "Attention_0" in outer and "Attention_5" in outer and len(outer) == 8
    assert nodes_by_rule(_graph(2), "outer_layers") is None  # too few layers: no such candidate
    assert nodes_by_rule([SimpleNamespace(name="MatMul_1")], "ffn_out") is None


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


def _matmul_model(w: np.ndarray):
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="/encoder/layer.0/output/dense/MatMul")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", w.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", w.shape[1]])],
        [numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])


def test_per_token_int8_is_accurate_next_to_an_outlier_token(tmp_path):
    """quantize_rows: every token keeps its own scale, so a 100x outlier token in the batch does not
    coarsen the others as quantize_dynamic's one scale per batch does."""
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from edge_agent.rag.embedding_variants import quantize_rows

    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    x[3] *= 100  # an outlier token
    ref = x @ w

    def rel_error(model) -> np.ndarray:
        got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        return np.abs(got - ref).max(axis=1) / np.abs(ref).max(axis=1)

    rows = _matmul_model(w)
    assert quantize_rows(rows, ["/encoder/layer.0/output/dense/MatMul"]) == 1
    assert [n.op_type for n in rows.graph.node].count("MatMul") == 0
    onnx.save(_matmul_model(w), str(tmp_path / "f.onnx"))
    quantize_dynamic(str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"), weight_type=QuantType.QInt8, per_channel=True)
    per_tensor = rel_error(onnx.load(str(tmp_path / "q.onnx")))
    per_token = rel_error(rows)
    assert per_token.max() < 0.03, per_token
    assert np.delete(per_tensor, 3).mean() > 5 * np.delete(per_token, 3).mean(), (per_tensor, per_token)
