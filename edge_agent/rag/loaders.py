"""Document loaders: bytes of one file -> sections of text with their page or heading.

Supported: .txt, .md, .pdf, .eml, .csv here; .html/.htm in loaders_html.py; the office formats (.docx, .xlsx, .pptx,
.odt, .ods, .odp, .rtf) in loaders_office.py. Every failure a user can cause (unsupported type,
empty, broken, encrypted, too big, too slow, a decompression bomb) raises LoaderError with a
message that says what to do; callers record it per document and go on with the batch.

A change in what a loader returns for the same bytes: bump its kind in reader_version.py, so that the files an
older loader read are read again by the next reindex.
"""
from __future__ import annotations

import csv
import email
import email.policy
import io
import re
import time
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any, Callable

KINDS = {
    ".txt": "txt", ".text": "txt", ".log": "txt",
    ".md": "md", ".markdown": "md",
    ".html": "html", ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
    ".eml": "eml",
    ".csv": "csv",
    ".xlsx": "xlsx", ".xlsm": "xlsx",
    ".pptx": "pptx",
    ".odt": "odt", ".ods": "ods", ".odp": "odp",
    ".rtf": "rtf",
}
_OOXML = "application/vnd.openxmlformats-officedocument."
_ODF = "application/vnd.oasis.opendocument."
MIME = {
    "txt": "text/plain", "md": "text/markdown", "html": "text/html", "pdf": "application/pdf",
    "docx": _OOXML + "wordprocessingml.document", "xlsx": _OOXML + "spreadsheetml.sheet",
    "pptx": _OOXML + "presentationml.presentation",
    "odt": _ODF + "text", "ods": _ODF + "spreadsheet", "odp": _ODF + "presentation",
    "eml": "message/rfc822", "csv": "text/csv", "rtf": "application/rtf",
}
_MIME_TO_KIND = {v: k for k, v in MIME.items()} | {"text/rtf": "rtf"}


class LoaderError(Exception):
    """A document could not be turned into text; the message says why and what to do."""


class UnsupportedTypeError(LoaderError):
    """The file type has no loader."""


@dataclass
class Section:
    """A run of text with where it came from."""

    text: str
    page: int | None = None
    heading: str | None = None


@dataclass
class LoadedDocument:
    """The text of one document, in sections, with its title and type."""

    title: str
    kind: str
    sections: list[Section]
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def mime(self) -> str:
        return MIME.get(self.kind, "application/octet-stream")


@dataclass
class LoaderLimits:
    """Resource limits for one document."""

    max_file_bytes: int = 50 * 1024 * 1024
    time_budget_s: float = 30.0            # PDF and office files: wall-clock budget for extraction
    max_uncompressed_bytes: int = 200 * 1024 * 1024  # zip packages (DOCX, XLSX, ODT...): sum of member sizes; PDF: per stream
    max_compression_ratio: float = 100.0   # zip packages: uncompressed / compressed, whole archive
    max_csv_rows: int = 200_000            # CSV, and all sheets of a workbook together
    max_attachment_depth: int = 2


class Deadline:
    """A wall-clock budget for reading one document; check() raises LoaderError once it is spent."""

    def __init__(self, budget_s: float, what: str):
        self.end = time.monotonic() + budget_s
        self.budget_s = budget_s
        self.what = what

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise LoaderError(
                f"{self.what} took longer than its {self.budget_s:g} s budget: split the file or raise ingest_time_budget_s (EDGE_AGENT_INGEST_TIME_BUDGET_S)"
            )


def detect_kind(filename: str, content_type: str | None = None) -> str | None:
    """The loader kind for a file name (or a MIME type when the name has no known suffix), else None."""
    kind = KINDS.get(Path(filename).suffix.lower())
    if kind is None and content_type:
        kind = _MIME_TO_KIND.get(content_type.split(";")[0].strip().lower())
    return kind


# formats users bring from office suites that no loader reads, with the supported one to save them as
_CONVERT = {
    ".doc": "save it as .docx", ".pages": "export it as .docx",
    ".msg": "save the mail as .eml (Outlook: drag it to a folder, or File > Save As)",
    ".xls": "save it as .xlsx", ".ppt": "save it as .pptx",
}


def load_path(path: Path, limits: LoaderLimits | None = None) -> LoadedDocument:
    """Load a file from disk; raises LoaderError (too big, unsupported, broken...)."""
    limits = limits or LoaderLimits()
    size = path.stat().st_size
    if size > limits.max_file_bytes:
        raise LoaderError(f"file is {size} bytes, over the {limits.max_file_bytes}-byte limit (max_file_bytes)")
    with open(path, "rb") as f:
        data = f.read(limits.max_file_bytes + 1)
    return load_bytes(data, path.name, limits)


def load_bytes(data: bytes, filename: str, limits: LoaderLimits | None = None, depth: int = 0) -> LoadedDocument:
    """Load a document from its bytes; the kind comes from the file name's suffix.

    Raises UnsupportedTypeError or LoaderError.
    """
    limits = limits or LoaderLimits()
    kind = detect_kind(filename)
    if kind is None:
        supported = ", ".join(sorted(KINDS))
        suffix = Path(filename).suffix.lower()
        hint = f" ({_CONVERT[suffix]})" if suffix in _CONVERT else ""
        raise UnsupportedTypeError(f"unsupported file type {Path(filename).suffix or '(none)'!r}{hint}: supported are {supported}")
    if len(data) > limits.max_file_bytes:
        raise LoaderError(f"file is {len(data)} bytes, over the {limits.max_file_bytes}-byte limit (max_file_bytes)")
    if not data.strip():
        raise LoaderError("file is empty")
    why = not_text_reason(data) if kind in TEXT_KINDS else None
    if why is not None:
        raise LoaderError(f"not a {kind} file: {why}; give it the extension of its real type, or remove it from the folder")
    title = Path(filename).stem or filename
    try:
        sections, meta = _LOADERS[kind](data, limits, depth)
    except LoaderError:
        raise
    except MemoryError:
        raise LoaderError(f"{kind} file needs too much memory to read") from None
    except Exception as exc:  # third-party parsers raise many types on broken input
        raise LoaderError(f"could not read {kind} file ({type(exc).__name__}: {_short(exc)}): is it damaged?") from None
    sections = [s for s in (Section(_tidy(s.text), s.page, s.heading) for s in sections) if s.text]
    if not sections:
        raise LoaderError(f"no text found in {kind} file (scanned images need OCR, which is not supported)")
    return LoadedDocument(title=str(meta.pop("title", None) or title), kind=kind, sections=sections, metadata=meta)


TEXT_KINDS = frozenset({"txt", "md", "html", "csv", "eml", "rtf"})  # kinds whose files are text (the others have their own magic)
_SIGNATURES = (  # the first bytes of common binary files (as file(1) and python-magic know them)
    (b"\x89PNG\r\n\x1a\n", "a PNG image"), (b"\xff\xd8\xff", "a JPEG image"), (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"), (b"%PDF-", "a PDF (give it the .pdf extension)"), (b"PK\x03\x04", "a ZIP archive or Office file"),
    (b"\x1f\x8b", "a gzip archive"), (b"\x7fELF", "a program"), (b"\xd0\xcf\x11\xe0", "an old Office file"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
)
_SNIFF_BYTES = 8192
_CONTROL = bytes(b for b in range(32) if b not in b"\t\n\r\f\x0b\x1b")


def not_text_reason(data: bytes) -> str | None:
    """Why these bytes are not text (a known binary signature, NUL bytes, mostly invalid UTF-8 or control
    bytes in the first 8 KiB), or None. UTF-16 with a byte-order mark and legacy 8-bit text pass."""
    head = data[:_SNIFF_BYTES]
    for sig, what in _SIGNATURES:
        if head.startswith(sig):
            return f"it is {what}"
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return None
    if b"\x00" in head:
        return "it has NUL bytes (binary content)"
    controls = sum(head.count(c) for c in _CONTROL)
    invalid = head.decode("utf-8", errors="replace").count("\ufffd") - head.decode("utf-8", errors="ignore").count("\ufffd")
    if controls * 10 > len(head) or invalid * 4 > len(head):  # cp1252 prose has a few percent at most
        return "it looks binary (control bytes or invalid UTF-8)"
    return None


def _short(exc: BaseException, n: int = 160) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= n else text[:n] + "..."


def _tidy(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = re.sub(r"[ \t\f\v]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def _decode(data: bytes) -> str:
    for enc in ("utf-8-sig", "utf-16") if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ("utf-8-sig",):
        try:
            return data.decode(enc)
        except UnicodeDecodeError:
            continue
    if b"\x00" in data[:4096]:
        raise LoaderError("file looks binary, not text: give it a supported extension or convert it")
    return data.decode("cp1252", errors="replace")


# --- plain text, markdown, csv ---------------------------------------------
# a plain text's first line is its title when it stands alone (a blank line under it, more text after), is this short
# and ends without a full stop, comma or semicolon: "De CPU is terug: heroverweging ..." over an article, not a log line or a
# paragraph's first sentence; otherwise the file's name is the title
TXT_TITLE_CHARS = 120
TXT_TITLE_WORDS = 20
_TXT_TITLE = re.compile(rf"\A\s*([^\n]{{1,{TXT_TITLE_CHARS}}}?)[ \t]*\r?\n[ \t]*\r?\n\s*\S")


def txt_title(text: str) -> str | None:
    """The title a plain text gives itself on its first line (see TXT_TITLE_CHARS), or None."""
    m = _TXT_TITLE.match(text)
    line = m.group(1).strip() if m else ""
    if not line or len(line.split()) > TXT_TITLE_WORDS or line[-1] in ".;," or not any(c.isalpha() for c in line):
        return None
    return line


def _load_txt(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    text = _decode(data)
    title = txt_title(text)
    return [Section(text)], ({"title": title} if title else {})


_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def _load_md(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    text = _decode(data)
    sections: list[Section] = []
    heading: str | None = None
    buf: list[str] = []
    in_fence = False
    meta: dict = {}
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        m = None if in_fence else _MD_HEADING.match(line)
        if m:
            sections.append(Section("\n".join(buf), heading=heading))
            heading, buf = m.group(2).strip(), [line]
            if len(m.group(1)) == 1 and "title" not in meta:
                meta["title"] = heading
        else:
            buf.append(line)
    sections.append(Section("\n".join(buf), heading=heading))
    return sections, meta


def row_line(header: list[str], row: list[str]) -> str:
    """One table row as text a question can match: "Header: value; Header: value." (empty cells left out; a cell
    past the header, or under an empty one, is "column N"). The CSV loader and the sheet loaders share it, and
    put a blank line between rows, so that the chunker packs whole rows into a chunk."""
    pairs = [f"{(h or '').strip() or f'column {j + 1}'}: {c.strip()}"
             for j, (h, c) in enumerate(zip_longest(header, row, fillvalue="")) if c and c.strip()]
    return "; ".join(pairs) + "."


def _load_csv(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    text = _decode(data)
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = csv.reader(io.StringIO(text), dialect)
    header = next(rows, None)
    if header is None:
        return [], {}
    lines = []
    for i, row in enumerate(rows):
        if i >= limits.max_csv_rows:
            raise LoaderError(f"CSV has more than {limits.max_csv_rows} rows: split it")
        if any(cell.strip() for cell in row):
            lines.append(row_line(header, row))
    if not lines:  # a single-row file: the row is the content
        lines = ["; ".join(c.strip() for c in header if c.strip())]
    # a row a paragraph: the chunker packs whole rows (one long paragraph it cut at every "; " and ": ")
    return [Section("\n\n".join(lines), heading=", ".join(h.strip() for h in header if h.strip())[:200] or None)], {}


# --- html (loaders_html.py) --------------------------------------------------
def _load_html(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    """An HTML page's sections and title (loaders_html, imported on first use: it imports this module)."""
    from edge_agent.rag.loaders_html import load_html

    return load_html(data, limits, depth)


# --- pdf -------------------------------------------------------------------
# what a print driver or converter writes as a PDF's title, not its author: "Microsoft Word - declaratiebeleid v3.docx"
# (Office's "print to PDF"); shown as the title and indexed in its boosted field, "Microsoft" and "Word" matched
# every question about Word for every such file
_PRODUCER_PREFIX = re.compile(r"^\s*Microsoft\s+(?:Office\s+)?(?:Word|PowerPoint|Excel|Outlook)\s*-\s*", re.IGNORECASE)
_FILE_SUFFIX = re.compile(r"\.(?:docx?|docm|dotx|pptx?|xlsx?|xlsm|odt|ods|odp|rtf|txt|pdf|html?)\s*$", re.IGNORECASE)


def pdf_title(raw: str) -> str | None:
    """A PDF's metadata title without a converter's prefix and the source file's extension ("Microsoft Word -
    Huurcontract.docx": "Huurcontract"); None where nothing is left (the file's name is its title then)."""
    title = _FILE_SUFFIX.sub("", _PRODUCER_PREFIX.sub("", raw.strip())).strip()
    return title or None


def _load_pdf(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    import pypdf
    from pypdf.errors import FileNotDecryptedError, PdfReadError

    deadline = Deadline(limits.time_budget_s, "reading the PDF")
    cap = int(limits.max_uncompressed_bytes)
    with pypdf.apply_configuration(
        zlib_maximum_output_length=cap, lzw_maximum_output_length=cap, run_length_maximum_output_length=cap,
        array_based_stream_maximum_output_length=cap, maximum_declared_stream_length=cap,
        brotli_maximum_output_length=cap, jbig2dec_binary=None, image_maximum_buffer_size=cap,
    ):
        try:
            reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        except PdfReadError as exc:
            raise LoaderError(f"could not read PDF ({_short(exc)}): is it damaged?") from None
        if reader.is_encrypted:
            try:  # many "encrypted" PDFs only restrict printing and open with an empty password
                ok = reader.decrypt("")
            except Exception:
                ok = 0
            if not ok:
                raise LoaderError("PDF is encrypted with a password: save an unencrypted copy and add that")
        meta: dict = {}
        try:
            info = reader.metadata
            title = pdf_title(str(info.title)) if info and info.title else None
            if title:
                meta["title"] = title
        except (FileNotDecryptedError, PdfReadError, Exception):
            pass
        sections = []
        pages = reader.pages
        meta["pages"] = len(pages)
        for number, page in enumerate(pages, start=1):
            deadline.check()
            sections.append(Section(page.extract_text() or "", page=number))
        deadline.check()
    return sections, meta


# --- e-mail ----------------------------------------------------------------
def _load_eml(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    msg = email.message_from_bytes(data, policy=email.policy.default)
    subject = str(msg.get("subject", "") or "").strip()
    if not subject and not msg.get("from") and not msg.get_payload():
        raise LoaderError("not an e-mail message (no headers or body)")
    header_lines = [f"{h}: {msg[h]}" for h in ("Subject", "From", "To", "Date") if msg.get(h)]
    meta: dict = {"title": subject or None, "from": str(msg.get("from", "") or ""), "date": str(msg.get("date", "") or "")}
    body_part = msg.get_body(preferencelist=("plain", "html"))
    body = ""
    if body_part is not None:
        content = body_part.get_content()
        if body_part.get_content_type() == "text/html":
            body = "\n".join(s.text for s in _load_html(content.encode("utf-8"), limits, depth)[0])
        else:
            body = content
    sections = [Section("\n".join(header_lines) + "\n\n" + body, heading=subject or None)]
    attachments = []
    for part in msg.iter_attachments():
        name = part.get_filename() or ""
        kind = detect_kind(name, part.get_content_type())
        if kind is None or depth >= limits.max_attachment_depth:
            continue
        payload = part.get_payload(decode=True) or b""
        if not name or Path(name).suffix.lower() not in KINDS:
            name = f"attachment{'.' + kind if kind != 'txt' else '.txt'}"
        try:
            loaded = load_bytes(payload, name, limits, depth + 1)
        except LoaderError as exc:
            attachments.append({"name": name, "error": str(exc)})
            continue
        attachments.append({"name": name, "kind": loaded.kind})
        for s in loaded.sections:
            label = f"Attachment {name}" + (f" - {s.heading}" if s.heading else "")
            sections.append(Section(s.text, page=s.page, heading=label))
    meta["attachments"] = attachments
    return sections, meta


def _office(kind: str) -> Callable[[bytes, LoaderLimits, int], tuple[list[Section], dict]]:
    """The loader of an office kind, from loaders_office (imported on first use: it imports this module)."""
    def load(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
        from edge_agent.rag.loaders_office import LOADERS

        return LOADERS[kind](data, limits, depth)
    return load


_LOADERS: dict[str, Callable[[bytes, LoaderLimits, int], tuple[list[Section], dict]]] = {
    "txt": _load_txt, "md": _load_md, "html": _load_html, "pdf": _load_pdf, "eml": _load_eml, "csv": _load_csv,
    **{kind: _office(kind) for kind in ("docx", "xlsx", "pptx", "odt", "ods", "odp", "rtf")},
}
