"""EmbeddingService: sentence embeddings from the document service's embedder, when one is loaded."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from edge_agent.services.errors import InvalidRequestError, ModelNotFoundError, UnavailableError


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
        """Embeddings (one float32 row per text) and the input token count.

        Raises UnavailableError when no embedding model is loaded, InvalidRequestError when `dimensions`
        (OpenAI's shortened vectors) is not the model's own dimension.
        """
        e = self._embedder()
        if e is None:
            raise UnavailableError(self._unavailable_message())
        vecs = np.asarray(e.embed(list(texts)), dtype=np.float32)
        if dimensions is not None and dimensions != vecs.shape[1]:
            raise InvalidRequestError(f"this embedding model gives {vecs.shape[1]}-dimensional vectors and cannot shorten them: "
                                      f"leave `dimensions` out or send {vecs.shape[1]}", param="dimensions", code="invalid_value")
        return vecs, self._count_tokens(e, texts)

    @staticmethod
    def _count_tokens(e: Any, texts: list[str]) -> int:
        inner = getattr(e, "embedder", e)
        tok = getattr(inner, "tokenizer", None)
        limit = int(getattr(inner, "max_tokens", 0) or 0)
        if tok is None or not hasattr(tok, "encode_batch"):
            return 0
        counts = [len(enc.ids) for enc in tok.encode_batch(list(texts))]
        return sum(min(c, limit) if limit else c for c in counts)
