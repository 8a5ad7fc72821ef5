"""The attention output projection as 8-bit blocks (a bundle build option): close to the checkpoint,
independent of the batch, recorded in the manifest, and carried over to the GPU path's graph."""
from __future__ import annotations

import shutil

import numpy as np
import onnx
import pytest

from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.models.importer import ModelImportError, import_model

from test_import import QUIET, TEXT, assert_last_logits_near_checkpoint, assert_rows_batch_invariant

from test_hardware import fresh_detection, gpu_box  # noqa: F401  (fixtures)

PROMPTS = ["Paris is the capital of", "def add(a, b):", "De snelle bruine vos 🙂"]


@pytest.fixture(scope="module")
def block8_bundle(checkpoints, tmp_path_factory):
    return import_model(checkpoints["gemma3"], "b8", tmp_path_factory.mktemp("b8"), attn_out="int8-block32", **QUIET)


def test_block8_bundle_is_recorded_and_close(block8_bundle, tiny_bundles, checkpoints):
    b = load_bundle(block8_bundle, verify=True)
    q = b.manifest["quantization"]
    assert q["block8_layers"] == ["self_attn.o_proj"] and q["fp32_layers"] == [] and q["attn_out"] == "int8-block32"
    graph = onnx.load(str(b.model_file), load_external_data=False).graph
    assert sum(n.op_type == "MatMulNBits" for n in graph.node) == int(b.architecture["num_layers"])
    assert load_bundle(tiny_bundles["gemma3"]).manifest["quantization"]["attn_out"] == "int8"  # the default (smoothed, test_smoothing)
    assert_last_logits_near_checkpoint(b, checkpoints["gemma3"])


def test_block8_logits_do_not_depend_on_the_batch(block8_bundle):
    assert_rows_batch_invariant(load_bundle(block8_bundle), PROMPTS)


def test_unknown_attention_output_format_is_refused_before_any_work(checkpoints, tmp_path):
    with pytest.raises(ModelImportError, match="int8-block32"):
        import_model(checkpoints["gemma3"], "x", tmp_path, attn_out="int4", **QUIET)
    assert not (tmp_path / "x").exists()


def test_gpu_graph_of_a_block8_bundle_runs(block8_bundle, gpu_box, tmp_path):
    """The GPU path de-quantizes the 8-bit blocks like the int8 layers (run here on host memory)."""
    gpu_box()
    dst = tmp_path / "b8"
    shutil.copytree(block8_bundle, dst)
    e = OnnxEngine(load_bundle(dst), threads=1, max_batch=2, context_length=64, gpu_device_type="cpu")
    assert e.device == "cuda" and e.fallback_reason is None
    graph = onnx.load(str(dst / "gpu" / "model.onnx"), load_external_data=False).graph
    assert not any(n.op_type == "MatMulNBits" for n in graph.node)
    cpu = OnnxEngine(load_bundle(dst), threads=1, max_batch=2, context_length=64, device="cpu")
    ids = np.array(cpu.encode(TEXT))
    ref, got = cpu.model.prefill(0, ids, 0), e.model.prefill(0, ids, 0)
    assert np.corrcoef(got, ref)[0, 1] > 0.99
