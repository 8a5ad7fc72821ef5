"""EmbeddingService: sentence embeddings from the document service's embedder, when one is loaded."""
from __future__ import annotations

from collections.abc import Callable
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

    def __init__(self, documents: Callable[[], Any], status: Callable[[], str | None] = lambda: None):
        self._documents = documents
        self._status = status

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

    def check_model(self, name: str) -> None:
        served = self.model_name
        if served is None:
            raise UnavailableError(self._unavailable_message())
        if name not in (served, "default"):
            raise ModelNotFoundError(name, [served])

    def _unavailable_message(self) -> str:
        why = self._status()
        return "embedding model not loaded" + (f": {why}" if why else "")

    def embed(self, texts: list[str], dimensions: int | None = None) -> tuple[np.ndarray, int]:
        """Embeddings (one float32 row per text) and the input token count; see embed_texts (texts are truncated)."""
        out = self.embed_texts(texts, dimensions)
        return out.vectors, out.tokens

    def embed_texts(self, texts: list[str], dimensions: int | None = None, truncate: bool = True) -> Embedded:
        """Embeddings, the inputs' real token count and how many were cut to the model's window.

        A text longer than the window (max_tokens, special tokens included) is truncated when `truncate`
        (Ollama's and TEI's default); otherwise nothing is embedded. Raises InputTooLongError (400) then,
        UnavailableError when no embedding model is loaded, InvalidRequestError when `dimensions` (OpenAI's
        shortened vectors) is not the model's own dimension.
        """
        e = self._embedder()
        if e is None:
            raise UnavailableError(self._unavailable_message())
        counts, limit = self._count_tokens(e, texts)
        over = [i for i, c in enumerate(counts) if limit and c > limit]
        if over and not truncate:
            i = over[0]
            which = "input" if len(texts) == 1 else f"input[{i}]"
            raise InputTooLongError(f"{which} is {counts[i]} tokens, over this embedding model's limit of {limit} tokens "
                                    f"({len(over)} of {len(texts)} inputs are too long): shorten or split it, or send "
                                    "\"truncate\": true to embed its first tokens only", param="input")
        vecs = np.asarray(e.embed(list(texts)), dtype=np.float32)
        if dimensions is not None and dimensions != vecs.shape[1]:
            raise InvalidRequestError(f"this embedding model gives {vecs.shape[1]}-dimensional vectors and cannot shorten them: "
                                      f"leave `dimensions` out or send {vecs.shape[1]}", param="dimensions", code="invalid_value")
        return Embedded(vecs, sum(counts), len(over), limit)

    @staticmethod
    def _count_tokens(e: Any, texts: list[str]) -> tuple[list[int], int]:
        """Each text's tokens (special tokens included, as the model sees them) and the model's window (0: unknown)."""
        inner = getattr(e, "embedder", e)
        tok = getattr(inner, "tokenizer", None)
        limit = int(getattr(inner, "max_tokens", 0) or 0)
        if tok is None or not hasattr(tok, "encode_batch"):
            return [0] * len(texts), 0
        return [len(enc.ids) for enc in tok.encode_batch(list(texts))], limit
