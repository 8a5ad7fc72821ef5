"""What a "how many / how much" question asks for (services/figures.py), and the quotes and declines that follow
from it in answers.settle; also the table rows and the "who" question words that are never quoted as an answer, the
money a "what does it cost" question asks for, and the person's name a who-question asks for (services/persons.py)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from edge_agent.services import answers as A
from edge_agent.services import asks
from edge_agent.services import figures as F
from edge_agent.services import persons as P

DECLINE = "Niet gevonden."


def _evidence(question: str, texts: list[str], lang: str) -> list[tuple[int, A.Sentence]]:
    chunks = [SimpleNamespace(text=t) for t in texts]
    return [(s.chunk + 1, s) for s in A.rank_sentences(question, chunks, lang)[:3]]


@pytest.mark.parametrize("question, lang, noun, cls", [
    ("Hoeveel kernen heeft de processor?", "nl", "kernen", None),
    ("How many bytes does a float take?", "en", "bytes", "data"),
    ("How much memory does a list of a million integers use?", "en", "memory", "data"),
    ("Over hoeveel jaar reken je de kosten?", "nl", "jaar", "time"),
    ("Hoeveel meer vermogen vraagt de kaart?", "nl", "vermogen", "power"),
    ("Wat is het stroomverbruik van de chip in watt?", "nl", "watt", "power"),
    ("How much does the service cost?", "en", None, None),  # a verb after "how much": no noun
    ("Hoeveel heeft het gekost?", "nl", None, None),
])
def test_the_quantity_a_question_asks_for(question, lang, noun, cls):
    assert F.asked_noun(question, lang) == noun
    assert F.asked_class(question, lang) == cls


@pytest.mark.parametrize("text, says", [
    ("Het draait 1,8× sneller dan op x86.", True), ("It takes tien keer langer.", True), ("Het is 30% sneller.", True),
    ("It is twice as slow.", True), ("If two nested handlers exist for the same exception, the outer one waits.", False),
    ("Op 16 kernen draait het sneller.", False),  # a count of things, not how much faster
])
def test_a_comparison_is_answered_by_a_ratio_or_a_percentage(text, says):
    q = "Hoeveel sneller draait het model op de Vera dan op x86?"
    assert F.asked_class(q, "nl") == "ratio" and F.asked_class("How much slower is a try block than an if?", "en") == "ratio"
    assert F.asked_class("Hoeveel meer geheugen heeft de Vera dan een x86?", "nl") == "data"  # the noun's class first
    assert F.states(text, q, "nl", asks._NUMBER_WORDS) is says


def test_what_something_costs_is_no_span_of_time():
    q = "Wat kost een kilowattuur stroom in het rekenvoorbeeld?"
    tco = "De Total Cost of Ownership (TCO) over een periode van twee tot drie jaar is doorslaggevend."
    assert asks.fits(tco, "money", q, "nl") and not asks.answers_kind(tco, "money", q, "nl")  # a cost word, but the figure is time
    assert asks.answers_kind("Een kilowattuur kost 30 cent.", "money", q, "nl")
    assert asks.answers_kind("bijna nul marginale hardwarekosten", "money", "Wat kost inferentie aan extra hardware?", "nl")


def test_dates_and_versions_are_no_figures():
    assert F.figures("Lanceerde in maart 2026 de chip, de eerste in 35 jaar.") == [("35", "time")]
    assert F.figures("Changed in version 3.5: calls accept any number of unpackings (PEP 448).") == []
    assert F.figures("Tegen 2030 groeit de markt naar 60 miljard, 850W tot 1500W.") == [("60", None), ("850", "power"), ("1500", "power")]
    assert F.figures("2048 tokens in 2026") == [("2048", None)]  # a year-like figure that is no date stays


@pytest.mark.parametrize("text, question, lang, says", [
    ("Lanceerde in maart 2026 de Vera CPU.", "Hoeveel kernen heeft de Vera-processor?", "nl", False),
    ("Arm lanceerde de AGI CPU, de eerste in 35 jaar.", "Hoeveel kernen heeft de AGI CPU?", "nl", False),
    ("Moderne CPU's hebben meestal 8 tot 24 kernen.", "Hoeveel kernen heeft een CPU?", "nl", True),
    ("There is no reason to have two kinds of floating point numbers.", "How many bytes does a float occupy?", "en", False),
    ("A float object takes 24 bytes.", "How many bytes does a float occupy?", "en", True),
    ("Bekijk de kosten over twee tot drie jaar.", "Over hoeveel jaar bekijk je de kosten?", "nl", True),
    ("Een model van 6 GB kan 12 tot 16 GB opeisen.", "Hoeveel geheugen vraagt een model van 6 GB?", "nl", True),
    ("Een PCIe 4.0 x16 verbinding haalt 31,5 GB/s.", "Hoe snel is PCIe 4.0?", "nl", True),  # "hoe snel": any figure
    ("De chip kwam uit in maart 2026.", "Wat is het stroomverbruik van de chip in watt?", "nl", False),
    ("Function calls accept any number of unpackings since version 3.5.", "How many arguments can a function take?", "en", False),
    # a compound unit is of its head's class (head-final): "werkdagen" are days, "gigabyte" is data
    ("De partner krijgt vijf werkdagen geboorteverlof.", "Hoeveel dagen geboorteverlof krijgt de partner?", "nl", True),
    ("De partner krijgt 5 werkdagen geboorteverlof.", "Hoeveel dagen geboorteverlof krijgt de partner?", "nl", True),
    ("Het model vraagt 16 gigabyte.", "Hoeveel geheugen vraagt het model?", "nl", True),
    ("Het bedrijf heeft vijf vestigingen.", "Hoeveel dagen geboorteverlof krijgt de partner?", "nl", False),
])
def test_a_sentence_states_a_figure_of_the_quantity_asked(text, question, lang, says):
    assert F.states(text, question, lang, asks._NUMBER_WORDS) is says


def test_a_unit_named_last_asks_for_a_figure():
    assert asks.answer_kind("Wat is het stroomverbruik van de Vera CPU in watt?", "nl") == "number"
    assert asks.answer_kind("In welke eenheid geef je de cache op?", "nl") is None


def test_a_figure_question_answered_only_by_a_date_or_a_span_of_time_is_declined():
    q = "Hoeveel kernen heeft de Vera-processor van NVIDIA?"
    doc = ("NVIDIA lanceerde in maart 2026 de Vera-processor, de eerste processor voor agents. "
           "Arm bracht de eerste eigen processor in 35 jaar uit.")
    ev = _evidence(q, [doc], "nl")
    assert asks.fits(ev[0][1].text, "number", q, "nl")  # a figure, so the old rule quoted it
    assert A.settle("De Vera heeft 36 kernen.", q, ev, "nl", DECLINE) == (DECLINE, {"answer": "declined", "check": "no_answer"})
    # nor where the model's answer copies such a figure: its sentence must hold a figure of the asked quantity too
    spans = "De Vera-processor van NVIDIA is het werk van 35 jaar onderzoek."
    ev2 = _evidence(q, [spans], "nl")
    assert A.check_answer("35.", q, [s for _, s in ev2], "nl").ok  # the figure is in a sentence about the Vera
    assert A.settle("35.", q, ev2, "nl", DECLINE) == (DECLINE, {"answer": "declined", "check": "no_answer"})
    # the figure the question asks for is quoted
    doc2 = doc + " De Vera-processor van NVIDIA heeft 88 kernen."
    text, how = A.settle("Veel.", q, _evidence(q, [doc2], "nl"), "nl", DECLINE)
    assert "88 kernen" in text and how["answer"] == "extractive"


def test_an_amount_of_memory_is_not_answered_by_a_count_of_kinds():
    q = "How many bytes does a Python float object occupy in memory?"
    doc = ("Python does not support single-precision floating point numbers; the savings in memory usage are dwarfed "
           "by the overhead of objects in Python, so there is no reason to have two kinds of floating point numbers.")
    assert A.settle("1024 bytes.", q, _evidence(q, [doc], "en"), "en", DECLINE)[0] == DECLINE
    doc2 = doc + " A Python float object occupies 24 bytes of memory."
    assert "24 bytes" in A.settle("Many.", q, _evidence(q, [doc2], "en"), "en", DECLINE)[0]


def test_a_piece_of_a_table_is_not_quoted_but_declined():
    q = "What is the time complexity of inserting at the front of a list?"
    row = "inserts x at the front of the list, in time that grows with the list"
    table = f'| "s.insert(0, x)" | {row} | |\n\nItems are referenced multiple times.'
    ev = _evidence(q, [table], "en")
    assert "|" in ev[0][1].text and ev[0][1].match >= A.MIN_MATCH
    assert A.settle("It is fast.", q, ev, "en", DECLINE)[0] == DECLINE
    assert A.settle("It is fast.", q, ev, "en")[1]["answer"] == "extractive"  # a caller that cannot decline still gets a quote
    # the same words as a sentence are quoted
    assert row in A.settle("It is fast.", q, _evidence(q, [f"The method {row}."], "en"), "en", DECLINE)[0]


def test_a_question_word_after_a_code_line_is_no_name():
    q = "Who wrote the pdb module?"
    text = "python -m pdb myscript.py When invoked as a module, pdb will enter post-mortem debugging."
    assert not asks.fits(text, "name", q, "en")
    assert asks.fits("The pdb module was written by Guido van Rossum.", "name", q, "en")
    assert A.settle("The author.", q, _evidence(q, [text], "en"), "en", DECLINE)[0] == DECLINE


def test_the_sentence_the_model_ranks_first_is_quoted_with_a_lower_share_of_the_question():
    q = "Hoe heet de topman van Arm?"
    haas = A.Sentence(0, 0, "Arm CEO Rene Haas schat dat het aantal kernen stijgt.", 0.17, 0.17)
    other = A.Sentence(0, 1, "Arm voorspelt deze verschuiving nog sterker.", 0.1, 0.1)
    assert A.FIRST_MIN_MATCH <= haas.match < A.MIN_MATCH
    text, how = A.settle("De topman.", q, [(1, haas), (1, other)], "nl", DECLINE)
    assert "Rene Haas" in text and how["answer"] == "extractive"
    # the same sentence after another one (not the model's first) holds too little of the question: declined
    assert A.settle("De topman.", q, [(1, other), (1, haas)], "nl", DECLINE)[0] == DECLINE


def test_a_question_about_a_default_gets_a_sentence_that_says_default_or_a_decline():
    q = "Hoeveel threads gebruikt llama-bench standaard als je geen -t opgeeft?"
    cmd = "Een gestandaardiseerde meting met llama-bench gebruikt 16 threads: llama-bench -p 512 -n 128 -t 16."
    ev = _evidence(q, [cmd], "nl")
    assert asks.answers_kind(ev[0][1].text, "number", q, "nl")  # a figure of threads, so only the default rule declines it
    assert A.settle("Veel.", q, ev, "nl", DECLINE)[0] == DECLINE
    said = cmd + " Zonder -t gebruikt llama-bench standaard 4 threads."
    assert "standaard 4 threads" in A.settle("Veel.", q, _evidence(q, [said], "nl"), "nl", DECLINE)[0]
    en = "What is the default tab size of str.expandtabs?"
    text = "str.expandtabs(tabsize=8) Tab positions occur every tabsize characters (default is 8)."
    assert "default is 8" in A.settle("Eight.", en, _evidence(en, [text], "en"), "en", DECLINE)[0]


@pytest.mark.parametrize("question, money", [
    ("Wat kost de AGI CPU van Arm?", True),
    ("What does the Vera CPU cost?", True),
    ("How expensive is an RTX 5090?", True),
    ("Wat is de prijs van de AI300?", True),
    ("What does repeated concatenation of immutable sequences cost in runtime?", False),  # a cost that is no money
    ("Wat doet je hardware de hele tijd?", False),
])
def test_a_question_about_what_something_costs_asks_for_money(question, money):
    assert (asks.answer_kind(question, "en" if question.startswith(("What", "How")) else "nl") == "money") is money


def test_a_cost_question_is_answered_by_an_amount_of_money_or_declined():
    q = "Wat kost de AGI CPU van Arm?"
    launch = "Arm lanceerde in maart de AGI CPU, hun eerste productie-silicon in 35 jaar."
    assert A.settle("De AGI CPU.", q, _evidence(q, [launch], "nl"), "nl", DECLINE)[0] == DECLINE
    priced = "De AGI CPU van Arm kost 450 euro per stuk."
    assert "450 euro" in A.settle("De AGI CPU.", q, _evidence(q, [priced], "nl"), "nl", DECLINE)[0]
    assert asks.fits("bijna nul marginale hardwarekosten", "money", "Wat kost inferentie aan extra hardware?", "nl")  # a cost word


@pytest.mark.parametrize("question, lang, person", [
    ("Wie is de topman van AMD?", "nl", True),
    ("Who proposed adding the match statement to Python?", "en", True),
    ("Hoe heet de topman van Arm?", "nl", True),
    ("What is the name of the CEO of Intel?", "en", True),
    ("Hoe heet de burgemeester van Utrecht?", "nl", True),  # an office: the same person nouns as asks_party's
    ("What is the name of the mayor of Leeds?", "en", True),
    ("Wie maakt de AI300?", "nl", False),  # what makes a thing: a company
    ("Which company makes the AI300?", "en", False),
    ("Hoe heet het alternatief van AMD voor CUDA?", "nl", False),
    ("Wie viele Seiten hat es?", "de", False),  # German "wie" asks how, not who
])
def test_which_questions_ask_for_a_person(question, lang, person):
    assert P.asks_person(question, lang) is person


@pytest.mark.parametrize("text, named", [
    ("Lisa Su leidt AMD sinds 2014.", True),
    ("Arm CEO Rene Haas schat dat het aantal kernen stijgt.", True),
    ("Guido van Rossum created Python.", True),
    ("Lip-Bu Tan, CEO van Intel, sprak op Computex.", True),
    ("Onderzoekers van Georgia Tech en Intel ontdekten dat tool-verwerking de CPU belast.", False),  # the question's own name
    ("Intel, Nvidia en AMD maken processors.", False),  # organisations in a list
    ("**PEP 634** - Structural Pattern Matching The specification for the Python \"match\" statement.", False),
])
def test_a_person_is_two_capitalised_words_not_an_organisation_or_acronym(text, named):
    assert P.names_person(text, "Wie leidde het onderzoek van Georgia Tech?", "nl") is named


def test_a_who_question_about_a_person_is_not_answered_by_an_organisation():
    q = "Who proposed adding the match statement to Python?"
    pep = "**PEP 634** - Structural Pattern Matching The specification for the Python \"match\" statement."
    assert A.settle("PEP.", q, _evidence(q, [pep], "en"), "en", DECLINE)[0] == DECLINE
    nl = "Wie leidt Intel?"
    assert not asks.fits("Intel zag de vraag naar Xeon stijgen.", "name", nl, "nl")
    assert asks.fits("Lip-Bu Tan leidt Intel sinds maart.", "name", nl, "nl")
    company = "Wie maakt de AI300?"  # a company is asked: one capitalised name does
    assert asks.fits("De AI300 wordt gemaakt door Corsair.", "name", company, "nl")


def test_a_plural_of_a_magnitude_is_a_figure_written_as_a_word():
    words = asks._NUMBER_WORDS
    assert all(F.is_number_word(w, words) for w in ("honderdduizenden", "tienduizenden", "duizenden", "thousands", "miljoenen"))
    assert not any(F.is_number_word(w, words) for w in ("vieren", "tenen", "alles", "allen", "fives"))
    q = "Tot hoeveel nvidia kaarten krijgt openai toegang?"
    assert asks.answers_kind("OpenAI krijgt toegang tot honderdduizenden NVIDIA GPU's.", "number", q, "nl")
    assert not asks.answers_kind("OpenAI krijgt toegang tot NVIDIA GPU's.", "number", q, "nl")


def test_a_dutch_genitive_of_a_name_is_the_name():
    q = "Wat gebeurt er volgens de conclusie met de vraag naar Intels Xeon-processors?"
    assert asks.missing_names(q, ["Intel ziet de vraag naar Xeon stijgen boven het aanbod."]) == set()
    assert asks.missing_names(q, ["AMD ziet de vraag naar Xeon stijgen."]) == {"intels"}


def test_the_models_first_sentence_of_the_asked_kind_is_quoted_below_a_better_matching_one():
    q = "Wat kost inferentie op servers die je al hebt staan aan extra hardware?"
    first = A.Sentence(0, 0, "CPU-inferentie op reeds aanwezige serverinfrastructuur heeft bijna nul marginale hardwarekosten.", 0.12, 0.18)
    other = A.Sentence(0, 1, "Waar de processor in elke bestaande server al aanwezig is, vereist een GPU aanpassingen.", 0.24, 0.26)
    assert A.FIRST_MIN_MATCH <= first.match < A.NEAR_BEST * other.match
    text, how = A.settle("Het hangt ervan af.", q, [(1, first), (1, other)], "nl", DECLINE)
    assert "bijna nul" in text and how["answer"] == "extractive"
    # below the first place the usual bars apply (MIN_MATCH, NEAR_BEST of the best)
    assert A.settle("Het hangt ervan af.", q, [(1, other), (1, first)], "nl", DECLINE)[0] == DECLINE


@pytest.mark.parametrize("question, text, missing", [
    ("Does the GPLv3 let me charge for copies?", "GNU GENERAL PUBLIC LICENSE\nVersion 3, 29 June 2007\n... the GNU GPL ...", set()),
    ("Mag ik onder de GPLv2 geld vragen?", "De GNU GPL, versie 2, juni 1991", set()),
    ("Is Python3 required?", "It needs Python 3 or later.", set()),
    ("Does the GPLv4 let me charge?", "GNU GENERAL PUBLIC LICENSE Version 3 ... the GNU GPL ... section 4", {"gplv4"}),
    ("Does the GPLv3 let me charge?", "The Apache License, Version 3 of the notice ...", {"gplv3"}),
])
def test_a_name_glued_to_its_version_counts_where_a_text_writes_it_apart(question, text, missing):
    """"GPLv3" over the licence's own text ("GNU GPL", "Version 3") was an unknown name, so the answer declined
    before the model read a word; another version, or the number without the name, still is."""
    assert asks.missing_names(question, [text]) == missing
