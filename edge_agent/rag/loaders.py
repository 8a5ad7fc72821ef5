"""Document loaders: bytes of one file -> sections of text with their page or heading.

Supported: .txt, .md, .html/.htm, .pdf, .eml, .csv here; the office formats (.docx, .xlsx, .pptx,
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


# --- html ------------------------------------------------------------------
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_PARAGRAPHS = {"p", "div", "pre", "blockquote", "section", "article", "table", "ul", "ol", "dl"}  # start a paragraph
_LINES = {"li", "tr", "br", "td", "th", "dd", "dt"}  # start a line
_SKIP_TYPES = ("Comment", "Doctype", "Declaration", "ProcessingInstruction", "CData")
# Page chrome, dropped before the text is read (the idea of readability and jusText, kept conservative for
# documents, where cross-references are content): what the page itself calls navigation (<nav>, an ARIA role, a
# class or id word: DocBook's navheader/toc, Sphinx's toctree, Word's MsoToc1, MediaWiki's toc), the page's own
# <header>/<footer> (not an article's; a header's heading stays), and a block of several links that is mostly
# link text, where a link counts when it leads to another page or to a place on this one (a menu, a table of
# contents, a prev/next bar). A link to a definition (#os.stat) or into another page, or one that prints its URL,
# is content; so is any block that holds most of the page's words outside links, whatever its class says. The
# density bars were set on the HTML docs Debian installs (Python, Node, Valgrind, libffi, libxslt, texinfo
# manuals): their menus and tables of contents lie at 0.7-1.0, their link-rich prose, parameter lists and data
# tables at 0.5-0.6, one of Node's sentences at 0.77. Python's contents.html, one table of contents, keeps its title.
_CHROME_ROLES = {"navigation", "banner", "contentinfo", "search", "menubar", "doc-toc"}
_CHROME_WORDS = {"nav", "navbar", "navbox", "navheader", "navfooter", "navigation", "navpath", "toc", "toctree",
                 "breadcrumb", "breadcrumbs", "pagination", "pager", "editsection", "skiplink"}
_INLINE = {"a", "abbr", "b", "bdi", "bdo", "big", "cite", "code", "dfn", "em", "font", "i", "img", "kbd", "label",
           "mark", "q", "s", "samp", "small", "span", "strike", "strong", "sub", "sup", "time", "tt", "u", "var",
           *_HEADINGS}
_SECTIONING = {"article", "aside", "main", "nav", "section"}  # a <header>/<footer> inside one of these is content
_LINK_BLOCKS = {"div", "section", "aside", "ul", "ol", "dl", "table", "menu", "form", "center", "p"}
_LINK_DENSITY = 0.7  # share of a block's text in navigating links that makes it navigation (with 3 links or more)
_LINK_DENSITY_PROSE = 0.9  # the same for a <p>: prose unless nearly all of it is links
_URL_TEXT = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|www\.|mailto:)\S*$|^\S+@\S+\.\w+$", re.I)
_TEXT, _LINK_TEXT, _LINKS, _HEADS, _ANY_LINK_TEXT = range(5)


def _words(value: Any) -> list[str]:
    """The words of a class or id ("toc-macro", "MsoToc1", "topNav"), lower-case."""
    value = " ".join(value) if isinstance(value, list) else str(value or "")
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", value)]


def _anchors(body: Any) -> set[str]:
    """The ids (and old-style names) on this page that a link may lead to, less those of a term's definition
    (Sphinx's <dt id="os.stat">): a link there is a cross-reference, not navigation."""
    terms = {id(el) for dt in body.find_all("dt") for el in (dt, *dt.find_all(True))}
    return {str(v) for el in body.find_all(True) if id(el) not in terms for v in (el.get("id"), el.get("name")) if v}


def _navigates(a: Any, anchors: set[str]) -> bool:
    """Whether a link leads somewhere to read rather than to a definition: another page, or a place on this one
    (DocBook names its own file: toc.html#part). A printed URL, an address or a link into another page is content."""
    href = str(a.get("href") or "").strip()
    if not href or _URL_TEXT.match(a.get_text().strip()) or href.lower().startswith(("mailto:", "tel:")):
        return False
    fragment = href.partition("#")[2]
    return not fragment or fragment == "top" or fragment in anchors


def _text_stats(body: Any) -> dict[int, list[int]]:
    """Per element id: [text chars, navigating-link text chars, navigating links, headings, any link's text chars],
    in one pass over the tree (in reverse document order an element's children come before it)."""
    anchors = _anchors(body)
    stats: dict[int, list[int]] = {}
    for el in reversed(list(body.descendants)):
        up = stats.setdefault(id(el.parent), [0, 0, 0, 0, 0])
        if el.name is None:
            if type(el).__name__ not in _SKIP_TYPES:
                up[_TEXT] += len("".join(str(el).split()))
            continue
        own = stats.setdefault(id(el), [0, 0, 0, 0, 0])
        if el.name == "a" and el.get("href"):
            own[_ANY_LINK_TEXT] = own[_TEXT]
            if own[_TEXT] and _navigates(el, anchors):
                own[_LINK_TEXT], own[_LINKS] = own[_TEXT], 1
        elif el.name in _HEADINGS:
            own[_HEADS] = 1
        for i, n in enumerate(own):
            up[i] += n
    return stats


def _is_chrome(el: Any, stats: dict[int, list[int]], page_words: int) -> bool:
    text, link_text, links, headings, any_link_text = stats.get(id(el), (0, 0, 0, 0, 0))
    if text - any_link_text > page_words / 2:  # most of the page's words outside links: content, whatever its class
        return False
    name = el.name
    if name == "nav" or str(el.get("role") or "").strip().lower() in _CHROME_ROLES:
        return True
    if (name in ("header", "footer") or name == "div" and "footer" in _words(el.get("class")) + _words(el.get("id"))) \
            and not any(p.name in _SECTIONING for p in el.parents):  # (Sphinx's <div class="footer">: the copyright)
        return not (name == "header" and headings)  # a page header with the page's title: its parts are judged
    if name not in _INLINE and _CHROME_WORDS.intersection(_words(el.get("class")) + _words(el.get("id"))):
        return True  # (not a link or a heading: docutils' headings are links classed toc-backref)
    # a block of links; one with a heading of its own is a section: its parts are judged one by one
    density = _LINK_DENSITY_PROSE if name == "p" else _LINK_DENSITY
    return name in _LINK_BLOCKS and not headings and links >= 3 and link_text >= density * text


def _drop_page_chrome(body: Any) -> None:
    """Remove navigation, the page's header and footer, tables of contents and link blocks from `body` (see
    _CHROME_WORDS); a page that is nothing but links (a link list, a site map) keeps them all."""
    stats = _text_stats(body)
    total = stats.get(id(body), [0, 0, 0, 0, 0])
    chrome, todo = [], [body]
    while todo:
        for child in (c for c in todo.pop().children if c.name):
            (chrome if _is_chrome(child, stats, total[_TEXT] - total[_ANY_LINK_TEXT]) else todo).append(child)
    if sum(stats.get(id(el), [0])[_TEXT] for el in chrome) < total[_TEXT]:
        for el in chrome:
            el.decompose()


_CELL_PARAGRAPHS = {"p", "li", "dt", "dd", "blockquote"}
_CELL_LAYOUT = {"pre", "table", *_HEADINGS}


def _is_data_row(tr: Any) -> bool:
    """Whether a table row reads as one line of cells: no cell holds a heading, a table, preformatted text or more
    than one paragraph (a layout table's row, a DocBook Q and A, is read as blocks instead)."""
    for cell in tr.children:
        if cell.name in ("td", "th"):
            blocks = [el.name for el in cell.descendants if el.name in _CELL_PARAGRAPHS or el.name in _CELL_LAYOUT]
            if len(blocks) > 1 or _CELL_LAYOUT.intersection(blocks):
                return False
    return True


def _last_descendant(el: Any) -> Any:
    while getattr(el, "contents", None):
        el = el.contents[-1]
    return el


FIELD_VALUE_CHARS = 200  # a <dd> this short, of one paragraph, under a <dt> ending in ":" is that field's value


def _field_value(dd: Any) -> bool:
    """Whether a <dd> is the value of a field ("Author:" / "Gordon McMillan" in a Sphinx or docutils field list, "Datum:"
    / "3 maart" in a page's metadata): its <dt> ends in ":", and it is short and one paragraph. It is read on the
    field's line ("Author: Gordon McMillan"), as a header line, not as a paragraph of its own."""
    dt = dd.find_previous_sibling(True)
    if dt is None or dt.name != "dt" or not dt.get_text(" ", strip=True).endswith(":"):
        return False
    value = dd.get_text(" ", strip=True)
    blocks = [el for el in dd.find_all(True) if el.name in _PARAGRAPHS or el.name in _LINES or el.name in _HEADINGS]
    return 0 < len(value) <= FIELD_VALUE_CHARS and len(blocks) <= 1 and all(b.name == "p" for b in blocks)


def _load_html(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "svg"]):
        tag.decompose()
    for a in soup.find_all("a", href=True):  # a heading's permalink (Sphinx's and MkDocs' "¶", "#"): not text
        if a["href"].startswith("#") and a.get_text(strip=True) in ("¶", "§", "#", "🔗"):
            a.decompose()
    meta = {}
    if soup.title and soup.title.get_text(strip=True):
        meta["title"] = soup.title.get_text(strip=True)
    if soup.head:
        soup.head.decompose()
    body = soup.body or soup
    _drop_page_chrome(body)
    sections: list[Section] = []
    heading: str | None = None
    buf: list[str] = []
    bare = True  # nothing under the current heading yet
    row, row_end, cells = None, None, 0  # a data row being read as one line: its last node, its cells so far
    row_done = 0  # where in buf the last row ended
    field_end = None  # the last node of a field's value being read on its field's line (_field_value)
    for el in body.descendants:
        name = getattr(el, "name", None)
        if name in _HEADINGS:
            text = " ".join(el.get_text(" ").split())
            if text:
                if bare:  # nothing under the previous heading (a chapter title before its first section): it
                    buf.append(f"{text}\n\n")  # leads this section instead of being a chunk without content
                else:
                    sections.append(Section("".join(buf), heading=heading))
                    buf = [f"{text}\n\n"]
                heading, bare = text, True
                if name == "h1" and "title" not in meta:
                    meta["title"] = text
        elif name is None:
            outer = {p.name for p in el.parents}
            if type(el).__name__ not in _SKIP_TYPES and not outer & _HEADINGS:
                # HTML's white space: a line break in the source is a space, except inside <pre>
                buf.append(str(el) if "pre" in outer else re.sub(r"\s+", " ", str(el)))
                bare = bare and not el.strip()
        elif row is not None:  # inside a data row: cells joined by " | " (as the DOCX loader does), blocks by a space
            if name in ("td", "th") and el.parent is row and el.get_text(strip=True):
                buf.append(" | " if cells else "")
                cells += 1
            elif name in _PARAGRAPHS or name in _LINES:
                buf.append(" ")
        elif field_end is not None:  # inside a field's value: on the field's line
            if name in _PARAGRAPHS or name in _LINES:
                buf.append(" ")
        elif name == "dd" and _field_value(el):
            field_end = _last_descendant(el)
            buf.append(" ")
        elif name == "tr" and _is_data_row(el):
            row, row_end, cells = el, _last_descendant(el), 0
            buf.append("" if "".join(buf[row_done:]).isspace() else "\n")  # one row a line, no blank line between
        elif name in _PARAGRAPHS:
            buf.append("\n\n")
        elif name in _LINES:
            buf.append("\n")
        if el is row_end:
            row, row_end = None, None
            buf.append("\n")
            row_done = len(buf) - 1
        if el is field_end:
            field_end = None
            buf.append("\n")
    sections.append(Section("".join(buf), heading=heading))
    for s in sections:
        s.text = re.sub(r"[ \t]*\n[ \t]*", "\n", re.sub(r"[ \t\xa0]+", " ", s.text))
    return sections, meta


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
