"""The body's int8 layers with guard columns (the default since the prefill profile): the same logits as the
guard-row graph of older bundles, fewer copies, batch-independent rows, and old bundles still load."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.models.importer import import_model, inspect_source, load_checkpoint
from edge_agent.models.onnx_builder import build_model
from edge_agent.models.spec import rope_tables, spec_from_config

from test_import import QUIET

PROMPTS = ["Paris is the capital of", "def add(a, b):", "De snelle bruine vos 🙂"]


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _feeds(spec, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {"inputs_embeds": (rng.standard_normal((1, n, spec.hidden_size)) * 3).astype(np.float32),
             "position_ids": np.arange(n)[None], "seqlens_k": np.array([n - 1], np.int32), "total_seq_len": np.array(n, np.int32)}
    for i in range(spec.num_layers):
        for kind in ("key", "value"):
            feeds[f"past_{kind}_{i}"] = np.zeros((1, spec.num_kv_heads, 32, spec.head_dim), np.float32)
    return feeds


@pytest.mark.parametrize("arch", ["gemma3", "llama"])
def test_guard_columns_give_the_guard_rows_logits_without_slices(arch, checkpoints):
    config, state = load_checkpoint(inspect_source(checkpoints[arch]))
    spec = spec_from_config(config)
    rope = rope_tables(config, 32)
    rows, cols = (build_model(spec, state, rope, int8_guard=g) for g in ("row", "columns"))
    n_slice = lambda m: sum(n.op_type == "Slice" for n in m.graph.node)  # noqa: E731
    # row: one output slice per body matmul (3 a layer) plus the last position's; columns: only the last position's
    assert n_slice(rows) == 3 * spec.num_layers + 2 and n_slice(cols) == 1  # (+ the shape slice of the reshapes)
    assert {p.key: p.value for p in cols.metadata_props}["edge_agent.int8_guard"] == "columns"
    feeds = _feeds(spec, 7)
    a, b = _session(rows).run(["logits"], feeds)[0], _session(cols).run(["logits"], feeds)[0]
    np.testing.assert_array_equal(a, b)  # the same quantized values and int32 sums
    with pytest.raises(ValueError, match="columns"):
        build_model(spec, state, rope, int8_guard="diagonal")


def test_new_bundle_rows_do_not_depend_on_the_batch(tiny_bundles):
    b = load_bundle(tiny_bundles["gemma3"])
    assert b.manifest["quantization"]["int8_guard"] == "columns"
    eng = OnnxEngine(b, threads=1, max_batch=4, context_length=64)
    m = eng.model
    ids = [np.array(eng.encode(p)) for p in PROMPTS]
    for slot, x in enumerate(ids):
        m.prefill(slot, x[:-1], 0)
    last = np.array([x[-1] for x in ids])
    lengths = np.array([len(x) - 1 for x in ids])
    together = m.decode(last, lengths).copy()
    for slot in range(len(ids)):
        m.move_slot(slot, 0, int(lengths[slot]))
        alone = m.decode(last[slot : slot + 1], lengths[slot : slot + 1])
        np.testing.assert_array_equal(alone[0], together[slot])


def test_a_guard_row_bundle_still_loads_and_answers_the_same(checkpoints, tiny_bundles, tmp_path, monkeypatch):
    import edge_agent.models.importer as importer

    monkeypatch.setattr(importer, "DEFAULT_INT8_GUARD", "row")  # a bundle as built before the option
    old = import_model(checkpoints["gemma3"], "old", tmp_path, **QUIET)
    ob = load_bundle(old, verify=True)
    assert ob.manifest["quantization"]["int8_guard"] == "row"
    new = OnnxEngine(load_bundle(tiny_bundles["gemma3"]), threads=1, max_batch=1, context_length=64)
    eng = OnnxEngine(ob, threads=1, max_batch=1, context_length=64)
    ids = np.array(eng.encode(PROMPTS[0]))
    np.testing.assert_array_equal(eng.model.prefill(0, ids, 0), new.model.prefill(0, ids, 0))
