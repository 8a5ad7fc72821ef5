"""Grounded answers that declined although the passage held the fact (issue 13, part 4): a who-wrote question over an
author line that shares none of its words, a value asked of a named thing where a passage about something else matches
the question's other words better, and a document's "Key: value" field read as a heading."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from edge_agent.services import answers as A
from edge_agent.services import persons
from edge_agent.services.sentences import question_words

DECLINE = "Niet gevonden."
MAN = ("NAAM\n\nshred - versnipper een bestand om de inhoud te verbergen\n\nBESCHRIJVING\n\nOverschrijf het bestand herhaaldelijk, "
       "zodat de inhoud moeilijk terug te halen is. Met -u verwijdert shred het bestand daarna.\n\n"
       "AUTEUR\n\nGeschreven door Colin Plumb.\n\nVERTALING\n\nDe Nederlandse vertaling werd gemaakt door Frans Spiesschaert.")


def _chunk(text: str, rank: int = 0):
    return SimpleNamespace(document_id=rank + 1, chunk_id=rank + 1, title=f"doc{rank}", location={}, score=0.1, snippet="", text=text)


def _evidence(question: str, texts: list[str], lang: str):
    ranked = A.rank_sentences(question, [_chunk(t, i) for i, t in enumerate(texts)], lang)
    return [(s.chunk + 1, s) for s in ranked[:3]], ranked


@pytest.mark.parametrize("question, lang, terms", [
    ("Who wrote the shred program?", "en", {"wrote"}),
    ("Door wie is het hulpprogramma timeout gemaakt?", "nl", {"maak"}),
    ("Wie heeft het info-hypertekstsysteem bedacht?", "nl", {"bedacht"}),
    ("Wie is de hoofdauteur van de handleiding?", "nl", {"hoofdauteur"}),
    ("Wie heeft aptitude in het Iers vertaald?", "nl", set()),  # a translation: another relation
    ("What does shred write over a file?", "en", set()),  # no who-question
])
def test_a_who_question_about_who_wrote_or_made_something(question, lang, terms):
    assert persons.author_terms(question, lang, question_words(question, lang)) == terms


@pytest.mark.parametrize("text, states", [
    ("AUTEUR Geschreven door Colin Plumb.", True),
    ("Author: Gordon McMillan", True),
    ("The initial draft of this document was written by Andrew Kuchling.", True),
    ("Het werd ontworpen door Richard Stallman en is ouder dan WWW.", True),
    ("De Nederlandse vertaling werd in 2015 gemaakt door Frans Spiesschaert.", False),  # a translator, not the author
    ("The file is made by the installer.", False),  # nobody named
    ("Daniel Burrows", False),  # a name, but no word that says what he did
])
def test_a_sentence_that_says_who_wrote_something(text, states):
    assert persons.states_author(text, "Who wrote it?", "en") is states


@pytest.mark.parametrize("question, lang", [("Door wie is het programma shred gemaakt?", "nl"), ("Who wrote the shred program?", "en")])
def test_the_author_line_answers_who_wrote_it_though_it_shares_none_of_the_questions_words(question, lang):
    evidence, ranked = _evidence(question, [MAN], lang)
    assert "Colin Plumb" in ranked[0].text  # "Geschreven door" holds the question's "gemaakt" / "wrote"
    text, how = A.settle("Het programma shred.", question, evidence, lang, DECLINE, passages=[f"doc0\n{MAN}"])
    assert text == '"Geschreven door Colin Plumb." [1]' and how["answer"] == "extractive"


def test_who_made_it_is_declined_where_only_a_translator_is_named():
    without = MAN.replace("AUTEUR\n\nGeschreven door Colin Plumb.\n\n", "")
    question = "Door wie is het programma shred gemaakt?"
    evidence, ranked = _evidence(question, [without], "nl")
    translation = next(s for s in ranked if "Spiesschaert" in s.text)
    assert translation.match == 0.0  # its "gemaakt door" credits the translation, not the program
    assert A.settle("Frans Spiesschaert.", question, evidence, "nl", DECLINE, passages=[f"doc0\n{without}"]) == (
        DECLINE, {"answer": "declined", "check": "no_answer"})


def test_a_passage_that_does_not_name_the_asked_thing_sets_no_bar_for_the_one_that_does():
    question = "Tot hoeveel bandbreedte biedt het gedeelde geheugen van de Orka X2?"
    other = "Het gedeelde geheugen van een standaard DDR5-systeem biedt een bandbreedte tot 90 GB/s."
    about = "De Orka X2 haalt tot 800 GB/s."
    evidence, _ = _evidence(question, [other, about], "nl")
    first, second = (s for _, s in evidence[:2])
    assert first.chunk == 0 and second.chunk == 1 and second.match < A.NEAR_BEST * first.match  # words prefer the DDR5 one
    passages = [f"doc0\n{other}", f"doc1\n{about}"]
    assert A.settle("1000 GB/s.", question, evidence, "nl", DECLINE, passages=passages)[0] == f'"{about}" [2]'
    # the passage about something else alone: still declined (it does not name the Orka X2)
    assert A.settle("1000 GB/s.", question, evidence[:1], "nl", DECLINE, passages=passages)[0] == DECLINE


def test_a_documents_field_is_quoted_where_a_heading_would_not_be():
    question = "who are the authors of the ipaddress tutorial?"
    text = ("An introduction to the ipaddress module\n\nauthor: Nick Coghlan\n\nOverview\n\nIt's not really a tutorial - you'll "
            "still have work to do. It doesn't cover the fine points of the ipaddress module.")
    evidence, _ = _evidence(question, [text], "en")
    assert {s.text for _, s in evidence} >= {"author: Nick Coghlan", "An introduction to the ipaddress module"}
    assert A.settle("Nick and David.", question, evidence, "en", DECLINE, passages=[f"doc0\n{text}"])[0] == '"author: Nick Coghlan" [1]'
    # a heading alone is still no answer: the same question over the heading and prose only declines
    bare = text.replace("author: Nick Coghlan\n\n", "")
    evidence, _ = _evidence(question, [bare], "en")
    assert A.settle("Nick and David.", question, evidence, "en", DECLINE, passages=[f"doc0\n{bare}"])[0] == DECLINE


def test_a_year_the_model_copies_points_at_the_one_sentence_that_writes_it():
    question = "Vanaf welk jaar tellen pakketten met een veiligheidsfix mee voor het hardening-doel?"
    text = ("Het hardening-project wil de beveiliging van programma's verbeteren door ze met speciale vlaggen te compileren. "
            "De doelstelling is om dit te realiseren voor alle pakketten van een standaardinstallatie en voor de pakketten die "
            "sinds 2006 een opwaardering hebben gehad omwille van een beveiligingsprobleem. Momenteel werden ongeveer 400 "
            "pakketten aangepast.")
    evidence, _ = _evidence(question, [text], "nl")
    assert all(s.match < A.FIRST_MIN_MATCH for _, s in evidence)  # a paraphrase: too few of its words to quote by them
    passages = [f"doc0\n{text}"]
    answer, how = A.settle(" vanaf 2006.", question, evidence, "nl", DECLINE, passages=passages)
    assert "sinds 2006 een opwaardering" in answer and how == {"answer": "extractive", "check": "figure"}
    # a year no sentence writes, or a figure that is no year, points at nothing
    assert A.settle(" vanaf 2004.", question, evidence, "nl", DECLINE, passages=passages)[0] == DECLINE
    assert A.settle(" 400.", question, evidence, "nl", DECLINE, passages=passages)[0] == DECLINE


def test_the_author_line_stays_shown_where_the_models_likelihood_ranks_it_last():
    from edge_agent.services.grounding import focus

    question = "Who wrote the shred program?"
    other = ("NAAM\n\ninfo - lees documentatie in Info-formaat\n\nBESCHRIJVING\n\nHet werd ontworpen door Richard Stallman en is "
             "ouder dan WWW. Info toont hypertekst in een gewone tekstconsole.")
    chunks = [_chunk(MAN, 0), _chunk(other, 1)]

    def likelihood(texts):  # the model prefers anything to a Dutch author line
        return [-9.0 if "Geschreven door" in t else -1.0 for t in texts]

    g = focus(question, chunks, "en", "Text", 3, likelihood, 5)
    shown = [s.text for _, s in g.evidence]
    assert "AUTEUR Geschreven door Colin Plumb." in shown  # of the passage about shred, not info's author
    assert not any("Stallman" in t for t in shown)
    without = focus(question, chunks, "en", "Text", 3, likelihood, 0)  # no reranking: its words show it
    assert "AUTEUR Geschreven door Colin Plumb." in [s.text for _, s in without.evidence]
    # a question that names a thing no author line is about is still declined: info's author is not shred's
    q2 = "Wie heeft het programma Shred-X oorspronkelijk geschreven?"
    g2 = focus(q2, [_chunk(other, 0)], "nl", "Tekst", 3, likelihood, 5)
    passages = [f"doc0\n{other}"]
    assert A.settle("Richard Stallman.", q2, g2.evidence, "nl", DECLINE, passages=passages)[0] == DECLINE
