"""Body layers as int4 blocks (a bundle build option): the stored blocks are the checkpoint's weights, the
graph stays close to the checkpoint, a row's logits do not depend on its batch, the manifest says so."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from edge_agent.engine.bundle import load_bundle
from edge_agent.models.importer import ModelImportError, import_model
from edge_agent.models.int4 import dequantize_int4

from test_import import QUIET, assert_last_logits_near_checkpoint, assert_rows_batch_invariant

PROMPTS = ["Paris is the capital of", "def add(a, b):", "De snelle bruine vos 🙂", "Numbers: 0 1 2 3"]


@pytest.fixture(scope="module")
def mlp4(checkpoints, tmp_path_factory):
    """The tiny Gemma 3 with gate/up and down as int4 blocks (unsmoothed, so the blocks hold the checkpoint's weights)."""
    return import_model(checkpoints["gemma3"], "mlp4", tmp_path_factory.mktemp("mlp4"), int4_layers=("gate_up", "down"),
                        smooth_alpha=None, kv_cache="fp32", **QUIET)  # (the int8 cache's own error is test_kv_cache's)


def test_blocks_hold_the_checkpoint_weights_in_matmulnbits_layout(mlp4, checkpoints):
    """De-quantized with the reference (models.int4), each layer's blocks are the checkpoint's [in, out] weights
    within one quantization step: a transposed, mis-packed or mis-ordered matrix is off by far more."""
    from safetensors.numpy import load_file

    state = load_file(str(next(checkpoints["gemma3"].glob("*.safetensors"))))
    graph = onnx.load(str(mlp4 / "model.onnx")).graph
    inits = {t.name: t for t in graph.initializer}
    nodes = {n.input[1]: n for n in graph.node if n.op_type == "MatMulNBits"}
    layers = int(load_bundle(mlp4).architecture["num_layers"])
    assert len(nodes) == 2 * layers  # gate_up and down of every layer; the head and attention stay int8
    assert not any(n.endswith("mlp.gate_up.qweight") or n.endswith("mlp.down_proj.qweight") for n in inits)
    for i in range(layers):
        p = f"model.layers.{i}.mlp."
        want = {"mlp.gate_up": np.concatenate([state[p + "gate_proj.weight"], state[p + "up_proj.weight"]]).T,
                "mlp.down_proj": state[p + "down_proj.weight"].T}
        for base, w in want.items():
            name = f"layers.{i}.{base}"
            node = nodes[name + ".qweight4"]
            attrs = {a.name: a.i for a in node.attribute}
            assert (attrs["K"], attrs["N"], attrs["bits"], attrs["block_size"], attrs["accuracy_level"]) == (*w.shape, 4, 32, 4)
            got = dequantize_int4(*(numpy_helper.to_array(inits[name + s]) for s in (".qweight4", ".scale", ".zero_point")), w.shape[0])
            step = np.abs(w).max() / 7  # the coarsest block's step
            assert got.shape == w.shape and np.abs(got - w).max() <= step
            assert np.abs(got - w).mean() < 0.1 * np.abs(w).mean() + 0.05 * step


def test_int4_body_is_recorded_and_close_to_the_checkpoint(mlp4, checkpoints, tmp_path):
    b = load_bundle(mlp4, verify=True)
    rec = b.manifest["quantization"]["int4_layers"]
    assert rec["layers"] == ["gate_up", "down"] and rec["block_size"] == 32 and rec["accuracy_level"] == 4
    meta = {p.key: p.value for p in onnx.load(str(b.model_file), load_external_data=False).metadata_props}
    assert meta["edge_agent.int4_layers"] == "gate_up,down:int4-b32"
    assert_last_logits_near_checkpoint(b, checkpoints["gemma3"], corr=0.95)
    # smoothed (the default alpha) with every projection int4: still close
    all4 = import_model(checkpoints["gemma3"], "all4", tmp_path, int4_layers=("qkv", "o", "gate_up", "down"), kv_cache="fp32", **QUIET)
    graph = onnx.load(str(all4 / "model.onnx"), load_external_data=False).graph
    int8 = [n.input[1] for n in graph.node if n.op_type == "MatMulIntegerToFloat"]
    assert int8 and all("lm_head" in w for w in int8)  # only the head stays int8
    assert_last_logits_near_checkpoint(load_bundle(all4), checkpoints["gemma3"], corr=0.85)


def test_int4_body_logits_do_not_depend_on_the_batch(mlp4):
    """Each row decoded among four gives bit for bit the logits it gets alone (MatMulNBits quantizes each row's
    activations per block of its own, accuracy_level 4)."""
    together = assert_rows_batch_invariant(load_bundle(mlp4), PROMPTS, threads=2)
    assert not np.array_equal(together[0], together[1])


def test_unknown_int4_layer_kind_is_refused_before_any_work(checkpoints, tmp_path):
    with pytest.raises(ModelImportError, match="gate_up"):
        import_model(checkpoints["gemma3"], "x", tmp_path, int4_layers=("mlp",), **QUIET)
    assert not (tmp_path / "x").exists()
