"""Grounded answers: retrieve chunks for a question, fit them into the prompt, report them as sources.

The sources go where the model reads instructions: for a chat template, a system message;
for a base model's transcript, the text before "Question: ...\\nAnswer:" (the transcript puts
system messages there); for a text completion, a block in front of the prompt. Chunks are
taken best first and the last one that fits is cut at a token boundary, so the prompt plus
the room kept for the answer stay within the model's context.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from edge_agent.services.errors import InvalidRequestError, UnavailableError

INSTRUCTION = "Use the sources to answer."
SOURCE_SEPARATOR = "\n"
MIN_CUT_TOKENS = 24  # a chunk cut shorter than this is left out instead
ELLIPSIS = " …"  # marks a chunk cut to fit
RETRY_AFTER_S = 5.0


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Grounding:
    """The retrieved chunks that made it into the prompt, and their lines ("Source [n] (...): text")."""

    sources: list[Source] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    @property
    def block(self) -> str:
        """The text given to the model: the instruction, a blank line, one line per source ("" when none)."""
        return INSTRUCTION + "\n\n" + SOURCE_SEPARATOR.join(self.lines) if self.lines else ""


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


def header(n: int, chunk: Any) -> str:
    """'Source [n] (title, p. 2, Heading): '"""
    label = (chunk.location or {}).get("label") or ""
    where = f"{chunk.title}, {label}" if label else chunk.title
    return f"Source [{n}] ({where}): "


def fit_sources(chunks: Sequence[Any], budget: int, count: Callable[[str], int], cut: Callable[[str, int], str]) -> Grounding:
    """Take chunks best first while their lines fit in `budget` tokens; cut the first one that does not fit.

    count(text) is the number of model tokens of text; cut(text, n) its first n tokens as text.
    """
    lines: list[str] = []
    sources: list[Source] = []
    used = count(INSTRUCTION) + 2  # the instruction and the blank line after it
    for c in chunks:
        head = header(len(lines) + 1, c)
        line = head + " ".join(c.text.split())
        need = count(line) + 1
        full = used + need <= budget
        if not full:
            line, need = _cut_line(head, line[len(head):], budget - used, count, cut)
            if not line:
                break
        lines.append(line)
        used += need
        sources.append(Source(c.document_id, c.chunk_id, c.title, dict(c.location), float(c.score), c.snippet))
        if not full:
            break
    return Grounding(sources, lines)


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
