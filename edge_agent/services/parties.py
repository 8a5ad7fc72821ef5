"""The parties a contract defines ("hierna te noemen: "Opdrachtnemer"", "(hereinafter the "Customer")"), and whether a
sentence may answer a question that names one of them: a figure of one party is no answer about the other.

A contract names each party by its role in nearly every clause, and the clause that gives one party's number, address or
fee reads, to the words of a question about the other party, almost as well as a clause about that one: "Onder welk nummer
is de opdrachtgever ingeschreven?" matched the opdrachtnemer's line ("... ingeschreven in het handelsregister onder nummer
61234567, hierna te noemen: "Opdrachtnemer"") on every word but the role. party_check ties a sentence to the parties it
names; answers.settle quotes no sentence it rejects.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from edge_agent.rag import language
from edge_agent.services import persons
from edge_agent.services.asks import _DIGITS, answer_kind, unmarked
from edge_agent.services.sentences import match_credits, question_words, text_language

# a defined term: a capitalised word or two in double quotes after "hereinafter", "hierna te noemen", "nachfolgend", "ci-après",
# "en adelante" (and what may stand between: "referred to as the", ":"), or alone in a bracket: ("Supplier"), (the "Buyer");
# not code's strings ('Found', "No Content") in a call or a tuple
_QUOTED_TERM = r"[\"“‘]([A-ZÀ-ÖØ-Þ][\w-]{1,30}(?: [A-ZÀ-ÖØ-Þ]?[\w-]{1,30})?)[\"”’]"
_DEFINES = re.compile(
    r"(?:\b(?:[Hh]ereinafter|[Hh]ereafter|[Hh]enceforth|referred\s+to\s+as|[Hh]ierna|[Hh]ierna\s+te\s+noemen|[Hh]ierna\s+genoemd|"
    r"[Nn]achfolgend|[Ii]m\s+[Ff]olgenden|ci-après|dénommée?s?|en\s+adelante|en\s+lo\s+sucesivo)\b[^\"“‘\n.;]{0,30}?"
    + _QUOTED_TERM + r"|\(\s*(?:the|de|het|der|die|das|le|la|el)?\s*" + _QUOTED_TERM + r"\s*\))")
# a sentence's clauses: one party's part ends at a semicolon or at ", and" / ", en" before the other's
_CLAUSE_END = re.compile(r";|,\s+(?:and|en|und|et|y|alsmede|sowie|as\s+well\s+as)\s+", re.IGNORECASE)
# a question that asks for a number of its own (an identifier: "btw-nummer", "company number", "registration no."), whose
# figure sits in the clause of the party it belongs to
_ASKS_IDENTIFIER = re.compile(r"\w*(?:nummer|number|nr|numéro|número)\b", re.IGNORECASE)
DEFINED_REACH = 240  # characters before a definition read for the party's name
MIN_PARTIES = 2  # one defined term is a name for a thing ("the "Software""), not one side of an agreement


def defined_parties(texts: Sequence[str], lang: str) -> list[frozenset[str]]:
    """The terms texts define in quotes after a defining phrase or in a bracket (_DEFINES) for a party: the clause before
    the definition names an organisation or a person (persons.names_organisation, names_person: "Van Dijk Bouwadvies
    B.V., ..., hierna te noemen: "Opdrachtnemer"", not "(the "Services")"); each as its set of stems in lang, in order
    of first definition, each once."""
    out: list[frozenset[str]] = []
    for text in texts:
        for m in _DEFINES.finditer(text):
            before = _CLAUSE_END.split(re.split(r"[\n.;]\s", text[max(0, m.start() - DEFINED_REACH):m.start()])[-1])[-1]
            if not (persons.names_organisation(before, "", lang) or persons.names_person(before, "", lang)):
                continue
            stems = frozenset(language.terms(m.group(1) or m.group(2), lang))
            if stems and stems not in out:
                out.append(stems)
    return out


def party_check(question: str, passages: Sequence[str], lang: str) -> Callable[[str], bool] | None:
    """For a question that names some of the parties the passages define (defined_parties, MIN_PARTIES or more): sentence
    -> whether it may answer it; None where there is nothing to check. A sentence may not where it names another
    party and none of the asked ones (unless the question asks for an amount, which one party pays the other); where the
    question asks for a figure (answer_kind "number") or a number of its own ("btw-nummer", "company number"), where each of its figures stands in a clause (_CLAUSE_END) that names
    another party and none of the asked ones ("registered under number 08812345 (hereinafter the "Supplier"), and
    Westmere County Council (hereinafter the "Customer")" gives no number of the Customer); and where the question asks
    more than the party (other content words), where it holds none of them: a clause that only names the party ("The
    Customer shall pay ...") tells nothing of the Customer's company number."""
    parties = defined_parties(passages, lang)
    if len(parties) < MIN_PARTIES:
        return None
    qterms = language.content_terms(question, lang)
    asked = [p for p in parties if p <= qterms]
    if not asked:
        return None
    others = [p for p in parties if p not in asked]
    rest = qterms - set().union(*parties)
    qwords = question_words(question, lang)
    kind = answer_kind(question, lang)
    # an amount passes between the parties: what one receives the other pays ("Hoeveel betaalt de opdrachtgever per uur?"
    # over "Opdrachtnemer ontvangt een vergoeding van 95 euro per uur")
    money = kind == "money"
    wants_figure = kind == "number" or bool(_ASKS_IDENTIFIER.search(question))

    def names(text: str) -> tuple[bool, bool]:
        held = set(language.terms(text, lang))
        return any(p <= held for p in asked), any(p <= held for p in others)

    def may_answer(sentence: str) -> bool:
        own, other = names(sentence)
        if other and not own and not money:
            return False
        if rest and not any(v > 0 for v in match_credits(rest, qwords, sentence, lang, text_language(sentence)).values()):
            return False
        if wants_figure and own and other:
            holding = [c for c in _CLAUSE_END.split(unmarked(sentence)) if _DIGITS.search(c)]
            return not holding or any(names(c)[0] or not names(c)[1] for c in holding)
        return True

    return may_answer
