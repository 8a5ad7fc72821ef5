"""Ranking: compound parts (character n-grams), the title/heading field, score fusion (each ranker's clear
winner kept; BM25 leading for languages the embedder does not cover), near-duplicates and MMR, neighbour
expansion, documents as results, and the BM25 snapshot version bump."""
from __future__ import annotations

import numpy as np
import pytest

from edge_agent.rag import bm25 as bm25_mod
from edge_agent.rag import language
from edge_agent.rag.bm25 import Bm25Index
from edge_agent.rag.retrieval import HybridIndex, IndexUpdate, score_fusion

SWITCH = "Op de achterkant zit een prestatieschakelaar met drie standen voor stil werken of volle snelheid."
FAN = "De ventilator draait harder wanneer de kaart warm wordt, maar de behuizing blijft redelijk stil."
PSU = "Een zware voeding levert genoeg vermogen voor twee videokaarten en een snelle processor in de kast."
CHAIN = "De leverancier sloot een infrastructuurcontract van achtendertig miljard met de cloudaanbieder."


def _index(texts) -> Bm25Index:
    b = Bm25Index()
    b.rebuild(np.arange(1, len(texts) + 1), texts)
    return b


def test_a_compound_matches_its_parts_and_the_parts_match_the_compound(monkeypatch):
    b = _index([SWITCH, FAN, PSU, CHAIN])
    assert b.langs[1] == "nl"
    # "schakelaar" is no stem of "prestatieschakelaar": only its n-grams find it
    assert b.search("Welke standen heeft de schakelaar?", 4)[0].tolist()[:1] == [1]
    assert b.search("Hoe groot was het contract met de cloud?", 4)[0].tolist()[:1] == [4]
    # and the other way round: a compound in the query finds the text that has its parts
    assert b.search("Welk voedingsvermogen is nodig?", 4)[0].tolist()[:1] == [3]
    monkeypatch.setattr(bm25_mod, "FIELD_WEIGHTS", (1.0, 0.0, 0.0))  # words only: the part is not found
    assert 1 not in b.search("Welke schakelaar?", 4)[0].tolist()


def test_english_text_gets_no_ngrams():
    assert language.subword_terms("The performance switch has three settings", "en") == []
    grams = language.subword_terms("prestatieschakelaar", "nl")
    assert "~chak" in grams and "~<pre" in grams and "~aar>" in grams


def test_a_heading_match_ranks_first():
    body = "The warranty covers parts for two years; labour is covered for one year after purchase."
    other = "Claims go through the dealer, who checks the serial number and the purchase date before any warranty repair."
    b = _index([("Installation guide\nMounting the boiler", body), ("Boiler manual\nWarranty", other),
                ("Boiler manual\nCleaning", "Clean the filter every month with warm water and dry it before use.")])
    ids, _ = b.search("warranty", 3)
    assert ids.tolist()[:1] == [2]  # the section named Warranty, though both mention it once
    plain = _index([body, other])  # without headers the shorter chunk wins
    assert plain.search("warranty", 2)[0].tolist()[:1] == [1]


def test_service_indexes_titles_on_ingest_and_on_rebuild(make_service):
    svc = make_service()
    svc.add_text("Dakkapel vergunning", "Voor de bouw aan de achterkant is een aanvraag bij de gemeente nodig, met tekeningen.")
    svc.add_text("Notulen", "De gemeente besprak de aanvraag voor de vergunning van de markt en het parkeren.")
    assert [h.title for h in svc.retrieve("dakkapel", k=2, mode="bm25")][:1] == ["Dakkapel vergunning"]
    svc.close()
    svc.index.bm25_path.unlink()  # next start rebuilds BM25 from SQLite: titles must come along
    again = make_service()
    assert [h.title for h in again.retrieve("dakkapel", k=2, mode="bm25")][:1] == ["Dakkapel vergunning"]


def _rrf(ranked: list[list[int]], weights: tuple[float, ...] = (1.0, 1.0), k: int = 60) -> list[int]:
    """Reciprocal rank fusion (the hybrid fusion before score fusion): ids best first, for the premises below."""
    scores: dict[int, float] = {}
    for ids, w in zip(ranked, weights):
        for rank, i in enumerate(ids, start=1):
            scores[i] = scores.get(i, 0.0) + w / (k + rank)
    return sorted(scores, key=lambda i: -scores[i])


def test_score_fusion_keeps_a_clear_bm25_winner_first():
    d_ids, d_scores = np.array([3, 2, 9]), np.array([0.61, 0.60, 0.40], np.float32)
    b_ids, b_scores = np.array([1, 2, 3]), np.array([12.0, 5.0, 4.9], np.float32)
    assert score_fusion(d_ids, d_scores, b_ids, b_scores, 0.25)[0][0] == 1
    # rank fusion, even with dense at a quarter weight, lets the dense favourite overtake it
    assert _rrf([d_ids.tolist(), b_ids.tolist()], weights=(0.25, 1.0))[0] != 1
    # one list empty (a single ranker, or BM25 found nothing): the other's order, its scores rescaled
    assert [i for i, _ in score_fusion(d_ids, d_scores, np.zeros(0, np.int64), np.zeros(0, np.float32), 1.0)] == [3, 2, 9]
    bm25_alone = score_fusion(np.zeros(0, np.int64), np.zeros(0, np.float32), b_ids, b_scores, 1.0)
    assert [i for i, _ in bm25_alone] == [1, 2, 3] and [s for _, s in bm25_alone] == pytest.approx([1.0, 0.1 / 7.1, 0.0])


# chunk -> (text, cosine of its vector to the query's): A is BM25's clear winner, D dense's; B, C and G both rank in between
SURE = {"A": ("Boiler pressure valve: the boiler pressure valve settings, boiler pressure valve parts.", 0.50),
        "B": ("The boiler pressure drops when the pump stops.", 0.60),
        "C": ("Open the valve under the boiler before filling it.", 0.58),
        "D": ("A safety device lets water out through a valve once the water inside goes above three bar.", 0.95),
        "G": ("The pressure gauge on the boiler shows bar.", 0.57),
        "E": ("Loops run over ranges and lists of items.", 0.20),
        "F": ("String formatting uses braces and field names.", 0.10)}


@pytest.mark.parametrize("languages", [None, ["en", "nl"]])
def test_each_rankers_clear_winner_keeps_its_place_when_the_embedder_covers_the_query(tmp_path, languages):
    """Dense is sure of D (cosine 0.95, the next 0.60), BM25 of A (about twice the next score) and ranks D last; B, C
    and G are middling in both. Rank fusion put B, middling in both, first and let one of the two winners fall below
    it; score fusion keeps both winners on top. For a language the embedder does not cover, BM25's order stands."""
    dim, q = 8, np.eye(8, dtype=np.float32)[0]
    vecs = np.stack([np.eye(dim, dtype=np.float32)[0] * c + np.eye(dim, dtype=np.float32)[1 + n % (dim - 1)] * np.sqrt(1 - c * c)
                     for n, (_, c) in enumerate(SURE.values())])
    name = dict(enumerate(SURE, start=1))
    query = "boiler pressure valve"
    for langs, covered in ((languages, True), (["xx"], False)):
        idx = HybridIndex(tmp_path / str(covered), dim, dense_languages=langs)
        idx.apply(IndexUpdate(list(name), vecs, [t for t, _ in SURE.values()]), save=False)
        dense = [name[h.chunk_id] for h in idx.search(q, query, k=7, mode="dense")]
        bm25 = idx.search(q, query, k=7, mode="bm25")
        assert dense[:2] == ["D", "B"] and [name[h.chunk_id] for h in bm25] == ["A", "G", "B", "C", "D"]  # the premise
        assert bm25[0].bm25_score > 1.8 * bm25[1].bm25_score
        assert _rrf([dense, [name[h.chunk_id] for h in bm25]])[0] == "B"
        hits = idx.search(q, query, k=7)
        assert hits[0].query_language == "en" and idx.covers("en") == covered
        if covered:
            assert [name[h.chunk_id] for h in hits[:2]] == ["A", "D"]
        else:
            assert [name[h.chunk_id] for h in hits[:5]] == ["A", "G", "B", "C", "D"]
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_near_duplicates_are_left_out_and_diversity_spreads_hits(make_service):
    svc = make_service()
    text = "The boiler pressure must stay between one and two bar; below one bar the boiler stops and shows error E-442."
    svc.add_text("Boiler manual", text)
    svc.add_text("Boiler manual copy", text + " Page 2.")
    svc.add_text("Boiler FAQ", "Error E-442 means low pressure: open the filling valve until the gauge shows 1.5 bar.")
    hits = svc.retrieve("boiler pressure error E-442", k=2)
    titles = [h.title for h in hits]
    assert len(titles) == 2 and not {"Boiler manual", "Boiler manual copy"} <= set(titles)
    assert "Boiler FAQ" in titles
    assert len(svc.retrieve("boiler pressure error E-442", k=2, diversity=0.7)) == 2
    with pytest.raises(Exception, match="diversity"):
        svc.retrieve("boiler", k=2, diversity=1.5)


def test_neighbour_expansion_adds_the_adjacent_chunks(make_service):
    svc = make_service(chunk_tokens=16, chunk_overlap=0)
    sentences = ["The red valve controls the hot water supply.", "The blue valve controls the cold water supply.",
                 "The green lever resets the burner after a fault.", "The yellow knob sets the room temperature."]
    svc.add_text("Valves", " ".join(sentences))
    hit = svc.retrieve("green lever resets burner", k=1, mode="bm25")[0]
    assert "green lever" in hit.text and "blue valve" not in hit.text
    wide = svc.retrieve("green lever resets burner", k=1, mode="bm25", neighbors=1)[0]
    assert "blue valve" in wide.text and "yellow knob" in wide.text and "red valve" not in wide.text
    assert wide.location["char_start"] < hit.location["char_start"] and wide.location["char_end"] > hit.location["char_end"]
    assert wide.text.count("green lever") == 1


def test_documents_as_results_are_distinct(make_service):
    svc = make_service(chunk_tokens=16, chunk_overlap=0)
    svc.add_text("Pump manual", "The pump primes itself. The pump runs dry safely. The pump needs a yearly check of its seal.")
    svc.add_text("Pump warranty", "The pump warranty lasts five years from the date on the invoice.")
    chunks = svc.retrieve("pump", k=3, mode="bm25")
    assert len({h.document_id for h in chunks}) < len(chunks)  # several chunks of one document
    docs = svc.retrieve("pump", k=3, mode="bm25", group="document")
    assert sorted(h.title for h in docs) == ["Pump manual", "Pump warranty"]


def test_a_snapshot_of_the_previous_tokenizer_is_rebuilt_with_ngrams(make_service, monkeypatch):
    svc = make_service()
    svc.add_text("Hardware", SWITCH)
    svc.add_text("Voeding", PSU)
    monkeypatch.setattr("edge_agent.rag.retrieval.TOKENIZER_VERSION", 3)  # as the release before wrote it
    svc.close()
    monkeypatch.undo()
    encoded = {"n": 0}
    real = Bm25Index.encode_many

    def counting(self, texts):
        texts = list(texts)
        encoded["n"] += len(texts)
        return real(self, texts)

    monkeypatch.setattr(Bm25Index, "encode_many", counting)
    again = make_service()
    assert encoded["n"] == 2  # the old snapshot was not used: every chunk encoded again
    assert [h.title for h in again.retrieve("schakelaar", k=1, mode="bm25")] == ["Hardware"]
    assert again.stats()["index"]["bm25_fields"]["subwords"] > 0
