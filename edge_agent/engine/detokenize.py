"""Streaming detokenization that only ever yields whole UTF-8 characters."""
from __future__ import annotations

from tokenizers import Tokenizer

_REPLACEMENT = "\ufffd"


class IncrementalDecoder:
    """Feed token ids one at a time; get back only text that is complete.

    Decodes a short window (the previous emission point onwards) rather than the
    whole sequence, so each token costs O(1). Text is held back while the
    window ends in an incomplete byte sequence (a U+FFFD from byte fallback).
    """

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = True):
        self.tokenizer = tokenizer
        self.skip_special = skip_special_tokens
        self.ids: list[int] = []
        self.prefix_offset = 0
        self.read_offset = 0

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special)

    def add(self, token_id: int) -> str:
        """Append one token; return the newly completed text (maybe empty)."""
        self.ids.append(int(token_id))
        prefix = self._decode(self.ids[self.prefix_offset : self.read_offset])
        full = self._decode(self.ids[self.prefix_offset :])
        if len(full) > len(prefix) and not full.endswith(_REPLACEMENT):
            self.prefix_offset = self.read_offset
            self.read_offset = len(self.ids)
            return full[len(prefix) :]
        return ""

    def flush(self) -> str:
        """Whatever is still held back (an incomplete character decodes to U+FFFD)."""
        prefix = self._decode(self.ids[self.prefix_offset : self.read_offset])
        full = self._decode(self.ids[self.prefix_offset :])
        self.prefix_offset = self.read_offset = len(self.ids)
        return full[len(prefix) :] if len(full) > len(prefix) else ""
