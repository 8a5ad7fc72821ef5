"""Language lanes: with a multilingual embedder, a question in one language finds the chunk in the other language
(rag.retrieval, "Across languages"). Real FAISS (exact and HNSW) and real BM25 in tmp dirs; hand-made vectors stand in
for the embedder's: a Dutch question whose vector lies closer to the Dutch chunks than to the English one that
answers it, as multilingual-e5-small places them."""
from __future__ import annotations

import numpy as np

from edge_agent.rag.index import FaissIndex, RWLock
from edge_agent.rag.retrieval import CROSS_LANGUAGE_GAP, HybridIndex, IndexUpdate

DIM = 16
NL = [
    "De archiefserver draait Debian en maakt elke nacht een reservekopie van alle mappen naar de tweede schijf.",
    "Het wachtwoord van de beheerder staat in de kluis op het kantoor aan de gracht in Amsterdam.",
    "Facturen worden binnen dertig dagen na ontvangst betaald door de afdeling financiën van de gemeente.",
    "De vergaderzaal op de tweede verdieping kan worden gereserveerd via het intranet van de organisatie.",
    "Nieuwe medewerkers krijgen op hun eerste werkdag een laptop en een toegangspas van de receptie.",
]
EN = "The recursion limit of the interpreter is one thousand frames by default; setrecursionlimit changes it."
QUESTION = "Hoeveel niveaus diep mag een functie zichzelf aanroepen?"


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _vectors(english_cos: float) -> tuple[np.ndarray, np.ndarray]:
    """Five Dutch chunk vectors at cosines 0.90 .. 0.86 to the query, the English one at english_cos."""
    rng = np.random.default_rng(7)
    q = _unit(rng.standard_normal(DIM))
    out = []
    for cos in [0.90, 0.89, 0.88, 0.87, 0.86, english_cos]:
        r = rng.standard_normal(DIM)
        r -= r.dot(q) * q
        out.append(_unit(cos * q + np.sqrt(1 - cos**2) * _unit(r)))
    return q, np.stack(out)


def _index(tmp_path, dense_languages, english_cos=0.84, candidates=3, dutch_copies=1) -> tuple[HybridIndex, np.ndarray]:
    """Chunks 1.. the Dutch ones (dutch_copies times), the English one last."""
    q, vecs = _vectors(english_cos)
    texts = NL * dutch_copies + [EN]
    vecs = np.concatenate([vecs[:5]] * dutch_copies + [vecs[5:]])
    index = HybridIndex(tmp_path / "ix", DIM, candidates=candidates, dense_languages=dense_languages,
                        cross_language_gap=CROSS_LANGUAGE_GAP)
    index.apply(IndexUpdate(list(range(1, len(texts) + 1)), vecs, texts), save=False)
    return index, q


def test_a_dutch_question_finds_the_english_chunk_that_answers_it(tmp_path):
    index, q = _index(tmp_path, ["en", "nl"])
    assert index.bm25.languages() == {"nl": 5, "en": 1} and index.bm25.query_languages(QUESTION)[0] == "nl"
    hits = index.search(q, QUESTION, k=3)
    # dense alone over all chunks keeps the five Dutch ones on top (0.90 .. 0.86 > 0.84) and BM25 shares no word with
    # the English chunk: without the lane the first three hits are Dutch (test_no_lane_...). With it, the English
    # chunk's cosine plus the gap (0.89) puts it among them.
    english = next(h for h in hits if h.chunk_id == 6)
    assert abs(english.dense_score - (0.84 + CROSS_LANGUAGE_GAP)) < 1e-4 and english.bm25_rank is None
    # dense search alone keeps the embedder's own ranking (no lane): the Dutch chunks first
    assert [h.chunk_id for h in index.search(q, QUESTION, k=3, mode="dense")] == [1, 2, 3]
    # a filter that leaves the English chunk out is kept: the lane searches only among the allowed chunks
    assert 6 not in [h.chunk_id for h in index.search(q, QUESTION, k=3, allowed=np.array([1, 2, 3, 4, 5]))]
    # and the English chunk in the allowed ones is found through the lane again
    assert 6 in [h.chunk_id for h in index.search(q, QUESTION, k=3, allowed=np.array([1, 2, 6]))]


def test_no_lane_without_a_multilingual_embedder_or_for_a_small_language(tmp_path):
    # an English-only embedder (all-MiniLM-L6-v2) does not cover the Dutch question: no lane
    en_only, q = _index(tmp_path / "a", ["en"])
    assert 6 not in [h.chunk_id for h in en_only.search(q, QUESTION, k=3)]
    # an embedder that declares no languages: no lane either (nothing says it places languages side by side)
    unknown, q = _index(tmp_path / "b", None)
    assert 6 not in [h.chunk_id for h in unknown.search(q, QUESTION, k=3)]
    # a gap of 0 turns lanes off
    off, q = _index(tmp_path / "c", ["en", "nl"])
    off.cross_language_gap = 0.0
    assert 6 not in [h.chunk_id for h in off.search(q, QUESTION, k=3)]
    # a language under a tenth of the chunks (one English chunk among ten Dutch ones) gets no lane
    small, q = _index(tmp_path / "d", ["en", "nl"], candidates=6, dutch_copies=2)
    assert small.bm25.languages() == {"nl": 10, "en": 1}
    assert 11 not in [h.chunk_id for h in small.search(q, QUESTION, k=3)]


def test_an_english_chunk_far_below_stays_out(tmp_path):
    # the gap lifts the other language's cosines by CROSS_LANGUAGE_GAP, no more: an English chunk at 0.5 does not pass
    # Dutch chunks at 0.86 .. 0.90
    index, q = _index(tmp_path, ["en", "nl"], english_cos=0.5)
    assert 6 not in [h.chunk_id for h in index.search(q, QUESTION, k=3)]


def test_lanes_are_off_by_default_and_on_through_the_setting(tmp_path):
    from edge_agent.config import Settings

    assert HybridIndex(tmp_path / "ix", DIM).cross_language_gap == 0.0
    assert Settings().rag_cross_language_gap == 0.0
    assert Settings(rag_cross_language_gap=0.05).rag_cross_language_gap == 0.05


def test_search_among_uses_the_hnsw_graph_and_only_the_given_ids():
    rng = np.random.default_rng(3)
    vecs = np.stack([_unit(v) for v in rng.standard_normal((400, DIM))])
    fi = FaissIndex(DIM, ann_threshold=100)
    fi.add(np.arange(400, dtype=np.int64), vecs)
    fi.maybe_build_ann(RWLock(), wait=True)
    assert fi.ann_state == "ready"
    among = np.arange(0, 400, 3, dtype=np.int64)
    scores, ids = fi.search_among(vecs[5], 10, among)
    assert len(ids) == 10 and set(ids.tolist()) <= set(among.tolist())
    exact = np.argsort(-(vecs[among] @ vecs[5]))[:10]
    assert len(set(ids.tolist()) & set(among[exact].tolist())) >= 8  # HNSW's filtered search finds the exact top 10 (nearly)
    fi.remove(np.array([among[exact[0]]]))  # a removed chunk is not returned before the graph is rebuilt
    assert int(among[exact[0]]) not in fi.search_among(vecs[5], 10, among)[1].tolist()
