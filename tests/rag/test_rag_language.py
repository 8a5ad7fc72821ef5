"""Language-aware retrieval: detection, per-language stems and stop words, weighted fusion, languages in stats."""
from __future__ import annotations

import numpy as np

from edge_agent.rag import language
from edge_agent.rag.bm25 import Bm25Index
from edge_agent.rag.retrieval import HybridIndex, IndexUpdate

NL = "De videokaarten verwerken de berekeningen veel sneller dan de processoren van gewone werkstations."
EN = "The graphics cards process the calculations much faster than the processors of ordinary workstations."


def test_detects_languages_and_stems_each_in_its_own():
    assert language.detect(NL) == "nl" and language.detect(EN) == "en"
    assert language.detect("12345 -- 678") == language.UNKNOWN
    nl = language.terms(NL, "nl")
    assert "videokaart" in nl and "de" not in nl  # Dutch plural stemmed, Dutch stop word gone
    en = language.terms(EN, "en")
    assert "card" in en and "calcul" in en and "the" not in en
    # codes stay whole next to the stems; accents folded after stemming
    assert "xk-99/b" in language.terms("Bestel onderdeel XK-99/B vóór vrijdag", "nl")
    assert "voor" in language.terms("vóór", "nl", drop_stop_words=False)
    # a query is analysed in the index languages it is likely in
    assert language.likely("Hoeveel kost een nieuwe videokaart?", ["en", "nl"])[0] == "nl"
    assert language.likely("How much does a new graphics card cost?", ["en", "nl"])[0] == "en"
    assert language.likely("anything", []) == [] and language.likely("anything", ["nl"]) == ["nl"]


def test_a_dutch_query_finds_the_inflected_dutch_chunk():
    b = Bm25Index()
    b.rebuild(np.array([1, 2, 3]), [NL, EN, "Het weer wordt morgen zonnig met een zwakke wind uit het oosten en veel zon."])
    assert b.languages() == {"nl": 2, "en": 1}
    assert b.langs[1] == "nl" and b.langs[2] == "en"
    # "videokaart" (singular) and "berekening" only match the Dutch chunk's plurals through the stemmer
    ids, _ = b.search("Welke videokaart doet de berekening?", 3)
    assert ids.tolist()[:1] == [1]
    ids, _ = b.search("which graphics card calculates faster", 3)
    assert ids.tolist()[:1] == [2]


def test_snapshot_keeps_each_chunks_language():
    b = Bm25Index()
    b.rebuild(np.array([5, 9]), [NL, EN])
    again = Bm25Index.from_snapshot(b.snapshot())
    assert again.langs == {5: "nl", 9: "en"} and again.languages() == {"nl": 1, "en": 1}
    again.apply([11], again.encode_many([NL]), [9])
    assert again.languages() == {"nl": 2}


def _one_hot(i: int, dim: int = 8) -> np.ndarray:
    v = np.zeros(dim, np.float32)
    v[i] = 1.0
    return v


def test_fusion_leans_on_bm25_when_the_embedder_does_not_cover_the_query_language(tmp_path):
    """Dense ranks chunk 1 first by far, BM25 chunk 2 ahead of it (chunk 3, last in both, sets each ranker's floor):
    with equal weights chunk 1 wins (dense's margin is the larger); a Dutch query on an English-only embedder has
    dense at 0.25, so BM25's choice wins."""
    texts = ["De sleutel van het archief en de code van de deur liggen bij de portier, die om vijf uur naar huis gaat.",  # 1: once each
             "De code van het archief is QX-7731 en de code van de kluis is anders.",  # 2: "code" twice, "archief"
             "In de kelder onder het gemeentehuis bewaren ze behalve het archief ook oude kaarten, foto's, "
             "verslagen van raadsvergaderingen en dozen vol brieven van vroegere burgemeesters."]  # 3: "archief", long
    vecs = np.stack([_one_hot(0), 0.3 * _one_hot(0) + np.sqrt(0.91) * _one_hot(1), _one_hot(2)])
    query = "Wat is de code van het archief?"
    both = HybridIndex(tmp_path / "a", 8, dense_languages=None)
    en_only = HybridIndex(tmp_path / "b", 8, dense_languages=["en"])
    for idx in (both, en_only):
        idx.apply(IndexUpdate([1, 2, 3], vecs, texts), save=False)
        assert [h.chunk_id for h in idx.search(_one_hot(0), query, k=3, mode="dense")] == [1, 2, 3]
        assert [h.chunk_id for h in idx.search(_one_hot(0), query, k=3, mode="bm25")] == [2, 1, 3]
        assert idx.search(_one_hot(0), query, k=3)[0].query_language == "nl"
    assert both.search(_one_hot(0), query, k=2)[0].chunk_id == 1
    assert en_only.search(_one_hot(0), query, k=2)[0].chunk_id == 2
    # an English query on the same index: the embedder covers it, equal weights again
    assert en_only.covers("en") and not en_only.covers("nl") and en_only.covers(None)
    stats = en_only.stats()
    assert stats["languages"] == {"nl": {"chunks": 3, "embedder_covers": False}}
    assert stats["embedder_languages"] == ["en"]


def test_service_stats_name_the_languages_and_the_embedder_coverage(service):
    service.add_text("Archief", NL)
    service.add_text("Archive", EN)
    stats = service.stats()["index"]
    assert stats["languages"] == {"nl": {"chunks": 1, "embedder_covers": False}, "en": {"chunks": 1, "embedder_covers": True}} \
        or stats["languages"] == {"en": {"chunks": 1, "embedder_covers": True}, "nl": {"chunks": 1, "embedder_covers": False}}
    assert stats["embedder_languages"] == ["en"]
    hits = service.retrieve("Welke videokaart is sneller?", k=1)
    assert hits[0].title == "Archief"


def test_index_stats_say_which_languages_the_embedder_covers(index_cli, docs_root, capsys):
    import json

    (docs_root / "nl.txt").write_text(NL)
    (docs_root / "en.txt").write_text(EN)
    assert index_cli("add", str(docs_root), "--no-progress") == 0
    capsys.readouterr()
    assert index_cli("stats", "--json") == 0
    langs = json.loads(capsys.readouterr().out)["index"]["languages"]
    assert langs["nl"] == {"chunks": 1, "embedder_covers": False} and langs["en"] == {"chunks": 1, "embedder_covers": True}
    assert index_cli("stats") == 0
    out = capsys.readouterr().out
    assert "nl* 1 chunk" in out and "en 1 chunk," in out + "," and out.count("does not cover it: BM25 leads") == 1
    assert "`edge-agent model install-embedding`" in out  # what to do about the Dutch chunks


def test_the_install_hint_only_when_a_language_is_not_covered():
    from edge_agent.cli.index import stats_lines

    def lines(covers: bool) -> str:
        ix = {"documents": 1, "chunks": 2, "index": {"ann_threshold": 100000, "languages": {"en": {"chunks": 1, "embedder_covers": True},
                                                                    "und": {"chunks": 1, "embedder_covers": False},
                                                                    "nl": {"chunks": 1, "embedder_covers": covers}}}}
        return "\n".join(stats_lines(ix))

    assert "install-embedding" in lines(False) and "install-embedding" not in lines(True)
