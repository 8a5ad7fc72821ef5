"""Streaming detokenization that only ever yields whole UTF-8 characters (tokenizers' DecodeStream).

`tokenizers.decoders.DecodeStream` (tokenizers 0.22) decodes a short window per token in
Rust and holds text back while it ends in an incomplete character. On the default bundle's
Gemma tokenizer and the tiny Llama/Qwen2/Gemma3 ones it gave the same increments as the
hand-written window decoder it replaces, on the 114 tokenizer-parity texts and 300 random
id sequences (byte-fallback pieces, control tokens, characters cut at the end).
"""
from __future__ import annotations

from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream


class IncrementalDecoder:
    """Feed token ids one at a time; get back only text that is complete. O(1) per token."""

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = True):
        self.tokenizer = tokenizer
        self.skip_special = skip_special_tokens
        self._stream = DecodeStream(skip_special_tokens=skip_special_tokens)
        self.ids: list[int] = []
        self._prev = 0  # where the window of the last emission started
        self._last = 0  # ids up to here have been emitted

    def add(self, token_id: int) -> str:
        """Append one token; return the newly completed text (maybe empty)."""
        self.ids.append(int(token_id))
        text = self._stream.step(self.tokenizer, int(token_id))
        if text:
            self._prev, self._last = self._last, len(self.ids)
            return text
        return ""

    def flush(self) -> str:
        """Whatever is still held back (an incomplete character decodes to U+FFFD)."""
        if self._last == len(self.ids):
            return ""
        prefix = self.tokenizer.decode(self.ids[self._prev:self._last], skip_special_tokens=self.skip_special)
        full = self.tokenizer.decode(self.ids[self._prev:], skip_special_tokens=self.skip_special)
        self._prev = self._last = len(self.ids)
        self._stream = DecodeStream(skip_special_tokens=self.skip_special)
        return full[len(prefix):] if len(full) > len(prefix) else ""
