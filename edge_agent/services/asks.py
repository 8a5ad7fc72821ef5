"""What a question asks for, and whether a text gives it: the names and figures it names (names, missing_names), what it
asks of a named thing (relation_terms, unasked_relation, thing_check), the kind of value it wants (answer_kind: a
number, an amount, a name, a year, a version, a date, code) and whether a text holds one (answers_kind, fits).
services/answers.py ranks and checks with these (and re-exports them)."""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from edge_agent.rag import language
from edge_agent.services import figures, persons
from edge_agent.services.sentences import LIST_ITEM, match_credits, question_words, split_sentences, text_language

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


_VERSIONED = re.compile(r"^([^\W\d_]{2,}?)v?(\d+)$")  # "gplv3", "python3": a name glued to its version number


def _held_apart(name: str, texts: Sequence[str]) -> bool:
    """Whether a name glued to its version ("GPLv3", "Python3") is written apart in one of texts: the stem as a word and
    the number after "version", "versie", "v" or the stem ("GNU GPL ... Version 3", "Python 3"). "GPLv4" over the
    GPL 3's text is not (its "section 4" is no version)."""
    m = _VERSIONED.match(name)
    if m is None:
        return False
    stem, number = m.groups()
    after = re.compile(rf"\b(?:version|versie|v|{re.escape(stem)})[\s._-]*{number}(?![\d.]\d)", re.IGNORECASE)
    return any(stem in {language.fold(w) for w in _WORD.findall(t.casefold())} and after.search(language.fold(t.casefold()))
               for t in texts)


def missing_names(question: str, texts: Sequence[str]) -> set[str]:
    """The question's names (names()) that none of texts holds as a word (or, NAME_PREFIX_MIN letters or more, as the
    start of a word, or glued to a version number that a text writes apart: _held_apart): a question about "Peru" or
    "M4 Ultra" that passages about other things cannot answer."""
    wanted = names(question)
    if not wanted:
        return set()
    held = {language.fold(w) for t in texts for w in _WORD.findall(t.casefold())}
    return {n for n in wanted if n not in held and not (len(n) >= NAME_PREFIX_MIN and any(w.startswith(n) for w in held))
            and not (len(n) > NAME_PREFIX_MIN and n.endswith("s") and n[:-1] in held)  # "Intels": Intel's
            and not _held_apart(n, texts)}


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


def named_versions(text: str, question: str) -> set[str]:
    """The versions text writes as a name the question names followed by a figure: "Debian 8" for "Which Debian release
    ...?", "Windows 11", "Ubuntu 22.04" (versions() reads only "version 3", "Python 3" and dotted figures)."""
    low = language.fold(text.casefold())
    found: set[str] = set()
    for name in names(question):
        if any(c.isdigit() for c in name) or len(name) < 2:
            continue
        found |= {m.group(1) for m in re.finditer(rf"(?<![\w-]){re.escape(name)}\s+v?(\d+(?:\.\d+)*)(?![\w.,]\d|\w)", low)}
    return found


def _new_versions(text: str, question: str) -> set[str]:
    """The versions text writes (versions, named_versions) that the question does not ("Debian 13" in "Wanneer komt
    Debian 13 uit?" answers nothing)."""
    return (versions(text) | named_versions(text, question)) - versions(question) - named_versions(question, question)


def answer_kind(question: str, lang: str) -> str | None:
    """What the question asks for: "money" (an amount: "how much does it cost", "wat kost", "how expensive"), "number" (a
    figure: "how many", "hoeveel", "how fast", or a unit named last: "... in watt?"), "code" (a name as code writes it: "which method", "welke
    omgevingsvariabele"), "name" (a name: "who", "wie"), "year" ("which year", "in welk jaar"), "version" ("which version",
    "welke versie"), "date" (when something came out: "wanneer kwam X uit", "when was X added"), or None (anything: its
    words decide)."""
    if persons.asks_who(question, lang):
        return None if persons.asks_role(question, lang) else "name"  # a role may answer a procedure's "who"
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
    # "Binnen hoeveel dagen betaalt de opdrachtgever?": a paying verb, but the noun asks for days, not an amount
    return "money" if set(low.split()) & _MONEY_WORDS and not figures.asked_class(question, lang) else "number"


def _identifiers(text: str) -> set[str]:
    """Names as code writes them: __dunder__, CamelCase, call(), CONST_CASE, "quoted" tokens, --flags."""
    found = {m.group(0) for m in _IDENTIFIER.finditer(text)} | {m.group(1) for m in _QUOTED.finditer(text)}
    return {f.strip("()").casefold() for f in found if f.strip("()")}


def answers_kind(text: str, kind: str, question: str, lang: str) -> bool:
    """What a quote must hold to be given as the answer: fits, and for a figure or an amount, a figure of the
    quantity asked (figures.states: not a date, a version, or a figure of another unit: "in maart 2026" or "35 jaar"
    does not answer "Hoeveel kernen ...?", "two kinds" not "How many bytes ...?"; nor a list item's number)."""
    return fits(text, kind, question, lang) and (kind not in ("number", "money")
                                                 or figures.states(unmarked(text), question, lang, _NUMBER_WORDS))


# a reference to a place in a document: "§4.2.1", "see 6.3(5)", "artikel 4.2", "clause 12", "section A.5" (its figures
# number a clause, they count nothing)
_REFERENCE = re.compile(r"(?:§\s*|\b(?:see|zie|artikel|artikelen|article|articles|art\.|clause|clauses|section|sections|sectie|"
                        r"secties|hoofdstuk|chapter|paragraaf|paragraph|bijlage|annex|schedule|appendix)\s+§?\s*)"
                        r"[A-Z]?\d+(?:\.\d+)*(?:\(\d+\))?", re.IGNORECASE)


def unmarked(text: str) -> str:
    """text without the mark of a list item or a clause it starts with ("1. ", "5) ", "4.2 ", "• ") and without its
    references to other clauses ("see §4.2.1", "artikel 4.2"): the number of an item or a clause is no figure of what
    it says ("1. The Project Leader is elected by the Developers." answers no "how long")."""
    m = LIST_ITEM.match(text)
    return _REFERENCE.sub(" ", text[m.end():] if m else text)


def fits(text: str, kind: str, question: str, lang: str) -> bool:
    """Whether text holds what a question of this kind asks for, beyond the question's own: a figure (digits or
    a number word, "duizenden" too) for "number", a figure and an amount of money (figures.states_money) for "money", a
    name as code writes it for "code", a capitalised word that is not the question's, a stop word, a question word
    ("When" after a code line) or (in a text of more than NAME_ANSWER_WORDS words) the first word, for "name" (for a
    question about a person, a person's name: persons.names_person, or for a party by its role an organisation's:
    persons.names_organisation); a year (1500-2099) the question does not name, for "year";
    a version it does not name (versions, named_versions), for "version"; a year, a month or a version, for "date". A list
    item's or clause's own number is none of these (unmarked)."""
    text = unmarked(text)
    if kind == "year":
        return bool(set(_YEAR.findall(text)) - set(_YEAR.findall(question)))
    if kind == "version":  # "version 3.8", "Python 3", or a named thing's figure: "Debian 8" for "which Debian release"
        return bool(_new_versions(text, question))
    if kind == "date":  # a year, a month or a version the question does not name
        return bool(set(_YEAR.findall(text)) - set(_YEAR.findall(question)) or _MONTH.search(text) or _new_versions(text, question))
    if kind == "name" and persons.asks_person(question, lang):  # a person's name, not "Intel" or "PEP"
        if persons.asks_party(question, lang) and persons.names_organisation(text, question, lang):
            return True  # "Wie is de opdrachtnemer?": a company is a party too
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
