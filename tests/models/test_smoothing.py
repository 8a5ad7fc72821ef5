"""SmoothQuant folding (models.smoothing): an identity of the fp32 network, and the default int8 graph's
attention output projection is int8 (no fp32 layer left)."""
from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest

from edge_agent.engine.bundle import MANIFEST, load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.models import smoothing
from edge_agent.models.importer import DEFAULT_SMOOTH_ALPHA, ModelImportError, import_model, inspect_source, load_checkpoint
from edge_agent.models.onnx_builder import build_model, save_model
from edge_agent.models.spec import rope_tables, spec_from_config

from test_import import QUIET, TEXT, assert_last_logits_near_checkpoint, hf_logits


def _calibration(bundle, model, spec):
    eng = OnnxEngine(load_bundle(bundle), threads=1, max_batch=1, context_length=64)
    seqs = [[i for i in eng.encode(t)[:64] if i < spec.vocab_size] for t in smoothing.calibration_texts()[:4]]
    return smoothing.input_absmax(model, seqs)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma3"])
def test_smoothed_fp32_graph_gives_the_unsmoothed_logits(arch, checkpoints, tmp_path):
    """Folding the scales changes the weights (v_proj, norms, up_proj, every projection) but not the function."""
    config, state, model = load_checkpoint(inspect_source(checkpoints[arch]))
    spec = spec_from_config(config)
    plain = import_model(checkpoints[arch], "plain", tmp_path, quantize=False, **QUIET)
    smoothed_state = smoothing.smooth_state(spec, state, _calibration(plain, model, spec), 0.8)
    v = "model.layers.0.self_attn.v_proj.weight"
    ratio = smoothed_state[v] / np.where(state[v] == 0, 1, state[v])
    assert np.abs(np.log(np.abs(ratio[state[v] != 0]))).max() > 0.1  # the scales are far from 1: a real test
    assert smoothed_state["model.layers.1.input_layernorm.weight"] is not state["model.layers.1.input_layernorm.weight"]

    # the smoothed fp32 graph in a copy of the plain bundle
    sm = tmp_path / "smoothed"
    shutil.copytree(plain, sm)
    save_model(build_model(spec, smoothed_state, rope_tables(config, load_bundle(plain).context_length), quantize=False), sm)
    manifest = json.loads((sm / MANIFEST).read_text())
    for name in ("model.onnx", "model.onnx.data"):
        manifest["files"][name]["bytes"] = (sm / name).stat().st_size
    (sm / MANIFEST).write_text(json.dumps(manifest))

    engines = [OnnxEngine(load_bundle(b, verify=False), threads=1, max_batch=1, context_length=64) for b in (plain, sm)]
    ids = engines[0].encode(TEXT)
    ref, got = (e.model.prefill(0, np.array(ids), 0) for e in engines)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    np.testing.assert_allclose(got, hf_logits(checkpoints[arch], ids)[-1], rtol=1e-3, atol=1e-3 * np.abs(ref).max())


def test_default_int8_bundle_has_an_int8_attention_output(tiny_bundles, checkpoints):
    b = load_bundle(tiny_bundles["gemma3"], verify=True)
    q = b.manifest["quantization"]
    assert q["fp32_layers"] == [] and q["attn_out"] == "int8" and q["smoothing"]["alpha"] == DEFAULT_SMOOTH_ALPHA
    graph = onnx.load(str(b.model_file), load_external_data=False).graph
    names = {t.name for t in graph.initializer}
    layers = int(b.architecture["num_layers"])
    assert all(f"layers.{i}.self_attn.o_proj.qweight" in names for i in range(layers))
    assert not any(n.endswith("o_proj.weight") for n in names)
    assert not any(n.op_type == "MatMul" for n in graph.node)  # every linear layer is int8 (MatMulIntegerToFloat)
    assert_last_logits_near_checkpoint(b, checkpoints["gemma3"])


def test_unsmoothed_import_keeps_its_choice_and_bad_alpha_is_refused(checkpoints, tmp_path):
    b = import_model(checkpoints["llama"], "nosmooth", tmp_path, attn_out="fp32", smooth_alpha=None, **QUIET)
    q = load_bundle(b).manifest["quantization"]
    assert q["fp32_layers"] == ["self_attn.o_proj"] and "smoothing" not in q
    with pytest.raises(ModelImportError, match=r"outside \[0, 1\]"):
        import_model(checkpoints["llama"], "bad", tmp_path, smooth_alpha=1.5, **QUIET)
    assert not (tmp_path / "bad").exists()


def test_cli_turns_smoothing_off_and_refuses_a_bad_alpha(checkpoints, tmp_path, monkeypatch, capsys):
    from edge_agent.cli import main

    monkeypatch.setenv("EDGE_AGENT_MODELS_DIR", str(tmp_path))
    assert main(["model", "import", str(checkpoints["llama"]), "--name", "off", "--smooth-alpha", "-1"]) == 0
    assert "smoothing" not in load_bundle(tmp_path / "off").manifest["quantization"]
    assert main(["model", "import", str(checkpoints["llama"]), "--name", "bad", "--smooth-alpha", "2"]) == 2
    assert "outside [0, 1]" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_alpha_per_kind_smooths_only_those_kinds(checkpoints):
    """A mapping of alphas smooths the kinds it names (o_proj here: v_proj and o_proj change) and leaves the
    others' weights and norms as they were; a bad alpha in it is refused."""
    config, state, model = load_checkpoint(inspect_source(checkpoints["llama"]))
    spec = spec_from_config(config)
    seqs = [list(range(3, 40))]
    amax = smoothing.input_absmax(model, seqs)
    out = smoothing.smooth_state(spec, state, amax, {"o": 0.8, "gate_up": None})
    p = "model.layers.0."
    assert not np.array_equal(out[p + "self_attn.v_proj.weight"], state[p + "self_attn.v_proj.weight"])
    assert not np.array_equal(out[p + "self_attn.o_proj.weight"], state[p + "self_attn.o_proj.weight"])
    for name in ("self_attn.q_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                 "input_layernorm.weight", "post_attention_layernorm.weight"):
        assert out[p + name] is state[p + name]
    with pytest.raises(ValueError, match="outside"):
        smoothing.smooth_state(spec, state, amax, {"down": 1.5})
