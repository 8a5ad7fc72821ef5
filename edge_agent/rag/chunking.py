"""Chunking by embedding-model tokens, with overlap, on paragraph and sentence boundaries where possible.

A change in where chunks are cut changes every document's chunks: bump every kind in reader_version.py.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any, Sequence

from edge_agent.rag.loaders import Section

SECTION_SEPARATOR = "\n\n"
_PARAGRAPH = re.compile(r"\n\s*\n")
_WORD_RUN = re.compile(r"\S+")
_SENTENCE = re.compile(r"(?<=[.!?…;:])[\"')\]]*\s+|\n")


@dataclass
class Chunk:
    """A piece of a document's text with where it lies; offsets index the document's joined text."""

    ordinal: int
    text: str
    char_start: int
    char_end: int
    token_count: int
    page: int | None = None
    heading: str | None = None


def joined_text(sections: Sequence[Section]) -> str:
    """The document text that chunk offsets refer to: sections joined by a blank line."""
    return SECTION_SEPARATOR.join(s.text for s in sections)


class TokenChunker:
    """Splits sections into chunks of at most `chunk_tokens` tokens, neighbours sharing about `overlap` tokens.

    `tokenizer` is a `tokenizers.Tokenizer` (no truncation); chunks never cross a section
    (page or heading) boundary.
    """

    def __init__(self, tokenizer: Any, chunk_tokens: int = 200, overlap: int = 40):
        if chunk_tokens < 8:
            raise ValueError("chunk_tokens must be at least 8")
        self.tokenizer = tokenizer
        self.chunk_tokens = chunk_tokens
        self.overlap = max(0, min(overlap, chunk_tokens // 2))

    def _count(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        return [len(e.ids) for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def chunk(self, sections: Sequence[Section]) -> list[Chunk]:
        """Chunks of all sections, numbered from 0, with offsets into `joined_text(sections)`."""
        chunks: list[Chunk] = []
        base = 0
        for section in sections:
            for start, end, n in self._pack(section.text):
                text = section.text[start:end]
                chunks.append(Chunk(len(chunks), text, base + start, base + end, n, section.page, section.heading))
            base += len(section.text) + len(SECTION_SEPARATOR)
        # exact token counts of the final texts (packing sums pieces, which can differ by a token or two)
        for c, n in zip(chunks, self._count([c.text for c in chunks])):
            c.token_count = n
        return chunks

    # --- internals ---------------------------------------------------------
    def _pieces(self, text: str) -> list[tuple[int, int, int]]:
        """(start, end, tokens) spans: paragraphs, split into sentences, split into token windows if needed."""
        spans = _spans(text, _PARAGRAPH, 0, len(text))
        counts = self._count([text[s:e] for s, e in spans])
        out: list[tuple[int, int, int]] = []
        for (s, e), n in zip(spans, counts):
            if n <= self.chunk_tokens:
                out.append((s, e, n))
                continue
            sentences = _spans(text, _SENTENCE, s, e)
            for (ss, se), sn in zip(sentences, self._count([text[a:b] for a, b in sentences])):
                if sn <= self.chunk_tokens:
                    out.append((ss, se, sn))
                else:
                    out.extend(self._windows(text, ss, se))
        return out

    def _windows(self, text: str, start: int, end: int) -> list[tuple[int, int, int]]:
        """Split one over-long sentence into runs of whole words of about `overlap` tokens (so the packer
        can carry some of them into the next chunk as overlap); only a single word longer than a
        chunk is cut inside, by tokens, into windows that overlap by `overlap` tokens."""
        enc = self.tokenizer.encode(text[start:end], add_special_tokens=False)
        offsets = [(a, b) for a, b in enc.offsets if b > a]
        words = [(m.start(), m.end()) for m in _WORD_RUN.finditer(text, start, end)]
        if not offsets or not words:
            return [(start, end, max(1, len(offsets)))]
        # tokens per word: a token belongs to the word its first character lies in
        starts = [w[0] - start for w in words]
        per_word = [0] * len(words)
        word_tokens: list[list[tuple[int, int]]] = [[] for _ in words]
        for a, b in offsets:
            w = max(0, bisect.bisect_right(starts, a) - 1)
            per_word[w] += 1
            word_tokens[w].append((a, b))
        group = max(1, min(self.overlap or self.chunk_tokens, self.chunk_tokens) // 2)
        out: list[tuple[int, int, int]] = []
        run_start, run_end, run_tokens = -1, -1, 0
        for (ws, we), n, toks in zip(words, per_word, word_tokens):
            if n > self.chunk_tokens:  # one word longer than a chunk: cut by tokens, windows overlapping
                if run_tokens:
                    out.append((run_start, run_end, run_tokens))
                    run_start, run_end, run_tokens = -1, -1, 0
                out.extend(self._token_windows(ws, we, start, toks))
                continue
            if run_tokens and run_tokens + n > group:
                out.append((run_start, run_end, run_tokens))
                run_start, run_end, run_tokens = -1, -1, 0
            if not run_tokens:
                run_start = ws
            run_end, run_tokens = we, run_tokens + n
        if run_tokens:
            out.append((run_start, run_end, run_tokens))
        return out

    def _token_windows(self, ws: int, we: int, base: int, toks: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
        """Windows of chunk_tokens tokens over one over-long word [ws, we), each starting `overlap` tokens
        before the previous one ended."""
        step = max(1, self.chunk_tokens - self.overlap)
        out = []
        i = 0
        while True:
            j = min(i + self.chunk_tokens, len(toks))
            s = ws if i == 0 else base + toks[i][0]
            e = we if j == len(toks) else base + toks[j - 1][1]
            out.append((s, e, j - i))
            if j == len(toks):
                return out
            i += step

    def _pack(self, text: str) -> list[tuple[int, int, int]]:
        """Greedy packing of pieces into windows of <= chunk_tokens, carrying trailing pieces as overlap."""
        pieces = self._pieces(text)
        chunks: list[tuple[int, int, int]] = []
        current: list[tuple[int, int, int]] = []
        tokens = 0
        for piece in pieces:
            if current and tokens + piece[2] > self.chunk_tokens:
                chunks.append((current[0][0], current[-1][1], tokens))
                carry: list[tuple[int, int, int]] = []
                carried = 0
                for p in reversed(current):
                    if carried + p[2] > self.overlap or carried + p[2] + piece[2] > self.chunk_tokens:
                        break
                    carry.insert(0, p)
                    carried += p[2]
                current, tokens = carry, carried
            current.append(piece)
            tokens += piece[2]
        if current:
            chunks.append((current[0][0], current[-1][1], tokens))
        return chunks


def _spans(text: str, pattern: re.Pattern, start: int, end: int) -> list[tuple[int, int]]:
    """Non-blank spans of text[start:end] between matches of `pattern`, stripped of surrounding whitespace."""
    out = []
    pos = start
    for m in pattern.finditer(text, start, end):
        _add_stripped(text, pos, m.start(), out)
        pos = m.end()
    _add_stripped(text, pos, end, out)
    return out


def _add_stripped(text: str, s: int, e: int, out: list[tuple[int, int]]) -> None:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    if e > s:
        out.append((s, e))
