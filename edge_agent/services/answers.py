"""Grounded answers after retrieval: the sentences that answer a question, a check that a model's answer stays
on them, the extractive answer when it does not, and the "[n]" citations that tie an answer to its sources.

A 270M base model reads a few sentences better than whole chunks, and restates the fact in about half of its
answers; the rest are empty, echo the question, or invent. So its answer is kept only when what it adds to the
question is found in the sentences it was given (the best-matching one first); otherwise the answer is that
best sentence, quoted, with its citation: the documents' own words, never an invention. Which path produced
an answer is reported with the response (`grounding`).

Sentences are ranked by the share of the question's content terms they hold (stemmed in the question's
language), each term weighed by how rare it is among the retrieved sentences, with a small penalty per
retrieval rank of the chunk; ties keep retrieval and text order.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edge_agent.rag import language

# a sentence ends at . ! ? (and closing quotes or brackets) before whitespace; a paragraph at a blank line,
# a list item at a line that starts with a bullet or a number: single line breaks inside a paragraph are wrapping
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=\S)")
_BREAK = re.compile(r"\n[ \t]*\n\s*|\n(?=[ \t]*(?:[•·*\-–]|\d{1,2}[.)])\s)")
HEAD_WORDS = 12  # a paragraph this short without a closing mark heads the next sentence
_CLOSED = re.compile(r"[.!?:;][\"'”’)\]]*$")
MAX_SENTENCE_CHARS = 400  # a longer "sentence" (a grammar listing, a table) is cut at its clauses, then its words
RANK_PENALTY = 0.02  # per retrieval rank of the sentence's chunk, in shares of the question's weight
_CITATION = re.compile(r"\[(\d{1,3})\]")
# an answer is kept when one sentence holds this share of the terms it adds to the question (dev set: 0.6-0.8
# gave the same answers, 0.5 kept wrong ones)
MIN_SUPPORT = 0.7
# ... in a sentence that matches the question at least this share as well as the best one (on the bench's
# 34 dev questions 0.6-0.8 kept the same answers; 1.0 lost correct answers from a near-best sentence, 0 kept
# wrong numbers copied from an unrelated sentence)
NEAR_BEST = 0.7
LANGUAGE_CHECK_WORDS = 4  # shorter answers are not judged by language: too few words to tell


@dataclass(frozen=True)
class Sentence:
    """One sentence of a retrieved chunk: the chunk's retrieval rank (0-based), its place in the chunk, its score."""

    chunk: int
    index: int
    text: str
    score: float


def split_sentences(text: str) -> list[str]:
    """text's sentences, whitespace collapsed, wrapped lines joined; pieces of 3 characters or fewer left out.

    A short paragraph without a closing . ! ? : ; (a heading, a signature such as "object.__len__(self)", a
    bullet without a full stop) is not a sentence of its own: it heads the sentence that follows it.
    """
    out: list[str] = []
    head = ""
    for para in _BREAK.split(text):
        para = " ".join(para.split())
        if not para:
            continue
        if len(para.split()) <= HEAD_WORDS and not _CLOSED.search(para):
            if len(head) > 3:  # only the nearest one heads the next sentence; an earlier one stands alone
                out.extend(_cap(head))
            head = para
            continue
        pieces = [s.strip() for s in _SENTENCE_END.split(para) if s.strip()]
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


def rank_sentences(question: str, chunks: Sequence[Any], lang: str) -> list[Sentence]:
    """Every sentence of the chunks (best-ranked chunk first), best match to the question first (see the module doc)."""
    qterms = language.content_terms(question, lang)
    items = [(r, j, s, set(language.terms(s, lang))) for r, c in enumerate(chunks) for j, s in enumerate(split_sentences(c.text))]
    df = Counter(t for *_, ts in items for t in ts & qterms)
    n = len(items)
    weight = {t: math.log(1.0 + (n + 1) / (df[t] + 0.5)) for t in qterms}
    total = sum(weight.values()) or 1.0
    scored = [Sentence(r, j, s, sum(weight[t] for t in qterms & ts) / total - RANK_PENALTY * r) for r, j, s, ts in items]
    return sorted(scored, key=lambda x: (-x.score, x.chunk, x.index))


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

    empty: no word; echo: no term beyond the question's; off_source: no such sentence holds MIN_SUPPORT of the
    added terms; wrong_language: four words or more that read as English (the model's habit) or as the source's
    language, where the question is in another.
    """
    text = strip_citations(answer).strip()
    if not language.words(text):
        return Verdict("empty")
    added = set(language.terms(text, lang)) - set(language.terms(question, lang, drop_stop_words=False))
    if not added:
        return Verdict("echo")
    top = given[0].score if given else 0.0
    anchors = _anchors(question, given, lang)
    best, share = None, 0.0
    for s in given:
        held = set(language.terms(s.text, lang))
        if s.score < NEAR_BEST * top or (anchors and not anchors & held):
            continue
        got = len(added & held) / len(added)
        if got > share + 1e-9:
            best, share = s, got
    if best is None or share < MIN_SUPPORT:
        return Verdict("off_source")
    if len(language.words(text)) >= LANGUAGE_CHECK_WORDS:
        said = language.likely(text, {lang, "en", language.detect(best.text)})
        if said and said[0] != lang:
            return Verdict("wrong_language", best)
    return Verdict("ok", best)


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


def extractive(sentence: Sentence, number: int) -> str:
    """The sentence, quoted, with its citation: '"..." [n]'; the source's own "[4]" footnote marks are left out,
    so that every "[n]" of an answer is a citation."""
    text = re.sub(r"\s+(?=[.,;:!?])", "", re.sub(r"\s{2,}", " ", strip_citations(sentence.text))).strip()
    return f"\"{text}\" [{number}]"


def report(lang: str, how: list[dict[str, str]]) -> dict:
    """A response's `grounding`: the question's language and, per choice, which path made its answer."""
    return {"language": lang, "choices": [{"index": i, **h} for i, h in enumerate(how)]}


def settle(answer: str, question: str, evidence: Sequence[tuple[int, Sentence]], lang: str) -> tuple[str, dict[str, str]]:
    """The answer to give for a model's answer, and how it was made: {"answer": "model", "check": "ok"} (the
    model's words, cited with the passage they rest on) or {"answer": "extractive", "check": why} (the best
    sentence, quoted and cited). evidence: (passage number, sentence) pairs, best first; with none, the model's
    answer is given unchecked ({"answer": "model", "check": "none"})."""
    if not evidence:  # a prompt of cut chunks, not sentences: nothing to check against
        return answer.strip(), {"answer": "model", "check": "none"}
    number = {s: k for k, s in evidence}
    verdict = check_answer(answer, question, [s for _, s in evidence], lang)
    if verdict.ok and verdict.support is not None:
        return with_citation(answer.strip(), number[verdict.support], set(number.values())), {"answer": "model", "check": "ok"}
    k, best = evidence[0]
    return extractive(best, k), {"answer": "extractive", "check": verdict.status}
