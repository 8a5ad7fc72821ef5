"""EmbeddingService: sentence embeddings from the document service's embedder, when one is loaded."""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge_agent.services.errors import InvalidRequestError, ModelNotFoundError, UnavailableError


class InputTooLongError(InvalidRequestError):
    """An input is longer than the embedding model's window and the request said truncate: false (400)."""

    code = "context_length_exceeded"  # OpenAI's code for an input over the model's window


@dataclass(frozen=True)
class Embedded:
    """The vectors of a request, its inputs' real token count, how many inputs were truncated, and the window."""

    vectors: np.ndarray
    tokens: int
    truncated: int
    max_tokens: int


class EmbeddingService:
    """Embeds texts with whatever `documents()` provides: an object with embed(list[str]) -> array,
    or one whose `.embedder` has it. `status()` explains why none is available (e.g. still loading)."""

    def __init__(self, documents: Callable[[], Any], status: Callable[[], str | None] = lambda: None, aliases: Sequence[str] = ()):
        """aliases: more names the model answers to (Settings.embedding_model_aliases)."""
        self._documents = documents
        self._status = status
        self.aliases: tuple[str, ...] = tuple(a for a in aliases if a)

    @property
    def names(self) -> tuple[str, ...]:
        """The names the model answers to: its id, then its aliases (none while no embedding model is loaded)."""
        served = self.model_name
        return (served, *self.aliases) if served is not None else ()

    def _embedder(self) -> Any | None:
        docs = self._documents()
        if docs is None:
            return None
        if callable(getattr(docs, "embed", None)):
            return docs
        inner = getattr(docs, "embedder", None)
        return inner if callable(getattr(inner, "embed", None)) else None

    @property
    def model_name(self) -> str | None:
        e = self._embedder()
        if e is None:
            return None
        inner = getattr(e, "embedder", e)
        return str(getattr(inner, "name", None) or getattr(inner, "model_id", None) or "embedding")

    def facts(self) -> dict[str, Any] | None:
        """The loaded model's name, dim, window in tokens (0: unknown) and modified (its folder's mtime, 0: unknown), or None
        when none is loaded."""
        e = self._embedder()
        if e is None:
            return None
        inner = getattr(e, "embedder", e)
        folder = getattr(inner, "folder", None)
        return {"name": self.model_name, "dim": int(getattr(inner, "dim", 0) or 0), "window": int(getattr(inner, "max_tokens", 0) or 0),
                "modified": folder.stat().st_mtime if folder is not None and folder.exists() else 0.0}

    @property
    def languages(self) -> tuple[str, ...] | None:
        """ISO 639-1 codes the loaded model was trained on (all-MiniLM-L6-v2: English; rag.embedder), None when
        unknown (taken to cover every language) or when no model is loaded."""
        e = self._embedder()
        langs = getattr(getattr(e, "embedder", e), "languages", None) if e is not None else None
        return tuple(langs) if langs else None

    def covers(self, lang: str) -> bool:
        """Whether the loaded model was trained on lang (a model of unknown languages is taken to cover all); False
        while no model is loaded."""
        if self._embedder() is None:
            return False
        langs = self.languages
        return langs is None or lang in langs

    def check_model(self, name: str) -> None:
        served = self.model_name
        if served is None:
            raise UnavailableError(self._unavailable_message())
        if name != "default" and name not in self.names:
            raise ModelNotFoundError(name, list(self.names))

    def _unavailable_message(self) -> str:
        why = self._status()
        return "embedding model not loaded" + (f": {why}" if why else "")

    def embed(self, texts: list[str], dimensions: int | None = None, query: bool = False) -> tuple[np.ndarray, int]:
        """Embeddings (one float32 row per text) and the input token count; see embed_texts (texts are truncated)."""
        out = self.embed_texts(texts, dimensions, query=query)
        return out.vectors, out.tokens

    def embed_texts(self, texts: list[str], dimensions: int | None = None, truncate: bool = True, query: bool = False) -> Embedded:
        """Embeddings, the inputs' real token count and how many were cut to the model's window.

        A text longer than the window (max_tokens, special tokens included) is truncated when `truncate`
        (Ollama's and TEI's default): it is tokenized once, for the count, and the model is given the words its
        window holds. Otherwise nothing is embedded, and a text whose first words already fill the window is
        refused without being tokenized whole. Raises InputTooLongError (400) then, UnavailableError when no
        embedding model is loaded, InvalidRequestError when `dimensions` (OpenAI's shortened vectors) is not the
        model's own dimension. query: with the model's query prompt (e5's "query: ") where the embedder has one,
        instead of its passage prompt.
        """
        e = self._embedder()
        if e is None:
            raise UnavailableError(self._unavailable_message())
        inner = getattr(e, "embedder", e)
        tok = getattr(inner, "tokenizer", None)
        limit = int(getattr(inner, "max_tokens", 0) or 0)
        if tok is None or not hasattr(tok, "encode_batch") or not limit:
            vecs = np.asarray(self._embed_with(e, list(texts), query), dtype=np.float32)
            return Embedded(self._check_dimensions(vecs, dimensions), 0, 0, 0)
        if not truncate:
            for i, text in enumerate(texts):
                head = cut_after(text, limit * HEAD_CHARS_PER_TOKEN)
                least = len(tok.encode(head).ids) if len(head) < len(text) else 0
                if least > limit:
                    raise self._too_long(texts, i, f"at least {least}", limit)
        count = getattr(tok, "encode_batch_fast", tok.encode_batch)  # without offsets: half the time (7 MB: 3.7 s, 6.8 s)
        counts = [len(enc.ids) for enc in count(list(texts))]
        over = [i for i, c in enumerate(counts) if c > limit]
        if over and not truncate:
            raise self._too_long(texts, over[0], f"{counts[over[0]]}", limit, f" ({len(over)} of {len(texts)} inputs are too long)")
        shown = [self._window(tok, t, limit) if c > limit else t for t, c in zip(texts, counts)]
        vecs = np.asarray(self._embed_with(e, shown, query), dtype=np.float32)
        return Embedded(self._check_dimensions(vecs, dimensions), sum(counts), len(over), limit)

    @staticmethod
    def _embed_with(e: Any, texts: list[str], query: bool) -> Any:
        queries = getattr(getattr(e, "embedder", e), "embed_queries", None) if query else None
        return queries(texts) if queries is not None else e.embed(texts)

    @staticmethod
    def _window(tok: Any, text: str, limit: int) -> str:
        """The words of an over-long text that hold its first `limit` tokens, for the model (which keeps no more), so it
        does not tokenize the whole text again; the whole text when its head has fewer (mostly blanks)."""
        head = cut_after(text, limit * HEAD_CHARS_PER_TOKEN)
        enc = tok.encode(head)
        return cut_after(head, enc.offsets[limit - 1][1]) if len(enc.ids) > limit else text

    @staticmethod
    def _too_long(texts: list[str], i: int, count: str, limit: int, how_many: str = "") -> InputTooLongError:
        which = "input" if len(texts) == 1 else f"input[{i}]"
        return InputTooLongError(f"{which} is {count} tokens, over this embedding model's limit of {limit} tokens{how_many}: "
                                 "shorten or split it, or send \"truncate\": true to embed its first tokens only", param="input")

    @staticmethod
    def _check_dimensions(vecs: np.ndarray, dimensions: int | None) -> np.ndarray:
        if dimensions is not None and dimensions != vecs.shape[1]:
            raise InvalidRequestError(f"this embedding model gives {vecs.shape[1]}-dimensional vectors and cannot shorten them: "
                                      f"leave `dimensions` out or send {vecs.shape[1]}", param="dimensions", code="invalid_value")
        return vecs


def main_language(texts: Sequence[str]) -> str | None:
    """The language most of texts are in (rag.language.detect; texts without letters do not count), or None for
    none or a tie."""
    from collections import Counter

    from edge_agent.rag.language import UNKNOWN, detect

    counts = Counter(lang for lang in map(detect, texts) if lang != UNKNOWN).most_common(2)
    if not counts or (len(counts) == 2 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


# The head of a text read to refuse it (truncate false): this many characters per token of the window (16 KiB for a
# 256-token window), a few milliseconds to tokenize; a text with fewer tokens than the window there (mostly blanks or
# unknown words) is counted whole. A 7 MB input took 7.3 s of a server thread to tokenize before its 400.
HEAD_CHARS_PER_TOKEN = 64
_WORD_END = re.compile(r"\S(?=\s)")


def cut_after(text: str, pos: int) -> str:
    """text up to the end of the word that holds character pos (all of it when no blank follows). A blank after a
    word ends a pre-token in the tokenizers embedding models use (BERT's, SentencePiece's Metaspace, byte-level
    BPE's), so the tokens of the cut text are the first tokens of the whole: a floor of its count, and the same
    window for the model."""
    if pos >= len(text):
        return text
    m = _WORD_END.search(text, max(pos - 1, 0))
    return text if m is None else text[: m.end()]
