"""Grounded answers over manuals, policies and contracts: a form's two-column table (one field a row, cells joined by
" | " as the HTML and .docx loaders write them), numbered lists and clauses (a constitution's "1. The Project Leader is
elected ...", "see §4.2.1"), a contract's "Binnen hoeveel dagen betaalt ...?", and the sentence that holds what a question
asks for among the ones shown to the model.

Each case is a defect blind12's documents (GOsa's Dutch help, Debian's Constitution) or a contract probe showed: a
table's rows read as one wrapped sentence, cut at 400 characters and, with three "|" in it, never quoted; an item's or a
reference's number read as the figure a "how long" question asks for; a paying verb that made a count of days an amount
of money; the likelihood rerank that pushed the only sentence with the figure out of the shown ones. Sentence splitting
and choice only: no model, no index.
"""
from __future__ import annotations

from types import SimpleNamespace

from edge_agent.rag.loaders import load_bytes
from edge_agent.services import answers as A
from edge_agent.services import asks
from edge_agent.services import sentences as S

DECLINE = "De documenten gaan hier niet over."

PHONE_FORM = ("Telefoon hardware\n\n"
              "Telefoon | Selecteer de telefoon van de gebruiker uit de lijst\n"
              "Voicemail PIN-code* | Geef de vier cijferige PIN-code op, die de gebruiker in moet geven om de voicemailbox "
              "te kunnen beluisteren\n"
              "Telefoon PIN-code* | Geef de zes cijferige PIN-code op, die de gebruiker in moet geven om zich bij de telefoon "
              "aan te melden.\n\nJan Wenzel 2008-03-13")


def _chunk(text: str, rank: int = 0):
    return SimpleNamespace(document_id=rank + 1, chunk_id=rank + 1, title=f"doc{rank}", location={}, score=0.1, snippet="", text=text)


def _answer(question: str, texts: list[str], lang: str) -> tuple[str, dict]:
    """settle() over the three best sentences by words (the model's answer says nothing usable: the quote decides)."""
    ranked = A.rank_sentences(question, [_chunk(t, i) for i, t in enumerate(texts)], lang)
    evidence = [(s.chunk + 1, s) for s in ranked[:3]]
    return A.settle("", question, evidence, lang, DECLINE, passages=texts)


def test_each_table_row_is_a_unit_of_its_own():
    units = S.split_sentences(PHONE_FORM)
    assert "Telefoon | Selecteer de telefoon van de gebruiker uit de lijst" in units
    assert any(u.startswith("Voicemail PIN-code* | Geef de vier cijferige") and "Telefoon PIN-code" not in u for u in units)
    assert any(u.startswith("Telefoon PIN-code* | Geef de zes cijferige") for u in units)


def test_a_table_row_is_an_item_and_carries_no_next_row():
    ranked = A.rank_sentences("Uit hoeveel cijfers bestaat de voicemail PIN-code?", [_chunk(PHONE_FORM)], "nl")
    voicemail = next(s for s in ranked if s.text.startswith("Voicemail"))
    assert voicemail.after == ""  # the telephone's own PIN row is another record


def test_a_value_in_a_form_table_is_quoted():
    answer, how = _answer("Uit hoeveel cijfers bestaat de pincode van de voicemail?", [PHONE_FORM], "nl")
    assert how["answer"] == "extractive"
    assert "vier cijferige" in answer and "zes" not in answer


def test_an_html_definition_table_is_answered_row_by_row():
    html = ("<html><body><h2>Algemeen</h2><table>"
            "<tr><td>Persoonlijke map*</td><td>Het pad naar de persoonlijke map van de gebruiker</td></tr>"
            "<tr><td>Shell</td><td>De Unix shell bij het aanmelden. (/bin/false zorgt ervoor dat de gebruiker niet kan "
            "inloggen.)</td></tr>"
            "<tr><td>Primaire groep</td><td>De primaire groep van de gebruiker.</td></tr>"
            "<tr><td>Status</td><td>Geeft aan of het account actief is</td></tr>"
            "</table></body></html>")
    text = load_bytes(html.encode(), "form.html").sections[0].text
    answer, how = _answer("Welke shell zorgt dat de gebruiker niet kan inloggen?", [text], "nl")
    assert "/bin/false" in answer
    assert "Primaire groep" not in answer and "Persoonlijke map" not in answer


def test_code_and_grammar_lines_are_no_table_rows():
    assert not S.is_item('or_test ::= and_test | or_test "or" and_test')
    assert not S.is_item(">>> a | b")
    assert not S.is_item("   | not_test")
    assert S.is_item("Shell | De Unix shell")


CONSTITUTION = ("5.2. Appointment\n"
                "1. The Project Leader is elected by the Developers.\n"
                "2. The election begins six weeks before the post becomes vacant.\n")


def test_an_item_number_is_no_figure():
    q = "How long is the Project Leader in office once elected?"
    assert asks.unmarked("1. The Project Leader is elected by the Developers.") == "The Project Leader is elected by the Developers."
    assert asks.unmarked("4.2 Opzegtermijn: twee maanden.") == "Opzegtermijn: twee maanden."
    assert not asks.fits("1. The Project Leader is elected by the Developers.", "number", q, "en")
    assert asks.fits("8. The Project Leader serves for one year from their election.", "number", q, "en")
    assert not asks.fits("4.2 Opzegtermijn", "version", "Welke versie van de voorwaarden geldt?", "nl")


def test_a_how_long_question_is_not_answered_by_an_item_number():
    answer, how = _answer("How long is the Project Leader in office once elected?", [CONSTITUTION], "en")
    assert how["answer"] == "declined", answer
    answer, how = _answer("How long is the Project Leader in office once elected?",
                          [CONSTITUTION + "8. The Project Leader serves for one year from their election.\n"], "en")
    assert "one year" in answer


def test_a_count_of_days_to_pay_asks_for_days_not_money():
    assert asks.answer_kind("Binnen hoeveel dagen betaalt de opdrachtgever?", "nl") == "number"
    assert asks.answer_kind("How many days does the customer have to pay?", "en") == "number"
    assert asks.answer_kind("Hoeveel betaalt de opdrachtgever per uur?", "nl") == "money"
    assert asks.answer_kind("How much does the customer pay each month?", "en") == "money"
    clauses = ("Artikel 3 Vergoeding\n3.1 Opdrachtnemer ontvangt een vergoeding van 95 euro per uur, exclusief btw.\n"
               "3.2 Opdrachtnemer factureert maandelijks; Opdrachtgever betaalt binnen 30 dagen na factuurdatum.\n")
    answer, how = _answer("Binnen hoeveel dagen betaalt de opdrachtgever?", [clauses], "nl")
    assert "30 dagen" in answer, (answer, how)


def test_a_reference_to_a_clause_is_no_figure():
    q = "How long do developers get to cast their votes?"
    assert not asks.fits("Sponsors for the General Resolution are not required; see §4.2.1.", "number", q, "en")
    assert not asks.fits("The usual maintainer decides first, however; see 6.3(5).", "number", q, "en")
    assert not asks.fits("De opzegging gaat volgens artikel 7.", "number", "Hoeveel maanden is de opzegtermijn?", "nl")
    assert asks.fits("The voting period is 2 weeks, but may be varied by up to 1 week.", "number", q, "en")


def test_the_sentence_with_the_asked_figure_stays_shown_when_the_models_likelihood_prefers_others():
    """focus keeps, for every kind of question, the best reranked sentence that holds what it asks for among the shown
    ones (as it did for contract parties only): here the figure of "how long", which the likelihood ranked last."""
    from edge_agent.services.grounding import focus

    text = ("4.2 Procedure. Votes are taken by the Project Secretary. Votes are cast by email in a manner suitable to the "
            "Secretary. The Secretary determines for each poll whether voters can change their votes. "
            "The voting period for votes of the developers is 2 weeks.")

    def likely(texts: list[str]) -> list[float]:  # highest after the sentences without the figure
        return [0.0 if "2 weeks" in t else 5.0 for t in texts]

    q = "How long is the voting period when developers cast their votes?"
    shown = focus(q, [_chunk(text)], "en", "Text", 3, likely, rerank=5)
    assert any("2 weeks" in s.text for _, s in shown.evidence), shown.evidence
    answer, how = A.settle("", q, shown.evidence, "en", DECLINE, passages=[text])
    assert "2 weeks" in answer, (answer, how)


def test_a_section_heading_is_quoted_with_the_figure_of_its_next_sentence():
    """The section's number is no figure, but the quote carries the next sentence, which holds one: what is asked is
    looked for in what is quoted (answers.quoted), here where only the heading was shown (as blind9's "BD iso" was)."""
    q = "Hoe groot is de BD iso van Debian Edu?"
    text = ("6.2.3. BD iso-images voor amd64 of i386\n\n"
            "Deze ISO-images zijn ongeveer 7.5 GB groot en kunnen gebruikt worden voor het installeren.\n")
    heading = next(s for s in A.rank_sentences(q, [_chunk(text)], "nl") if s.text.startswith("6.2.3."))
    assert "7.5 GB" in heading.after
    answer, how = A.settle("", q, [(1, heading)], "nl", DECLINE, passages=[text])
    assert "7.5 GB" in answer, (answer, how)
    alone = next(s for s in A.rank_sentences(q, [_chunk("6.2.3. BD iso-images voor amd64 of i386\n")], "nl"))
    assert A.settle("", q, [(1, alone)], "nl", DECLINE, passages=["6.2.3. BD iso-images"])[1]["answer"] == "declined"


def test_a_numbered_heading_with_the_figure_after_it_stays_shown():
    """The keep-in of focus asks what the quote would hold: a numbered heading quoted with the figure of its next sentence
    holds it, so no dated release line elsewhere is put in its place (blind9's "BD iso" lost its quote that way)."""
    from edge_agent.services.grounding import focus

    q = "Hoe groot is de BD iso van Debian Edu?"
    texts = ["6.2.3. BD iso-images voor amd64 of i386\n\nDeze ISO-images zijn ongeveer 7.5 GB groot en kunnen gebruikt worden.\n",
             "Zie https://get.debian.org/cdimage/release/current/amd64/iso-bd/ voor de BD iso van Debian Edu.\n\n"
             "Debian Edu 5.0.6+edu1 codenaam 'Lenny', uitgebracht op 05-10-2010.\n"]

    def likely(sentences: list[str]) -> list[float]:  # the heading and the URL first, the figure's own sentence last
        return [5.0 if s.startswith(("6.2.3.", "Zie https")) else 0.0 if "Lenny" in s else -5.0 for s in sentences]

    shown = focus(q, [_chunk(t, i) for i, t in enumerate(texts)], "nl", "Tekst", 2, likely, rerank=5)
    assert any(s.text.startswith("6.2.3.") for _, s in shown.evidence), shown.evidence
    assert not any("Lenny" in s.text for _, s in shown.evidence)
