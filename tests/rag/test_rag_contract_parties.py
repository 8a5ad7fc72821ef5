"""Grounded answers over a contract that defines its parties (a Dutch "overeenkomst van opdracht" and an English services
agreement, as a user walked them through the daemon): a figure of one party is no answer about the other, a compound of
the question whose first part is a short word of the text ("uurtarief" / "per uur") finds its passage, a clause's quote
does not run on into the next clause's number and heading, and a currency named in words is an amount.

Sentence ranking, the quote choice and the decline gate as the daemon runs them (answers.rank_sentences, answers.settle,
GroundingPolicy.uncovered), and the whole path through ChatService with the tiny real Llama (random weights: its answer
is noise, so the quote or the decline decides) over a real DocumentService in a tmp dir.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from edge_agent.services import answers as A
from edge_agent.services import parties
from edge_agent.services import sentences as S
from edge_agent.services.grounding import SCAFFOLDS, GroundingPolicy, RagOptions

OVEREENKOMST = """OVEREENKOMST VAN OPDRACHT

De ondergetekenden:

1. Van Dijk Bouwadvies B.V., gevestigd te Amersfoort, ingeschreven in het handelsregister onder nummer 61234567, hierna te noemen: "Opdrachtnemer";

2. Stichting Zorggroep Eemland, gevestigd te Baarn, hierna te noemen: "Opdrachtgever";

komen het volgende overeen.

Artikel 1 Opdracht
1.1 Opdrachtgever verleent aan Opdrachtnemer de opdracht tot het adviseren over de renovatie van het gebouw aan de Stationsweg 12 te Baarn.
1.2 Opdrachtnemer voert de opdracht uit naar beste inzicht en vermogen.

Artikel 2 Duur
2.1 Deze overeenkomst gaat in op 1 maart 2026 en eindigt op 31 december 2026.
2.2 Opdrachtgever kan de overeenkomst tussentijds opzeggen met inachtneming van een termijn van één maand.

Artikel 3 Vergoeding
3.1 Opdrachtnemer ontvangt een vergoeding van 95 euro per uur, exclusief btw.
3.2 Opdrachtnemer factureert maandelijks; Opdrachtgever betaalt binnen 30 dagen na factuurdatum.

Artikel 4 Geheimhouding
4.1 Opdrachtnemer houdt alle informatie over de cliënten van Opdrachtgever geheim.
4.2 Deze verplichting blijft ook na het einde van de overeenkomst van kracht.
"""

AGREEMENT = """SERVICES AGREEMENT

This Services Agreement is made between Harbourline Logistics Ltd, a company registered in England under number 08812345 (hereinafter referred to as the "Supplier"), and Westmere County Council (hereinafter the "Customer").

1. Services. The Supplier shall provide the warehousing services described in Schedule 1.
2. Term. This Agreement starts on 1 April 2026 and runs for three years.
3. Fees. The Customer shall pay the Supplier a monthly fee of 12,500 pounds.
4. Termination. Either party may terminate this Agreement on six months' written notice.
5. Liability. The Supplier's total liability shall not exceed the fees paid in the preceding twelve months.
"""


def _chunk(text: str, rank: int = 0):
    return SimpleNamespace(document_id=rank + 1, chunk_id=rank + 1, title=f"doc{rank}", location={}, score=0.1, snippet="", text=text)


def _answer(question: str, text: str, lang: str, model_said: str = "") -> tuple[str, dict]:
    """settle() over the three best sentences by words of one passage (the model's answer says nothing usable)."""
    ranked = A.rank_sentences(question, [_chunk(text)], lang)
    return A.settle(model_said, question, [(1, s) for s in ranked[:3]], lang, SCAFFOLDS[lang].absent, passages=[text])


def test_a_contract_defines_its_parties_in_quotes():
    from edge_agent.rag import language

    assert parties.defined_parties([OVEREENKOMST], "nl") == [frozenset(language.terms(w, "nl")) for w in ("Opdrachtnemer", "Opdrachtgever")]
    assert len(parties.defined_parties([AGREEMENT], "en")) == 2
    # a defined term is a party where the clause before it names an organisation or a person; not "(the "Services")"
    assert parties.defined_parties(['The Supplier provides the services (the "Services") to Jan Jansen (the "Buyer").'], "en") \
        == [frozenset({"buyer"})]
    # nor code's strings in a call or a tuple
    assert parties.defined_parties(["codes = (('Found', 302), (\"No Content\", 204)); Dave Jones (\"Dave\") wrote it."], "en") \
        == [frozenset({"dave"})]
    # no defining phrase: quoted words are no parties, and nothing is checked
    assert parties.party_check("What is the fee of the Supplier?", ['Press "Enter" to go on. The fee is 5 euro.'], "en") is None
    assert parties.party_check("Wat is de looptijd?", [OVEREENKOMST], "nl") is None  # no party asked


@pytest.mark.parametrize("question, lang, text, says", [
    ("Onder welk nummer is de opdrachtnemer ingeschreven in het handelsregister?", "nl", OVEREENKOMST, "61234567"),
    ("Onder welk nummer is de opdrachtgever ingeschreven in het handelsregister?", "nl", OVEREENKOMST, None),
    ("Wat is het btw-nummer van de opdrachtgever?", "nl", OVEREENKOMST, None),
    ("Waar is de opdrachtnemer gevestigd?", "nl", OVEREENKOMST, "Amersfoort"),
    ("Waar is de opdrachtgever gevestigd?", "nl", OVEREENKOMST, "Baarn"),
    # a clause that names both parties answers for the one whose part holds the figure
    ("Binnen hoeveel dagen betaalt de opdrachtgever?", "nl", OVEREENKOMST, "30 dagen"),
    # an amount passes between the parties: what the opdrachtnemer receives, the opdrachtgever pays
    ("Hoeveel betaalt de opdrachtgever per uur?", "nl", OVEREENKOMST, "95 euro per uur"),
    ("What is the company number of the Supplier?", "en", AGREEMENT, "08812345"),
    ("What is the company number of the Customer?", "en", AGREEMENT, None),
    ("What is the registration number of the Customer?", "en", AGREEMENT, None),
])
def test_a_figure_of_one_party_is_no_answer_about_the_other(question, lang, text, says):
    """The opdrachtnemer's registration line matched "Onder welk nummer is de opdrachtgever ingeschreven ...?" on every word
    but the role, and was quoted; the Supplier's number was quoted for the Customer's (both named in one sentence)."""
    answer, how = _answer(question, text, lang)
    if says is None:
        assert answer == SCAFFOLDS[lang].absent and how == {"answer": "declined", "check": "no_answer"}, answer
    else:
        assert says in answer and how["answer"] == "extractive", (answer, how)


def test_a_models_figure_of_the_other_party_is_not_quoted_either():
    """The model's answer that copies the other party's number passes the word check; its sentence is still not quoted."""
    q = "Onder welk nummer is de opdrachtgever ingeschreven in het handelsregister?"
    answer, how = _answer(q, OVEREENKOMST, "nl", model_said=" 61234567")
    assert answer == SCAFFOLDS["nl"].absent, (answer, how)


def test_a_clause_is_quoted_without_the_next_clauses_number_and_heading():
    """"3. Fees. The Customer shall pay ... 12,500 pounds." was quoted with "4. Termination." after it."""
    ranked = A.rank_sentences("What is the monthly fee?", [_chunk(AGREEMENT)], "en")
    fee = next(s for s in ranked if "12,500" in s.text)
    assert A.extractive(fee, 1) == '"The Customer shall pay the Supplier a monthly fee of 12,500 pounds." [1]'
    notice = next(s for s in ranked if "six months" in s.text)
    assert "Liability" not in A.quoted(notice)
    # a sentence that announces a list with a colon still carries its first item; prose still carries prose
    text = "Start the server with one of these flags:\n- --fast skips the check.\n- --slow runs it twice."
    head = next(s for s in A.rank_sentences("Which flags start the server?", [_chunk(text)], "en") if s.text.endswith(":"))
    assert A.quoted(head) == "Start the server with one of these flags: - --fast skips the check."
    plain = next(s for s in A.rank_sentences("When does the canteen close?", [_chunk("The canteen closes at two. It opens at nine.")], "en")
                 if "closes" in s.text)
    assert A.quoted(plain) == "The canteen closes at two. It opens at nine."


def test_a_compound_whose_first_part_is_a_short_word_of_the_text_finds_its_passage():
    """"Wat is het uurtarief?" declined before the model: neither "uurtarief" nor "tarief" is in a contract that says
    "95 euro per uur"; its first part "uur" is."""
    q = "Wat is het uurtarief?"
    assert S.coverage(q, OVEREENKOMST, "nl") == pytest.approx(3 / 9)
    assert GroundingPolicy().uncovered(q, [_chunk(OVEREENKOMST)], "nl") is None
    assert "95 euro per uur" in A.rank_sentences(q, [_chunk(OVEREENKOMST)], "nl")[0].text
    answer, how = _answer(q, OVEREENKOMST, "nl")
    assert "95 euro per uur" in answer and how["answer"] == "extractive"
    # only as the compound's first part, and only before what can start a word of its own
    assert S.coverage("Wat is de huurprijs?", "Het kost 95 euro per uur.", "nl") == 0.0
    assert S.coverage("Hoe werken de kantooruren?", "Het kantoor is een uur open.", "nl") < 1.0
    # and only in a text of the question's language: an English "bug" is no part of a Dutch "bugrapport"
    from edge_agent.rag import language

    terms, words = language.content_terms(q, "nl"), S.question_words(q, "nl")
    assert S.match_credits(terms, words, "Het kost 95 euro per uur.", "nl", "nl") == {"uurtarief": pytest.approx(3 / 9)}
    assert not S.match_credits(terms, words, "It costs 95 euro per uur.", "nl", "en")


def test_a_currency_named_in_words_is_an_amount():
    """"How much does the Customer pay per month?" declined over "a monthly fee of 12,500 pounds": no currency it knew."""
    answer, how = _answer("How much does the Customer pay per month?", AGREEMENT, "en")
    assert "12,500 pounds" in answer and how["answer"] == "extractive", (answer, how)


@pytest.fixture(scope="module")
def contract_chat(tiny_bundles, tmp_path_factory):
    from rag_docs import grounded_chat_over

    docs = {"Overeenkomst van opdracht": OVEREENKOMST, "Services agreement": AGREEMENT}
    with grounded_chat_over(tiny_bundles["llama"], tmp_path_factory.mktemp("contract-chat"), docs) as chat:
        yield chat


@pytest.mark.parametrize("question, lang, says", [
    ("Onder welk nummer is de opdrachtgever ingeschreven in het handelsregister?", "nl", None),
    ("What is the company number of the Customer?", "en", None),
    ("What is the company number of the Supplier?", "en", "08812345"),
    ("Wat is het uurtarief?", "nl", "95 euro per uur"),
])
def test_the_daemons_chat_path_over_the_contracts(contract_chat, question, lang, says):
    from edge_agent.services.chat import SamplingOptions

    gen = contract_chat.chat([{"role": "user", "content": question}], SamplingOptions(max_tokens=8, temperature=0), rag=RagOptions(k=4))
    (r,) = gen.collect()
    how = gen.grounding["choices"][0]
    assert gen.grounding["language"] == lang
    if says is None:
        assert r.text == SCAFFOLDS[lang].absent and how["answer"] == "declined", (r.text, how)
    else:
        assert says in r.text and how["answer"] == "extractive", (r.text, how)
        assert "Termination" not in r.text
