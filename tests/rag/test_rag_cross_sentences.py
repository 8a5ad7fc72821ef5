"""Sentence choice across languages: a Dutch question shares few words with an English passage, so the sentences of a
passage in another language that a multilingual embedding model places nearest to the question join those the model's
likelihood ranks again (answers.rank_sentences' lane, grounding.focus), and the model's answer that copies a name from
such a sentence has it quoted (answers.check_answer, settle); an embedding model of one language adds nothing. The real
packaged embedder (declared multilingual where a test says so), real sentences."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from edge_agent.services import answers as A
from edge_agent.services.grounding import DocumentRetriever, GroundingPolicy, focus

# a Dutch passage full of the question's words that does not answer it, and the English one that does
NL_TEXT = ("Een fout bij het delen kan veel oorzaken hebben. Wie door een klein getal deelt, krijgt een groot getal. "
           "Nul is een bijzonder getal bij het delen. Een fout melden kan via de lijst. Krijg je een fout, lees dan de "
           "melding. Delen door nul komt in de rekenkunde vaak voor.")
EN_TEXT = ("The modulo operator yields the remainder from the division. Division by zero raises the ZeroDivisionError "
           "exception. The floor division operator rounds down.")
FACT = "Division by zero raises the ZeroDivisionError exception."
Q = "Welke fout krijg je als je een getal door nul deelt?"


def _chunk(text: str, i: int):
    return SimpleNamespace(document_id=i, chunk_id=i, title=f"doc {i}", location={}, score=0.1, snippet="", text=text)


CHUNKS = [_chunk(NL_TEXT, 0), _chunk(EN_TEXT, 1)]


def _near(best: str, calls: list | None = None):
    """A similarity that places `best` nearest (0.9) and every other text at 0.8; records what it was asked."""
    def alike(texts: list[str]) -> list[float]:
        if calls is not None:
            calls.append(list(texts))
        return [0.9 if t == best else 0.8 for t in texts]
    return alike


def test_the_nearest_sentence_of_a_passage_in_another_language_is_its_lane():
    plain = A.rank_sentences(Q, CHUNKS, "nl")
    fact = next(s for s in plain if s.text == FACT)
    assert fact.match == 0 and not fact.lane and plain.index(fact) >= A.CROSS_SENTENCES + 5  # no word of the question
    calls: list = []
    ranked = A.rank_sentences(Q, CHUNKS, "nl", _near(FACT, calls), cross=1)
    assert calls and all(t in EN_TEXT for t in calls[0])  # only the other language's sentences are compared
    lane = [s for s in ranked if s.lane]
    assert [s.text for s in lane] == [FACT] and lane[0].language == "en"
    # the words still score every sentence: the order is the same
    assert [(s.text, s.score, s.match) for s in ranked] == [(s.text, s.score, s.match) for s in plain]
    assert sum(s.lane for s in A.rank_sentences(Q, CHUNKS, "nl", _near(FACT), cross=2)) == 2
    # past the best `skip` by words: a sentence ranked there already is no lane of its own
    assert not any(s.lane for s in A.rank_sentences(Q, CHUNKS, "nl", _near(FACT), cross=1, skip=len(plain)))
    past = A.rank_sentences(Q, CHUNKS, "nl", _near(FACT), cross=1, skip=plain.index(fact) + 1)
    assert [s.text for s in past if s.lane] != [FACT] and all(s.text in EN_TEXT for s in past if s.lane)
    assert sum(s.lane for s in past) == 1
    assert not any(s.lane for s in A.rank_sentences(Q, CHUNKS, "nl", _near(FACT), cross=0))


def test_no_lane_where_every_passage_is_in_the_questions_language():
    calls: list = []
    ranked = A.rank_sentences(Q, [_chunk(NL_TEXT, 0)], "nl", _near(FACT, calls))
    assert not calls and not any(s.lane for s in ranked)
    # an English question over the English passage: its own words rank it
    ranked = A.rank_sentences("Which exception does division by zero raise?", CHUNKS[1:], "en", _near("", calls))
    assert not calls and ranked[0].text == FACT


def test_a_similarity_must_give_one_value_per_sentence():
    with pytest.raises(ValueError):
        A.rank_sentences(Q, CHUNKS, "nl", lambda texts: [0.5])


def _prefers(text: str):
    """A likelihood that ranks `text` far above every other (what the model's likelihood of the question does when the
    sentence answers it)."""
    return lambda texts: [-1.0 if t == text else -4.0 for t in texts]


def test_focus_shows_the_lane_sentence_the_likelihood_ranks_first():
    without = focus(Q, CHUNKS, "nl", "Tekst", likelihood=_prefers(FACT))
    assert FACT not in [s.text for _, s in without.evidence]  # by words it never reaches the re-ranked five
    g = focus(Q, CHUNKS, "nl", "Tekst", likelihood=_prefers(FACT), similarity=_near(FACT))
    assert g.evidence[0][1].text == FACT and len(g.evidence) == 3
    assert g.lines[-1] == f"Tekst [{g.evidence[0][0]}]: {FACT}"  # the best last, next to the question
    assert {s.number for s in g.sources} == {k for k, _ in g.evidence}
    # without the likelihood's re-rank there is no lane (nothing to join), and the embedder is not asked
    calls: list = []
    assert FACT not in [s.text for _, s in focus(Q, CHUNKS, "nl", "Tekst", similarity=_near(FACT, calls)).evidence] and not calls
    # where the likelihood does not rank it among the best three, it is not shown
    g = focus(Q, CHUNKS, "nl", "Tekst", likelihood=lambda texts: [-4.0 if t == FACT else -1.0 for t in texts],
              similarity=_near(FACT))
    assert FACT not in [s.text for _, s in g.evidence]


DECLINE = "De documenten gaan hier niet over."


def test_the_answer_that_copies_a_name_from_a_sentence_in_another_language_has_it_quoted():
    g = focus(Q, CHUNKS, "nl", "Tekst", likelihood=_prefers(FACT), similarity=_near(FACT))
    fact = g.evidence[0][1]
    assert A.across(fact, "nl") and not A.across(g.evidence[1][1], "nl")
    v = A.check_answer("Een ZeroDivisionError.", Q, [s for _, s in g.evidence], "nl")
    assert v.ok and v.support == fact  # its words hold none of the question's: the copied name points at it
    text, how = A.settle("Een ZeroDivisionError.", Q, g.evidence, "nl", decline=DECLINE)
    assert text == A.extractive(fact, g.evidence[0][0]) and text.startswith(f"\"{FACT}")
    assert how == {"answer": "extractive", "check": "ok"}
    # the model's answer may read as the sentence's language: the sentence is quoted, not the answer
    english = "Division by zero raises the ZeroDivisionError exception."
    v = A.check_answer(english, Q, [s for _, s in g.evidence], "nl")
    assert v.status == "wrong_language" and v.support == fact
    assert A.settle(english, Q, g.evidence, "nl", decline=DECLINE) == (text, {"answer": "extractive", "check": "wrong_language"})
    # an answer that copies no name from it (a word of its own, a name in other letters, or one the question writes) is
    # no support there, and the sentence alone, with no word of the question, is not quoted
    for answer in ("Een fout.", "Een zerodivisionerror.", "Een RuntimeError."):
        assert A.check_answer(answer, Q, [s for _, s in g.evidence], "nl").support != fact
        assert A.settle(answer, Q, g.evidence, "nl", decline=DECLINE)[0] != text
    q = "Geeft delen door nul een ZeroDivisionError?"
    assert not A._copied_name("Ja, een ZeroDivisionError.", q, FACT)
    assert A._copied_name("Ja, een ZeroDivisionError.", Q, FACT)
    assert A._copied_name("Via X-Debbugs-CC: other-list@cosmic.edu", "Met welke pseudo-header?", "use X-Debbugs-CC")
    assert not A._copied_name("Python 3", "Welke versie?", "Python 3.12 is out.")  # "3" is not written as a word there


class _Declared:
    """The packaged embedding model with the languages a model's manifest declares."""

    def __init__(self, inner, languages):
        self.inner, self.languages = inner, languages
        self.embedded = 0

    def embed(self, texts):
        self.embedded += 1
        return self.inner.embed(texts)

    def embed_query(self, text):
        return self.inner.embed_query(text)


def test_the_retriever_gives_cosines_only_for_a_multilingual_embedder(embedder):
    q = "Which exception does division by zero raise?"
    texts = [FACT, "The floor division operator rounds down."]
    assert DocumentRetriever(lambda: SimpleNamespace(embedder=embedder)).sentence_similarity(q, "en") is None  # English only
    declared = _Declared(embedder, ("en", "nl"))
    retriever = DocumentRetriever(lambda: SimpleNamespace(embedder=declared))
    assert retriever.sentence_similarity(q, "fr") is None  # a language the model does not declare
    alike = retriever.sentence_similarity(q, "nl")
    got = alike(texts)
    want = embedder.embed(texts) @ embedder.embed_query(q)
    assert got == pytest.approx([float(x) for x in want], abs=1e-5) and got[0] > got[1]
    assert alike(texts) == got and declared.embedded == 1  # asked again (fewer sentences shown): remembered
    assert alike([]) == []
    assert DocumentRetriever(lambda: None).sentence_similarity(q, "en") is None  # not loaded yet


def test_the_setting_reaches_the_policy():
    from edge_agent.config import Settings

    assert GroundingPolicy().cross_sentences == A.CROSS_SENTENCES == Settings().rag_cross_language_sentences
    assert GroundingPolicy.from_settings(Settings(rag_cross_language_sentences=0)).cross_sentences == 0
    with pytest.raises(ValueError):
        Settings(rag_cross_language_sentences=-1)


def test_the_first_sentence_in_another_language_that_holds_what_is_asked_is_quoted_whatever_its_words():
    q = "Welke speciale methode gebruikt reversed() om achterstevoren te itereren?"
    fact = A.Sentence(0, 0, 'object.__reversed__(self) Called (if present) by the "reversed()" built-in to implement reverse '
                            'iteration.', 0.1, 0.127, language="en")
    other = A.Sentence(0, 1, "It should return a new iterator object that iterates in reverse order.", 0.1, 0.127, language="en")
    assert A.answer_kind(q, "nl") == "code" and fact.match < A.FIRST_MIN_MATCH
    # the likelihood ranked it first: quoted, though its words hold little of the Dutch question
    text, how = A.settle("Een methode.", q, [(1, fact), (1, other)], "nl", decline=DECLINE)
    assert text == A.extractive(fact, 1) and how["answer"] == "extractive"
    # not where it holds nothing of what is asked, not in second place, and not in the question's own language
    assert A.settle("Een methode.", q, [(1, other), (1, fact)], "nl", decline=DECLINE)[0] == DECLINE
    dutch = A.Sentence(0, 0, "De methode object.__reversed__(self) keert de volgorde om.", 0.1, 0.1, language="nl")
    assert A.settle("Een methode.", q, [(1, dutch)], "nl", decline=DECLINE)[0] == DECLINE

