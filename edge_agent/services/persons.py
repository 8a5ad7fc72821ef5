"""Whether a question asks for a person, and whether a text names one that the question does not.

"Wie is de topman van AMD?", "Who proposed the match statement?", "Hoe heet de CEO van Arm?" ask for a person: a
sentence that names only "Intel", "PEP 634" or "Structural Pattern Matching The" does not answer them. A person's
name is read as two capitalised words in a row, not more, no punctuation between ("Rene Haas", "Lip-Bu Tan",
"Guido van Rossum": a particle such as "van" may stand between them), none of them the question's, an acronym, a
stop word, or a sentence's first word unless a name follows it; or one capitalised word after a title ("CEO Tan",
"dr. Jansen") or after initials, as Dutch and business texts name people ("R. Smit", "drs. H.J. Wiersma", "L. de Bruijn"). A question about a company ("Wie maakt de AI300?", "Which company ...", "welk bedrijf") takes an
organisation: it is no person question. (asks.answer_kind gives "name" to who-questions only, so "Hoe heet de
topman" keeps its words-only path: its kind would make a passage that says "CEO" for "topman" be declined.) A
who-question about a procedure ("Wie beslist over mijn verlof?", asks_role) is answered by a role as well: no name needed.
A who-question about a party by its role in a document ("Wie is de opdrachtnemer?", "Who is the Supplier?": asks_party)
is answered by a person or an organisation, which contracts name by its legal form ("Van Dijk Bouwadvies B.V.",
"Harbourline Logistics Ltd") or its kind ("Stichting Zorggroep Eemland", "Westmere County Council": names_organisation).
"""
from __future__ import annotations

import re

from edge_agent.rag import language
from edge_agent.services.sentences import INITIALS

# "who" / "wie" first (after a preposition at most), or "hoe heet / what is the name of" + a person's role
_WHO_WORDS = {"en": "who|whom|whose", "nl": "wie", "de": "wer|wem|wen|wessen", "fr": "qui", "es": "quién|quiénes"}
_WHO = {lang: re.compile(rf"^\W*(?:\w+\s+)?(?:{w})\b") for lang, w in _WHO_WORDS.items()}
# a person's role or office, one list for both questions that read it: "hoe heet de / what is the name of" one
# asks for a person (_ROLE_ASKS), and "wie is de / who is the" one asks for no party (asks_party)
_PERSON_ROLES = ("ceo|cto|cfo|topman|topvrouw|baas|directeur|oprichter|medeoprichter|voorzitter|president|bestuurder|leider|"
                 "auteur|schrijver|uitvinder|ontwerper|bedenker|maker van|founder|co-founder|cofounder|chairman|chair|"
                 "director|head|chief|author|writer|inventor|creator|designer|lead|leader|boss|minister|premier|hoogleraar|"
                 "professor|burgemeester|wethouder|koning|koningin|paus|rector|decaan|rechter|notaris|advocaat|arts|"
                 "huisarts|mayor|king|queen|pope|judge|governor|senator|dean|chancellor|prime|secretary|manager|owner|"
                 "eigenaar|partner")
_ROLE_ASKS = re.compile(rf"\b(?:hoe\s+heet|hoe\s+heette|wat\s+is\s+de\s+naam\s+van|what\s+is\s+the\s+name\s+of|what's\s+the\s+name\s+of|"
                        rf"wie\s+is|who\s+is)\s+(?:de|het|the|een|a|an)?\s*(?:{_PERSON_ROLES})\b")
# a who-question about a company: what makes, sells or ships something ("Wie maakt de AI300?")
_ORGANISATION = re.compile(
    r"\b(?:company|companies|firm|organisation|organization|vendor|manufacturer|supplier|bedrijf|bedrijven|firma|organisatie|"
    r"fabrikant|leverancier|producent|makes|made|manufactures|manufactured|produces|produced|sells|sold|ships|supplies|"
    r"maakt|maakte|produceert|produceerde|verkoopt|verkocht|levert|leverde|fabriceert|bouwt|bouwde)\b")
# a who-question about a procedure, whose answer is a role or a department ("Wie beslist over mijn verlof?" -> "De
# leidinggevende beslist binnen tien werkdagen", "Who must approve a purchase?", "Bij wie meld ik me ziek?"): the reader
# is addressed (ik, mijn, je, u, I, my, you, ...) or a duty or decision is asked about (moet, mag, beslist, keurt goed,
# is verantwoordelijk, must, may, approves, is responsible, ...). No name is required of its answer.
_ROLE_ANSWER = re.compile(
    r"\b(?:ik|mij|me|mijn|je|jij|jou|jouw|u|uw|we|wij|ons|onze|i|my|mine|you|your|our|us|"
    r"moet|moeten|mag|mogen|kan|kunnen|beslist|beslissen|besluit|keurt|keuren|betaalt|betalen|bepaalt|bepalen|controleert|"
    r"ondertekent|tekent|beoordeelt|behandelt|verantwoordelijk|aansprakelijk|bevoegd|must|should|can|may|need|needs|"
    r"decides|decide|approves|approve|pays|pay|signs|sign|reviews|determines|handles|responsible|liable|authorised|authorized)\b")
_PERSON_NOUNS = tuple(r for r in _PERSON_ROLES.split("|") if " " not in r)  # one word each (_person_noun)
# "wie is de X" / "who is the X" with X no person's role (_PERSON_ROLES): a party of a contract, a letter, a case
_PARTY_ASKS = re.compile(r"^\W*(?:wie|who)\s+(?:is|zijn|was|waren|are|were)\s+(?:de|het|the)\s+(\w[\w-]*)")
# an organisation's legal form after its name (a word of its own, dots optional) or its kind before or after it
_LEGAL_FORMS = re.compile(r"^(?:b\.?v\.?|n\.?v\.?|v\.?o\.?f\.?|c\.?v\.?|ltd\.?|limited|llp|llc|inc\.?|incorporated|corp\.?|"
                          r"plc|gmbh|ag|s\.?a\.?|s\.?a\.?s\.?|s\.?r\.?l\.?|se|bvba|nv)$", re.IGNORECASE)
_ORGANISATION_KINDS = frozenset("stichting vereniging coöperatie cooperatie gemeente provincie waterschap ministerie universiteit "
                                "hogeschool ziekenhuis maatschap council foundation association university ministry hospital "
                                "municipality authority agency trust".split())
_PARTICLES = frozenset("van de der den het ter ten von zu da di del della le la du dos bin ibn al el".split())
_TITLES = frozenset("ceo cto cfo topman directeur oprichter voorzitter president founder chairman dr prof mr "
                    "mrs ms sir dhr mevr meneer mevrouw drs ir mw".split())
_EDGES = "\"'“”‘’()[]*•,;:!?."
SHORT_ANSWER = 3  # a model's short answer may give one capitalised word ("Verhoeven.")
PERSON_WORDS = (2, 2)  # capitalised words in a row that read as a person's name (particles not counted)


# who wrote or made a text or a program ("who wrote shred?", "door wie is timeout gemaakt?", "wie heeft info bedacht?",
# "wie is de hoofdauteur van ...?"): the question's word for it ...
_AUTHOR_ASKS = re.compile(r"(?:wrote|written|writes|authored|authors?|writer|created|creator|designed|designer|developed|"
                          r"drafted|invented|inventor|made|schreef|geschreven|schrijver|\w*auteurs?|gemaakt|maakte|bedacht|"
                          r"bedenker|ontworpen|ontwerper|ontwikkeld|opgesteld|uitgevonden|uitvinder|maker)")
# ... and a sentence that says who did, in words of its own: a manual's "AUTEUR Geschreven door Colin Plumb.", a
# HOWTO's "Author: Gordon McMillan", "The initial draft of this document was written by Andrew Kuchling.", "Het werd
# ontworpen door Richard Stallman". Not a translation's credit ("De Nederlandse vertaling werd gemaakt door ...")
_STATES_AUTHOR = re.compile(r"\b(?:authors?|auteurs?)\s*:|\b(?:written|authored|drafted|created|designed|developed|invented|"
                            r"made)\s+by\b|\b(?:geschreven|opgesteld|ontworpen|ontwikkeld|bedacht|gemaakt|uitgevonden)\s+door\b|"
                            r"\bvan de hand van\b|^(?:AUTHORS?|AUTEURS?)\b", re.IGNORECASE)
_TRANSLATION = re.compile(r"\b(?:translat\w*|vertaa?l\w*|übersetz\w*|tradu\w*)\b", re.IGNORECASE)


def author_terms(question: str, lang: str, qwords: dict[str, str]) -> set[str]:
    """The terms of a who-question (asks_who; qwords: its terms -> words, sentences.question_words) that ask who wrote,
    made or designed something (_AUTHOR_ASKS: "wrote", "gemaakt", "bedacht", "hoofdauteur"); none for another question,
    or one about a translation ("wie heeft aptitude in het Iers vertaald?")."""
    if not asks_who(question, lang) or _TRANSLATION.search(question):
        return set()
    return {t for t, w in qwords.items() if _AUTHOR_ASKS.fullmatch(w)}


def states_author(text: str, question: str, lang: str) -> bool:
    """Whether a sentence says who wrote or made something (_STATES_AUTHOR) and names that person (names_person), not
    who translated it: "Geschreven door Colin Plumb." holds none of the words of "who wrote the shred program?"."""
    return bool(_STATES_AUTHOR.search(text)) and not _TRANSLATION.search(text) and names_person(text, question, lang)


def states_translator(text: str) -> bool:
    """Whether a sentence credits a translation ("De Nederlandse vertaling werd gemaakt door Frans Spiesschaert."): its
    "gemaakt" is no answer to who made the program."""
    return bool(_STATES_AUTHOR.search(text)) and bool(_TRANSLATION.search(text))


def asks_who(question: str, lang: str) -> bool:
    """Whether the question's word is "who" ("wie", "wer", ...): first, or after a preposition at most."""
    return bool(_WHO.get(lang, _WHO["en"]).search(question.casefold()))


def asks_role(question: str, lang: str) -> bool:
    """Whether a who-question asks about a procedure, answered by a role or a department as well as by a name
    (_ROLE_ANSWER): "Wie beslist over mijn verlof?", "Who must approve the purchase?"."""
    return asks_who(question, lang) and bool(_ROLE_ANSWER.search(question.casefold()))


def asks_person(question: str, lang: str) -> bool:
    """Whether the question asks for a person: "who"/"wie" first, or "hoe heet / what is the name of" a role
    ("de topman", "the CEO"); not where it asks about a company (a company noun, or what makes or sells a thing)."""
    low = question.casefold()
    if _ORGANISATION.search(low):
        return False
    return asks_who(question, lang) or bool(_ROLE_ASKS.search(low))


def asks_party(question: str, lang: str) -> bool:
    """Whether a who-question asks for a party by its role ("Wie is de opdrachtnemer?", "Who is the Customer?"), which a
    person or an organisation answers; not a person's role ("Wie is de topman van AMD?": _PERSON_ROLES)."""
    m = _PARTY_ASKS.search(question.casefold())
    return bool(m) and not any(_person_noun(part) for part in m.group(1).split("-"))


def _person_noun(word: str) -> bool:
    """Whether a noun names a person's role or office, compounds and plurals too ("hoofdauteur", "authors")."""
    stems = {word, word[:-1] if word.endswith("s") else word, word[:-2] if word.endswith("en") else word}
    return any(stem.endswith(role) for stem in stems for role in _PERSON_NOUNS)


def names_organisation(text: str, question: str, lang: str) -> bool:
    """Whether text names an organisation the question does not: a capitalised name with its legal form after it
    ("Van Dijk Bouwadvies B.V.", "Harbourline Logistics Ltd"), or a kind of organisation next to a capitalised name
    ("Stichting Zorggroep Eemland", "Westmere County Council")."""
    asked = {language.fold(w) for w in language.words(question.casefold())}
    raw = text.split()
    words = [w.strip(_EDGES) for w in raw]

    def named(i: int) -> bool:  # a capitalised word (an acronym too: "ING Bank N.V.") the question does not hold
        w = words[i] if 0 <= i < len(words) else ""
        return len(w) > 1 and w[0].isupper() and language.fold(w.casefold()) not in asked

    for i, w in enumerate(words):
        if i and _LEGAL_FORMS.match(raw[i].strip("\"'“”‘’()[],;:")) and named(i - 1) and not raw[i - 1].endswith((",", ";", ":")):
            return True
        if w.casefold() in _ORGANISATION_KINDS and w[:1].isupper() and (named(i + 1) or named(i - 1)):
            return True
    return False


def _capitalised(word: str) -> bool:
    """'Rene', 'Lip-Bu', "Haas": a capital first, lower case after it in every part (no acronym: 'PEP', 'AMD')."""
    return bool(word) and all(len(p) > 1 and p[0].isupper() and p[1:].isalpha() and p[1:].islower() for p in word.split("-"))


def names_person(text: str, question: str, lang: str) -> bool:
    """Whether text names a person the question does not (see the module's docstring); a run of names ends at a
    punctuation mark ("Intel, Nvidia en AMD" names no person). A text of SHORT_ANSWER words or fewer (a model's
    "Verhoeven.") may give one capitalised word."""
    asked = {language.fold(w) for w in language.words(question.casefold())} | language.stop_words(lang) \
        | language.stop_words("en") | language.QUESTION_WORDS.get(lang, frozenset()) | language.QUESTION_WORDS["en"]
    raw = text.split()
    words = [w.strip(_EDGES) for w in raw]
    ends = [w[-1] in ",;:!?.)]\"'”’" for w in raw]  # a run of names ends at the mark

    def name(i: int) -> bool:
        w = words[i]
        if not _capitalised(w) or language.fold(w.casefold()) in asked:
            return False
        if i > 0 or len(words) <= 3:
            return True
        nxt = words[2] if len(words) > 2 and words[1].casefold() in _PARTICLES else words[1]
        return not ends[0] and _capitalised(nxt)  # the first word of a sentence: only where a name follows it

    run, longest_ok = 0, False
    for i, w in enumerate(words):
        if INITIALS.fullmatch(raw[i]) and i + 1 < len(words):
            nxt = i + 2 if words[i + 1].casefold() in _PARTICLES and not ends[i + 1] and i + 2 < len(words) else i + 1
            if _capitalised(words[nxt]) and language.fold(words[nxt].casefold()) not in asked:
                return True  # "R. Smit", "L. de Bruijn"
        if w.casefold() in _TITLES and i + 1 < len(words) and name(i + 1) and (not ends[i] or raw[i].endswith(".")):
            return True  # "CEO Tan", "dr. Jansen"
        if name(i):
            run += 1
        elif not (run and w.casefold() in _PARTICLES and not ends[i] and i + 1 < len(words) and name(i + 1)):
            longest_ok |= PERSON_WORDS[0] <= run <= PERSON_WORDS[1]
            run = 0
            continue
        if ends[i]:
            longest_ok |= PERSON_WORDS[0] <= run <= PERSON_WORDS[1]
            run = 0
    if len(words) <= SHORT_ANSWER and any(name(i) for i in range(len(words))):
        return True
    return longest_ok or PERSON_WORDS[0] <= run <= PERSON_WORDS[1]
