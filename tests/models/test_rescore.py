"""Coarse head, exact top: an int4 head tied to the embedding, its candidate logits re-scored from the int8 rows.

The tiny Gemma 3 (tied embeddings, logits a few hundredths apart) is where the int4 head alone picks
another greedy token than the exact int8 rows at about one position in seven: the checks below
fail when the re-scoring is skipped, scores the wrong rows or the wrong scale, or looks at the batch.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from edge_agent.bench.quality import perplexity_ours, reference_text
from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import SamplingParams
from edge_agent.models.importer import import_model

QUIET = dict(echo=lambda s: None)
# twice the tiny int4 head's largest logit error (~0.045): the exact argmax is always a candidate,
# and a row has a handful of candidates, not the whole vocabulary (the default margin covers all 400)
TINY_MARGIN = 0.2


@pytest.fixture(scope="module")
def int4_bundles(checkpoints, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rescore")
    return {a: import_model(checkpoints[a], a, root, lm_head="int4", **QUIET) for a in ("gemma3", "qwen2")}


def engine(path: Path, margin: float | None = TINY_MARGIN, max_batch: int = 4) -> OnnxEngine:
    e = OnnxEngine(load_bundle(path), threads=1, max_batch=max_batch, context_length=300)
    if margin is not None:
        e.model.rescorer.margin = margin
    return e


def exact_head(path: Path) -> np.ndarray:
    """[vocab, dim] float32: the int8 embedding rows with their scales, Gemma's sqrt(dim) taken out."""
    b = load_bundle(path)
    scale = np.load(path / "embed_scale.npy") / np.float32(b.architecture["embed_scale"])
    return np.load(path / "embed.npy").astype(np.float32) * scale[:, None]


def test_candidates_get_the_exact_int8_logits_and_the_rest_stay(int4_bundles):
    path = int4_bundles["gemma3"]
    graph = onnx.load(str(path / "model.onnx"), load_external_data=False)
    assert [o.name for o in graph.graph.output][:2] == ["logits", "hidden"]
    w = exact_head(path)
    fine, raw = engine(path), engine(path, margin=-np.inf)  # -inf: no candidate, the int4 logits as they come
    ids = np.random.default_rng(1).integers(4, fine.vocab_size, 40)
    sizes = []
    for i in range(0, 40, 5):  # prefill in chunks of 5: only the last position's logits leave the graph
        got = fine.model.prefill(0, ids[i : i + 5], i).copy()
        coarse = raw.model.prefill(0, ids[i : i + 5], i).copy()
        np.testing.assert_array_equal(fine.model.prefill_hidden, raw.model.prefill_hidden)
        exact = w @ fine.model.prefill_hidden[0]
        cand = coarse >= coarse.max() - TINY_MARGIN
        sizes.append(int(cand.sum()))
        np.testing.assert_allclose(got[cand], exact[cand], rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(got[~cand], coarse[~cand])
        assert np.abs(coarse[cand] - exact[cand]).max() > 1e-4  # the int4 logits were really replaced
    assert 1 <= min(sizes) and max(sizes) < fine.vocab_size // 4


def test_greedy_is_the_exact_heads_where_int4_alone_differs(int4_bundles):
    """Teacher-forced positions: the re-scored argmax is the exact int8 rows' argmax everywhere; the
    int4 head alone misses it at some of them."""
    path = int4_bundles["gemma3"]
    w = exact_head(path)
    fine, raw = engine(path), engine(path, margin=-np.inf)
    ids = np.random.default_rng(0).integers(4, fine.vocab_size, 120)
    int4_misses = 0
    for i, t in enumerate(ids):
        got = fine.model.prefill(0, ids[i : i + 1], i)
        best = int(np.argmax(w @ fine.model.prefill_hidden[0]))
        assert int(np.argmax(got)) == best
        int4_misses += int(np.argmax(raw.model.prefill(0, ids[i : i + 1], i))) != best
    assert int4_misses >= 3


def test_rows_alone_equal_rows_in_a_batch_greedy_and_seeded(int4_bundles):
    """Batch invariance: each prompt decodes the same tokens alone and among others (rows joining and
    leaving), greedy and with seeded sampling, and a second seeded run repeats the first."""
    eng = engine(int4_bundles["gemma3"], max_batch=8)
    assert eng.model.rescorer.margin == TINY_MARGIN
    prompts = ["The quick brown fox", "Paris is the capital", "def add(a, b):", "Numbers: 0 1 2", "hello world"]
    s = BatchScheduler(eng, max_queue=32, prefill_chunk=8).start()
    try:
        for params in (dict(), dict(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0)):
            def p(n: int, i: int) -> SamplingParams:
                return SamplingParams(max_tokens=n, ignore_eos=True, seed=100 + i, **params)
            solo = [s.generate(t, p(16, i)).token_ids for i, t in enumerate(prompts)]
            handles = [s.submit(eng.encode(t), p(16 - 2 * i, i)) for i, t in enumerate(prompts)]
            together = [h.result().token_ids for h in handles]
            assert together == [t[: 16 - 2 * i] for i, t in enumerate(solo)]
            assert [s.generate(t, p(16, i)).token_ids for i, t in enumerate(prompts)] == solo
    finally:
        s.stop()
    assert eng.model.rescorer.rows > 0


def test_perplexity_goes_through_the_rescoring(int4_bundles):
    """bench.quality scores what the engine serves: the re-scored logits (here every logit is a candidate
    under the default margin, so it is the exact head's perplexity), not the raw int4 ones."""
    path = int4_bundles["gemma3"]
    ppl, ids = perplexity_ours(path, threads=1, n_tokens=48)
    assert ids == engine(path, margin=None).encode(reference_text())[:48]
    w = exact_head(path)
    raw = engine(path, margin=-np.inf)
    nll_exact = nll_raw = 0.0
    for i in range(len(ids) - 1):
        coarse = raw.model.prefill(0, np.array([ids[i]], np.int64), i).astype(np.float64)
        exact = (w @ raw.model.prefill_hidden[0]).astype(np.float64)
        for logits, acc in ((exact, "e"), (coarse, "r")):
            m = logits.max()
            v = m + np.log(np.exp(logits - m).sum()) - logits[ids[i + 1]]
            if acc == "e":
                nll_exact += v
            else:
                nll_raw += v
    n = len(ids) - 1
    assert ppl == pytest.approx(np.exp(nll_exact / n), rel=1e-5)
    assert abs(ppl - np.exp(nll_raw / n)) > 1e-4


def test_untied_int4_head_has_no_rescoring(int4_bundles):
    """Qwen2's output projection is its own matrix, not the embedding: nothing exact to re-score from."""
    e = engine(int4_bundles["qwen2"], margin=None)
    assert e.model.rescorer is None
    graph = onnx.load(str(int4_bundles["qwen2"] / "model.onnx"), load_external_data=False)
    assert "hidden" not in [o.name for o in graph.graph.output]
    assert np.isfinite(e.model.prefill(0, np.array(e.encode("hello")), 0)).all()


def test_manifest_and_graph_record_the_rescoring(int4_bundles):
    from edge_agent.engine.rescore import MARGIN, MAX_CANDIDATES

    tied, own = (load_bundle(int4_bundles[a]).manifest["quantization"]["lm_head"] for a in ("gemma3", "qwen2"))
    assert tied["rescore"]["margin"] == MARGIN and tied["rescore"]["max_candidates"] == MAX_CANDIDATES
    assert "rescore" not in own
    meta = {p.key: p.value for p in onnx.load(str(int4_bundles["gemma3"] / "model.onnx"), load_external_data=False).metadata_props}
    assert float(meta["edge_agent.rescore_margin"]) == MARGIN
    e = engine(int4_bundles["gemma3"], margin=None)
    assert e.model.rescorer.margin == MARGIN and e.model.rescorer.max_candidates == MAX_CANDIDATES


def test_kept_rows_are_the_tables_rows_through_replacement(int4_bundles, monkeypatch):
    """The rows kept in memory stay the table's own while older ones are replaced (round robin)."""
    from edge_agent.engine import rescore
    from edge_agent.engine.runner import Embedding

    monkeypatch.setattr(rescore, "HOT_ROWS", 7)
    emb = Embedding(int4_bundles["gemma3"])
    r = rescore.HeadRescorer(emb, 1.0)
    rng = np.random.default_rng(3)
    pool = rng.choice(emb.rows, 12, replace=False)  # a few ids come back often: kept rows and misses in one call
    for _ in range(60):
        ids = rng.choice(pool, rng.integers(1, 8), replace=False)
        np.testing.assert_array_equal(r.int8_rows(ids), emb.read(ids))
    assert 0 < r.reads < 60 * 7
    many = rng.choice(emb.rows, 12, replace=False)  # more than are kept: read directly
    np.testing.assert_array_equal(r.int8_rows(many), emb.read(many))
