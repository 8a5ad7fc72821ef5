"""What the document service takes and gives back: its errors, results and retrieval filters,
and the location labels and snippets of retrieved chunks (no I/O)."""
from __future__ import annotations

import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any

from edge_agent.rag.bm25 import tokenize


class DocumentError(Exception):
    """A request about documents that cannot be done; `code` names the kind for API mapping."""

    code = "invalid_request"
    param: str | None = None

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        if param is not None:
            self.param = param


# bidi embeddings, overrides and isolates (U+202A-E, U+2066-9: "Trojan Source") and the line and paragraph separators
_UNSAFE_IN_NAME = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029")


def _unsafe(ch: str) -> bool:
    return ch in _UNSAFE_IN_NAME or unicodedata.category(ch) in ("Cc", "Cs")  # Cs: a byte not UTF-8, from the file system


def name_problem(name: str) -> str | None:
    """What makes a name unfit to store and show: "U+202E (RIGHT-TO-LEFT OVERRIDE)" for a control character (C0,
    DEL, C1: NUL, tab, newline ...) or a bidi override, "a byte that is not UTF-8" for a file name's undecodable byte
    (Python's surrogate escape), else None."""
    for ch in name:
        if _unsafe(ch):
            if unicodedata.category(ch) == "Cs":
                return "a byte that is not UTF-8"
            return f"U+{ord(ch):04X}" + (f" ({unicodedata.name(ch)})" if unicodedata.name(ch, "") else "")
    return None


def escaped_name(name: str) -> str:
    """name with each character name_problem objects to written as an escape ("\\u202e", "\\n", "\\xe9" for a byte
    that is not UTF-8): safe to store, log and show, and still telling which file it was."""
    if not any(_unsafe(ch) for ch in name):
        return name
    out = []
    for ch in name:
        if not _unsafe(ch):
            out.append(ch)
        elif unicodedata.category(ch) == "Cs":
            out.append(f"\\x{ord(ch) - 0xDC00:02x}" if 0xDC80 <= ord(ch) <= 0xDCFF else f"\\u{ord(ch):04x}")
        else:
            out.append(ch.encode("unicode_escape").decode("ascii") if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
    return "".join(out)


def file_name_error(shown: str) -> str | None:
    """Why a file on disk (its path as shown, relative to its ingest root) is not indexed, or None: a name with a
    control or bidi-override character, or not UTF-8, as an upload so named is refused (checked_name)."""
    problem = name_problem(shown)
    if problem is None:
        return None
    return (f"file name contains {problem}: control and bidi-override characters, and names that are not UTF-8, "
            "are not indexed; rename the file")


def checked_name(raw: str | None, field: str, param: str, fix: str) -> str:
    """A document title or upload name as stored: trimmed, in NFC (one name in any Unicode form), possibly "".

    Raises DocumentError (param `param`) for a control character (C0, DEL, C1: NUL, tab, newline ...) or a bidi
    override inside it: a title is shown in lists, sources and logs, where these forge or hide what a reader sees."""
    name = unicodedata.normalize("NFC", (raw or "").strip())
    problem = name_problem(name)
    if problem is not None:
        raise DocumentError(f"{field} contains {problem}: control and bidi-override characters are not accepted; {fix}",
                            param=param)
    return name


class DocumentNotFoundError(DocumentError):
    code = "not_found"


class FileTooLargeError(DocumentError):
    """A file or text over max_file_bytes (413)."""

    code = "file_too_large"


class IndexInUseError(DocumentError):
    """Another process owns the index (see edge_agent.rag.owner); `pid` is that process's."""

    def __init__(self, message: str, pid: int | None = None):
        super().__init__(message)
        self.pid = pid


class IndexUnreadableError(DocumentError):
    """A read-only view cannot open the documents database without writing to it (none yet, or migrations missing)."""


class ReadOnlyError(DocumentError):
    """A write on a service opened read-only (another process owns the index)."""


class PathRefusedError(DocumentError):
    code = "path_not_allowed"
    param = "path"


@dataclass
class IngestResult:
    """What happened to one document: added, updated, unchanged, failed, or processing (an upload finished in the background)."""

    status: str
    source: str
    document_id: int | None = None
    title: str | None = None
    chunks: int = 0
    error: str | None = None
    # a re-read of the same bytes (a newer reader): "changed" when the title or the text came out differently, "same"
    # when not; None otherwise. Reindex results show it (jobs.reindex); not part of to_dict (the API's upload answers)
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["text"]
        return out


@dataclass
class Filters:
    """Retrieval filters: any given one must match."""

    document_ids: list[int] | None = None
    path_prefix: str | None = None
    types: list[str] | None = None

    @classmethod
    def from_any(cls, value: "Filters | dict | None") -> "Filters | None":
        if value is None or isinstance(value, Filters):
            return value
        types = value.get("types", value.get("type"))
        if isinstance(types, str):
            types = [types]
        return cls(value.get("document_ids"), value.get("path_prefix"), types)

    def empty(self) -> bool:
        return self.document_ids is None and self.path_prefix is None and self.types is None


@dataclass
class ScoredChunk:
    """A retrieved chunk with its document and where it lies."""

    document_id: int
    chunk_id: int
    title: str
    path: str | None
    type: str
    location: dict[str, Any]
    score: float
    text: str
    snippet: str
    dense_rank: int | None = None
    bm25_rank: int | None = None
    dense_score: float | None = None  # the query's cosine to the chunk, where dense search ranked it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CheckResult:
    """Whether the FAISS file, BM25 and SQLite agree, what was wrong and what was done."""

    ok: bool
    sqlite_chunks: int
    index_vectors: int
    problems: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    moved_aside: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def location_label(page: int | None, heading: str | None) -> str:
    parts = []
    if page is not None:
        parts.append(f"p. {page}")
    if heading:
        parts.append(heading)
    return ", ".join(parts)


def make_snippet(text: str, query: str, width: int = 240) -> str:
    """About `width` characters of `text` around the first query word found in it."""
    if len(text) <= width:
        return text
    low = text.casefold()
    pos = -1
    for tok in sorted(set(tokenize(query)), key=len, reverse=True):
        if len(tok) > 2:
            pos = low.find(tok)
            if pos >= 0:
                break
    start = 0 if pos < 0 else max(0, pos - width // 3)
    end = min(len(text), start + width)
    out = text[start:end].strip()
    return ("…" if start else "") + out + ("…" if end < len(text) else "")
