"""Grounded answers after the model: sentence choice, the check of a model's answer, the extractive fallback,
"[n]" citations that match the sources marked used, the `grounding` report, declines, chat-template bundles.

Real parts: the tiny real Llama (random weights: its answers are noise, which the check must catch), a real
DocumentService (SQLite, FAISS, BM25, the packaged embedding model) in tmp dirs, the real server on loopback.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import openai
import pytest

from edge_agent.services import answers as A
from edge_agent.services import asks
from edge_agent.services import sentences as S
from edge_agent.services.grounding import SCAFFOLDS, GroundedPrompt, RagOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from api_helpers import KEY, api_settings, start_server  # noqa: E402

NL_DOC = ("Het Zeeuwse archief\n\nHet archief is op werkdagen open van negen tot vijf. "
          "De toegangscode van het Zeeuwse archief is QX-7731-B; de sleutel ligt bij de portier. "
          "Bezoekers melden zich aan de balie.")
EN_DOC = "The canteen serves tomato soup on Mondays and pasta on Thursdays. The canteen closes at two."
NL_Q = "Wat is de toegangscode van het Zeeuwse archief?"
FACT_SENTENCE = "De toegangscode van het Zeeuwse archief is QX-7731-B; de sleutel ligt bij de portier."
FACT_QUOTE = f'"{FACT_SENTENCE} Bezoekers melden zich aan de balie." [1]'  # an extractive answer: the sentence and the next
TINY_CHAT = (
    "{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] | trim }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
)


def _chunk(text: str, rank: int = 0):
    return SimpleNamespace(document_id=rank + 1, chunk_id=rank + 1, title=f"doc{rank}", location={}, score=0.1, snippet="", text=text)


def _evidence(question: str, texts: list[str], lang: str) -> list[tuple[int, S.Sentence]]:
    ranked = A.rank_sentences(question, [_chunk(t, i) for i, t in enumerate(texts)], lang)
    return [(s.chunk + 1, s) for s in ranked[:3]]


def test_sentences_join_wrapped_lines_and_headings_head_the_next_sentence():
    text = "object.__len__(self)\n\n   Called to implement the built-in\n   function \"len()\".  Should return an int.\n\n• Bullet one.\n• Bullet two"
    assert S.split_sentences(text) == [
        'object.__len__(self) Called to implement the built-in function "len()".', "Should return an int.", "• Bullet one.", "• Bullet two"]
    long = "word " * 200
    assert all(len(s) <= S.MAX_SENTENCE_CHARS for s in S.split_sentences(long))


@pytest.mark.parametrize("text, sentences", [
    ("It is named after Randal L. Schwartz, who popularized it among Perl programmers. It is old.",
     ["It is named after Randal L. Schwartz, who popularized it among Perl programmers.", "It is old."]),
    ("De directeur is dr. J. de Vries. Hij begint morgen.", ["De directeur is dr. J. de Vries.", "Hij begint morgen."]),
    ("Dit geldt o.a. voor de huurder. Zie art. 7 lid 2 en blz. 12 van het contract.",
     ["Dit geldt o.a. voor de huurder.", "Zie art. 7 lid 2 en blz. 12 van het contract."]),
    ("Het kost ca. 500 euro, bijv. voor de huur. Use a key, e.g. the lower method.",
     ["Het kost ca. 500 euro, bijv. voor de huur.", "Use a key, e.g. the lower method."]),
    ("We sell apples, pears, etc. The shop opens at 9. Dank u. De rest volgt.",  # still ends: etc. before a capital, "u."
     ["We sell apples, pears, etc.", "The shop opens at 9.", "Dank u.", "De rest volgt."]),
    ("Is it on? Yes! It runs version 3.2. Key was added later.", ["Is it on?", "Yes!", "It runs version 3.2.", "Key was added later."]),
])
def test_sentences_do_not_end_at_abbreviations_or_initials(text, sentences):
    # a name with an initial or a Dutch abbreviation ("art.", "o.a.", "dr.") cut in two lost the fact's half of a quote
    # ("Schwartz, who popularized it ..." without "Randal L.": a who-question declined) and dropped pieces ("J.")
    assert S.split_sentences(text) == sentences


CONTRACT = "Arbeidsovereenkomst\nDe proeftijd bedraagt twee maanden. De opzegtermijn is een maand."


@pytest.mark.parametrize("text", [CONTRACT, CONTRACT.replace("\n", "\n\n", 1)])
def test_a_heading_line_heads_its_sentence_for_matching_but_is_never_quoted(text):
    """A heading (short, no closing mark, a line break after it: a .docx heading, a .txt title) is matched with the
    sentence under it, and left out of the quote: "Arbeidsovereenkomst De proeftijd ..." is not an answer's text."""
    (first, second) = S.split_units(text)
    assert first.text == "Arbeidsovereenkomst De proeftijd bedraagt twee maanden."
    assert first.quote == "De proeftijd bedraagt twee maanden." and second.quote == ""
    q = "Hoe lang is de proeftijd van de arbeidsovereenkomst?"
    ev = _evidence(q, [text], "nl")
    first_match = ev[0][1].match
    assert ev[0][1].index == 0 and first_match > A.rank_sentences(q, [_chunk(first.quote)], "nl")[0].match  # the heading's word counts
    answer, how = A.settle("", q, ev, "nl", "Niet gevonden.")
    assert answer == '"De proeftijd bedraagt twee maanden. De opzegtermijn is een maand." [1]' and how["answer"] == "extractive"


def test_a_docx_heading_is_not_glued_to_the_quote_nor_a_next_section_to_it():
    from rag_docs import make_docx

    from edge_agent.rag.loaders import load_bytes

    doc = load_bytes(make_docx([("p", "Arbeidsvoorwaarden"), ("p", "Het salaris wordt op de 25e van de maand betaald."),
                                ("h2", "Verlof"), ("p", "Elke werknemer heeft recht op 25 vakantiedagen per jaar.")]), "cao.docx")
    texts = [s.text for s in doc.sections if s.text.strip()]
    q = "Wanneer wordt het salaris betaald?"
    answer, _ = A.settle("", q, _evidence(q, texts, "nl"), "nl", "Niet gevonden.")
    assert answer == '"Het salaris wordt op de 25e van de maand betaald." [1]'
    q = "Op hoeveel vakantiedagen heeft een werknemer recht?"
    answer, _ = A.settle("", q, _evidence(q, texts, "nl"), "nl", "Niet gevonden.")
    assert answer == '"Elke werknemer heeft recht op 25 vakantiedagen per jaar." [2]'


MD_CHUNKS = ["## Vakantiedagen\nMedewerkers met een volledig dienstverband (36 uur per week) hebben recht op 25 vakantiedagen "
             "per jaar. Wie in deeltijd werkt, krijgt dagen naar rato.",
             "## Aanvragen\nVerlof vraag je minstens vier weken van tevoren aan via het portaal (Mijn Rijnoord).\n## Bezwaar"]


def test_a_markdown_heading_is_not_glued_to_the_quote():
    """A chunk of a .md file starts with its "## " heading line; the text under it holding parentheses (a code mark
    elsewhere) made it glue to the first sentence: the answer quoted "## Vakantiedagen Medewerkers met ...". A heading
    line that ends the chunk is no sentence either."""
    units = [u.text for t in MD_CHUNKS for u in S.split_units(t)]
    assert units == ["Medewerkers met een volledig dienstverband (36 uur per week) hebben recht op 25 vakantiedagen per jaar.",
                     "Wie in deeltijd werkt, krijgt dagen naar rato.",
                     "Verlof vraag je minstens vier weken van tevoren aan via het portaal (Mijn Rijnoord)."]
    q = "Hoeveel vakantiedagen krijg ik bij een volledig dienstverband?"
    answer, _ = A.settle("", q, _evidence(q, MD_CHUNKS, "nl"), "nl", "Niet gevonden.")
    assert answer.startswith('"Medewerkers met een volledig dienstverband') and "#" not in answer
    # shell comments over commands are not headings: their words stay for matching
    script = "Zo start je het model:\n# 24 lagen in VRAM (-ngl 24)\n./llama-cli -ngl 24\n# klaar"
    assert "24 lagen in VRAM" in " ".join(u.text for u in S.split_units(script))


def test_mail_headers_are_units_of_their_own_quoted_only_for_a_question_about_them():
    from rag_docs import make_eml

    from edge_agent.rag.loaders import load_bytes

    body = ("Hoi team,\n\nHet pakket met de nieuwe laptops wordt dinsdag tussen negen en twaalf geleverd.\n"
            "Groet, Anna\n\nVan: Piet Bakker <piet@example.nl>\nVerzonden: maandag 2 maart 2026 09:12\n"
            "Aan: anna@example.nl\nOnderwerp: Levering laptops\n\nWanneer komen de laptops?")
    text = load_bytes(make_eml("Levering laptops", body), "mail.eml").sections[0].text
    units = S.split_units(text)
    headers = [u for u in units if u.header]
    assert [u.header for u in headers] == ["subject", "from", "to", "date", "van", "verzonden", "aan", "onderwerp"]
    assert headers[1].quote == "From: Anna de Vries <anna@example.nl>"
    assert headers[1].text == "Subject: Levering laptops From: Anna de Vries <anna@example.nl>"  # matched with the subject
    assert all(not u.header and "@" not in u.text for u in units if not u.header)  # no header glued to a sentence
    q = "Wanneer worden de laptops geleverd?"
    ev = _evidence(q, [text], "nl")
    answer, _ = A.settle("", q, ev, "nl", "Niet gevonden.")
    assert answer == '"Het pakket met de nieuwe laptops wordt dinsdag tussen negen en twaalf geleverd." [1]'
    assert all("@" not in s.text for _, s in ev)  # the date headers are offered to a when-question, the addresses not
    ranked = A.rank_sentences("Wat kost het pakket met de laptops?", [_chunk(text)], "nl")
    assert not any(s.header for s in ranked)  # headers are not offered to a question about something else
    q = "Wie stuurde de mail over de levering van de laptops?"
    ranked = A.rank_sentences(q, [_chunk(text)], "nl")
    assert {s.header for s in ranked if s.header} == {"from", "van"}  # who sent it: the senders, not the recipients
    answer, _ = A.settle("", q, [(1, s) for s in ranked[:3]], "nl", "Niet gevonden.")
    assert answer == '"From: Anna de Vries <anna@example.nl>" [1]'
    assert {s.header for s in A.rank_sentences("Aan wie is de mail gestuurd?", [_chunk(text)], "nl") if s.header} == {"to", "aan"}
    reply = "Het pakket wordt dinsdag geleverd.\nVan: piet@example.nl\nAan: anna@example.nl\n\nKomt het pakket dinsdag?"
    (first, *_) = A.rank_sentences("Wanneer wordt het pakket geleverd?", [_chunk(reply)], "nl")
    assert first.text == "Het pakket wordt dinsdag geleverd." and first.after == ""  # a quote carries no header after it


def test_hard_wrapped_prose_stays_one_sentence_and_list_items_stand_alone():
    import textwrap

    prose = ("The interpreter first reads the whole source file, compiles it to bytecode and caches that bytecode next "
             "to the file. Python then executes the bytecode in its virtual machine, one instruction at a time.")
    for width, indent in [(w, i) for w in (30, 40, 50, 60, 72) for i in ("", "   ")]:
        wrapped = textwrap.fill(prose, width, initial_indent=indent, subsequent_indent=indent)
        assert S.split_sentences(wrapped) == S.split_sentences(prose) == [
            prose[: prose.index("Python") - 1], prose[prose.index("Python"):]], width
        assert all(not u.quote for u in S.split_units(wrapped))
    assert "\nPython then" in textwrap.fill(prose, 40)  # a line that starts with a capital, and still no heading before it
    items = "De backends:\n• x86 AVX-512\n• IBM Z\n\nDe API is identiek over alle backends."
    assert S.split_sentences(items) == ["De backends:", "• x86 AVX-512", "• IBM Z", "De API is identiek over alle backends."]
    steps = "De import gaat in twee stappen:\n1. zoek de module, en laad die zo nodig\n2. bind de naam in de lokale namespace."
    assert S.split_sentences(steps) == ["De import gaat in twee stappen:", "1. zoek de module, en laad die zo nodig",
                                        "2. bind de naam in de lokale namespace."]  # an item's number is no sentence of its own


def test_the_sentence_with_the_rare_question_words_ranks_first():
    ranked = A.rank_sentences(NL_Q, [_chunk(EN_DOC, 0), _chunk(NL_DOC, 1)], "nl")
    assert ranked[0].text == FACT_SENTENCE and ranked[0].chunk == 1
    assert ranked[0].score > ranked[1].score


@pytest.mark.parametrize("answer, status", [
    ("", "empty"), ("[1]", "empty"), (" ...", "empty"),
    ("De toegangscode van het Zeeuwse archief.", "echo"),  # restates the question, adds nothing
    ("De hoofdstad van Australië is Canberra.", "off_source"),  # invented
    ("De code is QX-7731-B.", "ok"),
])
def test_the_check_keeps_only_answers_that_add_what_the_best_sentences_hold(answer, status):
    ev = _evidence(NL_Q, [NL_DOC, EN_DOC], "nl")
    v = A.check_answer(answer, NL_Q, [s for _, s in ev], "nl")
    assert v.status == status
    text, how = A.settle(answer, NL_Q, ev, "nl")
    # the documents' own words, quoted, with the number of the passage they come from
    assert text == FACT_QUOTE and how == {"answer": "extractive", "check": status}
    text, how = A.settle(answer, NL_Q, ev, "nl", model_words=True)  # the model's own words where they pass the check
    if status == "ok":
        assert text == "De code is QX-7731-B. [1]" and how == {"answer": "model", "check": "ok"}
    else:
        assert text == FACT_QUOTE and how == {"answer": "extractive", "check": status}


def test_a_checked_answer_that_states_a_figure_picks_the_sentence_to_quote():
    """The default model copies a figure from the sentence it read ("16" from "... -t 16"): that sentence is quoted, not
    the best by words; a checked answer without a figure of its own gets the best sentence."""
    q = "How many threads does the benchmark command use?"
    best = S.Sentence(0, 0, "The benchmark command fixes the prompt length and the number of tokens to generate.", 0.9, 0.9)
    figure = S.Sentence(1, 0, "The benchmark command: llama-bench -p 512 -n 128 -t 16 (threads).", 0.8, 0.8)
    ev = [(1, best), (2, figure)]
    assert A.check_answer("16", q, [best, figure], "en").support is figure
    assert A.settle("16", q, ev, "en", "Not covered.") == (f'"{figure.text}" [2]', {"answer": "extractive", "check": "ok"})
    assert A.settle("16", q, ev, "en", "Not covered.", model_words=True) == ("16 [2]", {"answer": "model", "check": "ok"})
    q2 = "What does the benchmark command fix?"  # an answer that passes the check without a figure: the best sentence
    assert A.check_answer("The prompt length.", q2, [best, figure], "en").ok
    assert A.settle("The prompt length.", q2, ev, "en", "Not covered.") == (f'"{best.text}" [1]', {"answer": "extractive", "check": "ok"})


@pytest.mark.parametrize("answer, said", [
    # a base model looping a sentence until max_tokens cut it: said once, the cut restart dropped
    ("De code is QX-7731-B. De code is QX-7731-B. De code is QX-7731-B. De code", "De code is QX-7731-B."),
    ("De code is QX-7731-B. de code  is QX-7731-B. De sleutel ligt bij de portier.", "De code is QX-7731-B. De sleutel ligt bij de portier."),
    ("De code is QX-7731-B. De sleutel ligt bij de", "De code is QX-7731-B. De sleutel ligt bij de"),  # no repeat: as it was
    ("Dr. Jansen zegt: de code is QX-7731-B.", "Dr. Jansen zegt: de code is QX-7731-B."),
])
def test_a_looping_answer_says_its_sentence_once(answer, said):
    assert A.drop_repeats(answer) == said
    if said.startswith("De code is QX-7731-B."):
        text, how = A.settle(answer, NL_Q, _evidence(NL_Q, [NL_DOC, EN_DOC], "nl"), "nl", model_words=True)
        assert how == {"answer": "model", "check": "ok"} and text.count("QX-7731-B") == 1, text


def test_an_answer_from_a_weaker_sentence_or_in_english_is_replaced(monkeypatch):
    q = "Wat serveert de kantine op maandag?"
    ev = _evidence(q, [EN_DOC], "nl")
    assert ev[0][1].text.startswith("The canteen serves tomato soup")
    # a sentence that holds none of the question's (Dutch) words carries no answer ...
    assert A.check_answer("The canteen serves tomato soup on Mondays.", q, [s for _, s in ev], "nl").status == "off_source"
    # ... and where it may, the right words in English to a Dutch question are still not the answer
    monkeypatch.setattr(A, "MIN_MATCH", 0.0)
    assert A.check_answer("The canteen serves tomato soup on Mondays.", q, [s for _, s in ev], "nl").status == "wrong_language"
    monkeypatch.undo()
    # a sentence that matches the question far worse than the best one does not carry an answer
    ev2 = _evidence(NL_Q, [NL_DOC], "nl")
    weak = [s for _, s in ev2 if "balie" in s.text]
    assert weak and weak[0].score < A.NEAR_BEST * ev2[0][1].score
    assert A.check_answer("Aan de balie.", NL_Q, [s for _, s in ev2], "nl").status == "off_source"


def test_an_answer_must_rest_on_a_sentence_with_the_questions_most_specific_word(monkeypatch):
    monkeypatch.setattr(A, "NEAR_BEST", 0.0)  # every given sentence near enough: the anchor alone decides
    q = "What does the modulo operator give you?"
    doc = ('The "%" (modulo) operator yields the remainder from the division of the first argument by the second. '
           'The "/" (division) and "//" (floor division) operators yield the quotient of their arguments.')
    given = [s for _, s in _evidence(q, [doc], "en")]
    assert A._anchors(q, given, "en") == {"modulo"}
    assert A.check_answer("The floor division operators yield the quotient.", q, given, "en").status == "off_source"
    assert A.check_answer("The remainder of the division.", q, given, "en").status == "ok"


def test_a_dutch_compound_counts_in_part_where_its_parts_are_separate_words():
    q = "Vanaf welke promptlengte groeit de KV-cache sterk?"
    passage = "Bij prompts van meer dan 16.000 tokens neemt de omvang van de KV-cache drastisch toe."
    other = "Een moderne GPU zoals een RTX 5090 biedt daarentegen meer dan 1.000 GB/s."
    from edge_agent.rag import language

    assert language.coverage(q, passage, "nl") < 0.34 <= S.coverage(q, passage, "nl")  # "prompts" is part of "promptlengte"
    q2, p2 = "Na hoeveel jaar kwam er nieuw productiesilicium?", "hun eerste productie-silicon in 35 jaar"
    assert language.coverage(q2, p2, "nl") == 0.25 < S.coverage(q2, p2, "nl") < 0.5  # "productie" is half the compound
    assert S.coverage(q, other, "nl") == 0.0
    # a word that only starts a longer one where a vowel follows is another word, not part of a compound
    assert S.coverage("Wat is het recept voor appeltaart?", "De CPU is een receptionist die het werk regelt.", "nl") == 0.0
    assert S.coverage("Welk recept?", "Het receptenboek ligt klaar.", "nl") == 1.0  # joined by "en": a compound
    assert S.coverage("Welke kamer?", "De kameraden wachten.", "nl") == 0.0
    assert S.coverage("Hoeveel geheugen?", "De geheugenbandbreedte is hoog.", "nl") == 1.0
    assert S.coverage("What does the systemmemory cost?", "The memory cost is high.", "en") == 0.5  # English: no compounds
    from edge_agent.services.grounding import GroundingPolicy

    assert GroundingPolicy().covered(q, [_chunk(other), _chunk(passage, 1)], "nl")


def test_a_dutch_verb_matches_its_other_forms_where_snowball_stems_them_apart():
    # Snowball's Dutch stems "installeert" to "installeert" and "installeren" to "installer", "verwijdert" and "verwijderd"
    # apart from "verwijderen": a question in the present tense missed the text's infinitive or participle
    q = "Welke map verwijdert de beheerder als hij een printer installeert?"
    passage = "Om een printer te installeren moet de beheerder eerst de map /var/spool/oud verwijderen."
    other = "De printer staat op de tweede verdieping naast de map met formulieren."
    assert S.coverage(q, passage, "nl") == 1.0 > S.coverage(q, other, "nl")
    assert S.verb_keys("geinstalleerd") & S.verb_keys("installeren") and S.verb_keys("verwijderd") & S.verb_keys("verwijderen")
    assert S.verb_keys("compileert") & S.verb_keys("compileren")
    assert not S.verb_keys("pakket") & S.verb_keys("pakken")  # a noun's -t after a vowel is no verb ending
    ev = _evidence(q, [f"{other} {passage}"], "nl")
    assert "/var/spool/oud" in ev[0][1].text


def test_a_documents_own_question_is_quoted_with_the_answer_after_it():
    # a FAQ's question matches a user's question best, and its answer is in the sentences after it: one sentence was too
    # little ("Ga uw gang."), and a short reply without a closing mark was left out as if it were a heading
    faq = ("Mag ik de cursusboeken kopiëren en doorverkopen?\n\nGa uw gang. U hoeft niemand om toestemming te vragen. "
           "U betaalt de uitgeverij geen licentiegeld. Vermeld wel de naam van de auteurs.\n\n"
           "Mijn printer drukt niets af. Wat moet ik doen?\n\nKoop er een die wel werkt :)\n\n"
           "Anders kunt u het stuurprogramma printfix gebruiken om hem toch aan de praat te krijgen.")
    q = "Mag ik cursusboeken kopiëren en verkopen?"
    answer, how = A.settle("", q, _evidence(q, [faq], "nl"), "nl", "Niet gevonden.")
    assert answer.startswith('"Mag ik de cursusboeken') and "niemand om toestemming" in answer, answer
    assert "Wat moet ik doen" not in answer  # the next question is another's
    q2 = "Mijn printer doet niets, wat nu?"
    answer2, _ = A.settle("", q2, _evidence(q2, [faq], "nl"), "nl", "Niet gevonden.")
    assert "printfix" in answer2, answer2
    twice = ("Waarom start de kopieerkamer niet? Waarom blijft het scherm zwart?\n\nDe hoofdschakelaar zit achter het apparaat. "
             "Zet die aan.")
    q3 = "Waarom start de kopieerkamer niet?"
    answer3, _ = A.settle("", q3, _evidence(q3, [twice], "nl"), "nl", "Niet gevonden.")
    assert "hoofdschakelaar" in answer3, answer3  # a question asked in two: the answer after both
    # a sentence that asks nothing keeps one sentence after it
    plain = A.rank_sentences("Wie vermeldt men?", [_chunk("Vermeld de auteurs. Zij schreven het boek. Het boek is dik.")], "nl")
    assert all(s.after.count(".") <= 1 for s in plain)


@pytest.mark.parametrize("question, lang, kind", [
    ("Hoeveel lagen blijven in het werkgeheugen?", "nl", "number"), ("How many moons does Jupiter have?", "en", "number"),
    ("Hoeveel kost een abonnement per maand?", "nl", "money"), ("How much does the licence cost?", "en", "money"),
    ("Welk formaat is de norm?", "nl", None), ("When does the else clause run?", "en", None),
])
def test_what_a_question_asks_for(question, lang, kind):
    assert asks.answer_kind(question, lang) == kind


def test_a_figure_question_gets_a_sentence_with_a_figure_or_a_decline():
    q = "Hoeveel lagen van het model blijven in het werkgeheugen?"
    doc = ("Het model heeft lagen die in het werkgeheugen blijven als de videokaart vol is. "
           "Van het model blijven de overige 8 lagen in het werkgeheugen.")
    ev = _evidence(q, [doc], "nl")
    assert "8 lagen" in ev[0][1].text  # the figure lifts its sentence above the one without
    assert A.check_answer("De lagen blijven in het werkgeheugen van de videokaart.", q, [s for _, s in ev], "nl").status == "off_kind"
    text, how = A.settle("Lagen.", q, ev, "nl", "Niet gevonden.")
    assert "8 lagen" in text and how["answer"] == "extractive"
    # an amount is asked for, no sentence names one: the answer declines instead of quoting a sentence without it
    q2 = "Hoeveel kost het model per maand?"
    text, how = A.settle("Het model kost 8 lagen.", q2, _evidence(q2, [doc], "nl"), "nl", "Niet gevonden.")
    assert (text, how) == ("Niet gevonden.", {"answer": "declined", "check": "no_answer"})
    # without a decline text (a caller that cannot decline) the best sentence is still quoted
    assert A.settle("Het model kost 8 lagen.", q2, _evidence(q2, [doc], "nl"), "nl")[1]["answer"] == "extractive"


def test_a_sentence_holding_little_of_the_question_is_not_quoted_but_declined():
    q = "What is the population of the capital city of Canada in winter?"
    doc = "Once the class namespace has been populated by executing the class body, the class object is created."
    ev = _evidence(q, [doc], "en")
    assert 0 < ev[0][1].match < A.MIN_MATCH
    assert A.settle("Canada is a country.", q, ev, "en", "Not covered.") == ("Not covered.", {"answer": "declined", "check": "no_answer"})


@pytest.mark.parametrize("answer, status", [
    ("Een RTX 5090 biedt 1000 GB/s.", "altered_figure"),  # "1.000" in the source
    ("Een RTX 5090 biedt meer dan 1.000 GB/s.", "ok"),
    ("Een RTX 5090 biedt geen 1.000 GB/s aan bandbreedte.", "altered_negation"),
])
def test_an_answer_keeps_the_sources_figures_and_negations(answer, status):
    q = "Welke bandbreedte heeft een RTX 5090?"
    doc = "Een standaard DDR5-geheugen biedt 50 tot 90 GB/s. Een moderne GPU zoals een RTX 5090 biedt daarentegen meer dan 1.000 GB/s."
    assert A.check_answer(answer, q, [s for _, s in _evidence(q, [doc], "nl")], "nl").status == status


def test_the_english_similarity_floor_declines_an_off_subject_question(docs):
    from edge_agent.services.grounding import DocumentRetriever, GroundingPolicy, RagOptions as Opts

    retriever = DocumentRetriever(lambda: docs)
    policy = GroundingPolicy()
    q = "What does the canteen serve on Mondays?"
    near = retriever.similarity(q, retriever.retrieve(q, Opts(k=2)), "en")
    far_q = "Which soup won the world championship of football?"  # shares "soup" with the canteen text
    far = retriever.similarity(far_q, retriever.retrieve(far_q, Opts(k=2)), "en")
    assert near is not None and far is not None and far < near
    hits = retriever.retrieve(q, Opts(k=2))
    assert near == max(h.dense_score for h in hits if h.dense_score is not None)  # dense search's own cosine
    assert abs(retriever.similarity(q, [_chunk(EN_DOC)], "en") - near) < 0.15  # chunks it did not rank: embedded anew
    assert policy.covered(q, retriever.retrieve(q, Opts(k=2)), "en", near)
    assert not policy.covered(far_q, [_chunk(EN_DOC)], "en", policy.min_similarity - 0.01)
    assert retriever.similarity(NL_Q, retriever.retrieve(NL_Q, Opts(k=2)), "nl") is None  # the embedder does not cover Dutch


def test_without_sentences_to_check_against_the_answer_is_given_unchecked():
    assert A.settle(" Het is QX-7731-B.\n", NL_Q, [], "nl") == ("Het is QX-7731-B.", {"answer": "model", "check": "none"})


def test_citations_name_only_passages_that_exist():
    assert A.with_citation("Het is QX-7731-B [7].", 2, {1, 2}) == "Het is QX-7731-B. [2]"
    assert A.with_citation("Het is QX-7731-B [1].", 2, {1, 2}) == "Het is QX-7731-B [1]."
    assert A.cited('"a" [1] en [3]') == {1, 3}
    quote = A.extractive(S.Sentence(0, 0, 'Return "True" if all cased characters [4] in the string are uppercase [2].', 1.0), 1)
    assert quote == '"Return "True" if all cased characters in the string are uppercase." [1]' and A.cited(quote) == {1}


def test_a_which_method_question_quotes_a_sentence_that_writes_a_code_name():
    q = "Which method of the context manager is called when a with block starts?"
    best = S.Sentence(0, 0, "The with statement wraps a block with methods of a context manager called when it starts.", 0.9, 0.9)
    named = S.Sentence(0, 1, 'The manager\'s "__enter__()" method is invoked.', 0.4, 0.4)
    assert asks.fits(named.text, "code", q, "en") and not asks.fits(best.text, "code", q, "en") and named.match < A.NEAR_BEST * best.match
    text, how = A.settle("It is called.", q, [(1, best), (1, named)], "en", "Not covered.")
    assert text == f'"{named.text}" [1]' and how["answer"] == "extractive"
    assert A.settle("It is called.", q, [(1, best)], "en", "Not covered.")[0] == f'"{best.text}" [1]'  # none writes one: the best


def test_a_quote_carries_the_next_sentence_of_its_chunk_where_both_fit():
    q = "Which strings does isascii accept as ASCII?"
    doc = ('isascii() Return "True" if all characters in the string are ASCII, "False" otherwise. '
           "ASCII characters have code points in the range U+0000-U+007F.")
    ranked = A.rank_sentences(q, [_chunk(doc)], "en")
    first = next(s for s in ranked if s.index == 0)
    assert first.after == "ASCII characters have code points in the range U+0000-U+007F." and ranked[0].index == 0
    assert next(s for s in ranked if s.index == 1).after == ""  # the chunk's last sentence
    # the model's answer fails its check: the quote is the rule and, after it, the detail the question asks for
    text, how = A.settle("It counts them.", q, [(1, s) for s in ranked], "en", "Not covered.")
    assert text == f'"{doc}" [1]' and how["answer"] == "extractive"
    long = S.Sentence(0, 0, "word " * 70, 1.0, 1.0, "Next one. " * 10)
    assert A.extractive(long, 2) == f'"{"word " * 69}word" [2]'  # both would not fit: the sentence alone
    assert A.extractive(S.Sentence(0, 0, "One [4].", 1.0, 1.0, "Two [5]."), 1) == '"One. Two." [1]'  # footnotes left out


def test_the_models_likelihood_reorders_the_sentences_the_words_found():
    from edge_agent.services.grounding import focus

    a, b, c = (S.Sentence(0, i, t, sc) for i, (t, sc) in enumerate((("De topman is druk.", 0.6), ("Rene Haas leidt Arm.", 0.3),
                                                                    ("Arm maakt chips.", 0.2))))
    assert A.rerank_sentences([a, b, c], [-2.0, -1.5, -1.9]) == [b, a, c]  # 0.3-1.5 beats 0.6-2.0
    assert A.rerank_sentences([a, b, c], [-2.0, -2.0, -2.0]) == [a, b, c]  # no preference: the words decide
    assert A.rerank_sentences([a, b], [-1.0, -0.8]) == [a, b]  # a small preference does not outweigh the words
    with pytest.raises(ValueError):
        A.rerank_sentences([a, b], [-1.0])
    # evidence ranked by more than words: a weak first sentence is passed over, not a reason to decline
    weak, fact = S.Sentence(0, 0, "Bezoekers melden zich aan de balie.", 0.05, 0.05), S.Sentence(0, 1, FACT_SENTENCE, 0.9, 0.9)
    assert A.settle("Canberra.", NL_Q, [(1, weak), (1, fact)], "nl", "Niet gevonden.") == (
        f'"{FACT_SENTENCE}" [1]', {"answer": "extractive", "check": "off_source"})
    assert A.settle("Canberra.", NL_Q, [(1, weak)], "nl", "Niet gevonden.")[0] == "Niet gevonden."
    q, texts = NL_Q, [NL_DOC]
    seen: list[list[str]] = []

    def likely(ts: list[str]) -> list[float]:  # prefers the sentence about the opening hours, whatever its words
        seen.append(ts)
        return [0.0 if "werkdagen" in t else -5.0 for t in ts]

    plain = focus(q, [_chunk(t, i) for i, t in enumerate(texts)], "nl", "Tekst", 2)
    ranked = focus(q, [_chunk(t, i) for i, t in enumerate(texts)], "nl", "Tekst", 2, likely, rerank=2)
    assert plain.evidence[0][1].text == FACT_SENTENCE and "werkdagen" in ranked.evidence[0][1].text
    assert ranked.lines[-1].endswith(ranked.evidence[0][1].text)  # the best one stays next to the question
    assert seen and all(len(ts) <= 2 for ts in seen)  # only the best `rerank` by words are scored
    assert focus(q, [_chunk(NL_DOC)], "nl", "Tekst", 2, likely, rerank=0).evidence == plain.evidence


@pytest.mark.parametrize("question, found", [
    ("Hoeveel tokens per seconde haalt een 70B-model op een Apple M4 Ultra?", {"70b", "apple", "m4", "ultra"}),
    ("Wat is de hoofdstad van Australië?", {"australie"}),  # folded as the index folds words
    ("Which TCP port does pdb listen on?", {"tcp"}),
    ("What does str.find return when __debug__ is off?", set()),  # code names are lowercase words: not names
    ("Welke bandbreedte heeft gewoon geheugen?", set()),  # the first word's capital is not a name
    # nor the first word of a later sentence: "Waarom", "Quick", "Could" name nothing a passage must hold
    ("Kan een VM zonder videokaart een H200 bijhouden? Waarom niet?", {"vm", "h200"}),
    ("Hi! Quick question: is it safe to delete keys while looping?", set()),
    ("Hello, I mistyped an escape sequence. Could you tell me what happens?", set()),
    ("Goedemorgen, ik las het stuk. Kunt u zeggen wat OpenAI met \"Vera\" doet?", {"openai", "vera"}),
])
def test_the_names_and_figures_a_question_refers_to(question, found):
    assert asks.names(question) == found


def test_a_question_naming_what_no_passage_holds_is_declined_before_the_model():
    from edge_agent.services.grounding import GroundingPolicy

    q = "Wat is de toegangscode van het Zeeuwse archief in Middelburg?"  # enough of its words, but "Middelburg" is nowhere
    assert asks.missing_names(q, [NL_DOC, EN_DOC]) == {"middelburg"}
    assert asks.missing_names(q, [NL_DOC + " Het ligt in Middelburgs centrum."]) == set()  # a longer word it starts counts
    assert asks.missing_names(NL_Q, [NL_DOC]) == set()
    policy = GroundingPolicy()
    assert policy.uncovered(q, [_chunk(NL_DOC)], "nl") == "unknown_name" and not policy.covered(q, [_chunk(NL_DOC)], "nl")
    assert policy.uncovered(NL_Q, [_chunk(NL_DOC)], "nl") is None
    assert policy.uncovered("Wat is de hoofdstad van Australië?", [_chunk(NL_DOC)], "nl") == "no_passage"  # words first
    assert GroundingPolicy(require_names=False).covered(q, [_chunk(NL_DOC)], "nl")
    # the chunk's title counts: a passage under "Zeeuws archief, Middelburg" names the place
    titled = SimpleNamespace(**{**vars(_chunk(NL_DOC)), "title": "Zeeuws archief, Middelburg"})
    assert policy.covered(q, [titled], "nl")


@pytest.mark.parametrize("question, lang, kind", [
    ("Wie is de topman van NVIDIA?", "nl", "name"), ("Who wrote the pdb module?", "en", "name"), ("Van wie is het archief?", "nl", "name"),
    ("By whom was it written?", "en", "name"), ("Hoe heet de topman van Arm?", "nl", None), ("Wie viele Seiten hat es?", "de", "number"),
    ("Which users who log in get a key?", "en", None),  # a relative "who" further on asks for no name
    ("In welk jaar opende het archief?", "nl", "year"), ("Which year was Python 3.0 released?", "en", "year"),
    # a procedure's "who" (the reader addressed, a duty or decision asked about): a role answers it
    ("Wie beslist over mijn verlof?", "nl", None), ("Bij wie meld ik me ziek?", "nl", None),
    ("Who must approve a purchase order?", "en", None), ("Wie is verantwoordelijk voor de back-up?", "nl", None),
    ("Wie leidt Intel?", "nl", "name"), ("Who founded Red Hat?", "en", "name"),
])
def test_a_who_question_asks_for_a_name(question, lang, kind):
    assert asks.answer_kind(question, lang) == kind


def test_a_procedures_who_question_is_answered_by_a_role():
    """"Wie beslist over mijn verlof?" was declined ("De documenten gaan hier niet over.") over a leave policy that says
    "De leidinggevende beslist binnen tien werkdagen.": no person's name in it. A person question still needs one."""
    policy = ["## Aanvragen\nVerlof vraag je minstens vier weken van tevoren aan via het personeelsportaal. De leidinggevende "
              "beslist binnen tien werkdagen. Bij een afwijzing kun je bezwaar maken bij de afdeling HR."]
    q = "Wie beslist over mijn verlof?"
    answer, _ = A.settle("", q, _evidence(q, policy, "nl"), "nl", "Niet gevonden.")
    assert "De leidinggevende beslist binnen tien werkdagen." in answer and answer.endswith("[1]")
    news = ["De topman van AMD sprak over agents. Het bedrijf groeide dit jaar hard."]
    q = "Wie is de topman van AMD?"
    assert A.settle("", q, _evidence(q, news, "nl"), "nl", "Niet gevonden.")[0] == "Niet gevonden."


def test_a_year_question_gets_a_sentence_with_a_year_or_a_decline():
    q = "Which year was Python 3.0 released?"
    assert not asks.fits("Leading zeros are not allowed, as in the octal literals Python used before version 3.0.", "year", q, "en")
    assert asks.fits("Python 3.0 came out in December 2008.", "year", q, "en") and not asks.fits("It costs 1.2015 euro.", "year", q, "en")
    ev = _evidence(q, ["Octal literals with a leading zero were what Python used before version 3.0."], "en")
    assert A.settle("Python 3.0 was released.", q, ev, "en", "Not covered.")[0] == "Not covered."


@pytest.mark.parametrize("question, lang, kind", [
    ("Welke versie van vLLM heeft de CPU-backend?", "nl", "version"), ("Since which Python version can I use underscores?", "en", "version"),
    ("Wanneer kwam de Orka X2 op de markt?", "nl", "date"), ("When was the walrus operator added?", "en", "date"),
    ("Wanneer is het huurcontract getekend?", "nl", "date"),
    ("When an item is added to a list, what happens?", "en", None),  # a conditional "when" asks for no date
    ("Wanneer draai je een model beter op de processor?", "nl", None),  # a condition, not a release
])
def test_a_version_or_release_question_asks_for_a_version_or_a_date(question, lang, kind):
    assert asks.answer_kind(question, lang) == kind


def test_versions_are_dotted_or_named_figures_not_thousands():
    assert asks.versions("Changed in version 3.6: before 3.5, and Python 3 too; llama.cpp 1.6.0") == {"3.6", "3.5", "3", "1.6.0"}
    assert asks.versions("meer dan 1.000 GB/s, circa 5,5 GB en 35 jaar") == set()


def test_a_version_question_gets_a_sentence_with_a_version_or_a_decline():
    q = "Welke versie van vLLM heeft de CPU-backend?"
    without = "De CPU-backend van vLLM ondersteunt nu continuous batching en prefix caching. Deze werken op x86 en Arm."
    text, how = A.settle("vLLM heeft een CPU-backend.", q, _evidence(q, [without], "nl"), "nl", "Niet gevonden.")
    assert (text, how) == ("Niet gevonden.", {"answer": "declined", "check": "no_answer"})  # the subject, not the version
    with_version = without + " De CPU-backend zit in vLLM sinds versie 0.6.2."
    text, how = A.settle("vLLM heeft een CPU-backend.", q, _evidence(q, [with_version], "nl"), "nl", "Niet gevonden.")
    assert "0.6.2" in text and how["answer"] == "extractive"


def test_a_release_written_as_the_named_things_figure_is_a_version():
    # "Which Debian release ...?" is answered by "Debian 8 jessie": a version written as the name the question names and a
    # figure, not "version 8" or a dotted "8.0"; the sentence was passed over and the answer declined
    q = "Which Debian release was the first to ship the new installer?"
    assert asks.answer_kind(q, "en") == "version"
    assert asks.fits('In April 2015 Debian 8 "jessie" was the first release with the new installer.', "version", q, "en")
    assert asks.named_versions("Debian 8 and Ubuntu 22.04 and Debian-based 7", q) == {"8"}
    assert not asks.fits("Debian was the first distribution to ship the new installer.", "version", q, "en")
    assert not asks.fits("The installer needs 2 GB of memory on Debian systems.", "version", q, "en")
    q2 = "Wanneer komt Debian 13 trixie uit?"  # the version the question names is no answer to it
    assert asks.answer_kind(q2, "nl") == "date" and not asks.fits("trixie (Debian 13) was een plastic triceratops.", "date", q2, "nl")
    text, how = A.settle("", q, _evidence(q, ['In April 2015 Debian 8 "jessie" was the first release with the new installer.'], "en"),
                         "en", "Not found.")
    assert "jessie" in text and how["answer"] == "extractive", (text, how)


def test_a_release_question_gets_a_sentence_with_a_date_or_a_decline():
    q = "Wanneer kwam de Orka X2 op de markt?"
    assert A.settle("In 2019.", q, _evidence(q, [AI_DOC], "nl"), "nl", "Niet gevonden.")[0] == "Niet gevonden."  # no date of the X2
    dated = AI_DOC + " De Orka X2 kwam in maart uit."
    assert "maart" in A.settle("In 2019.", q, _evidence(q, [dated], "nl"), "nl", "Niet gevonden.")[0]
    q2 = "When was the walrus operator added?"  # for software, a version dates it
    assert asks.fits('New in version 3.8: the walrus operator ":=".', "date", q2, "en")
    assert not asks.fits("The walrus operator assigns to a name inside an expression.", "date", q2, "en")


def test_a_value_asked_of_a_named_thing_is_quoted_only_from_a_passage_that_names_it():
    q = "Hoeveel watt verbruikt de Orka X2?"
    about = AI_DOC + " Het verbruik van de Orka X2 hangt af van de stand van de schakelaar."
    servers = "Een GPU-cluster van 700 watt verbruikt in een jaar duizenden kilowatturen."
    ev = _evidence(q, [about, servers], "nl")
    assert any("700 watt" in s.text and s.chunk == 1 for _, s in ev)  # a figure of the asked unit, in the other passage
    passages = [f"doc0\n{about}", f"doc1\n{servers}"]
    assert A.settle("700 watt.", q, ev, "nl", "Niet gevonden.", passages=passages) == (
        "Niet gevonden.", {"answer": "declined", "check": "no_answer"})
    assert "700 watt" in A.settle("700 watt.", q, ev, "nl", "Niet gevonden.")[0]  # without passages: as before
    named = [f"doc0\n{about}", f"doc1\nDe Orka X2 in het rekenvoorbeeld. {servers}"]  # the passage speaks of the X2
    assert "700 watt" in A.settle("700 watt.", q, ev, "nl", "Niet gevonden.", passages=named)[0]
    # a question without a name, or one that asks no value, is not held to it
    assert asks.thing_check("Hoeveel watt verbruikt een server?", passages, "nl") is None
    assert asks.thing_check("Wat voor ventilator heeft de Orka X2?", passages, "nl") is None
    check = asks.thing_check(q, passages, "nl")
    assert check(passages[0]) and not check(passages[1])


def test_a_who_question_gets_a_sentence_with_a_name_or_a_decline():
    q = "Wie is de topman van het Zeeuwse archief?"
    without = "Het Zeeuwse archief heeft een topman die op werkdagen aanwezig is."
    named = "De topman van het Zeeuwse archief heet Jan Verhoeven."
    assert asks.fits(named, "name", q, "nl") and not asks.fits(without, "name", q, "nl")
    assert not asks.fits("Zeeuwse archief.", "name", q, "nl")  # the question's own name is no answer
    assert asks.fits("Verhoeven.", "name", q, "nl")  # a short answer may be the name alone
    # no sentence names anyone: the model's answer ("the archive is the boss") and a quote are both refused
    assert A.settle("Het archief is de topman.", q, _evidence(q, [without], "nl"), "nl", "Niet gevonden.") == (
        "Niet gevonden.", {"answer": "declined", "check": "no_answer"})
    text, how = A.settle("Jan Verhoeven.", q, _evidence(q, [without + " " + named], "nl"), "nl", "Niet gevonden.")
    assert text == f'"{named}" [1]' and how == {"answer": "extractive", "check": "ok"}
    text, how = A.settle("Jan Verhoeven.", q, _evidence(q, [without + " " + named], "nl"), "nl", "Niet gevonden.", model_words=True)
    assert text == "Jan Verhoeven. [1]" and how == {"answer": "model", "check": "ok"}
    text, how = A.settle("De topman.", q, _evidence(q, [without + " " + named], "nl"), "nl", "Niet gevonden.")
    assert text == f'"{named}" [1]' and how["answer"] == "extractive"


# --- through the service and the server -----------------------------------------------------------------------
def _make_docs(tmp: Path):
    from edge_agent.config import Settings
    from edge_agent.rag.embedder import OnnxEmbedder
    from edge_agent.services.documents import DocumentService
    from rag_docs import EMBED_CACHE

    svc = DocumentService.from_settings(Settings(data_dir=tmp / "var", index_dir=tmp / "index"), embedder=OnnxEmbedder(cache_dir=EMBED_CACHE))
    svc.add_text("Zeeuws archief", NL_DOC)
    svc.add_text("Canteen", EN_DOC)
    return svc


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    svc = _make_docs(tmp_path_factory.mktemp("answers-docs"))
    yield svc
    svc.close()


def _chat_service(bundle: Path, docs, tmp: Path):
    from edge_agent.config import Settings
    from edge_agent.runtime import build_engine
    from edge_agent.services.chat import ChatService

    settings = Settings(models_dir=bundle.parent, model=bundle.name, threads=1, context_length=512, max_batch=4,
                        data_dir=tmp / "var", index_dir=tmp / "index")
    scheduler = build_engine(settings)
    chat = ChatService(scheduler)
    chat.attach_documents(lambda: docs)
    return chat, scheduler


@pytest.fixture(scope="module")
def base_chat(tiny_bundles, docs, tmp_path_factory):
    chat, scheduler = _chat_service(tiny_bundles["llama"], docs, tmp_path_factory.mktemp("base-chat"))
    yield chat
    scheduler.stop()


def _consistent(answer: str, sources) -> None:
    """Every "[n]" of the answer names a source marked used, and every used source is cited."""
    numbers = [s.number for s in sources]
    assert numbers == list(range(1, len(numbers) + 1))
    assert A.cited(answer) == {s.number for s in sources if s.used}
    assert all(s.used is not None for s in sources)


def test_a_base_models_noise_falls_back_to_the_quoted_sentence(base_chat):
    from edge_agent.services.chat import SamplingOptions

    gen = base_chat.chat([{"role": "user", "content": NL_Q}], SamplingOptions(max_tokens=6, temperature=0), rag=RagOptions(k=2))
    (r,) = gen.collect()
    how = gen.grounding["choices"][0]
    assert gen.grounding["language"] == "nl"
    if how["answer"] == "model":  # random weights rarely say something the passages hold; if they do, it passed the check
        assert how["check"] == "ok" and A.check_answer(r.text, NL_Q, [s for _, s in _evidence(NL_Q, [NL_DOC], "nl")], "nl").ok
    else:
        assert how["answer"] == "extractive" and how["check"] in ("empty", "echo", "off_source", "wrong_language")
        assert r.text == FACT_QUOTE and r.finish_reason == "stop"
    _consistent(r.text, gen.sources)
    assert gen.sources[0].title == "Zeeuws archief" and gen.sources[0].used
    assert gen.usage.prompt_tokens > 20 and gen.usage.completion_tokens >= 1  # the model ran; its tokens are counted


def test_an_empty_generation_falls_back_to_the_extractive_answer(base_chat):
    from edge_agent.services.chat import SamplingOptions

    q = [{"role": "user", "content": NL_Q}]
    # a stop string at the model's first character: the model's answer is empty (a real, user-settable stop)
    gp = base_chat._ground_chat(q, SamplingOptions(max_tokens=4), "", RagOptions(k=2))
    assert isinstance(gp, GroundedPrompt)
    raw = base_chat.scheduler.submit(gp.ids, base_chat._params(SamplingOptions(max_tokens=1, temperature=0), len(gp.ids), 0))
    head = "".join(getattr(ev, "text", "") for ev in raw if type(ev).__name__ == "TextDelta").strip()[:1]
    assert head
    gen = base_chat.chat(q, SamplingOptions(max_tokens=4, temperature=0, stop=[head]), rag=RagOptions(k=2))
    (r,) = gen.collect()
    assert gen.grounding["choices"][0] == {"index": 0, "answer": "extractive", "check": "empty"}
    assert r.text == FACT_QUOTE
    _consistent(r.text, gen.sources)


def test_a_grounded_prompt_carries_the_retrieved_passages_by_rank(base_chat):
    from edge_agent.services.chat import SamplingOptions

    gp = base_chat._ground_chat([{"role": "user", "content": NL_Q}], SamplingOptions(max_tokens=4), "", RagOptions(k=2))
    assert isinstance(gp, GroundedPrompt) and gp.evidence and len(gp.passages) == 2
    assert gp.passages[0].startswith("Zeeuws archief\n")  # title, then text, of the best chunk
    assert all(s.text.split()[0] in gp.passages[s.chunk] for _, s in gp.evidence)


def test_a_question_below_the_threshold_is_declined_in_its_language(base_chat):
    from edge_agent.services.chat import SamplingOptions

    for q, lang in (("Wat is de hoofdstad van Australië?", "nl"), ("Who wrote the novel Moby-Dick?", "en")):
        gen = base_chat.chat([{"role": "user", "content": q}], SamplingOptions(max_tokens=8), rag=RagOptions(k=2))
        (r,) = gen.collect()
        assert r.text == SCAFFOLDS[lang].absent and gen.usage.completion_tokens == 0
        assert gen.grounding == {"language": lang, "choices": [{"index": 0, "answer": "declined", "check": "no_passage"}]}
        assert gen.sources and not any(s.used for s in gen.sources)  # searched, none used


def test_a_question_naming_something_absent_is_declined_without_running_the_model(base_chat):
    from edge_agent.services.chat import SamplingOptions

    for q, lang in (("Wat is de toegangscode van het Zeeuwse archief in Middelburg?", "nl"),
                    ("What does the canteen serve on Mondays in Paris?", "en")):
        gen = base_chat.chat([{"role": "user", "content": q}], SamplingOptions(max_tokens=8), rag=RagOptions(k=2))
        (r,) = gen.collect()
        assert r.text == SCAFFOLDS[lang].absent and gen.usage.completion_tokens == 0 and gen.usage.prompt_tokens == 0
        assert gen.grounding == {"language": lang, "choices": [{"index": 0, "answer": "declined", "check": "unknown_name"}]}
        assert gen.sources and not any(s.used for s in gen.sources)
    base_chat.grounding.require_names = False  # off: the same question reaches the model
    try:
        gen = base_chat.chat([{"role": "user", "content": "Wat is de toegangscode van het Zeeuwse archief in Middelburg?"}],
                             SamplingOptions(max_tokens=4, temperature=0), rag=RagOptions(k=2))
        gen.collect()
        assert gen.grounding["choices"][0]["check"] != "unknown_name" and gen.usage.prompt_tokens > 20
    finally:
        base_chat.grounding.require_names = True


def test_the_question_likelihood_is_scored_by_the_model_and_falls_back_to_words(base_chat):
    sc = SCAFFOLDS["nl"]
    likely = base_chat._question_likelihood(NL_Q, sc)
    texts = [FACT_SENTENCE, "Bezoekers melden zich aan de balie.", FACT_SENTENCE]
    got = likely(texts)
    assert len(got) == 3 and all(-30 < x < 0 for x in got)  # log-probabilities per token of a real (random) model
    assert got[0] == pytest.approx(got[2], abs=1e-4) and got[0] != got[1]  # the same text scores the same, another not
    assert likely(texts) is got  # remembered: the focus loop asks again with fewer sentences
    too_long = likely(["woord " * 2000])  # longer than the model's context: the scoring fails, the words decide
    assert too_long == [0.0]


def test_the_base_prompt_scaffold_follows_the_question_language(base_chat):
    from edge_agent.services.chat import SamplingOptions

    for q, (passage, question, answer) in ((NL_Q, ("Tekst", "Vraag: ", "Antwoord:")),
                                          ("What does the canteen serve on Mondays?", ("Text", "Question: ", "Answer:"))):
        gp = base_chat._ground_chat([{"role": "user", "content": q}], SamplingOptions(max_tokens=8), "", RagOptions(k=2))
        text = base_chat.engine.decode(gp.ids)
        assert f"{passage} [1]: " in text and text.rstrip().endswith(f"{question}{q}\n{answer}")
        assert text.index(f"{passage} [1]") < text.index(question + q)  # passages first, the question last


def test_server_answers_carry_numbered_sources_used_flags_and_the_path(tiny_bundles, tmp_path):
    server = start_server(api_settings(tiny_bundles["llama"], tmp_path, max_batch=4), documents=_make_docs(tmp_path / "docs"))
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
        r = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": NL_Q}], max_tokens=6, temperature=0,
                                           extra_body={"rag": {"k": 2}})
        extra = r.model_extra
        sources = [SimpleNamespace(**s) for s in extra["sources"]]
        _consistent(r.choices[0].message.content, sources)
        assert extra["grounding"]["language"] == "nl" and extra["grounding"]["choices"][0]["answer"] in ("model", "extractive")
        # streamed: the first chunk has the same sources (with their used flags) and the report; the text matches
        chunks = list(client.chat.completions.create(model="llama", messages=[{"role": "user", "content": NL_Q}], max_tokens=6,
                                                     temperature=0, stream=True, extra_body={"rag": {"k": 2}}))
        assert chunks[0].model_extra["sources"] == extra["sources"] and chunks[0].model_extra["grounding"] == extra["grounding"]
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == r.choices[0].message.content
        # a declined question: every searched source listed, none used
        d = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": "Wie schilderde De Nachtwacht?"}],
                                           max_tokens=6, extra_body={"rag": {"k": 2}})
        assert d.choices[0].message.content == SCAFFOLDS["nl"].absent
        assert d.model_extra["grounding"]["choices"][0]["answer"] == "declined"
        assert d.model_extra["sources"] and not any(s["used"] for s in d.model_extra["sources"])
        # a question naming what no passage holds: declined before the model, and the report says why
        n = client.chat.completions.create(model="llama", max_tokens=6, extra_body={"rag": {"k": 2}},
                                           messages=[{"role": "user", "content": "Wat is de toegangscode van het Zeeuwse archief in Middelburg?"}])
        assert n.choices[0].message.content == SCAFFOLDS["nl"].absent and n.usage.completion_tokens == 0
        assert n.model_extra["grounding"]["choices"][0] == {"index": 0, "answer": "declined", "check": "unknown_name"}
        # without rag: neither field
        bare = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": NL_Q}], max_tokens=2)
        assert "grounding" not in (bare.model_extra or {}) and "sources" not in (bare.model_extra or {})
    finally:
        server.close()  # closes the document service too


@pytest.fixture(scope="module")
def chat_template_service(tiny_bundles, docs, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("chat-bundle")
    dst = tmp / "models" / "tiny-chat"
    shutil.copytree(tiny_bundles["llama"], dst)
    m = json.loads((dst / "manifest.json").read_text())
    m["prompt_format"] = {"type": "chat", "template": TINY_CHAT}
    m["name"] = "tiny-chat"
    (dst / "manifest.json").write_text(json.dumps(m))
    chat, scheduler = _chat_service(dst, docs, tmp)
    yield chat
    scheduler.stop()


def test_a_chat_template_bundle_gets_the_instruction_in_the_question_language(chat_template_service):
    from edge_agent.services.chat import SamplingOptions

    chat = chat_template_service
    assert chat.formatter.kind == "chat"
    messages, sources = chat._ground_chat([{"role": "user", "content": NL_Q}], SamplingOptions(max_tokens=8), "", RagOptions(k=2))
    system = messages[0]["content"]
    assert messages[0]["role"] == "system" and system.startswith(SCAFFOLDS["nl"].instruction)
    assert re.search(r"Tekst \[1\] \(Zeeuws archief\): .*QX-7731-B", system) and sources[0].number == 1
    gen = chat.chat([{"role": "user", "content": NL_Q}], SamplingOptions(max_tokens=4, temperature=0), rag=RagOptions(k=2))
    gen.collect()
    assert gen.grounding["choices"][0] == {"index": 0, "answer": "model", "check": "none"}  # streamed as it comes: not checked
    assert [s.number for s in gen.sources] == list(range(1, len(gen.sources) + 1)) and all(s.used is None for s in gen.sources)
    gen.note_citations(["Het is QX-7731-B [1]."])  # a non-streamed answer that cites: the cited passage is the used one
    assert [s.used for s in gen.sources] == [True] + [False] * (len(gen.sources) - 1)


AI_DOC = ("De Orka X2 is een compact werkstation met een stille ventilator. De Orka X2 heeft een prestatieschakelaar met drie "
          "standen. Grote modellen vragen veel geheugen. Ze draaien dan traag. Een losse videokaart kost al snel meer dan 2.000 euro.")


@pytest.mark.parametrize("question, unasked", [
    ("Hoeveel kost de Orka X2?", True),  # the passage names the X2 and prices something else, never the X2
    ("Hoeveel standen heeft de prestatieschakelaar van de Orka X2?", False),  # asked and spoken of in one sentence
    ("Hoeveel kost een videokaart?", False),  # no name: left to the other checks
    ("Wie is de topman van Orka?", True),
    ("Wat voor ventilator heeft de Orka X2?", False),  # not a figure, amount, name or year
])
def test_a_value_asked_of_a_named_thing_the_passages_never_speak_of_that_way(question, unasked):
    assert asks.unasked_relation(question, [AI_DOC, EN_DOC], "nl") is unasked


def test_a_sentence_around_the_named_one_counts_and_a_passage_without_the_name_decides_nothing():
    listing = "De cijfers van Orka over het kwartaal:\n\n• Omzet: 12 miljoen euro.\n• Winst: 2 miljoen euro."
    assert not asks.unasked_relation("Hoeveel omzet haalde Orka?", [listing], "nl")  # the list item after the heading
    assert not asks.unasked_relation("Hoeveel kost de Orka X2?", [EN_DOC], "nl")  # never named: not this check's call


def test_the_policy_declines_an_unasked_relation_before_the_model():
    from edge_agent.services.grounding import GroundingPolicy

    q = "Hoeveel kost de Orka X2?"
    policy = GroundingPolicy()
    assert policy.uncovered(q, [_chunk(AI_DOC)], "nl") == "unasked_relation"
    assert policy.uncovered("Hoeveel standen heeft de prestatieschakelaar van de Orka X2?", [_chunk(AI_DOC)], "nl") is None
    assert GroundingPolicy(require_relation=False).uncovered(q, [_chunk(AI_DOC)], "nl") is None


def test_a_which_exception_question_quotes_the_sentence_that_names_an_exception(monkeypatch):
    q = "Which exception does a from-import raise when the module lacks the name?"
    doc = ('A from-import first imports the module and then looks each name up in it as "module.name". '
           "The search goes through the module's namespace first and then through its attributes and its submodules. "
           'If the name is not found, "ImportError" is raised.')
    ev = _evidence(q, [doc], "en")
    assert asks.fits('If the name is not found, "ImportError" is raised.', "code", q, "en")
    assert not asks.fits('It looks each name up in it as "module.name".', "code", q, "en")
    assert not asks.fits("The module raises an error.", "code", q, "en")  # no exception's name
    text, how = A.settle("The module.", q, ev, "en", "Not covered.")
    assert '"ImportError" is raised' in text and how["answer"] == "extractive"
    # whichever comes first, the quote skips the sentence with another code name for the one that names an exception
    ev.reverse()
    assert '"ImportError" is raised' in A.settle("The module.", q, ev, "en", "Not covered.")[0]
    assert A.check_answer("ImportError", q, [s for _, s in ev], "en").status != "off_kind"


def test_a_signature_left_alone_at_a_chunks_end_is_not_quoted():
    q = "What does str.partition give back?"
    end_of_chunk = "str.removeprefix(prefix) Return the string without the prefix.\n\nstr.partition(sep)"
    next_chunk = ("str.partition(sep)\n\n   Split the string at the first occurrence of *sep*, and return a 3-tuple containing the "
                  "part before the separator, the separator itself, and the part after the separator.")
    ev = _evidence(q, [end_of_chunk, next_chunk], "en")
    assert ev[0][1].text == "str.partition(sep)" and not ev[0][1].after  # the bare signature matches the question best
    text, how = A.settle("", q, ev, "en", "Not covered.")  # no answer from the model: a sentence is quoted
    assert "3-tuple" in text and how["answer"] == "extractive"


POLICY_TEXTS = ["Het doel is dat de apparaten van de afdeling voor het eind van het jaar zijn vervangen door nieuwe modellen.",
                "Tot nu toe werden ongeveer 140 apparaten omgeruild sinds de start van het project. De rest volgt in het voorjaar.",
                "Voor de apparaten van de afdeling geldt een vaste procedure bij defecten."]


def test_a_figure_the_model_copied_points_at_its_sentence_when_the_words_match_poorly():
    # a paraphrase shares one word with the sentence that holds the fact; the model's figure is written by that sentence
    # alone, so it is quoted instead of declined
    q = "hoeveel apparaten zijn er inmiddels al vervangen door een nieuwe?"
    ev = _evidence(q, POLICY_TEXTS, "nl")
    held = next(s for _, s in ev if "140" in s.text)
    assert held.match < A.MIN_MATCH  # the words alone would not quote it
    answer, how = A.settle("140 apparaten.", q, ev, "nl", "Niet gevonden.")
    assert "ongeveer 140 apparaten omgeruild" in answer and how == {"answer": "extractive", "check": "figure"}, (answer, how)
    # a figure no sentence writes, one that two sentences write, or one next to nothing the question names points at
    # none: declined, as before
    for answer, texts in (("250 apparaten.", POLICY_TEXTS),
                          ("140 apparaten.", POLICY_TEXTS[:2] + ["De 140 apparaten van de afdeling volgen een procedure."]),
                          ("140.", [POLICY_TEXTS[0], "Sinds de start werden er tot nu toe 140 omgeruild.", POLICY_TEXTS[2]])):
        got, how = A.settle(answer, q, _evidence(q, texts, "nl"), "nl", "Niet gevonden.")
        assert got == "Niet gevonden." and how == {"answer": "declined", "check": "no_answer"}, (answer, got, how)


def test_a_list_item_that_names_what_is_asked_is_quoted_though_nothing_follows_it():
    # an item is quoted without the next item, so it has nothing after it; that made a short item without a full stop
    # look like a heading left alone (_bare) and passed it over for a worse sentence
    chunk = ('The following values are considered false:\n\n* constants defined to be false: "None" and "False"\n\n'
             '* zero of any numeric type: "0", "0.0", "0j"\n\n'
             "By default, an object is considered true unless its class defines a method that returns false.")
    q = "Which constants are defined to be false?"
    answer, how = A.settle("None and False.", q, _evidence(q, [chunk], "en"), "en", "Not found.")
    assert answer.startswith('"* constants defined to be false: "None" and "False""'), (answer, how)
