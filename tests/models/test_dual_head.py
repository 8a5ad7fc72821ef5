"""Both output heads in one bundle: the int4 head (top logits re-scored exactly) for steps of few rows,
the int8 head for many, its top re-scored the same way; the body runs once and the engine picks the head by
the step's row count.

The tiny Gemma 3 (tied embeddings, logits a few hundredths apart) is where the int4 head alone picks
another greedy token than the exact int8 rows at about one position in seven, so the checks below fail
when the engine takes the wrong head or skips the re-scoring of either head.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from edge_agent.engine.bundle import BundleError, load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.runner import INT4_HEAD_MAX_ROWS
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import SamplingParams
from edge_agent.models.importer import ModelImportError, import_model

QUIET = dict(echo=lambda s: None)
TINY_MARGIN = 0.2  # as tests/models/test_rescore.py: twice the tiny int4 head's largest logit error
PROMPTS = ["The quick brown fox", "Paris is the capital", "def add(a, b):", "Numbers: 0 1 2", "hello world", "De snelle"]


@pytest.fixture(scope="module")
def heads(checkpoints, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dual")
    return {h: import_model(checkpoints["gemma3"], h, root, lm_head=h, **QUIET) for h in ("int8", "int4", "dual")}


def engine(path: Path, max_batch: int = 8, **kw) -> OnnxEngine:
    e = OnnxEngine(load_bundle(path), threads=1, max_batch=max_batch, context_length=300, **kw)
    if e.model.rescorer is not None:
        e.model.rescorer.margin = TINY_MARGIN
    return e


def exact_head(path: Path) -> np.ndarray:
    """[vocab, dim] float32: the int8 embedding rows with their scales, Gemma's sqrt(dim) taken out."""
    scale = np.load(path / "embed_scale.npy") / np.float32(load_bundle(path).architecture["embed_scale"])
    return np.load(path / "embed.npy").astype(np.float32) * scale[:, None]


def test_the_engine_takes_the_head_by_rows_per_step(heads):
    """At most int4_head_max_rows rows: exactly the int4 bundle's (re-scored) logits; more: the int8 bundle's
    with their top re-scored from the same exact rows (so greedy picks do not depend on the batch); the body
    runs once (one graph, one session)."""
    e8, e4, dual = engine(heads["int8"]), engine(heads["int4"]), engine(heads["dual"], int4_head_max_rows=2)
    assert dual.model.dual_head and not e8.model.dual_head and not e4.model.dual_head
    ids = np.random.default_rng(3).integers(4, e8.vocab_size, 10)
    for e in (e8, e4, dual):
        for slot in range(4):
            e.model.prefill(slot, ids[slot:], 0)
    for b in (1, 2, 3, 4, 2, 1):
        tok, lengths = np.arange(b) + 7, np.array([10 - s for s in range(b)])
        rows = dual.model.rescorer.rows
        got = dual.model.decode(tok, lengths).copy()
        rescored = dual.model.rescorer.rows - rows
        want = (e4 if b <= 2 else e8).model.decode(tok, lengths).copy()
        if b > 2:
            raw8 = want[:b].copy()
            dual.model.rescorer.apply(want[:b], dual.model.hidden[:b])
            assert not np.array_equal(got[:b], raw8)  # the int8 head's own top logits were replaced
        other = (e8 if b <= 2 else e4).model.decode(tok, lengths)
        np.testing.assert_array_equal(got[:b], want[:b])
        assert not np.array_equal(got[:b], other[:b])
        assert rescored == b
    assert dual.model.int4_head_steps == 8  # 4 prefills (one row of logits each) and the 1- and 2-row steps
    always8 = engine(heads["dual"], int4_head_max_rows=0)
    always8.model.prefill(0, ids, 0)
    e8.model.prefill(0, ids, 0)
    got = always8.model.decode(np.array([5]), np.array([10]))[:1].copy()
    want = e8.model.decode(np.array([5]), np.array([10]))[:1].copy()
    always8.model.rescorer.apply(want, always8.model.hidden[:1])
    np.testing.assert_array_equal(got, want)
    assert always8.model.int4_head_steps == 0


def test_greedy_tokens_are_the_exact_heads_alone_and_across_the_switch(heads):
    """Greedy decoding with the default switch: every token is the argmax of the exact int8 rows (so the
    int4 head's error never shows), and each prompt decodes the same alone (int4 head) and among five
    others (int8 head above INT4_HEAD_MAX_ROWS rows, back to int4 as they finish)."""
    assert INT4_HEAD_MAX_ROWS < len(PROMPTS)
    path = heads["dual"]
    eng = engine(path)
    s = BatchScheduler(eng, max_queue=32, prefill_chunk=8).start()
    try:
        def p(n: int) -> SamplingParams:
            return SamplingParams(max_tokens=n, ignore_eos=True)
        solo = [s.generate(t, p(14)).token_ids for t in PROMPTS]
        int4_steps = eng.model.int4_head_steps
        handles = [s.submit(eng.encode(t), p(14 - 2 * i)) for i, t in enumerate(PROMPTS)]
        together = [h.result().token_ids for h in handles]
    finally:
        s.stop()
    assert together == [t[: 14 - 2 * i] for i, t in enumerate(solo)]
    assert eng.model.int4_head_steps > int4_steps and eng.model.steps > eng.model.int4_head_steps
    # teacher-forced: each solo token is the exact rows' argmax given the hidden state before it
    w, check = exact_head(path), engine(path, max_batch=1)
    raw = engine(path, max_batch=1)
    raw.model.rescorer.margin = -np.inf  # the int4 logits as they come
    misses = 0
    for prompt, toks in zip(PROMPTS, solo):
        ids = eng.encode(prompt)
        check.model.prefill(0, np.array(ids, np.int64), 0)
        raw.model.prefill(0, np.array(ids, np.int64), 0)
        for i, t in enumerate(toks):
            assert t == int(np.argmax(w @ check.model.prefill_hidden[0]))
            misses += int(np.argmax(raw.model.prefill_logits[0])) != t
            check.model.prefill(0, np.array([t], np.int64), len(ids) + i)
            raw.model.prefill(0, np.array([t], np.int64), len(ids) + i)
    assert misses >= 1  # the int4 head alone would have picked other tokens


def test_setting_is_validated_and_reaches_the_engine(heads, monkeypatch):
    from pydantic import ValidationError

    from edge_agent.config import Settings
    from edge_agent.runtime import build_engine

    with pytest.raises(ValidationError):
        Settings(int4_head_max_rows=-1)
    with pytest.raises(ValueError, match="int4_head_max_rows"):
        engine(heads["dual"], int4_head_max_rows=-2)
    assert engine(heads["dual"]).model.int4_head_max_rows == INT4_HEAD_MAX_ROWS
    monkeypatch.setenv("EDGE_AGENT_INT4_HEAD_MAX_ROWS", "3")
    sched = build_engine(Settings(models_dir=heads["dual"].parent, model="dual", threads=1, max_batch=4, context_length=128))
    try:
        assert sched.engine.model.int4_head_max_rows == 3
        assert sched.engine.model.uses_int4_head(3) and not sched.engine.model.uses_int4_head(4)
    finally:
        sched.stop()


def test_manifest_graph_and_refusals(heads, checkpoints, tmp_path):
    rec = load_bundle(heads["dual"]).manifest["quantization"]["lm_head"]
    assert rec["format"] == "dual" and rec["int4"]["rescore"]["margin"] > 0 and rec["int8"]["format"] == "int8"
    assert load_bundle(heads["dual"]).lm_head == "dual"
    # format 2 only where a format-1 engine could not run the graph (it would not bind lm_head_int4); 3 for every
    # bundle with a quantized key/value cache (`--kv-cache int8`), which a format-2 engine would bind as fp32; 4 for
    # an int8 cache, whose graph takes prompt_step (models.kv_prompt), which a format-3 engine would not bind
    assert [load_bundle(heads[h]).manifest["format_version"] for h in ("int8", "int4", "dual")] == [1, 1, 2]
    int8_cache = import_model(checkpoints["gemma3"], "dual-q", tmp_path, lm_head="dual", kv_cache="int8", **QUIET)
    assert load_bundle(int8_cache).manifest["format_version"] == 4
    newer = tmp_path / "newer"
    shutil.copytree(heads["int8"], newer)
    mf = json.loads((newer / "manifest.json").read_text())
    (newer / "manifest.json").write_text(json.dumps({**mf, "format_version": 5}))
    with pytest.raises(BundleError, match="format 5.*re-import it"):
        load_bundle(newer)
    graph = onnx.load(str(heads["dual"] / "model.onnx"), load_external_data=False).graph
    assert "lm_head_int4" in [i.name for i in graph.input] and [o.name for o in graph.output][:2] == ["logits", "hidden"]
    assert [n.op_type for n in graph.node].count("If") == 1
    # Qwen2's output projection is its own matrix: no int8 rows to re-score the int4 head from
    with pytest.raises(ModelImportError, match="tied"):
        import_model(checkpoints["qwen2"], "q", tmp_path, lm_head="dual", **QUIET)
    assert not (tmp_path / "q").exists()


def test_gpu_graph_keeps_the_int8_head(heads):
    """The fp16 GPU graph of a dual bundle is the int8 bundle's: one head, no select input, no re-scoring."""
    from edge_agent.engine.device_runner import DeviceOnnxModel
    from edge_agent.engine.gpu_graph import ensure_gpu_graph
    from edge_agent.engine.runner import Embedding, make_session

    logits = []
    for h in ("dual", "int8"):
        cpu = engine(heads[h], max_batch=2)
        graph = ensure_gpu_graph(load_bundle(heads[h]))
        g = onnx.load(str(graph), load_external_data=False).graph
        assert "lm_head_int4" not in [i.name for i in g.input] and "hidden" not in [o.name for o in g.output]
        model = DeviceOnnxModel(make_session(graph, 1), cpu._cache_shape(), cpu.vocab_size, Embedding(heads[h]), "cpu", 0)
        assert model.rescorer is None
        ids = cpu.encode("The quick brown fox")
        model.prefill(0, np.array(ids, np.int64), 0)
        logits.append(model.decode(np.array([9]), np.array([len(ids)])).copy())
    np.testing.assert_array_equal(logits[0], logits[1])
    sizes = [(heads[h] / "gpu" / "model.onnx.data").stat().st_size for h in ("dual", "int8")]
    assert sizes[0] == sizes[1]  # the int4 head's weights are not carried along
