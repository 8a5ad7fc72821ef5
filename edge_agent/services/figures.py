"""Which figure a "how many / how much" question asks for, and whether a sentence states one of that kind.

A sentence answers "Hoeveel kernen heeft de Vera-processor?" only with a figure that could count cores: not the
year of "in maart 2026", not the version of "Changed in version 3.5", not the "35 jaar" of a span of time. And
"How much memory does ... use?" asks for an amount of data: a figure with a unit of data ("5,5 GB", "16 bytes"),
not the "two" of "two kinds of floating point numbers". So the quantity a question asks for is put in a class by
its noun ("hoeveel jaar", "how many bytes", "how much memory", "in watt"): time, data, power or percent; a
figure counts when a unit of that class follows it, and, where the noun has no class ("kernen", "arguments",
"lagen"), when no unit of another class follows it. Dates and versions never count.
"""
from __future__ import annotations

import re

from edge_agent.rag import language

# units, by class (casefolded, as words of the text: "GB/s" is "gb" then "s")
UNITS = {
    "time": frozenset("jaar jaren year years maand maanden month months week weken weeks dag dagen day days uur uren hour hours "
                      "minuut minuten minute minutes seconde seconden second seconds sec ms milliseconde milliseconden "
                      "millisecond milliseconds".split()),
    "data": frozenset("byte bytes kb mb gb tb kib mib gib bit bits".split()),
    "power": frozenset("w watt watts kw kwh".split()),
    "percent": frozenset("% procent percent".split()),
    "ratio": frozenset("× x times keer maal".split()),
}
# a ratio in one word ("twice as fast", "dubbel zo snel")
_RATIO_WORDS = frozenset("twice double triple half dubbel drievoudig helft".split())
# "how much slower ... than", "hoeveel meer bandbreedte ... dan": a ratio (or a percentage) is asked for
_RATIO_ASKS = re.compile(r"\b(?:how\s+much|how\s+many\s+times|hoeveel|hoe\s+veel|wie\s+viel)\s+(?:(?:meer|more|extra)\s+\w+|\w+er)\b"
                         r"[^?]*\b(?:than|dan|als)\b")
# nouns that ask for a quantity of a class besides the units themselves ("how much memory", "hoeveel vermogen")
_ASKED_NOUNS = {
    "time": frozenset("tijd time duur".split()),
    "data": frozenset("geheugen werkgeheugen videogeheugen memory ram vram opslag storage schijfruimte".split()),
    "power": frozenset("vermogen stroom stroomverbruik power".split()),
    "percent": frozenset("percentage".split()),
}
# the question words after which the asked noun comes ("how many bytes", "hoeveel jaar")
_ASKS = re.compile(r"\b(?:how\s+(?:many|much)|hoeveel|hoe\s+veel|wie\s+viele?|wieviele?|combien\s+de)\s+"
                   r"(?:(?:meer|more|extra)\s+)?(\w+)")
# "... in watt?", "in GB": the unit is named
_IN_UNIT = re.compile(r"\bin\s+(%|\w+)\s*\??\s*$")
_FIGURE = re.compile(r"(?<![\w.,])(\d+(?:[.,]\d+)*)(?:\s*(%|×|[^\W\d_]+))?")
_YEAR = re.compile(r"(?:1[5-9]|20)\d\d")
# a year after these words is a date ("in maart 2026", "tegen 2030", "Q1 2026"), a figure after these a version
_DATE_BEFORE = frozenset(
    "in tegen sinds since by van vanaf from until till tot eind begin end early late q1 q2 q3 q4 "
    "januari februari maart april mei juni juli augustus september oktober november december "
    "january february march may june july august october".split())
_VERSION_BEFORE = frozenset("version versions versie versies python pep".split())
NUMBER_WORD_REACH = 3  # a number word ("twee tot drie jaar") has its unit among this many words after it


def names_unit(question: str) -> bool:
    """Whether the question ends by naming a unit of a class ("Wat is het stroomverbruik in watt?")."""
    m = _IN_UNIT.search(question.casefold())
    return bool(m) and any(m.group(1) in units for units in UNITS.values())


def asked_noun(question: str, lang: str) -> str | None:
    """The noun after the question's "how many / how much / hoeveel" ("kernen", "bytes", "memory"), or the unit it
    names last ("... in watt?"); None where a verb or a stop word follows ("how much does it cost", "hoeveel heeft")."""
    low = question.casefold()
    stops = (language.stop_words(lang) | language.stop_words("en")
             | language.QUESTION_WORDS.get(lang, frozenset()) | language.QUESTION_WORDS["en"])
    for m in (*_ASKS.finditer(low), *_IN_UNIT.finditer(low)):
        if m.group(1) not in stops and not m.group(1).isdigit():
            return m.group(1)
    return None


def asked_class(question: str, lang: str) -> str | None:
    """The class of the quantity a question asks for (time, data, power, percent, ratio) by its asked_noun, else "ratio"
    for a comparison ("how much slower ... than", "hoeveel meer bandbreedte ... dan": "1,8×", "tien keer"); None where
    the noun has no class (a count of things: "kernen", "arguments") or there is none."""
    noun = asked_noun(question, lang)
    # a unit ("hoeveel jaar"), a compound ending in one ("hoeveel vakantiedagen": days), or a noun of a class ("geheugen")
    cls = (_class_of(noun) or next((c for c, nouns in _ASKED_NOUNS.items() if noun in nouns), None)) if noun else None
    return cls or ("ratio" if _RATIO_ASKS.search(question.casefold()) else None)


# a compound ends in its head, so "werkdagen", "kalenderjaren", "weekdays", "megabytes" are units of the class of the
# unit they end in (Dutch and English compounds are head-final); a head of this many letters or more after a part of
# as many: "vijf werkdagen geboorteverlof" answers "Hoeveel dagen ...?"
COMPOUND_UNIT_PART = 3
_COMPOUND_CLASSES = ("time", "data", "power")


def _class_of(unit: str | None) -> str | None:
    if not unit:
        return None
    unit = unit.casefold()
    found = next((cls for cls, units in UNITS.items() if unit in units), None)
    if found is None and len(unit) >= 2 * COMPOUND_UNIT_PART:
        found = next((cls for cls in _COMPOUND_CLASSES for u in UNITS[cls]
                      if len(u) >= COMPOUND_UNIT_PART and len(unit) - len(u) >= COMPOUND_UNIT_PART and unit.endswith(u)), None)
    return found


def figures(text: str) -> list[tuple[str, str | None]]:
    """(figure, class of the unit right after it or None) for each figure of text, dates and versions left out
    (a year without a unit after "in", "tegen", a month, "Q1"; a figure after "version", "versie", "PEP", "Python")."""
    out = []
    for m in _FIGURE.finditer(text):
        before = text[: m.start()].split()
        prev = before[-1].casefold().strip("(*\"'“:,") if before else ""
        fig = m.group(1)
        if prev in _VERSION_BEFORE or (_YEAR.fullmatch(fig) and prev in _DATE_BEFORE and _class_of(m.group(2)) is None):
            continue
        out.append((fig, _class_of(m.group(2))))
    return out


_PLURAL = ("en", "s")  # "duizenden", "hundreds": an uncounted many of a number word
_MAGNITUDES = ("hundred", "thousand", "million", "billion", "trillion", "dozen", "honderd", "duizend", "miljoen", "miljard", "biljoen")


def is_number_word(word: str, number_words: frozenset[str]) -> bool:
    """Whether word is one of number_words, or the plural of a magnitude ("duizenden", "thousands"), alone or after
    number words ("honderdduizenden", "tienduizenden"): a figure written as a word."""
    if word in number_words:
        return True
    stems = [word[: -len(p)] for p in _PLURAL if word.endswith(p)]
    return any(stem.endswith(_MAGNITUDES) and _composed(stem, number_words) for stem in stems)


def _composed(word: str, number_words: frozenset[str]) -> bool:
    """Whether word is written as number words one after the other ("honderdduizend")."""
    if word in number_words:
        return True
    return any(word.startswith(w) and len(w) >= 3 and _composed(word[len(w):], number_words) for w in number_words if word[len(w):])


def states(text: str, question: str, lang: str, number_words: frozenset[str] = frozenset()) -> bool:
    """Whether text states a figure the question does not, of the quantity it asks for: where the asked noun has a
    class (asked_class), a figure followed by a unit of that class, or a number word (number_words) with one among
    the NUMBER_WORD_REACH words after it ("twee tot drie jaar"), and for a ratio ("hoeveel sneller ... dan") a percentage
    or a ratio word ("twice", "dubbel") too; where it names a count of things ("kernen") or asks what something costs,
    any figure but a span of time ("35 jaar", "twee tot drie jaar"); else any figure or number word. Dates and versions
    never count (figures)."""
    noun = asked_noun(question, lang)
    cls = asked_class(question, lang)
    counted = noun or asks_money(question)  # a count of things or an amount: never a span of time ("twee tot drie jaar")
    fitting = {cls, "percent"} if cls == "ratio" else {cls}  # "30% sneller" answers "hoeveel sneller ... dan"
    asked = {f for f, _ in figures(question)}
    for fig, unit in figures(text):
        if fig in asked:
            continue
        if unit in fitting if cls else not (counted and unit == "time"):
            return True
    ws = language.words(text.casefold())
    qws = set(language.words(question.casefold()))
    for i, w in enumerate(ws):
        if w not in qws and is_number_word(w, number_words):
            after = {_class_of(x) for x in ws[i + 1 : i + 1 + NUMBER_WORD_REACH]}
            if (cls == "ratio" and w in _RATIO_WORDS) or (after & fitting if cls else not (counted and "time" in after)):
                return True
    return False


# "Wat kost de AI300?", "What does X cost?", "How expensive is X?", "Wat is de prijs van X?": an amount of money is asked
_MONEY_ASKS = re.compile(
    r"\b(?:wat\s+(?:\w+\s+){0,4}?(?:kost|kosten|kostte|kostten|betaal|betaalt|betaalde)|what\s+(?:\w+\s+){0,5}?(?:cost|costs|charge|charges)|"
    r"how\s+expensive|how\s+pricey|hoe\s+duur|hoe\s+prijzig|(?:wat|what)\s+(?:is|was|zijn|are)\s+(?:de|het|the)\s+(?:\w+\s+)?"
    r"(?:prijs|prijzen|kosten|kostprijs|aanschafprijs|price|prices|cost|costs)|(?:wat|what)\s+(?:\w+\s+){0,3}?(?:costs?|prijs|price)\b)\b")
# "what does it cost in runtime / in memory": a cost that is no money
_COST_OF_OTHER = re.compile(r"\b(?:cost|costs|kost|kosten)\s+in\s+(?:terms\s+of\s+)?(?:runtime|time|memory|performance|speed|"
                            r"complexity|tijd|geheugen|snelheid|rekentijd|prestaties)\b")
# what says an amount of money: a currency, or a word about what something costs ("hardwarekosten", "gratis")
# (the currencies by name: "a monthly fee of 12,500 pounds" answers "How much does the Customer pay per month?")
_MONEY = re.compile(r"[$€£¥]|\b(?:euro|euros|dollar|dollars|usd|eur|gbp|chf|jpy|cent|cents|pond|ponden|pound|pounds|sterling|yen|"
                    r"yuan|franc|francs|frank|franken|krone|kronen|kroner|kronor|\w*kost(?:en|te|ten)?|costs?|costing|"
                    r"gratis|free|prijs|prijzen|price|priced|prices)\b", re.IGNORECASE)


def asks_money(question: str) -> bool:
    """Whether the question asks what something costs ("Wat kost X?", "What does X cost?", "How expensive is X?")."""
    low = question.casefold()
    return bool(_MONEY_ASKS.search(low)) and not _COST_OF_OTHER.search(low)


def states_money(text: str) -> bool:
    """Whether text speaks of an amount of money: a currency sign or name, or a cost word ("kost", "hardwarekosten",
    "price", "gratis")."""
    return bool(_MONEY.search(text))
