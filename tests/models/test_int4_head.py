"""The int4 output projection: MatMulNBits packing against numpy, batch invariance, manifest, old bundles."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from edge_agent.engine.bundle import list_bundles, load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import SamplingParams
from edge_agent.models.importer import ModelImportError, import_model
from edge_agent.models.int4 import dequantize_int4, quantize_int4

QUIET = dict(echo=lambda s: None)
PROMPTS = ["The quick brown fox", "Paris is the capital", "def add(a, b):", "Numbers: 0 1 2", "Emoji: 🙂 🚀 and"]


def nbits_session(k: int, n: int, block: int, packed, scales, zp, accuracy_level: int) -> ort.InferenceSession:
    inputs = ["x", "b", "s"] + (["z"] if zp is not None else [])
    inits = [onnx.numpy_helper.from_array(packed, "b"), onnx.numpy_helper.from_array(scales, "s")]
    if zp is not None:
        inits.append(onnx.numpy_helper.from_array(zp, "z"))
    node = helper.make_node("MatMulNBits", inputs, ["y"], domain="com.microsoft", K=k, N=n, bits=4, block_size=block,
                            accuracy_level=accuracy_level)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("k,block", [(64, 32), (100, 32), (96, 16)])
def test_packing_is_what_matmulnbits_multiplies_by(k, block, symmetric):
    """onnxruntime's kernel (fp32 compute) on our packed arrays gives x @ the numpy de-quantized
    weights; those are within a step of the float weights (a nibble-order, padding or
    zero-point mistake breaks one or the other)."""
    rng = np.random.default_rng(k + block)
    n = 37
    w = rng.standard_normal((k, n)).astype(np.float32) * rng.uniform(0.1, 3, n).astype(np.float32)
    packed, scales, zp = quantize_int4(w, block, symmetric)
    assert packed.shape == (n, -(-k // block), block // 2) and packed.dtype == np.uint8
    wd = dequantize_int4(packed, scales, zp, k)
    kb = -(-k // block)
    step = np.repeat(np.abs(scales).reshape(n, kb), block, axis=1)[:, :k].T
    err = np.abs(wd - w)
    # rounding: half a step on average at most; a value clipped at the end of the range: one step
    assert (err <= step + 1e-6).all() and (err / step).mean() < 0.3
    x = rng.standard_normal((5, k)).astype(np.float32)
    y = nbits_session(k, n, block, packed, scales, zp, 0).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, x @ wd, rtol=1e-5, atol=1e-5)
    # int8 compute (the level the graph uses): activations quantized per block, close to the same product
    y4 = nbits_session(k, n, block, packed, scales, zp, 4).run(None, {"x": x})[0]
    assert np.abs(y4 - x @ wd).max() < 0.02 * np.abs(x @ wd).max()


def test_int8_compute_rows_do_not_depend_on_their_batch():
    """accuracy_level 4 with 32-wide blocks: each row's result is bit-identical alone and in any batch."""
    rng = np.random.default_rng(5)
    k, n = 640, 3000
    packed, scales, zp = quantize_int4(rng.standard_normal((k, n)).astype(np.float32), 32, False)
    sess = nbits_session(k, n, 32, packed, scales, zp, 4)
    x = rng.standard_normal((17, k)).astype(np.float32) * rng.uniform(0.01, 100, (17, 1)).astype(np.float32)
    full = sess.run(None, {"x": x})[0]
    for m in (1, 2, 5, 16):
        np.testing.assert_array_equal(sess.run(None, {"x": x[1 : 1 + m]})[0], full[1 : 1 + m])


def test_unknown_block_size_and_format_are_refused(checkpoints, tmp_path):
    with pytest.raises(ValueError, match="block size"):
        quantize_int4(np.ones((64, 4), np.float32), 48)
    with pytest.raises(ModelImportError, match="int8, int4"):
        import_model(checkpoints["llama"], "x", tmp_path, lm_head="int3", **QUIET)
    assert not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def int4_bundles(checkpoints, tmp_path_factory) -> dict[str, Path]:
    """llama (tied output projection) and qwen2 (its own) imported with the int4 head."""
    root = tmp_path_factory.mktemp("int4")
    return {a: import_model(checkpoints[a], a, root, lm_head="int4", **QUIET) for a in ("llama", "qwen2")}


def test_manifest_and_graph_say_int4(int4_bundles, tiny_bundles):
    b = load_bundle(int4_bundles["llama"])
    head = b.manifest["quantization"]["lm_head"]
    assert head["format"] == "int4" and head["block_size"] == 32 and head["accuracy_level"] == 4
    assert b.lm_head == "int4" and load_bundle(tiny_bundles["llama"]).lm_head == "int8"
    assert load_bundle(tiny_bundles["llama"]).manifest["quantization"]["lm_head"]["format"] == "int8"
    rows = {r["name"]: r for r in list_bundles(b.path.parent)}
    assert rows["llama"]["lm_head"] == "int4" and rows["qwen2"]["quantization"] == "int8"
    graph = onnx.load(str(b.model_file), load_external_data=False)
    ops = [n.op_type for n in graph.graph.node]
    assert ops.count("MatMulNBits") == 1
    meta = {p.key: p.value for p in graph.metadata_props}
    assert meta["edge_agent.logit_guard_row"] == "0" and meta["edge_agent.lm_head"] == "int4-b32"
    # the head is stored at about half a byte per weight (plus scales and zero points) instead of one
    size = lambda p: (p / "model.onnx.data").stat().st_size  # noqa: E731
    assert size(int4_bundles["llama"]) < size(tiny_bundles["llama"])


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_int4_head_is_close_to_int8(arch, int4_bundles, tiny_bundles):
    ids = None
    out = []
    for bundle in (int4_bundles[arch], tiny_bundles[arch]):
        eng = OnnxEngine(load_bundle(bundle), threads=1, max_batch=2, context_length=64)
        ids = ids or eng.encode(PROMPTS[1])
        assert eng.model.logits.shape[0] == 2  # no guard row of logits (int4 head; int8 head since builder 2)
        out.append(eng.model.prefill(0, np.array(ids), 0).copy())
    assert np.corrcoef(out[0], out[1])[0, 1] > 0.99
    assert np.argmax(out[0]) in np.argsort(-out[1])[:3]


def test_int4_head_batched_greedy_equals_alone(int4_bundles):
    """The engine's batch-invariance promise holds with the int4 head: every prompt decodes the same
    tokens alone (batch 1) and in a batch of five, with rows joining and leaving."""
    eng = OnnxEngine(load_bundle(int4_bundles["llama"]), threads=2, max_batch=8, context_length=256)
    s = BatchScheduler(eng, max_queue=32, prefill_chunk=8).start()
    try:
        solo = [s.generate(p, SamplingParams(max_tokens=20, ignore_eos=True)).token_ids for p in PROMPTS]
        handles = [s.submit(eng.encode(p), SamplingParams(max_tokens=20 - 3 * i, ignore_eos=True)) for i, p in enumerate(PROMPTS)]
        together = [h.result().token_ids for h in handles]
    finally:
        s.stop()
    assert together == [t[: 20 - 3 * i] for i, t in enumerate(solo)]


def test_a_bundle_from_before_the_lm_head_field_still_loads_and_runs(tiny_bundles, tmp_path):
    """Bundles written before quantization.lm_head existed: int8, unchanged answers."""
    old = tmp_path / "old"
    shutil.copytree(tiny_bundles["qwen2"], old)
    mf = old / "manifest.json"
    m = json.loads(mf.read_text())
    del m["quantization"]["lm_head"]
    mf.write_text(json.dumps(m))
    graph = onnx.load(str(old / "model.onnx"), load_external_data=False)
    kept = [p for p in graph.metadata_props if p.key != "edge_agent.lm_head"]
    del graph.metadata_props[:]
    graph.metadata_props.extend(kept)
    onnx.save_model(graph, str(old / "model.onnx"))
    m["files"]["model.onnx"]["bytes"] = (old / "model.onnx").stat().st_size
    from edge_agent.engine.bundle import sha256_file

    m["files"]["model.onnx"]["sha256"] = sha256_file(old / "model.onnx")
    mf.write_text(json.dumps(m))
    assert load_bundle(old).lm_head == "int8"
    a = OnnxEngine(load_bundle(old), threads=1, max_batch=2, context_length=64)
    b = OnnxEngine(load_bundle(tiny_bundles["qwen2"]), threads=1, max_batch=2, context_length=64)
    ids = np.array(a.encode(PROMPTS[0]))
    assert a.model.extra_rows == 0  # builder 2: no guard row (builder 1's graphs say 1 in their metadata)
    np.testing.assert_array_equal(a.model.prefill(0, ids, 0), b.model.prefill(0, ids, 0))


def test_gpu_converter_dequantizes_like_the_reference():
    """engine.gpu_graph keeps its own de-quantizer (engine may not import models): same weights as models.int4's."""
    from edge_agent.engine.gpu_graph import _int4_weight

    rng = np.random.default_rng(9)
    k, n = 100, 20000  # more columns than one of the converter's 8192-column chunks
    w = rng.standard_normal((k, n)).astype(np.float32)
    for symmetric in (True, False):
        packed, scales, zp = quantize_int4(w, 32, symmetric)
        inits = {"b": onnx.numpy_helper.from_array(packed, "b"), "s": onnx.numpy_helper.from_array(scales, "s")}
        inputs = ["x", "b", "s"]
        if zp is not None:
            inits["z"] = onnx.numpy_helper.from_array(zp, "z")
            inputs.append("z")
        node = helper.make_node("MatMulNBits", inputs, ["y"], domain="com.microsoft", K=k, N=n, bits=4, block_size=32)
        ref = dequantize_int4(packed, scales, zp, k)
        np.testing.assert_allclose(_int4_weight(node, inits).astype(np.float32), ref, rtol=1e-3, atol=1e-3)
