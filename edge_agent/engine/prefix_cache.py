"""Reuse of the key/value cache of prompt prefixes (a repeated system prompt or RAG preamble)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

BLOCK = 64  # prefixes are cached and matched at multiples of this many tokens


class PrefixCache:
    """LRU of {prompt prefix -> copies of its keys/values per layer}, bounded in bytes.

    Keys and values at positions 0..n-1 depend only on tokens 0..n-1 (causal attention,
    per-token quantization), so a hit gives exactly the numbers a fresh prefill would.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[bytes, tuple[int, list[np.ndarray], list[np.ndarray]]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _key(prompt: np.ndarray, n: int) -> bytes:
        return np.ascontiguousarray(prompt[:n], np.int64).tobytes()

    def lookup(self, prompt: np.ndarray) -> tuple[int, list[np.ndarray], list[np.ndarray]] | None:
        """The longest cached prefix of prompt that leaves at least one token to prefill."""
        if self.max_bytes <= 0 or not self._entries:
            return None
        n = (len(prompt) - 1) // BLOCK * BLOCK
        while n >= BLOCK:
            hit = self._entries.get(self._key(prompt, n))
            if hit is not None:
                self._entries.move_to_end(self._key(prompt, n))
                self.hits += 1
                return hit
            n -= BLOCK
        self.misses += 1
        return None

    def wants(self, prompt: np.ndarray) -> int:
        """How many leading tokens of prompt are worth storing (0 when none or already stored)."""
        n = (len(prompt) - 1) // BLOCK * BLOCK
        if self.max_bytes <= 0 or n < BLOCK or self._key(prompt, n) in self._entries:
            return 0
        return n

    def store(self, prompt: np.ndarray, n: int, keys: list[np.ndarray], values: list[np.ndarray]) -> None:
        size = sum(a.nbytes for a in keys) + sum(a.nbytes for a in values)
        if size > self.max_bytes:
            return
        self._entries[self._key(prompt, n)] = (n, keys, values)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, k, v) = self._entries.popitem(last=False)
            self.bytes -= sum(a.nbytes for a in k) + sum(a.nbytes for a in v)
