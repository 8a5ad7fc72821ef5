"""Index parts on their own: FAISS files, HNSW in the background, BM25 pending + merge."""
from __future__ import annotations

import numpy as np
import pytest

from edge_agent.rag.bm25 import Bm25Index, tokenize
from edge_agent.rag.index import FaissIndex, IndexFileError, RWLock
from edge_agent.rag.retrieval import HybridIndex, IndexUpdate


def _vecs(n: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_tokenizer_is_language_neutral():
    assert tokenize("Één offerte voor XK-99/B, geïnstalleerd") == ["een", "offerte", "voor", "xk", "99", "b", "geinstalleerd", "xk-99/b"]
    assert tokenize("Ærø Straße ñandú") == ["ærø", "strasse", "nandu"]
    hindi = tokenize("नमस्ते दुनिया, देवनागरी लिपि")
    assert len(hindi) == 4 and hindi == tokenize("नमस्ते दुनिया देवनागरी लिपि")  # words whole, the same every time
    # codes start at a word's start only; plain prose gives words alone
    assert tokenize("see v1.2.3 and a_b-c or http://x.y/z") == [
        "see", "v1", "2", "3", "and", "a_b", "c", "or", "http", "x", "y", "z", "v1.2.3", "a_b-c", "x.y/z"]
    assert tokenize("Plain words, nothing joined.") == ["plain", "words", "nothing", "joined"]


def test_faiss_file_roundtrip_and_corruption(tmp_path):
    idx = FaissIndex(16)
    idx.add(np.arange(10, 20), _vecs(10))
    idx.remove(np.array([12, 13]))
    path = tmp_path / "x.faiss"
    idx.save(path)
    loaded = FaissIndex.load(path, 16)
    assert loaded.ids().tolist() == [10, 11, *range(14, 20)]
    with pytest.raises(IndexFileError, match="16-d|dimension|holds"):
        FaissIndex.load(path, 8)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(IndexFileError, match="corrupt"):
        FaissIndex.load(path, 16)
    with pytest.raises(IndexFileError, match="missing"):
        FaissIndex.load(tmp_path / "none.faiss", 16)
    assert not list(tmp_path.glob(".*tmp*"))  # no temp files left behind


def test_hnsw_built_in_background_serves_with_tombstones(tmp_path):
    h = HybridIndex(tmp_path, 16, ann_threshold=200)
    vecs = _vecs(300)
    h.apply(IndexUpdate(range(1, 301), vecs, [f"doc {i}" for i in range(1, 301)]))
    h.wait_background()
    assert h.stats()["ann"] == "ready"
    h.apply(IndexUpdate(remove_ids=[5]))
    top = h.search(vecs[4], "", k=3, mode="dense")
    assert 5 not in [x.chunk_id for x in top]
    assert h.search(vecs[9], "", k=1, mode="dense")[0].chunk_id == 10
    h.apply(IndexUpdate([1000], _vecs(1, seed=9), ["new"]))
    assert h.search(_vecs(1, seed=9)[0], "", k=1, mode="dense")[0].chunk_id == 1000


def test_bm25_pending_then_merged():
    lock = RWLock()
    b = Bm25Index(merge_after_s=0.05, sync_merge_max=3)
    with lock.write():
        b.rebuild(np.arange(1, 5), ["de kat zit op de mat", "quick brown fox", "warmtepomp onderhoud", "lazy dog"])
        assert b.apply([10], b.encode_many(["nieuwe warmtepomp handleiding"]), [3])
    assert b.search("warmtepomp", 5)[0].tolist() == [10]  # 3 is masked, 10 comes from pending
    b.schedule_merge(lock)
    b.wait_merged()
    assert b.pending_ids == [] and b.main.ids.tolist() == [1, 2, 4, 10]
    assert b.search("warmtepomp", 5)[0].tolist() == [10]
