"""Grounded answers after retrieval: the sentences that answer a question, a check that a model's answer stays
on them, the extractive answer when it does not, and the "[n]" citations that tie an answer to its sources.

A 270M base model reads a few sentences better than whole chunks, and restates the fact in about half of its
answers; the rest are empty, echo the question, or invent. Even its answers that pass the check (what they add to
the question is found in one of the sentences it was given) held the fact less often than that sentence quoted, so
the answer is a sentence, quoted, with its citation: the documents' own words, never an invention. The model's
answer chooses the sentence where it states a figure (it copies figures from the sentence it read); otherwise the best
one is quoted. Which path produced an answer is reported with the response (`grounding`).

A quote that names the question's subject but not what it asks is worse than none: where the question asks for a value
(a figure of the asked quantity or a ratio, an amount, a name, a year, a version, a release date: answer_kind) no
sentence without one is quoted, and a value asked of a named thing is quoted only from a passage that names it
(thing_check); with neither, the answer is the "documents do not cover this" text.

A quote is a sentence's own words (sentences.split_units): a heading over it is matched with it but left out, a list item
stands alone, and a mail's or document's "Key: value" header lines are quoted only for a question about them (who sent
it, when: asks_header), so that no heading or e-mail address is glued in front of an answer.

Sentences are ranked by the share of the question's content terms they hold (stemmed in the question's
language), each term weighed by how rare it is among the retrieved sentences, with a small penalty per
retrieval rank of the chunk; ties keep retrieval and text order.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from edge_agent.rag import language
from edge_agent.services import figures, persons
from edge_agent.services.sentences import (
    CLOSED,
    HEAD_WORDS,
    LIST_ITEM,
    SENTENCE_END,
    Sentence,
    Unit,
    asks_header,
    match_credits,
    question_words,
    split_sentences,
    split_units,
    text_language,
)

RANK_PENALTY = 0.02  # per retrieval rank of the sentence's chunk, in shares of the question's weight
_CITATION = re.compile(r"\[(\d{1,3})\]")
# an answer is kept when one sentence holds this share of the terms it adds to the question (dev set: 0.6-0.8
# gave the same answers, 0.5 kept wrong ones)
MIN_SUPPORT = 0.7
# ... in a sentence that matches the question at least this share as well as the best one (on the bench's
# 34 dev questions 0.6-0.8 kept the same answers; 1.0 lost correct answers from a near-best sentence, 0 kept
# wrong numbers copied from an unrelated sentence)
NEAR_BEST = 0.7
# a sentence that holds less of the question's weight is not quoted as the answer: when the model's own answer
# fails its check too, the answer declines (on the dev and held-out sets the quotes that held the fact held 0.24
# or more, those quoted for unanswerable questions 0.18-0.42)
MIN_MATCH = 0.2
# ... except for the first sentence of the evidence, the one the model's likelihood of the question ranks first
# (grounding.focus): it holds the fact of Dutch paraphrases with 0.12-0.19 ("topman" for "CEO"); on the dev, held-out
# and blind 1-4 sets the first sentence of unanswerable questions held 0.08, 0.10, then 0.28 or more
FIRST_MIN_MATCH = 0.15
QUOTE_CHARS = 400  # an extractive answer quotes the best sentence and the next one when both fit in this many characters
LANGUAGE_CHECK_WORDS = 4  # shorter answers are not judged by language: too few words to tell


def rank_sentences(question: str, chunks: Sequence[Any], lang: str) -> list[Sentence]:
    """Every sentence of the chunks (best-ranked chunk first), best match to the question first (see the module doc):
    a question word matched only as part of a compound counts in part (match_credits); a sentence that holds what
    the question asks for (a figure for "how many", an amount for "what does it cost": answer_kind; a name for "who"
    is checked, not ranked by) gains KIND_BONUS,
    one that reads as code (a ">>>" prompt, a grammar rule) loses CODE_PENALTY."""
    qterms = language.content_terms(question, lang)
    kind = answer_kind(question, lang)
    qwords = question_words(question, lang)
    items = []
    after: dict[tuple[int, int], str] = {}
    units: dict[tuple[int, int], Unit] = {}
    langs: dict[int, str] = {}
    for r, c in enumerate(chunks):
        sents = split_units(c.text)
        text_lang = langs[r] = text_language(c.text)
        for j, u in enumerate(sents):
            if u.header and not asks_header(question, u.header, lang, kind):
                continue
            units[r, j] = u
            items.append((r, j, u.text, match_credits(qterms, qwords, u.text, lang, text_lang)))
            nxt = sents[j + 1] if j + 1 < len(sents) else None
            # the next sentence goes with a quote; not a heading's section, a header line, or a heading, signature or
            # greeting left alone ("Groet, Anna", "str.partition(sep)" at a chunk's end: _bare)
            after[r, j] = nxt.text if nxt and not (nxt.quote or nxt.header or u.header or _lone(nxt.text)) else ""
    df = Counter(t for *_, cr in items for t, v in cr.items() if v > 0)
    n = len(items)
    weight = {t: math.log(1.0 + (n + 1) / (df[t] + 0.5)) for t in qterms}
    total = sum(weight.values()) or 1.0
    scored = []
    for r, j, s, cr in items:
        match = sum(weight[t] * v for t, v in cr.items()) / total
        score = match - RANK_PENALTY * r
        if match > 0 and kind and kind != "name" and fits(s, kind, question, lang):  # a name: checked, not ranked by
            score += KIND_BONUS
        if _CODE.search(s):
            score -= CODE_PENALTY
        scored.append(Sentence(r, j, s, score, match, after[r, j], units[r, j].quote, units[r, j].header, langs[r]))
    return sorted(scored, key=lambda x: (-x.score, x.chunk, x.index))


def rerank_sentences(sentences: Sequence[Sentence], likelihood: Sequence[float]) -> list[Sentence]:
    """sentences ordered by their word score plus likelihood (each one's: the model's log-probability per token of the
    question after it), best first; ties keep the given order. Words find the sentences that share the question's
    terms; the model tells which of them the question is about, where the words are synonyms or figures
    ("topman" for "CEO", "-1" for "not found"). (Taking each likelihood relative to the mean of its passage language's
    was tried for mixed-language candidates: no gain on any set, one fact lost on the held-out xl2.) Raises
    ValueError when the two lengths differ."""
    if len(sentences) != len(likelihood):
        raise ValueError("one likelihood per sentence is needed")
    order = sorted(range(len(sentences)), key=lambda i: (-(sentences[i].score + likelihood[i]), i))
    return [sentences[i] for i in order]


# a name the question refers to: a word of two characters or more with a digit ("5090", "M4", "70B"), a capital after its
# first letter ("OpenAI", "AI300", "NVIDIA"), or a capital first where it does not start a sentence ("Vera", "Peru"; not
# "Waarom" in "Kan een VM dat bijhouden? Waarom niet?", nor "Quick" in "Hi! Quick question: ...")
_WORD = re.compile(r"\w+", re.UNICODE)
_SENTENCE_END_MARK = re.compile(r"[.!?:][\"'”’)\]]*\s")  # not the dot of "pdb.Pdb"
NAME_PREFIX_MIN = 4  # a name this long also matches a passage word it starts ("Rubin" in "Rubin-rekken" is split anyway)


def names(question: str) -> set[str]:
    """The names and figures a question refers to (see _WORD's comment), folded and casefolded."""
    out = set()
    end = None  # where the word before ends (None: no word before)
    for m in _WORD.finditer(question):
        w = m.group(0)
        starts = end is None or _SENTENCE_END_MARK.search(question, end, m.start()) is not None
        end = m.end()
        if len(w) < 2 or "_" in w:
            continue
        if any(c.isdigit() for c in w) or any(c.isupper() for c in w[1:]) or (not starts and w[0].isupper()):
            out.add(language.fold(w.casefold()))
    return out


def missing_names(question: str, texts: Sequence[str]) -> set[str]:
    """The question's names (names()) that none of texts holds as a word (or, NAME_PREFIX_MIN letters or more, as the
    start of a word): a question about "Peru" or "M4 Ultra" that passages about other things cannot answer."""
    wanted = names(question)
    if not wanted:
        return set()
    held = {language.fold(w) for t in texts for w in _WORD.findall(t.casefold())}
    return {n for n in wanted if n not in held and not (len(n) >= NAME_PREFIX_MIN and any(w.startswith(n) for w in held))
            and not (len(n) > NAME_PREFIX_MIN and n.endswith("s") and n[:-1] in held)}  # "Intels": Intel's


# questions that ask for one value of a named thing (a figure, an amount, a name, a year): its answer sits in a sentence
# that speaks of the thing and of what is asked about it, never in one that only names the thing
RELATION_KINDS = frozenset({"number", "money", "name", "year"})
RELATION_WINDOW = 1  # sentences before and after one that names the thing, read with it ("Intel's figures:" then a list)


def relation_terms(question: str, lang: str) -> tuple[set[str], set[str]]:
    """(thing, relation): the question's content terms that come from its names (names(): "AI300", "NVIDIA") and
    the others, stop words left out ("kost", "topman", "videogeheugen": what is asked about the thing)."""
    qterms = language.content_terms(question, lang)
    qwords = question_words(question, lang)
    named = names(question)
    thing = {t for t in qterms if qwords.get(t) in named}
    stops = language.stop_words(lang)
    return thing, {t for t in qterms - thing if language.fold(t) not in stops}


def unasked_relation(question: str, texts: Sequence[str], lang: str) -> bool:
    """Whether texts name the question's thing but never speak of what the question asks about it: no sentence
    that holds one of its thing terms (relation_terms) holds, with RELATION_WINDOW sentences either side, any of its
    relation terms (match_credits: compounds count in part). False where the question asks no value of a named
    thing (answer_kind not in RELATION_KINDS, no name, or nothing asked beyond the name), or no text names it.
    "Hoeveel kost de AI300?" over passages that describe the AI300 but price nothing: True. A text in another language
    than the question's is read for the words both share (sentences.cross_credits: "IP" of "IP address" in "IP-adres"),
    and for a price, an amount of money next to the thing ("cost" is no word of "kost meer dan $45.000")."""
    kind = answer_kind(question, lang)
    if kind not in RELATION_KINDS:
        return False
    thing, relation = relation_terms(question, lang)
    if not thing or not relation:
        return False
    qterms = thing | relation
    qwords = question_words(question, lang)
    named_somewhere = False
    for text in texts:
        sents = split_sentences(text)
        text_lang = text_language(text)
        for j, s in enumerate(sents):
            if not any(v >= 1.0 for t, v in match_credits(thing, qwords, s, lang, text_lang).items()):
                continue
            named_somewhere = True
            around = " ".join(sents[max(0, j - RELATION_WINDOW) : j + RELATION_WINDOW + 1])
            if any(v > 0 for t, v in match_credits(qterms, qwords, around, lang, text_lang).items() if t in relation):
                return False
            if text_lang != lang and kind == "money" and figures.states_money(around):  # "kost $45.000" for "cost"
                return False
    return named_somewhere


# questions that ask for a value (VALUE_KINDS: a figure, an amount, a name, a year, a version, a date): where they name a
# thing, the quote comes from a passage that names it too ("Hoeveel watt verbruikt de Vera?" is not answered by "een
# GPU-cluster van 700 watt" in a passage about servers): on the older sets this declined 4 unanswerable questions and
# no answerable one
VALUE_KINDS = RELATION_KINDS | {"version", "date"}


def thing_check(question: str, passages: Sequence[str], lang: str) -> Callable[[str], bool] | None:
    """For a question of VALUE_KINDS that names a thing (relation_terms): passage -> whether it names every name of the
    question that one of passages names; None where there is nothing to check (another kind, no name, no passages)."""
    if not passages or answer_kind(question, lang) not in VALUE_KINDS:
        return None
    thing, _ = relation_terms(question, lang)
    if not thing:
        return None
    qwords = question_words(question, lang)

    def held(text: str) -> set[str]:
        return {t for t, v in match_credits(thing, qwords, text, lang, text_language(text)).items() if v >= 1.0}

    named = set().union(*(held(p) for p in passages))
    return (lambda passage: named <= held(passage)) if named else None


# what a question asks for, by its question words: a figure, or an amount of money (a figure with a currency)
_NUMBER_ASKS = {
    "en": ("how many", "how much", "how fast", "how long", "how large", "how big", "how high", "how often", "how old",
           "what percentage", "what share", "which percentage"),
    "nl": ("hoeveel", "hoe veel", "hoe snel", "hoe groot", "hoe lang", "hoe hoog", "hoe duur", "hoe zwaar", "hoe vaak",
           "hoe oud", "welk percentage", "welk aandeel"),
    "de": ("wie viel", "wieviel", "wie viele", "wie schnell", "wie groß", "wie lang", "wie hoch", "wie oft", "wie alt"),
    "fr": ("combien", "quelle taille", "quelle vitesse"),
    "es": ("cuánto", "cuántos", "cuántas", "qué tan"),
}
_MONEY_WORDS = {"cost", "costs", "price", "prices", "priced", "pay", "kost", "kosten", "prijs", "prijzen", "betaal", "betaalt",
                "kostet", "kosten", "preis", "coûte", "prix", "cuesta", "precio"}
_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred thousand million "
    "billion trillion half twice double triple dozen zero none all entire whole every several few "
    "twee drie vier vijf zes zeven acht negen tien elf twaalf twintig dertig veertig vijftig honderd duizend miljoen "
    "miljard biljoen half helft dubbel nul geen alle hele gehele geheel elke iedere enkele weinig "
    "zwei drei vier fünf zehn hundert tausend millionen milliarde hälfte deux trois quatre cinq dix cent mille "
    "dos tres cuatro cinco diez cien mil".split())
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
# a sentence that reads as code: an interactive prompt, a grammar rule, a table's border
_TABLE = r"\+-{3,}|\|\s.*\|\s.*\|"
_CODE = re.compile(rf">>>|::=|{_TABLE}")
_TABLE_ROW = re.compile(_TABLE)
# "which method / exception / option": a name as code writes it is asked for (at most one word between)
_CODE_NOUNS = {
    "en": "method|function|exception|error|attribute|module|class|keyword|variable|option|flag|command|operator|parameter|argument|setting",
    "nl": "methode|functie|uitzondering|foutmelding|attribuut|module|klasse|sleutelwoord|variabele|omgevingsvariabele|optie|vlag|"
          "commando|opdracht|operator|parameter|argument|instelling",
    "de": "methode|funktion|ausnahme|fehler|attribut|modul|klasse|schlüsselwort|variable|umgebungsvariable|option|befehl|operator|parameter",
}
_VERBS = "is|are|was|were|do|does|did|can|could|should|would|will|has|have|zijn|heeft|hebben|wordt|worden|kan|kun|ist|sind|hat"
_CODE_ASKS = {lang: re.compile(rf"\b(?:which|what|welke|welk|welcher|welche|welches)\s+(?:(?!(?:{_VERBS})\s)[\w-]+\s+)?"
                               rf"(?:{nouns})(?:s|en)?\b") for lang, nouns in _CODE_NOUNS.items()}
_IDENTIFIER = re.compile(r"__\w+__|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b|\b\w+\(\)|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\b[A-Z]{8,}\b"
                         r"|(?<![\w-])--?[a-z][\w-]*")
# "which exception / what error": the name of an exception class is asked for ("ImportError", "StopIteration")
_EXCEPTION_ASKS = re.compile(r"\b(?:which|what|welke|welk|welcher|welche|welches)\s+(?:[\w-]+\s+)?"
                             r"(?:exception|error|uitzondering|foutmelding|fout|ausnahme|fehler)(?:s|en)?\b")
_EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Warning|Exit|Iteration|Interrupt)\b")
_QUOTED = re.compile(r"[\"“]([^\"”\s]{1,40})[\"”]")
KIND_BONUS = 0.15  # in shares of the question's weight
CODE_PENALTY = 0.15


# "who" (persons.asks_who): a person's or an organisation's name is asked for
NAME_ANSWER_WORDS = 3  # an answer this short may give the name as its first word ("Guido.")
# "which year": a year is asked for
_YEAR_ASKS = re.compile(r"\b(?:which|what|in welk|welk|in welchem|welches|quel|quelle|en qué|qué)\s+(?:year|jaar|jahr|année|año)\b")
_YEAR = re.compile(r"(?<![\d.,])(?:1[5-9]|20)\d\d(?![\d.,]\d)")
# "which version", "sinds welke versie": a version is asked for ("Changed in version 3.8", "Python 3", "1.6.0")
_VERSION_ASKS = re.compile(r"\b(?:which|what|welke|welk|welcher|welche|welches|quelle|qué)\s+(?:[\w.-]+\s+)?(?:version|versie|release)s?\b")
_NAMED_VERSION = re.compile(r"\b(?:version|versions|versie|versies|release|python)\s+v?(\d+(?:\.\d+)*)", re.IGNORECASE)
_DOTTED = re.compile(r"(?<![\w.,])v?(\d+(?:\.\d+){1,3})(?![\w]|[.,]\d)")
# "when did X come out", "wanneer kwam X op de markt": a date is asked for (a year, a month, or, for software, a version);
# not "When a key is added twice, ...": an English "when" asks only before was/did/will/...
_RELEASE_ASKS = re.compile(
    r"^\W*(?:when\s+(?:was|were|did|does|do|will|is|are|has|have)|wanneer|wann|quand)\b[^,;]*\b(?:kwam|kwamen|komt|verscheen|verschenen|verschijnt|uitgebracht|bracht|brengt|"
    r"lanceerde|lanceert|gelanceerd|introduceerde|geïntroduceerd|opgericht|gepubliceerd|getekend|ondertekend|released?|launched?|"
    r"introduced?|came|comes?|appeared?|added|founded|published|signed|erschien|erscheint)\b")
_MONTH = re.compile(r"\b(?:januari|februari|maart|april|mei|juni|juli|augustus|september|oktober|november|december|january|"
                    r"february|march|june|july|august|october|januar|februar|märz|juli|oktober|dezember)\b", re.IGNORECASE)


def versions(text: str) -> set[str]:
    """The versions text writes: a figure after "version", "versie", "Python" ("version 3", "Python 3.11"), or a dotted
    figure of two to four parts ("3.8", "1.6.0"), not one whose later parts are all of three digits (the "1.000" of a
    thousand)."""
    found = {m.group(1) for m in _NAMED_VERSION.finditer(text)}
    for m in _DOTTED.finditer(text):
        if not all(len(part) == 3 for part in m.group(1).split(".")[1:]):
            found.add(m.group(1))
    return found


def answer_kind(question: str, lang: str) -> str | None:
    """What the question asks for: "money" (an amount: "how much does it cost", "wat kost", "how expensive"), "number" (a
    figure: "how many", "hoeveel", "how fast", or a unit named last: "... in watt?"), "code" (a name as code writes it: "which method", "welke
    omgevingsvariabele"), "name" (a name: "who", "wie"), "year" ("which year", "in welk jaar"), "version" ("which version",
    "welke versie"), "date" (when something came out: "wanneer kwam X uit", "when was X added"), or None (anything: its
    words decide)."""
    if persons.asks_who(question, lang):
        return "name"
    if _YEAR_ASKS.search(question.casefold()):
        return "year"
    if _VERSION_ASKS.search(question.casefold()):
        return "version"
    if _RELEASE_ASKS.search(question.casefold()):
        return "date"
    if figures.asks_money(question):  # "Wat kost X?", "What does X cost?", "How expensive is X?"
        return "money"
    low = " ".join(language.words(question.casefold()))
    asks = _NUMBER_ASKS.get(lang, ()) + (_NUMBER_ASKS["en"] if lang != "en" else ())
    if not any(re.search(rf"\b{re.escape(a)}\b", low) for a in asks):
        if figures.names_unit(question):  # "Wat is het stroomverbruik in watt?"
            return "number"
        code = _CODE_ASKS.get(lang, _CODE_ASKS["en"])
        return "code" if code.search(question.casefold()) or _CODE_ASKS["en"].search(question.casefold()) else None
    return "money" if set(low.split()) & _MONEY_WORDS else "number"


def _identifiers(text: str) -> set[str]:
    """Names as code writes them: __dunder__, CamelCase, call(), CONST_CASE, "quoted" tokens, --flags."""
    found = {m.group(0) for m in _IDENTIFIER.finditer(text)} | {m.group(1) for m in _QUOTED.finditer(text)}
    return {f.strip("()").casefold() for f in found if f.strip("()")}


def answers_kind(text: str, kind: str, question: str, lang: str) -> bool:
    """What a quote must hold to be given as the answer: fits, and for a figure or an amount, a figure of the
    quantity asked (figures.states: not a date, a version, or a figure of another unit: "in maart 2026" or "35 jaar"
    does not answer "Hoeveel kernen ...?", "two kinds" not "How many bytes ...?")."""
    return fits(text, kind, question, lang) and (kind not in ("number", "money") or figures.states(text, question, lang, _NUMBER_WORDS))


def fits(text: str, kind: str, question: str, lang: str) -> bool:
    """Whether text holds what a question of this kind asks for, beyond the question's own: a figure (digits or
    a number word, "duizenden" too) for "number", a figure and an amount of money (figures.states_money) for "money", a
    name as code writes it for "code", a capitalised word that is not the question's, a stop word, a question word
    ("When" after a code line) or (in a text of more than NAME_ANSWER_WORDS words) the first word, for "name" (for a
    question about a person, a person's name: persons.names_person); a year (1500-2099) the question does not name, for "year";
    a version it does not name (versions), for "version"; a year, a month or a version, for "date"."""
    if kind == "year":
        return bool(set(_YEAR.findall(text)) - set(_YEAR.findall(question)))
    if kind == "version":
        return bool(versions(text) - versions(question))
    if kind == "date":  # a year, a month or a version the question does not name
        return bool(set(_YEAR.findall(text)) - set(_YEAR.findall(question)) or _MONTH.search(text)
                    or versions(text) - versions(question))
    if kind == "name" and persons.asks_person(question, lang):  # a person's name, not "Intel" or "PEP"
        return persons.names_person(text, question, lang)
    if kind == "name":
        asked = ({language.fold(w) for w in _WORD.findall(question.casefold())} | language.stop_words(lang)
                 | language.QUESTION_WORDS.get(lang, frozenset()) | language.QUESTION_WORDS["en"])
        found = _WORD.findall(text)
        found = found if len(found) <= NAME_ANSWER_WORDS else found[1:]
        return any(len(w) > 1 and w[0].isupper() and any(c.islower() for c in w[1:]) and language.fold(w.casefold()) not in asked
                   for w in found)
    if kind == "code":
        if _EXCEPTION_ASKS.search(question.casefold()):  # "which exception": an exception's name, not any code name
            return bool(set(_EXCEPTION.findall(text)) - set(_EXCEPTION.findall(question)))
        return bool(_identifiers(text) - _identifiers(question) - set(language.words(question.casefold())))
    asked = set(_DIGITS.findall(question))
    said = [d for d in _DIGITS.findall(text) if d not in asked]
    if not said:
        words = set(language.words(text.casefold())) - set(language.words(question.casefold()))
        said = sorted(w for w in words if figures.is_number_word(w, _NUMBER_WORDS))
    if not said:
        return False
    return kind != "money" or figures.states_money(text)


@dataclass
class Verdict:
    """How a model's answer relates to its sentences: ok, or why not (empty, echo, off_source, wrong_language)."""

    status: str
    support: Sentence | None = None  # the sentence the answer's added terms come from (ok)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def check_answer(answer: str, question: str, given: Sequence[Sentence], lang: str) -> Verdict:
    """Whether answer adds something to the question that one of the given sentences (best first) holds, one
    that matches the question nearly as well as the best (NEAR_BEST of its score) and holds one of the
    question's most specific terms (_anchors).

    empty: no word; echo: no term beyond the question's; off_kind: no figure (or amount) where the question asks
    for one (answer_kind); off_source: no such sentence (holding MIN_MATCH of the question) holds MIN_SUPPORT of
    the added terms; altered_figure: a figure the sentence does not write so ("1000" for "1.000"); altered_negation:
    four words or more, negated where the sentence is not or the other way round ("can" for "cannot");
    wrong_language: four words or more that read as English (the model's habit) or as the source's language, where
    the question is in another.
    """
    text = strip_citations(answer).strip()
    if not language.words(text):
        return Verdict("empty")
    added = set(language.terms(text, lang)) - set(language.terms(question, lang, drop_stop_words=False))
    if not added:
        return Verdict("echo")
    kind = answer_kind(question, lang)
    if kind and not fits(text, kind, question, lang):
        return Verdict("off_kind")
    top = max((s.score for s in given), default=0.0)  # by words, whatever order the sentences come in
    anchors = _anchors(question, given, lang)
    best, share = None, 0.0
    for s in given:
        held = set(language.terms(s.text, lang))
        if s.score < NEAR_BEST * top or s.match < MIN_MATCH or (anchors and not anchors & held):
            continue
        got = len(added & held) / len(added)
        if got > share + 1e-9:
            best, share = s, got
    if best is None or share < MIN_SUPPORT:
        return Verdict("off_source")
    if _unwritten_figures(text, f"{best.text} {question}"):
        return Verdict("altered_figure", best)
    if len(language.words(text)) >= LANGUAGE_CHECK_WORDS and _negated(text, lang) != _negated(best.text, lang):
        return Verdict("altered_negation", best)
    if len(language.words(text)) >= LANGUAGE_CHECK_WORDS:
        said = language.likely(text, {lang, "en", language.detect(best.text)})
        if said and said[0] != lang:
            return Verdict("wrong_language", best)
    return Verdict("ok", best)


def _unwritten_figures(answer: str, source: str) -> set[str]:
    """The figures of answer that source does not write: "1000" for "1.000" is one; "45,000" for "45.000" is none (the
    thousands mark of English and of Dutch), nor "1.5" for "1,5" (a figure with a mark matches one with the other mark)."""
    written = set(_DIGITS.findall(source))
    marked = {re.sub(r"[.,]", ".", f) for f in written if not f.isdigit()}
    return {f for f in set(_DIGITS.findall(answer)) - written if f.isdigit() or re.sub(r"[.,]", ".", f) not in marked}


_NEGATIONS = {
    "en": frozenset("not no never cannot none nor neither nothing".split()),
    "nl": frozenset("niet geen nooit noch nergens niets".split()),
    "de": frozenset("nicht kein keine keinen keiner nie niemals nichts".split()),
    "fr": frozenset("ne pas jamais aucun aucune rien".split()),
    "es": frozenset("no nunca ningún ninguna nada".split()),
}
_NT = re.compile(r"n[’']t\b", re.IGNORECASE)


def _negated(text: str, lang: str) -> bool:
    """Whether text says "not" (its language's negation words, and English "n't")."""
    low = text.casefold()
    return bool(_NT.search(low) or set(language.words(low)) & (_NEGATIONS.get(lang, frozenset()) | _NEGATIONS["en"]))


def _anchors(question: str, given: Sequence[Sentence], lang: str) -> set[str]:
    """The question's most specific terms: those found in the fewest of the given sentences (but in one at least).
    An answer must rest on a sentence that holds one ("modulo", not just "operator")."""
    qterms = language.content_terms(question, lang)
    df = Counter(t for s in given for t in set(language.terms(s.text, lang)) & qterms)
    if not df:
        return set()
    least = min(df.values())
    return {t for t, n in df.items() if n == least}


def strip_citations(text: str) -> str:
    return _CITATION.sub("", text)


def cited(text: str) -> set[int]:
    """The passage numbers a text cites as "[n]"."""
    return {int(m) for m in _CITATION.findall(text)}


def with_citation(answer: str, number: int, valid: set[int]) -> str:
    """answer with its "[n]" markers that name no passage removed, and " [number]" added unless it cites one."""
    text = _CITATION.sub(lambda m: m.group(0) if int(m.group(1)) in valid else "", answer).strip()
    text = re.sub(r"\s+(?=[.,;:!?])", "", re.sub(r"\s{2,}", " ", text))
    if cited(text) & valid:
        return text
    return f"{text} [{number}]"


def _table(sentence: Sentence) -> bool:
    """Whether the sentence is a piece of a table (cells between "|", a "+---" border): cut out of its table it
    reads as noise, and quoted for a question no document answers it looked like an answer."""
    return bool(_TABLE_ROW.search(sentence.text))


# a question about a default ("the default recursion limit", "draait standaard"): a quote that never says "default"
# gives some setting, not the default
_DEFAULT = re.compile(r"\b(?:default|defaults|standaard|standaardwaarde|standardmäßig|voreingestellt|par défaut|por defecto)\b",
                      re.IGNORECASE)


def _may_answer(sentence: Sentence, question: str) -> bool:
    """Whether the sentence may be quoted where the answer can decline instead: no piece of a table (_table), and
    for a question about a default, one that speaks of a default (its own words or the next sentence's)."""
    if _table(sentence):
        return False
    return not _DEFAULT.search(question) or bool(_DEFAULT.search(f"{sentence.text} {sentence.after}"))


def _bare(sentence: Sentence) -> bool:
    """Whether the sentence is a heading or a signature left alone at the end of its chunk ("str.partition(sep)"):
    HEAD_WORDS words or fewer, no closing mark, nothing after it: it names what the text is about and answers nothing.
    A header line is none."""
    return not sentence.after and not sentence.header and len(sentence.text.split()) <= HEAD_WORDS and not CLOSED.search(sentence.text)


def _lone(text: str) -> bool:
    """Whether a sentence is a heading, signature or greeting that headed nothing ("Conclusie", "Groet, Anna"): HEAD_WORDS
    words or fewer, no closing mark, no list item, no code (a grammar rule)."""
    return len(text.split()) <= HEAD_WORDS and not CLOSED.search(text) and not LIST_ITEM.match(text) and not _CODE.search(text)


def extractive(sentence: Sentence, number: int) -> str:
    """The sentence, quoted, with its citation: '"..." [n]', followed by the chunk's next sentence where the two hold
    QUOTE_CHARS or fewer (a rule is often stated in one sentence and its detail in the next: "str.isascii() Return
    True if ... ASCII. ASCII characters have code points in the range U+0000-U+007F."); the source's own "[4]"
    footnote marks are left out, so that every "[n]" of an answer is a citation."""
    text = sentence.quote or sentence.text
    if sentence.after and len(text) + 1 + len(sentence.after) <= QUOTE_CHARS:
        text = f"{text} {sentence.after}"
    text = re.sub(r"\s+(?=[.,;:!?])", "", re.sub(r"\s{2,}", " ", strip_citations(text))).strip()
    return f"\"{text}\" [{number}]"


def report(lang: str, how: list[dict[str, str]]) -> dict:
    """A response's `grounding`: the question's language and, per choice, which path made its answer."""
    return {"language": lang, "choices": [{"index": i, **h} for i, h in enumerate(how)]}


def drop_repeats(answer: str) -> str:
    """A base model that loops ("X. X. X. X") says X once, and a last piece cut off by the token limit that only
    restarts a sentence it already said goes too; an answer without a repeat comes back as it was."""
    parts = SENTENCE_END.split(answer.strip())
    kept: list[str] = []
    seen: set[str] = set()
    for i, part in enumerate(parts):
        key = " ".join(part.casefold().split())
        cut = i == len(parts) - 1 and not CLOSED.search(part)
        if key in seen or (cut and any(k.startswith(key) for k in seen)):
            continue
        seen.add(key)
        kept.append(part)
    return answer if len(kept) == len(parts) else " ".join(kept)


def settle(answer: str, question: str, evidence: Sequence[tuple[int, Sentence]], lang: str,
           decline: str | None = None, model_words: bool = False, passages: Sequence[str] = ()) -> tuple[str, dict[str, str]]:
    """The answer to give for a model's answer, and how it was made: {"answer": "extractive", "check": why} (a sentence
    of the evidence, quoted and cited: the one the model's answer rests on where it passes the check and states a figure
    the question does not (the figure points at its sentence: "16" at "... -t 16"), else the best sentence that holds what
    the question asks for) or, given a decline text, that text when no sentence holds the figure or amount the question
    asks for (answers_kind: of its unit, not a date or a version), or none holds MIN_MATCH of the question's weight (the
    first, FIRST_MIN_MATCH); a piece of a table, or for a question about a default a sentence that never says "default",
    is never quoted then (_may_answer) ({"answer": "declined", "check": "no_answer"}).
    model_words: a model's answer that passes the check is given in its own words, cited with the passage it rests on
    ({"answer": "model", "check": "ok"}). Off by default: the default model's checked answers held the fact less often
    than the quote (held-out and blind sets, see GroundingPolicy.model_words).
    evidence: (passage number, sentence) pairs, best first; with none, the model's answer is given unchecked
    ({"answer": "model", "check": "none"}).
    passages: the retrieved chunks' texts by retrieval rank (Sentence.chunk); given a decline text, a question that asks
    a value of a named thing is answered only from a passage that names it (thing_check)."""
    answer = drop_repeats(answer)
    if not evidence:  # a prompt of cut chunks, not sentences: nothing to check against
        return answer.strip(), {"answer": "model", "check": "none"}
    number = {s: k for k, s in evidence}
    verdict = check_answer(answer, question, [s for _, s in evidence], lang)
    kind = answer_kind(question, lang)
    names_thing = thing_check(question, passages, lang) if decline is not None else None

    def on_thing(s: Sentence) -> bool:
        return names_thing is None or (s.chunk < len(passages) and names_thing(passages[s.chunk]))

    if verdict.ok and verdict.support is not None:
        if model_words:
            return with_citation(answer.strip(), number[verdict.support], set(number.values())), {"answer": "model", "check": "ok"}
        # the figure points at its sentence (all in support: check_answer), where that sentence holds what is asked (a
        # figure of the asked quantity: not the "16 kernen" of a sentence for "hoe lang duurt ...?")
        if set(_DIGITS.findall(strip_citations(answer))) - set(_DIGITS.findall(question)) and on_thing(verdict.support) \
                and (not kind or answers_kind(verdict.support.text, kind, question, lang)):
            return extractive(verdict.support, number[verdict.support]), {"answer": "extractive", "check": "ok"}
    top = max(s.match for _, s in evidence)
    # one that matches the question nearly as well as the best, not only by its figure (the model's first: FIRST_MIN_MATCH
    # is enough, as "bijna nul marginale hardwarekosten" under a sentence about servers); the evidence may be ranked
    # by more than words (grounding.focus), so a sentence below MIN_MATCH is passed over, not an end
    for i, (k, best) in enumerate(evidence):
        if (decline is not None and (best.match < (FIRST_MIN_MATCH if i == 0 else MIN_MATCH) or not _may_answer(best, question)
                                     or not on_thing(best))) \
                or (_bare(best) and any(not _bare(s) for _, s in evidence)):
            continue
        if not kind or (answers_kind(best.text, kind, question, lang) and (i == 0 or best.match >= NEAR_BEST * top)):
            return extractive(best, k), {"answer": "extractive", "check": verdict.status}
    k, best = next(((k, s) for k, s in evidence if s.match >= MIN_MATCH), evidence[0])
    if kind == "code":  # one that writes a code name, however far below the best, before one without
        k, best = next(((k, s) for k, s in evidence if s.match >= MIN_MATCH and fits(s.text, kind, question, lang)), (k, best))
    if kind == "code" and (decline is None or (best.match >= MIN_MATCH and _may_answer(best, question))):  # a name may be written as words
        return extractive(best, k), {"answer": "extractive", "check": verdict.status}
    if decline is not None:
        return decline, {"answer": "declined", "check": "no_answer"}
    k, best = evidence[0]
    return extractive(best, k), {"answer": "extractive", "check": verdict.status}
