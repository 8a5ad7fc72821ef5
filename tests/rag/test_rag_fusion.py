"""Document-level agreement in hybrid fusion: a document that dense and BM25 both place among their first
k documents, each through a different chunk, keeps a hit (fusion of chunks alone drops it). Real FAISS
and real SQLite (the store's chunk -> document map) in tmp_path; vectors chosen so the dense ranks are known."""
from __future__ import annotations

import numpy as np
import pytest

from edge_agent.rag.retrieval import HybridIndex, IndexUpdate, agreed_documents, keep_agreed
from edge_agent.store.db import SqliteDatabase
from edge_agent.store.documents import ChunkRecord, DocumentMeta, DocumentStore

DIM = 8
QUERY = "hash value equality"
# document -> its chunks: (name, text, cosine to the query vector)
DOCS = {
    "Popular B": [("b1", "hash notes on something else entirely with other words", 0.90),
                  ("b2", "hash value equality rules", 0.60)],
    "Popular C": [("c1", "hash value equality hash value equality", 0.80),
                  ("c2", "loops and iteration over ranges", 0.50)],
    "Answer A": [("a1", "objects that compare the same must agree", 0.70),  # dense likes it, BM25 has no word of it
                 ("a2", "hash value and some other words here", -0.50)],  # BM25 likes it, dense ranks it last
}


def _vector(cos: float, n: int) -> np.ndarray:
    v = np.zeros(DIM, np.float32)
    v[0], v[1 + n % (DIM - 1)] = cos, np.sqrt(1 - cos * cos)
    return v


@pytest.fixture
def indexed(tmp_path):
    """(store, index, chunk name -> id, document title -> id): the documents in SQLite and both indexes,
    each ranker keeping its first 4 candidates."""
    db = SqliteDatabase(tmp_path / "var" / "docs.sqlite")
    store = DocumentStore(db)
    ids, doc_ids, vecs, texts = {}, {}, [], []
    for n_doc, (title, chunks) in enumerate(DOCS.items()):
        records = [ChunkRecord(0, i, text, 0, len(text), len(text.split()), vector=_vector(cos, 3 * n_doc + i))
                   for i, (_, text, cos) in enumerate(chunks)]
        doc_id, _, new = store.replace(DocumentMeta(f"text:{title}", title, "text", title, 1), records)
        doc_ids[title] = doc_id
        for (name, text, _), cid, rec in zip(chunks, new, records):
            ids[name] = cid
            vecs.append(rec.vector)
            texts.append(text)
    index = HybridIndex(tmp_path / "index", DIM, candidates=4, agreement_min_k=2)  # three documents: agreement at k=3
    index.apply(IndexUpdate(list(ids.values()), np.stack(vecs), texts))
    index.wait_background()
    yield store, index, ids, doc_ids
    db.close()


def _query_vector() -> np.ndarray:
    q = np.zeros(DIM, np.float32)
    q[0] = 1.0
    return q


def test_a_document_both_rankers_like_through_different_chunks_keeps_a_hit(indexed):
    store, index, ids, doc_ids = indexed
    name = {v: k for k, v in ids.items()}
    dense = [name[h.chunk_id] for h in index.search(_query_vector(), QUERY, k=4, mode="dense")]
    bm25 = [name[h.chunk_id] for h in index.search(_query_vector(), QUERY, k=4, mode="bm25")]
    # the premise: each ranker has A among its first 3 documents, through a different chunk
    assert dense == ["b1", "c1", "a1", "b2"] and "a2" not in dense
    assert bm25[:3] == ["c1", "b2", "a2"] and "a1" not in bm25
    assert agreed_documents([ids[n] for n in dense], [ids[n] for n in bm25], store.document_ids_of(list(ids.values())), 3) == \
        [doc_ids["Popular B"], doc_ids["Popular C"], doc_ids["Answer A"]]

    chunk_level = [name[h.chunk_id] for h in index.search(_query_vector(), QUERY, k=3)]
    assert not {"a1", "a2"} & set(chunk_level)  # chunk-level fusion: B and C fill the three hits
    hits = index.search(_query_vector(), QUERY, k=3, doc_of=store.document_ids_of)
    got = [name[h.chunk_id] for h in hits]
    assert len({"a1", "a2"} & set(got)) == 1 and len(got) == 3 and len(set(got)) == 3  # A keeps one hit
    assert {store.document_ids_of([h.chunk_id])[h.chunk_id] for h in hits} == set(doc_ids.values())
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # with k=2 A is not among both rankers' first 2 documents: nothing is replaced
    assert [h.chunk_id for h in index.search(_query_vector(), QUERY, k=2, doc_of=store.document_ids_of)] == \
        [h.chunk_id for h in index.search(_query_vector(), QUERY, k=2)]


def test_agreement_is_left_out_for_single_rankers_documents_and_uncovered_languages(indexed, tmp_path):
    store, index, ids, _ = indexed
    q = _query_vector()
    for kw in ({"mode": "dense"}, {"mode": "bm25"}, {"pool": 6}):  # one ranker, or documents as results
        assert [h.chunk_id for h in index.search(q, QUERY, k=3, doc_of=store.document_ids_of, **kw)] == \
            [h.chunk_id for h in index.search(q, QUERY, k=3, **kw)]
    index.dense_languages = frozenset({"xx"})  # an embedder that does not cover the query's language: score fusion, as before
    assert [h.chunk_id for h in index.search(q, QUERY, k=3, doc_of=store.document_ids_of)] == \
        [h.chunk_id for h in index.search(q, QUERY, k=3)]


def test_agreement_needs_enough_hits(indexed):
    """Below agreement_min_k (by default AGREEMENT_MIN_K) the hits stay rank fusion's: an agreed document would
    take one of few hits from passages of another that rank higher."""
    from edge_agent.rag.retrieval import AGREEMENT_MIN_K

    store, index, ids, _ = indexed
    q = _query_vector()
    agreed = [h.chunk_id for h in index.search(q, QUERY, k=3, doc_of=store.document_ids_of)]
    assert agreed != [h.chunk_id for h in index.search(q, QUERY, k=3)]  # the premise: at k=3 agreement changes the hits
    index.agreement_min_k = 4
    assert [h.chunk_id for h in index.search(q, QUERY, k=3, doc_of=store.document_ids_of)] == \
        [h.chunk_id for h in index.search(q, QUERY, k=3)]
    assert AGREEMENT_MIN_K == 5 and HybridIndex(index.index_dir, DIM).agreement_min_k == AGREEMENT_MIN_K


def test_keep_agreed_replaces_only_a_second_hit_of_a_document():
    doc_of = {1: 10, 2: 10, 3: 20, 4: 30, 5: 40}
    fused = [(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6), (5, 0.5)]
    assert keep_agreed(fused[:3], fused, [30], doc_of) == [(1, 0.9), (4, 0.6), (3, 0.7)]
    assert keep_agreed([(1, 0.9), (3, 0.7)], fused, [30], doc_of) == [(1, 0.9), (3, 0.7)]  # every hit its document's only one
    assert keep_agreed(fused[:3], fused, [20], doc_of) == fused[:3]  # already there
    assert keep_agreed(fused[:3], fused, [30], doc_of, lambda c, chosen: c != 4) == fused[:3]  # its only chunk refused
    assert agreed_documents([1, 3, 4], [5, 4, 2], doc_of, 3) == [10, 30]
    assert agreed_documents([1, 2, 3, 4], [4, 1], doc_of, 2) == [10]  # 30 is dense's third document
    assert agreed_documents([1, 99], [99, 1], doc_of, 2) == [10]  # a chunk the store no longer has is left out
