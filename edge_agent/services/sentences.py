"""Sentences of retrieved passages: splitting a chunk into sentences, and how far a sentence holds a question's terms
(stemmed in the question's language; a Dutch or German compound counts in part where its parts are separate words).
services/answers.py ranks them against a question and checks answers on them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from edge_agent.rag import language

# a sentence ends at . ! ? (and closing quotes or brackets) before whitespace; a paragraph at a blank line,
# a list item at a line that starts with a bullet or a number: single line breaks inside a paragraph are wrapping
SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=\S)")
_BREAK = re.compile(r"\n[ \t]*\n\s*|\n(?=[ \t]*(?:[•·*\-–]|\d{1,2}[.)])\s)")
HEAD_WORDS = 12  # a paragraph this short without a closing mark heads the next sentence
_TITLE = re.compile(r"[^\n]{1,120}\n[ \t]*([*=~^#+-])\1{2,}[ \t]*\Z|#{1,6}[ \t]+[^\n]{1,120}\Z")
CLOSED = re.compile(r"[.!?:;][\"'”’)\]]*$")
MAX_SENTENCE_CHARS = 400  # a longer "sentence" (a grammar listing, a table) is cut at its clauses, then its words
COMPOUND_PART = 4  # least letters of a word that counts as part of a question's compound word
COMPOUND_MIN = 5  # shorter question words are not looked for inside compounds
INFLECTION = 2  # letters a text's word may add to the part of a compound it matches ("prompts" for "prompt-lengte")


@dataclass(frozen=True)
class Sentence:
    """One sentence of a retrieved chunk: the chunk's retrieval rank (0-based), its place in the chunk, its score."""

    chunk: int
    index: int
    text: str
    score: float
    match: float = 0.0  # the share of the question's weight it holds (the score before rank, kind and code terms)
    after: str = ""  # the chunk's next sentence ("" for its last): quoted with it where both fit (extractive)


def split_sentences(text: str) -> list[str]:
    """text's sentences, whitespace collapsed, wrapped lines joined; pieces of 3 characters or fewer left out.

    A short paragraph without a closing . ! ? : ; (a heading, a signature such as "object.__len__(self)", a
    bullet without a full stop) is not a sentence of its own: it heads the sentence that follows it. A document's
    section title (a line underlined with *** or ===, or a Markdown "# " line) is left out: it names a subject
    and answers nothing, and its words would make the first sentence under it seem to.
    """
    out: list[str] = []
    head = ""
    for para in _BREAK.split(text):
        if _TITLE.match(para.strip()):
            if len(head) > 3:
                out.extend(_cap(head))
            head = ""
            continue
        para = " ".join(para.split())
        if not para:
            continue
        if len(para.split()) <= HEAD_WORDS and not CLOSED.search(para) and ">>>" not in para:
            if len(head) > 3:  # only the nearest one heads the next sentence; an earlier one stands alone
                out.extend(_cap(head))
            head = para
            continue
        pieces = [s.strip() for s in SENTENCE_END.split(para) if s.strip()]
        if head and pieces:
            pieces[0], head = f"{head} {pieces[0]}", ""
        for s in pieces:
            if len(s) > 3:
                out.extend(_cap(s))
    if len(head) > 3:
        out.extend(_cap(head))
    return out


def _cap(s: str) -> list[str]:
    if len(s) <= MAX_SENTENCE_CHARS:
        return [s]
    parts, cur = [], ""
    for piece in re.split(r"(?<=[;:,])\s+|\s+", s):
        if cur and len(cur) + 1 + len(piece) > MAX_SENTENCE_CHARS:
            parts.append(cur)
            cur = piece
        else:
            cur = f"{cur} {piece}" if cur else piece
    if cur:
        parts.append(cur)
    return [p for p in parts if len(p) > 3]


def question_words(question: str, lang: str) -> dict[str, str]:
    """The question's content terms -> the folded word each comes from (for compound matching)."""
    out: dict[str, str] = {}
    skip = language.QUESTION_WORDS.get(lang, frozenset())
    for w in language.words(question.casefold()):
        if w in skip:
            continue
        ts = language.terms(w, lang)
        if ts:
            out.setdefault(ts[0], language.fold(w))
    return out


def match_credits(qterms: set[str], qwords: dict[str, str], text: str, lang: str) -> dict[str, float]:
    """How far text holds each of the question's terms: 1 for the term itself; in a language that writes compounds
    as one word ("promptlengte", "toolverwerking"), a question word that is not there counts by the share of its
    letters found as words of the text at its start and end ("prompts", "tool-verwerking": COMPOUND_PART letters
    at least), and fully when it is the start or end of a longer word of the text ("geheugen" in "systeemgeheugen")."""
    held = set(language.terms(text, lang))
    out = {t: 1.0 for t in qterms if t in held}
    if lang not in language.COMPOUNDING or len(out) == len(qterms):
        return out
    stops = language.stop_words(lang)
    parts = {language.fold(w) for w in language.words(text.casefold()) if len(w) >= COMPOUND_PART and w not in stops}
    for t in qterms - out.keys():
        w = qwords.get(t)
        if not w or len(w) < COMPOUND_MIN or w.isdigit():
            continue
        if any(len(p) > len(w) and (p.endswith(w) or (p.startswith(w) and _starts_a_word(p[len(w):]))) for p in parts):
            out[t] = 1.0
            continue
        head = max((n for p in parts if (n := _common_prefix(w, p)) >= COMPOUND_PART and len(p) - n <= INFLECTION < len(w) - n), default=0)
        tail = max((len(p) for p in parts if len(p) < len(w) and w.endswith(p)), default=0)
        got = min(1.0, (head + tail) / len(w))
        if got > 0:
            out[t] = got
    return out


_VOWELS = "aeiouyáéíóúàèëïöü"


def _starts_a_word(rest: str) -> bool:
    """Whether what follows a question word at the start of a longer word can start the compound's next word: a
    consonant (a linking "s" too), or after a linking "en" or "e" one that starts COMPOUND_PART letters or more ("prompt" is
    part of "promptlengte", "recept" of "receptenboek"; "recept" is no part of "receptionist", "kamer" none of "kameraden")."""
    rest = rest.lstrip("-")
    if rest and rest[0] not in _VOWELS:
        return True
    link = next((rest[len(x):] for x in ("en", "e") if rest.startswith(x)), "")
    return len(link) >= COMPOUND_PART and link[0] not in _VOWELS


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def coverage(question: str, passage: str, lang: str) -> float:
    """The share of the question's content terms passage holds (match_credits; 1.0 for a question without any)."""
    qterms = language.content_terms(question, lang)
    if not qterms:
        return 1.0
    return sum(match_credits(qterms, question_words(question, lang), passage, lang).values()) / len(qterms)
