"""Chunking by embedding-model tokens, with overlap, on paragraph and sentence boundaries where possible.

Reference text laid out as a definition list by indentation (a manual page's sections and options, a config reference's
keys, a glossary, an indented field table: a short term line with a more deeply indented body under it) is cut by
entry: an entry (its term line and body) is one piece, kept whole in one chunk where it fits (small entries share a
chunk, an entry is not carried over as overlap), and only an entry longer than a chunk is cut inside, into its own
entries or sentences; a chunk's heading names the entries it lies in ("OPTIONS > LineMax="), so BM25's heading field
sees the term of a default that lands in an entry's second chunk. Text without that layout is cut as before.

A change in where chunks are cut changes every document's chunks: bump every kind in reader_version.py.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any, Sequence

from edge_agent.rag.embedder import embedding_text
from edge_agent.rag.loaders import Section

SECTION_SEPARATOR = "\n\n"
_PARAGRAPH = re.compile(r"\n\s*\n")
_WORD_RUN = re.compile(r"\S+")
_SENTENCE = re.compile(r"(?<=[.!?…;:])[\"')\]]*\s+|\n")
# inside an entry's body lines are hard-wrapped (a rendered manual): a sentence ends at its mark, not at a line's end
_WRAPPED_SENTENCE = re.compile(r"(?<=[.!?…;:])[\"')\]]*\s+")
_TERM_GAP = re.compile(r"\s{2,}|\t")  # "-d     use digits": the term ends where its body starts on its own line
HEAD_LINES = 3  # a term of at most this many lines ("SystemMaxUse=, SystemKeepFree=, ...," wrapped onto a second line)
TERM_CHARS = 80  # a longer term labels no chunk (the entry is still kept whole)
HEADING_CHARS = 200


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
        batch = [embedding_text(t) for t in texts]  # as the embedder reads them: indentation spends no tokens
        return [len(e.ids) for e in self.tokenizer.encode_batch(batch, add_special_tokens=False)]

    def chunk(self, sections: Sequence[Section]) -> list[Chunk]:
        """Chunks of all sections, numbered from 0, with offsets into `joined_text(sections)`."""
        chunks: list[Chunk] = []
        base = 0
        for section in sections:
            for start, end, n, path in self._pack(section.text):
                text = section.text[start:end]
                heading = " > ".join(p for p in (section.heading, *path) if p)[:HEADING_CHARS] or None
                chunks.append(Chunk(len(chunks), text, base + start, base + end, n, section.page, heading))
            base += len(section.text) + len(SECTION_SEPARATOR)
        # exact token counts of the final texts (packing sums pieces, which can differ by a token or two)
        for c, n in zip(chunks, self._count([c.text for c in chunks])):
            c.token_count = n
        return chunks

    # --- internals ---------------------------------------------------------
    def _pieces(self, text: str) -> list[_Piece]:
        """The text's pieces in order: whole entries of a definition list where they fit (_outline), else paragraphs,
        split into sentences, split into token windows if needed."""
        return self._outline(text, 0, len(text), (), nested=False)

    def _outline(self, text: str, start: int, end: int, path: tuple[str, ...], nested: bool) -> list[_Piece]:
        """Pieces of text[start:end]: each entry (a head of at most HEAD_LINES lines starting a paragraph, the next
        non-blank line indented deeper, and every line up to the next one indented no deeper than the head) whole where
        it fits in a chunk, else its head and the pieces of its body under its term; the text between entries as
        paragraphs (_plain)."""
        lines = _lines(text, start, end)
        out: list[_Piece] = []
        plain: list[int] = []  # [start, end) of the text since the last entry
        i = 0
        while i < len(lines):
            ls, le, ind = lines[i]
            body = _body_start(lines, i) if ind is not None else None
            if body is None:
                if ind is not None:
                    plain[:] = [plain[0] if plain else ls, le]
                i += 1
                continue
            if plain:
                out.extend(self._plain(text, plain[0], plain[1], path, nested))
                plain.clear()
            last = body
            k = body
            while k < len(lines) and (lines[k][2] is None or lines[k][2] > ind):
                if lines[k][2] is not None:
                    last = k
                k += 1
            head_end = lines[body - 1][1]
            while text[head_end - 1].isspace():
                head_end -= 1
            entry_end = lines[last][1]
            first = ls + len(text[ls:le]) - len(text[ls:le].lstrip())
            term = _term(text, first, head_end)
            whole, head = self._count([text[ls:entry_end], text[ls:head_end]])  # counted with their indentation
            if whole <= self.chunk_tokens:
                out.append(_Piece(first, entry_end, whole, path, True))
            else:  # its head goes with its body's first piece, where they fit together: a term never ends a chunk alone
                inner = self._outline(text, lines[body][0], entry_end, (*path, term) if term else path, nested=True)
                if inner and head + inner[0].tokens <= self.chunk_tokens:
                    inner[0] = _Piece(first, inner[0].end, head + inner[0].tokens, inner[0].path, True, True)
                else:
                    out.append(_Piece(first, head_end, head, path, True, True))
                out.extend(inner)
            i = last + 1
        if plain:
            out.extend(self._plain(text, plain[0], plain[1], path, nested))
        return out

    def _plain(self, text: str, start: int, end: int, path: tuple[str, ...], nested: bool) -> list[_Piece]:
        """Paragraphs of text[start:end], an over-long one split into sentences (`nested`: an entry's hard-wrapped
        body, sentences end at their marks only), an over-long sentence into runs of words."""
        spans = _spans(text, _PARAGRAPH, start, end)
        counts = self._count([text[s:e] for s, e in spans])
        out: list[_Piece] = []
        for (s, e), n in zip(spans, counts):
            if n <= self.chunk_tokens:
                out.append(_Piece(s, e, n, path))
                continue
            sentences = _spans(text, _WRAPPED_SENTENCE if nested else _SENTENCE, s, e)
            for (ss, se), sn in zip(sentences, self._count([text[a:b] for a, b in sentences])):
                if sn <= self.chunk_tokens:
                    out.append(_Piece(ss, se, sn, path))
                else:
                    out.extend(_Piece(a, b, n, path) for a, b, n in self._windows(text, ss, se))
        return out

    def _windows(self, text: str, start: int, end: int) -> list[tuple[int, int, int]]:
        """Split one over-long sentence into runs of whole words of about `overlap` tokens (so the packer
        can carry some of them into the next chunk as overlap); only a single word longer than a
        chunk is cut inside, by tokens, into windows that overlap by `overlap` tokens."""
        enc = self.tokenizer.encode(text[start:end], add_special_tokens=False)
        offsets = [(a, b) for a, b in enc.offsets if text[start + a : start + b].strip()]  # not a bare space's token
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

    def _pack(self, text: str) -> list[tuple[int, int, int, tuple[str, ...]]]:
        """Greedy packing of pieces into windows of <= chunk_tokens, carrying trailing pieces as overlap (not into a
        chunk that starts with an entry: entries are whole, none is repeated); each window with the path of entries
        its first piece lies in."""
        pieces = self._pieces(text)
        chunks: list[tuple[int, int, int, tuple[str, ...]]] = []
        current: list[_Piece] = []
        tokens = 0
        for piece in pieces:
            if current and (tokens + piece.tokens > self.chunk_tokens or piece.opens and tokens >= self.overlap):
                chunks.append((current[0].start, current[-1].end, tokens, current[0].path))
                carry: list[_Piece] = []
                carried = 0
                for p in reversed(current) if not piece.entry else ():
                    if p.entry or p.path != piece.path:
                        break
                    if carried + p.tokens > self.overlap or carried + p.tokens + piece.tokens > self.chunk_tokens:
                        break
                    carry.insert(0, p)
                    carried += p.tokens
                current, tokens = carry, carried
            current.append(piece)
            tokens += piece.tokens
        if current:
            chunks.append((current[0].start, current[-1].end, tokens, current[0].path))
        return chunks


@dataclass
class _Piece:
    """A span the packer places whole: its tokens, the terms of the entries it lies in, whether it starts an entry, and
    whether it starts a chunk (`opens`: the first piece of an entry too long for one chunk, so it takes the fewest; unless
    the chunk before it would hold less than an overlap's tokens, a scrap of a chunk)."""

    start: int
    end: int
    tokens: int
    path: tuple[str, ...] = ()
    entry: bool = False
    opens: bool = False


def _lines(text: str, start: int, end: int) -> list[tuple[int, int, int | None]]:
    """(start, end, indentation) of each line of text[start:end]; indentation None for a blank line (tabs count 8)."""
    out = []
    pos = start
    while pos < end:
        nl = text.find("\n", pos, end)
        le = end if nl < 0 else nl
        line = text[pos:le]
        stripped = line.lstrip()
        out.append((pos, le, len(line[: len(line) - len(stripped)].expandtabs(8)) if stripped else None))
        pos = le + 1
    return out


def _body_start(lines: list[tuple[int, int, int | None]], i: int) -> int | None:
    """The index of an entry's first body line when line i starts one (a head: it starts a paragraph, at most HEAD_LINES
    lines of its indentation, then, after at most one blank line, a line indented deeper), else None."""
    ind = lines[i][2]
    if i > 0 and lines[i - 1][2] is not None:
        return None
    j = i + 1
    while j < len(lines) and lines[j][2] == ind and j - i < HEAD_LINES:
        j += 1
    if j < len(lines) and lines[j][2] is None and j + 1 < len(lines) and j == i + 1:
        j += 1  # "Example:", a blank line, the indented example
    if j < len(lines) and lines[j][2] is not None and lines[j][2] > ind:
        return j
    return None


def _term(text: str, start: int, end: int) -> str | None:
    """An entry's term: its head's words up to where a body starts on the same line ("-d     use digits": "-d"), or
    None where that is longer than TERM_CHARS."""
    head = text[start:end]
    first = head.split("\n", 1)[0]
    gap = _TERM_GAP.search(first.strip())
    term = first.strip()[: gap.start()] if gap else " ".join(head.split())
    return term if 0 < len(term) <= TERM_CHARS else None


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
