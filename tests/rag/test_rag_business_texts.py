"""Grounded answers over the texts of a law firm or a finance department: contracts with numbered clauses, names
written with titles and initials ("mr. P.A. Koster", "R. Smit"), legal forms ("B.V."), sheet and CSV rows.

Each case is a defect a new user met (docs of their own, asked through the daemon): a name cut at "drs." or "R.",
a party cut from what it does at "B.V.", an article's heading glued to its first clause, the next clause or row
quoted after the one asked about. Sentence splitting and choice only: no model, no index.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from edge_agent.rag.loaders import row_line
from edge_agent.services import answers as A
from edge_agent.services import asks
from edge_agent.services import persons
from edge_agent.services import sentences as S

DECLINE = "De documenten gaan hier niet over."


def _chunk(text: str, rank: int = 0):
    return SimpleNamespace(document_id=rank + 1, chunk_id=rank + 1, title=f"doc{rank}", location={}, score=0.1, snippet="", text=text)


def _answer(question: str, texts: list[str], lang: str, model_said: str = "") -> tuple[str, dict]:
    """settle() over the three best sentences by words (the model's answer says nothing usable: the quote decides)."""
    ranked = A.rank_sentences(question, [_chunk(t, i) for i, t in enumerate(texts)], lang)
    evidence = [(s.chunk + 1, s) for s in ranked[:3]]
    return A.settle(model_said, question, evidence, lang, DECLINE, passages=texts)


@pytest.mark.parametrize("text, sentences", [
    ("De melding gaat naar de compliance officer, mevrouw mr. L. de Bruijn. Zij bevestigt binnen vijf werkdagen.",
     ["De melding gaat naar de compliance officer, mevrouw mr. L. de Bruijn.", "Zij bevestigt binnen vijf werkdagen."]),
    ("Namens de vennootschap tekent drs. H.J. van Wijk, directeur. De volmacht is bijgevoegd.",
     ["Namens de vennootschap tekent drs. H.J. van Wijk, directeur.", "De volmacht is bijgevoegd."]),
    ("Kostenplaats: 7100; Budgethouder: T. Mulder.", ["Kostenplaats: 7100; Budgethouder: T. Mulder."]),
    ("Verhuurder Beleggingen Oost B.V. verhuurt de bedrijfshal aan huurder. De huur is per kwartaal.",
     ["Verhuurder Beleggingen Oost B.V. verhuurt de bedrijfshal aan huurder.", "De huur is per kwartaal."]),
    ("Dr. Maria Lopez chairs the board. She was appointed in May.", ["Dr. Maria Lopez chairs the board.", "She was appointed in May."]),
    ("Pay by transfer, e.g. to the escrow account. Cash is refused.", ["Pay by transfer, e.g. to the escrow account.", "Cash is refused."]),
    # full stops that do end a sentence stay ends
    ("Zie bijlage A. De tarieven staan daar.", ["Zie bijlage A.", "De tarieven staan daar."]),
    ("The delay is 5 ms. The next step follows.", ["The delay is 5 ms.", "The next step follows."]),
    ("The product launched in the U.S. The company grew.", ["The product launched in the U.S.", "The company grew."]),
    ("Release 3.12. Support ends in 2028.", ["Release 3.12.", "Support ends in 2028."]),
])
def test_a_title_initials_or_abbreviation_does_not_end_a_sentence(text, sentences):
    assert S.split_sentences(text) == sentences


@pytest.mark.parametrize("text, named", [
    ("Budgethouder: R. Smit.", True),
    ("vertegenwoordigd door mevrouw drs. H.J. Wiersma, financieel directeur", True),
    ("Contactpersoon is mr. P.A. Koster.", True),
    ("De melding gaat naar L. de Bruijn.", True),
    ("Zie bijlage A. voor de tarieven.", False),
    ("Kostenplaats 4200 valt onder Kantoorautomatisering.", False),
])
def test_a_name_written_with_initials_names_a_person(text, named):
    assert persons.names_person(text, "Wie is de budgethouder?", "nl") is named


def test_a_who_question_is_answered_by_a_name_written_with_initials():
    rows = [row_line(["Kostenplaats", "Omschrijving", "Budgethouder"], r)
            for r in (["7100", "Reiskosten", "T. Mulder"], ["7200", "Huisvesting", "K. Bos"], ["7300", "Opleidingen", "E. Kaya"])]
    text, how = _answer("Wie is budgethouder van kostenplaats 7200?", ["\n\n".join(rows)], "nl")
    assert text == '"Kostenplaats: 7200; Omschrijving: Huisvesting; Budgethouder: K. Bos." [1]', (text, how)
    deed = ("1. Bouwbedrijf Terpstra B.V., gevestigd te Sneek, vertegenwoordigd door mevrouw drs. H.J. van Wijk, "
            "financieel directeur, hierna te noemen: \"Koper\";\n2. Gemeente Sneek, hierna te noemen: \"Verkoper\".")
    text, how = _answer("Wie is de financieel directeur van Terpstra?", [deed], "nl")
    assert "drs. H.J. van Wijk, financieel directeur" in text and how["answer"] == "extractive", (text, how)


def test_a_party_named_with_its_legal_form_is_spoken_of_in_its_sentence():
    letter = ("Thank you for instructing us to advise Harbour Freight B.V. on the renewal of its lease in Delft. "
              "Our work will be led by Ms Sara Visser, partner.")
    assert not asks.unasked_relation("Who leads the work for Harbour Freight?", [letter], "en")  # "work" is one sentence on


CONTRACT = ("Artikel 9 Betaling\n9.1 Opdrachtnemer factureert maandelijks achteraf een vast bedrag van € 4.200,00.\n"
            "9.2 Facturen worden binnen 21 dagen na factuurdatum betaald.\n"
            "9.3 Bij te late betaling is de wettelijke rente verschuldigd.")


def test_a_clause_number_starts_an_item_and_the_articles_heading_is_not_quoted():
    units = S.split_units(CONTRACT)
    assert [u.quote or u.text for u in units] == [
        "9.1 Opdrachtnemer factureert maandelijks achteraf een vast bedrag van € 4.200,00.",
        "9.2 Facturen worden binnen 21 dagen na factuurdatum betaald.",
        "9.3 Bij te late betaling is de wettelijke rente verschuldigd."]
    assert units[0].text.startswith("Artikel 9 Betaling 9.1")  # the heading still counts when matching
    text, how = _answer("Welk vast bedrag factureert opdrachtnemer maandelijks?", [CONTRACT], "nl")
    assert text == '"9.1 Opdrachtnemer factureert maandelijks achteraf een vast bedrag van € 4.200,00." [1]', (text, how)
    # a figure with a decimal mark at a wrapped line's start, in lower case after it, is no clause number
    wrapped = "De vergoeding bedraagt\n0.23 euro per kilometer en wordt maandelijks betaald."
    assert S.split_sentences(wrapped) == ["De vergoeding bedraagt 0.23 euro per kilometer en wordt maandelijks betaald."]


def test_an_item_is_quoted_without_the_next_item():
    text, how = _answer("Binnen hoeveel dagen worden facturen betaald?", [CONTRACT], "nl")
    assert text == '"9.2 Facturen worden binnen 21 dagen na factuurdatum betaald." [1]', (text, how)  # not 9.3 after it
    steps = ("Closing the month:\n1. By working day 2 the clerk books all purchase invoices.\n"
             "2. By working day 3 the controller reconciles the bank accounts.\n3. By working day 5 the CFO signs the report.")
    text, _ = _answer("By which working day are the bank accounts reconciled?", [steps], "en")
    assert text == '"2. By working day 3 the controller reconciles the bank accounts." [1]', text
    rows = "\n\n".join(row_line(["Service", "Fee (EUR)"], r) for r in (["Company formation", "1650"], ["Trademark filing", "890"]))
    text, _ = _answer("What is the fee for company formation?", [rows], "en")
    assert text == '"Service: Company formation; Fee (EUR): 1650." [1]', text
    # prose keeps its next sentence (the detail of a rule), and an item keeps the prose that goes on after it
    item = "3. Kosten: een dienstauto kost 650 euro per maand. Brandstof is inbegrepen."
    assert _answer("Wat kost een dienstauto per maand?", [item], "nl")[0] == f'"{item}" [1]'


def test_a_question_naming_a_clause_number_gets_that_clause():
    lease = ("Artikel 6 Onderhoud\n6.1 Huurder verzorgt het dagelijks onderhoud van de bedrijfshal.\n"
             "6.2 Verhuurder draagt de kosten van groot onderhoud aan dak en gevel.\n"
             "6.3 Schade meldt huurder binnen twee werkdagen.")
    # "6.2" is a term of its own, as the index reads it: its parts "6" and "2" alone pointed at 6.1 under the heading
    assert _answer("Wat staat er in artikel 6.2?", [lease], "nl")[0] == \
        '"6.2 Verhuurder draagt de kosten van groot onderhoud aan dak en gevel." [1]'
    assert _answer("What does clause 6.3 say?", [lease], "en")[0] == '"6.3 Schade meldt huurder binnen twee werkdagen." [1]'


def test_a_letters_greeting_heads_no_sentence_and_is_never_quoted():
    mail = ("Dear Marco,\n\nThank you for the draft lease of the warehouse in Delft.\n"
            "Please send the signed copy before 14 April 2026 so that the bank can release the deposit.\n\nKind regards,\nEva")
    units = S.split_units(mail)
    assert units[0].text == "Dear Marco," and units[1].text.startswith("Thank you")  # not "Dear Marco, Thank you ..."
    # the name in the greeting drew the quote to the mail's first sentence, which says nothing of the date
    text, how = _answer("By when should Marco send the signed copy?", [mail], "en")
    assert text == '"Please send the signed copy before 14 April 2026 so that the bank can release the deposit." [1]', (text, how)
    assert S.split_sentences("Geachte heer Jansen,\n\nHierbij de offerte.") == ["Geachte heer Jansen,", "Hierbij de offerte."]


PARTIES = ('OVEREENKOMST VAN OPDRACHT\n\nDe ondergetekenden:\n\n1. Van Dijk Bouwadvies B.V., gevestigd te Amersfoort, ingeschreven '
            'in het handelsregister onder nummer 61234567, hierna te noemen: "Opdrachtnemer";\n\n2. Stichting Zorggroep '
            'Eemland, gevestigd te Baarn, hierna te noemen: "Opdrachtgever";\n\nkomen het volgende overeen.\n\n'
            'Artikel 1 Opdracht\n1.1 Opdrachtgever verleent aan Opdrachtnemer de opdracht tot het adviseren over de renovatie.\n'
            '1.2 Opdrachtnemer voert de opdracht uit naar beste inzicht en vermogen.')
PARTY_CLAUSES = ('Artikel 3 Vergoeding\n3.1 Opdrachtnemer ontvangt een vergoeding van 95 euro per uur, exclusief btw.\n'
           '3.2 Opdrachtnemer factureert maandelijks; Opdrachtgever betaalt binnen 30 dagen na factuurdatum.\n\n'
           'Artikel 4 Geheimhouding\n4.1 Opdrachtnemer houdt alle informatie over de cliënten van Opdrachtgever geheim.')
AGREEMENT_EN = ('This Services Agreement is made between Harbourline Logistics Ltd, a company registered in England under number '
             '08812345 (hereinafter referred to as the "Supplier"), and Westmere County Council (hereinafter the "Customer"). '
             '1. Services. The Supplier shall provide the warehousing services described in Schedule 1.')


@pytest.mark.parametrize("question, lang, party", [
    ("Wie is de opdrachtnemer?", "nl", True), ("Who is the Customer in the services agreement?", "en", True),
    ("Wie is de verhuurder?", "nl", True), ("Wie is de topman van AMD?", "nl", False),
    ("Wie is de minister-president van Nederland?", "nl", False), ("Who proposed the match statement?", "en", False),
    ("Who is the author of PEP 8?", "en", False), ("Wie is Guido van Rossum?", "nl", False),
])
def test_a_who_question_about_a_party_by_its_role(question, lang, party):
    assert persons.asks_party(question, lang) is party


@pytest.mark.parametrize("text, named", [
    ("1. Van Dijk Bouwadvies B.V., gevestigd te Amersfoort", True), ("Stichting Zorggroep Eemland, gevestigd te Baarn", True),
    ("between Harbourline Logistics Ltd, a company registered in England", True), ("and Westmere County Council (the Customer)", True),
    ("ING Bank N.V. is a bank.", True), ("Opdrachtnemer voert de opdracht uit naar beste inzicht.", False),
    ("De stichting beheert het fonds.", False), ("Intel en AMD maken processors.", False),
])
def test_an_organisation_is_named_by_its_legal_form_or_its_kind(text, named):
    assert persons.names_organisation(text, "Wie is de opdrachtnemer?", "nl") is named


@pytest.mark.parametrize("question, lang, texts, says", [
    ("Wie is de opdrachtnemer?", "nl", [PARTY_CLAUSES, PARTIES], "Van Dijk Bouwadvies B.V."),
    ("Wie is de opdrachtgever?", "nl", [PARTY_CLAUSES, PARTIES], "Stichting Zorggroep Eemland"),
    ("Who is the Customer in the services agreement?", "en", [AGREEMENT_EN], "Westmere County Council"),
])
def test_a_contract_party_asked_by_its_role_is_answered_by_the_sentence_that_names_it(question, lang, texts, says):
    """Every clause names the party by its defined term; the sentence that says who it is (a company, a foundation, a
    council: no person) is quoted, where the person check declined and the clauses outranked it."""
    answer, how = _answer(question, texts, lang)
    assert says in answer and how["answer"] == "extractive", (answer, how)


def test_a_party_sentence_stays_shown_when_the_models_likelihood_prefers_the_clauses():
    """The likelihood rerank may put the clauses that name the party first; the one that says who it is stays among
    the sentences shown to the model and quoted (grounding.focus)."""
    from edge_agent.services.grounding import focus

    def likely(texts: list[str]) -> list[float]:  # the model's likelihood of the question: highest after the clauses
        return [0.0 if "Stichting" in t else 5.0 for t in texts]

    q = "Wie is de opdrachtgever?"
    chunks = [_chunk(PARTY_CLAUSES, 0), _chunk(PARTIES, 1)]
    shown = focus(q, chunks, "nl", "Tekst", 3, likely, rerank=5)
    assert any("Stichting Zorggroep Eemland" in s.text for _, s in shown.evidence), shown.evidence
    answer, _ = A.settle("", q, shown.evidence, "nl", DECLINE, passages=[PARTY_CLAUSES, PARTIES])
    assert "Stichting Zorggroep Eemland" in answer
    plain = focus("Wat is het uurtarief van de opdrachtnemer?", chunks, "nl", "Tekst", 3, likely, rerank=5)
    assert not any("Stichting" in s.text for _, s in plain.evidence)  # other questions: as ranked
