"""Quantized key/value cache (onnx_builder kv_cache, models.kv_cache): tiny real models of each family, int8
and int4 caches against the fp32 cache of the same weights, the engine's bookkeeping in the cache's dtype."""
from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

from edge_agent.engine.bundle import MANIFEST, load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.prefix_cache import PrefixCache
from edge_agent.models import importer, kv_cache, kv_check
from edge_agent.models.importer import import_model, inspect_source, load_checkpoint
from edge_agent.models.spec import spec_from_config

from test_import import QUIET, TEXT, assert_rows_batch_invariant, run_steps

PROMPTS = ["Paris is the capital", "De snelle bruine vos springt over de luie hond.", "🙂 x", "1 2 3 4 5 6 7 8 9"]


@pytest.fixture(scope="module")
def kv_bundles(checkpoints, tmp_path_factory):
    """(arch, cache format) -> the tiny checkpoint imported with that cache (Gemma 3: qk norm and sliding
    windows; Llama: neither, SmolLM-style)."""
    root = tmp_path_factory.mktemp("kv")
    want = [("llama", "fp32"), ("llama", "int8"), ("llama", "int4"), ("gemma3", "fp32"), ("gemma3", "int8")]
    return {(a, f): import_model(checkpoints[a], f"{a}-{f}", root, kv_cache=f, **QUIET) for a, f in want}


def _cache_types(path) -> set[int]:
    g = onnx.load(str(path / "model.onnx"), load_external_data=False).graph
    return {v.type.tensor_type.elem_type for v in list(g.input) + list(g.output) if v.name.startswith(("past_", "present_"))}


# (the tiny random Gemma 3, sandwich norms and all, amplifies any change: its int8 weights alone move its logits
# by a few percent too)
@pytest.mark.parametrize("arch,fmt,tol", [("llama", "int8", 0.03), ("gemma3", "int8", 0.15), ("llama", "int4", 0.2)])
def test_quantized_cache_decodes_close_to_the_fp32_cache(kv_bundles, arch, fmt, tol):
    """A prefill and a dozen batched decode steps: every position's logits stay near those with an fp32 cache."""
    eng = OnnxEngine(load_bundle(kv_bundles[(arch, "fp32")]), threads=1, max_batch=1, context_length=64)
    ids = eng.encode(TEXT + " " + TEXT)[:24]
    ref, got = run_steps(kv_bundles[(arch, "fp32")], ids), run_steps(kv_bundles[(arch, fmt)], ids)
    err = np.linalg.norm(got - ref, axis=-1) / np.linalg.norm(ref, axis=-1)
    assert err.max() < tol, err
    assert err[1:].max() > 1e-4  # the decode steps really read a quantized cache
    assert (got.argmax(-1) == ref.argmax(-1)).mean() >= 0.75
    assert min(np.corrcoef(a, b)[0, 1] for a, b in zip(got, ref)) > 0.99


@pytest.mark.parametrize("key", [("llama", "int8"), ("gemma3", "int8"), ("llama", "int4")])
def test_quantized_cache_rows_do_not_depend_on_the_batch(kv_bundles, key):
    assert_rows_batch_invariant(load_bundle(kv_bundles[key]), PROMPTS)


def test_manifest_graph_and_engine_agree_on_the_cache_format(kv_bundles):
    for (arch, fmt), path in kv_bundles.items():
        b = load_bundle(path, verify=True)
        assert b.kv_cache == fmt and b.manifest["kv_cache"]["format"] == fmt
        want = {"fp32": TensorProto.FLOAT, "int8": TensorProto.INT8, "int4": TensorProto.UINT8}[fmt]
        assert _cache_types(path) == {want}
        m = OnnxEngine(b, threads=1, max_batch=2, context_length=64).model
        itemsize, width = {"fp32": (4, 1), "int8": (1, 1), "int4": (1, 2)}[fmt]
        hd = b.architecture["head_dim"]
        assert m.keys[0].dtype.itemsize == itemsize and m.keys[0].shape[-1] == hd // width
        assert m.host_position_bytes == b.architecture["num_layers"] * 2 * b.architecture["num_kv_heads"] * hd * itemsize // width
        if fmt != "fp32":
            check = b.manifest["kv_cache"]["check"]
            assert b.manifest["format_version"] == (4 if fmt == "int8" else 3) and check["ppl_ratio"] <= kv_check.KV_CHECK_MAX_RATIO and check["tokens"] > 100


def _decode_branch_only(path, out):
    """A copy of an int8-cache bundle's graph whose every attention is the int8 kernel (the Ifs on prompt_step
    replaced by their decode branch, as float_cache does before it makes the cache float)."""
    from edge_agent.engine.gpu_graph import _decode_attention_only

    model = onnx.load(str(path / "model.onnx"), load_external_data=False)
    _decode_attention_only(model.graph)
    shutil.copytree(path, out)
    onnx.save_model(model, str(out / "model.onnx"))
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["files"]["model.onnx"]["bytes"] = (out / "model.onnx").stat().st_size
    (out / MANIFEST).write_text(json.dumps(manifest))
    return out


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_int8_prompt_branch_attends_as_the_kernel_and_writes_the_same_bytes(kv_bundles, arch, tmp_path):
    """Prompt steps of an int8 cache attend in fp32 over the dequantized cache (models.kv_prompt): chunked
    prefills leave the bytes the int8 kernel leaves in the first layer (later layers see attention summed in
    another order), logits within float rounding of the kernel's, and the positions after the prompt untouched."""
    from edge_agent.engine.runner import PROMPT_STEP

    path = kv_bundles[(arch, "int8")]
    g = onnx.load(str(path / "model.onnx"), load_external_data=False).graph
    assert PROMPT_STEP in {i.name for i in g.input}
    assert sum(n.op_type == "If" and list(n.input) == [PROMPT_STEP] for n in g.node) == load_bundle(path).architecture["num_layers"]
    engines = [OnnxEngine(load_bundle(p, verify=False), threads=1, max_batch=2, context_length=128)
               for p in (path, _decode_branch_only(path, tmp_path / "kernel"))]
    assert [e.model.prompt_branch for e in engines] == [True, False]
    ids = np.array((engines[0].encode(TEXT) * 8)[:70])
    out = []
    for e in engines:
        m = e.model
        m.prefill(1, ids[:3], 0)  # another sequence in the slot after ours: a scatter must not reach it
        for bufs in (m.keys, m.values):
            bufs[0][0, :, 40:] = 7  # ours: positions after the prompt hold what they held
        first = m.prefill(0, ids[:24], 0).copy()
        last = m.prefill(0, ids[24:40], 24).copy()
        out.append((first, last, [k[:2].copy() for k in m.keys], [v[:2].copy() for v in m.values]))
    (f0, l0, k0, v0), (f1, l1, k1, v1) = out
    for a, b in ((f0, f1), (l0, l1)):
        assert np.abs(a - b).max() <= 1e-4 * np.abs(b).max()
    np.testing.assert_array_equal(k0[0][:, :, :40], k1[0][:, :, :40])
    np.testing.assert_array_equal(v0[0][:, :, :40], v1[0][:, :, :40])
    for layer in range(len(k0)):
        assert (k0[layer][0, :, 40:] == k1[layer][0, :, 40:]).all() and (v0[layer][0, :, 40:] == v1[layer][0, :, 40:]).all()
        assert (np.abs(k0[layer][:, :, :40].astype(int) - k1[layer][:, :, :40]) <= 1).all()
        np.testing.assert_array_equal(k0[layer][1], k1[layer][1])
    assert (k0[0][0, :, 40:] == 7).all()


def test_prefix_cache_restores_int8_blocks_exactly(kv_bundles):
    """Positions packed from one slot, kept by the prefix cache and copied into another give the next-token
    logits a chunked prefill in the same slot gives, bit for bit; an entry costs a quarter of fp32's."""
    eng = OnnxEngine(load_bundle(kv_bundles[("gemma3", "int8")]), threads=1, max_batch=2, context_length=128)
    m = eng.model
    ids = np.array((eng.encode(TEXT) * 8)[:80])
    m.prefill(0, ids[:64], 0)
    want = m.prefill(0, ids[64:], 64).copy()
    cache = PrefixCache(64 << 20, m.host_position_bytes)
    keys, values = m.read_prefix(0, 64)
    assert keys[0].dtype == np.int8 and sum(a.nbytes for a in keys + values) == 64 * m.host_position_bytes
    cache.store(ids, 64, keys, values)
    n, keys, values = cache.lookup(ids)
    assert n == 64
    m.copy_prefix(1, keys, values)
    got = m.prefill(1, ids[64:], 64)
    np.testing.assert_array_equal(got, want)


def test_rope_pairs_get_one_scale_and_the_graph_carries_it(checkpoints, kv_bundles):
    """Keys are rotated in pairs (c, c + head_dim/2): both channels get the pair's largest norm."""
    config, _, model = load_checkpoint(inspect_source(checkpoints["gemma3"]))
    spec = spec_from_config(config)
    ids = [[2, *range(10, 60)], [2, *range(100, 140)]]
    absmax = kv_cache.kv_absmax(model, spec, ids)
    half = spec.head_dim // 2
    for k, v in absmax:
        np.testing.assert_array_equal(k[:, :half], k[:, half:])
        assert not np.array_equal(v[:, :half], v[:, half:])  # values are per channel
    scales = kv_cache.kv_scales(absmax, "int8")
    assert kv_cache.clip_fraction(model, spec, ids, scales, "int8") == (0.0, 0.0)  # the calibration text itself never clips
    tight = kv_cache.kv_scales(absmax, "int8", margin=0.5)
    assert min(kv_cache.clip_fraction(model, spec, ids, tight, "int8")) > 0
    inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(kv_bundles[("gemma3", "int8")] / "model.onnx")).graph.initializer}
    ks = inits["layers.0.k_scale"].reshape(spec.num_kv_heads, spec.head_dim)
    np.testing.assert_array_equal(ks[:, :half], ks[:, half:])


def test_failed_check_keeps_an_fp32_cache(checkpoints, tmp_path, monkeypatch):
    """The build's safety net: a quantized cache above the perplexity bound is replaced by the fp32 one (a graph
    with both output heads, whose branches read the outer graph's initializers)."""
    monkeypatch.setattr(kv_check, "KV_CHECK_MAX_RATIO", 0.5)
    path = import_model(checkpoints["gemma3"], "strict", tmp_path, kv_cache="int8", lm_head="dual", **QUIET)
    b = load_bundle(path, verify=True)
    assert b.kv_cache == "fp32" and b.manifest["kv_cache"]["rejected"]["format"] == "int8"
    assert _cache_types(path) == {TensorProto.FLOAT} and not (path / "model.fp32-cache.onnx").exists()
    eng = OnnxEngine(b, threads=1, max_batch=1, context_length=64)
    assert np.isfinite(eng.model.prefill(0, np.array(eng.encode(TEXT)), 0)).all()


def test_bundle_from_before_the_field_keeps_its_fp32_cache(kv_bundles, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(kv_bundles[("llama", "fp32")], old)
    manifest = json.loads((old / MANIFEST).read_text())
    del manifest["kv_cache"]
    manifest["format_version"] = 1
    (old / MANIFEST).write_text(json.dumps(manifest))
    b = load_bundle(old, verify=True)
    assert b.kv_cache == "fp32"
    ref = OnnxEngine(load_bundle(kv_bundles[("llama", "fp32")]), threads=1, max_batch=1, context_length=64)
    eng = OnnxEngine(b, threads=1, max_batch=1, context_length=64)
    assert eng.model.keys[0].dtype == np.float32
    ids = np.array(eng.encode(TEXT))
    np.testing.assert_array_equal(eng.model.prefill(0, ids, 0), ref.model.prefill(0, ids, 0))


def test_unknown_cache_format_is_a_clear_error(checkpoints, tmp_path):
    with pytest.raises(importer.ModelImportError, match="key/value cache format 'fp8'"):
        import_model(checkpoints["llama"], "bad", tmp_path, kv_cache="fp8", **QUIET)
