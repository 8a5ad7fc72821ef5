"""Model import: every architecture from a HF folder and from GGUF, checked against transformers."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from edge_agent.engine.bundle import BundleError, list_bundles, load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.models.importer import ModelImportError, import_model
from edge_agent.models.spec import UnsupportedModelError

TEXT = "Paris is the capital of France. De snelle bruine vos 🙂"
QUIET = dict(echo=lambda s: None)


def hf_logits(ckpt: Path, ids: list[int]) -> np.ndarray:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(ckpt), dtype=torch.float32).eval()
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy()


def assert_last_logits_near_checkpoint(bundle, ckpt: Path, corr: float = 0.995) -> None:
    """A prefill of TEXT in an engine of the loaded bundle: its last logits correlate with the checkpoint's
    (> corr) and its greedy pick is among the checkpoint's top 3."""
    eng = OnnxEngine(bundle, threads=1, max_batch=1, context_length=64)
    ids = eng.encode(TEXT)
    ref = hf_logits(ckpt, ids)[-1]
    got = eng.model.prefill(0, np.array(ids), 0)
    assert np.corrcoef(got, ref)[0, 1] > corr
    assert np.argmax(got) in np.argsort(-ref)[:3]


def assert_rows_batch_invariant(bundle, prompts: list[str], threads: int = 1) -> np.ndarray:
    """Each prompt's next-token logits decoded together in one step equal, bit for bit, those it gets decoded
    alone (moved to slot 0); returns the batched logits [len(prompts), vocab]."""
    eng = OnnxEngine(bundle, threads=threads, max_batch=len(prompts), context_length=64)
    m = eng.model
    ids = [np.array(eng.encode(p)) for p in prompts]
    for slot, x in enumerate(ids):
        m.prefill(slot, x[:-1], 0)
    last = np.array([x[-1] for x in ids])
    lengths = np.array([len(x) - 1 for x in ids])
    together = m.decode(last, lengths).copy()
    for slot in range(len(ids)):  # each row again, alone in slot 0
        m.move_slot(slot, 0, int(lengths[slot]))
        alone = m.decode(last[slot : slot + 1], lengths[slot : slot + 1])
        np.testing.assert_array_equal(alone[0], together[slot])
    return together


def run_steps(bundle: Path, ids: list[int]) -> np.ndarray:
    """Logits at every position: a prefill of half, then one decode step per token."""
    eng = OnnxEngine(load_bundle(bundle), threads=1, max_batch=2, context_length=128)
    half = len(ids) // 2
    out = [eng.model.prefill(1, np.array(ids[:half]), 0).copy()]
    for i in range(half, len(ids)):
        # decode batch of 2: slot 0 is an unrelated sequence, slot 1 is ours
        eng.model.prefill(0, np.array(ids[: i + 1][-3:]), 0) if i == half else None
        logits = eng.model.decode(np.array([ids[0], ids[i]]), np.array([3 + i - half, i]))
        out.append(logits[1].copy())
    return np.stack(out)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma3"])
def test_fp32_import_matches_transformers(arch, checkpoints, tmp_path):
    bundle = import_model(checkpoints[arch], arch, tmp_path, quantize=False, **QUIET)
    eng_ids = OnnxEngine(load_bundle(bundle), threads=1, max_batch=1, context_length=64).encode(TEXT)
    ref = hf_logits(checkpoints[arch], eng_ids)
    got = run_steps(bundle, eng_ids)
    half = len(eng_ids) // 2
    np.testing.assert_allclose(got, ref[half - 1 :], atol=2e-4, rtol=1e-3)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma3"])
def test_int8_bundle_is_close_and_complete(arch, tiny_bundles, checkpoints):
    b = load_bundle(tiny_bundles[arch])
    m = b.manifest
    assert m["architecture"]["arch"] == arch
    assert m["quantization"]["scheme"] == "int8"
    assert set(m["files"]) == {"model.onnx", "model.onnx.data", "tokenizer.json", "embed.npy", "embed_scale.npy"}
    assert all(len(f["sha256"]) == 64 for f in m["files"].values())
    assert m["context_length"] == 512 and m["source"]["kind"] == "hf" and m["created"]
    eng = OnnxEngine(b, threads=1, max_batch=1, context_length=64)
    ids = eng.encode(TEXT)
    ref = hf_logits(checkpoints[arch], ids)[-1]
    got = eng.model.prefill(0, np.array(ids), 0)
    # int8 weights and activations: close, same ranking at the top
    assert np.corrcoef(got, ref)[0, 1] > 0.995
    assert np.argmax(got) in np.argsort(-ref)[:3]


def test_output_projection_in_blocks_gives_the_same_logits(tiny_bundles, checkpoints, tmp_path, monkeypatch):
    """The int8 output projection split into column blocks (so that loading it needs less
    memory at once) computes exactly what the single matrix does."""
    import onnx

    from edge_agent.models import onnx_builder

    whole = load_bundle(tiny_bundles["qwen2"])
    vocab = int(whole.architecture["vocab_size"])
    monkeypatch.setattr(onnx_builder, "LM_HEAD_PART_BYTES", vocab * int(whole.architecture["hidden_size"]) // 3 + 1)
    split = import_model(checkpoints["qwen2"], "split", tmp_path, **QUIET)
    graph = onnx.load(str(split / "model.onnx"), load_external_data=False).graph
    blocks = sorted(t.name for t in graph.initializer if t.name.startswith("lm_head") and t.name.endswith("qweight"))
    assert blocks == ["lm_head.0.qweight", "lm_head.1.qweight", "lm_head.2.qweight"]
    ids = OnnxEngine(whole, threads=1, max_batch=1, context_length=64).encode(TEXT)
    np.testing.assert_array_equal(run_steps(split, ids), run_steps(tiny_bundles["qwen2"], ids))


def test_int8_weights_are_a_quarter_of_fp32(checkpoints, tmp_path):
    q = import_model(checkpoints["qwen2"], "q", tmp_path, **QUIET)
    f = import_model(checkpoints["qwen2"], "f", tmp_path, quantize=False, **QUIET)
    size = lambda p: (p / "model.onnx.data").stat().st_size  # noqa: E731
    assert size(q) < 0.4 * size(f)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gemma3"])
def test_gguf_import_matches_transformers(arch, tmp_path):
    from tiny_models import make_checkpoint
    from gguf_writer import write_gguf

    ckpt = make_checkpoint(tmp_path / "ck", arch, seed=3)
    if arch == "gemma3":
        # transformers reads Gemma 3's GGUF with its config defaults: query_pre_attn_scalar 256
        # and one global layer in six (so all three tiny layers are local)
        cfg = json.loads((ckpt / "config.json").read_text())
        cfg["query_pre_attn_scalar"] = 256
        cfg["layer_types"] = ["sliding_attention"] * cfg["num_hidden_layers"]
        (ckpt / "config.json").write_text(json.dumps(cfg))
    gguf_path = write_gguf(ckpt, arch, tmp_path / f"tiny-{arch}.gguf")
    bundle = import_model(gguf_path, arch, tmp_path / "models", quantize=False, **QUIET)
    m = load_bundle(bundle).manifest
    assert m["source"]["kind"] == "gguf" and len(m["source"]["sha256"]) == 64
    eng = OnnxEngine(load_bundle(bundle), threads=1, max_batch=1, context_length=64)
    from transformers import AutoTokenizer

    hf_tok = AutoTokenizer.from_pretrained(str(ckpt))
    ids = eng.encode(TEXT)
    assert ids == hf_tok(TEXT)["input_ids"]  # the GGUF's tokenizer gives the checkpoint's ids
    ref = hf_logits(ckpt, ids)[-1]
    np.testing.assert_allclose(eng.model.prefill(0, np.array(ids), 0), ref, atol=2e-4, rtol=1e-3)


# --- bad sources ----------------------------------------------------------------
def test_unknown_architecture(tmp_path, checkpoints):
    src = tmp_path / "bert"
    shutil.copytree(checkpoints["llama"], src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["model_type"] = "bert"
    (src / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsupportedModelError, match="unsupported architecture 'bert'"):
        import_model(src, "x", tmp_path / "models", **QUIET)


def test_missing_tokenizer(tmp_path, checkpoints):
    src = tmp_path / "notok"
    shutil.copytree(checkpoints["llama"], src)
    for f in src.glob("tokenizer*"):
        f.unlink()
    with pytest.raises(ModelImportError, match="no tokenizer"):
        import_model(src, "x", tmp_path / "models", **QUIET)


def test_truncated_and_corrupt_gguf(tmp_path, checkpoints):
    from gguf_writer import write_gguf

    good = write_gguf(checkpoints["llama"], "llama", tmp_path / "good.gguf")
    data = good.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(ModelImportError, match="truncated|corrupt"):
        import_model(cut, "x", tmp_path / "models", **QUIET)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    with pytest.raises(ModelImportError, match="corrupt|truncated"):
        import_model(junk, "x", tmp_path / "models", **QUIET)
    notgguf = tmp_path / "model.bin"
    notgguf.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelImportError, match="neither a GGUF"):
        import_model(notgguf, "x", tmp_path / "models", **QUIET)
    assert not (tmp_path / "models" / "x").exists()


def test_not_enough_disk(tmp_path, checkpoints, monkeypatch):
    import edge_agent.models.importer as importer

    real = shutil.disk_usage
    monkeypatch.setattr(importer.shutil, "disk_usage", lambda p: real(p)._replace(free=1024))
    with pytest.raises(ModelImportError, match="not enough disk space"):
        import_model(checkpoints["llama"], "x", tmp_path / "models", **QUIET)


def test_existing_bundle_needs_force(tmp_path, checkpoints):
    import_model(checkpoints["llama"], "same", tmp_path, **QUIET)
    with pytest.raises(ModelImportError, match="--force"):
        import_model(checkpoints["llama"], "same", tmp_path, **QUIET)
    import_model(checkpoints["llama"], "same", tmp_path, force=True, **QUIET)
    assert [r["name"] for r in list_bundles(tmp_path)] == ["same"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# --- manifest verification --------------------------------------------------------
def test_manifest_detects_tampering(tmp_path, checkpoints):
    b = import_model(checkpoints["llama"], "t", tmp_path, **QUIET)
    load_bundle(b)
    data = b / "model.onnx.data"
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(BundleError, match="checksum"):
        load_bundle(b)
    data.write_bytes(bytes(raw[:-10]))
    with pytest.raises(BundleError, match="wrong size"):
        load_bundle(b)
    data.unlink()
    with pytest.raises(BundleError, match="missing"):
        load_bundle(b)
    assert list_bundles(tmp_path)[0]["ok"] is False


def test_missing_default_bundle_says_what_to_run(tmp_path):
    with pytest.raises(BundleError, match="edge-agent model install-default"):
        load_bundle(tmp_path / "default")
