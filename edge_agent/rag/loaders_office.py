"""Office document loaders: Office Open XML (.docx, .xlsx, .pptx), OpenDocument (.odt, .ods, .odp) and RTF.

Each turns the bytes of one file into Sections as loaders.py's loaders do. A zip package is checked before
any parser sees it (open_package): a zip bomb, a password-protected file, an old binary Office file and one
Office type named as another (a .docx renamed .xlsx) each raise LoaderError saying what to do.

Sheets read as a CSV does (loaders.row_line): a section per visible sheet, headed by its name, a row a line of
"Header: value" pairs, empty cells and hidden sheets left out, a formula as the value it last showed. Slides
are "Slide N: title" sections with their notes; an ODT's headings start sections as a DOCX's do.

XML from a file is parsed safely: openpyxl uses defusedxml (a dependency for that), python-docx and python-pptx
parse with lxml with entities off, and OpenDocument's XML is read here with defusedxml, a sheet's rows as a
stream. odfpy was not used to read: it builds a DOM (on a 5,000 x 8 sheet 3.2 s and ~170 MB against 0.15 s and
14 MB streaming) and has no wheel for the offline bundle; the tests use it to write files.

A change in what a loader returns for the same bytes: bump its kind in reader_version.py (as loaders.py says).
"""
from __future__ import annotations

import datetime as dt
import functools
import io
import re
import zipfile
from typing import Any, Callable, Iterable, Iterator

from edge_agent.rag import language
from edge_agent.rag.loaders import Deadline, LoaderError, LoaderLimits, Section, row_line

# --- packages --------------------------------------------------------------
_NAMES = {"docx": "a Word document", "xlsx": "an Excel workbook", "pptx": "a PowerPoint presentation",
          "odt": "an OpenDocument text", "ods": "an OpenDocument spreadsheet", "odp": "an OpenDocument presentation"}
_MAIN_TYPES = (  # the main part's content type in [Content_Types].xml -> the kind (templates and macro files too)
    ("wordprocessingml.", "docx"), ("ms-word.", "docx"), ("spreadsheetml.", "xlsx"), ("ms-excel.", "xlsx"),
    ("presentationml.", "pptx"), ("ms-powerpoint.", "pptx"),
)
_MAIN_PARTS = (("word/document.xml", "docx"), ("xl/workbook.xml", "xlsx"), ("ppt/presentation.xml", "pptx"))
_ODF_MIMETYPES = {"text": "odt", "spreadsheet": "ods", "presentation": "odp",
                  "text-template": "odt", "spreadsheet-template": "ods", "presentation-template": "odp"}
_OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an OLE compound file: an old .doc/.xls/.ppt, or an encrypted OOXML file
_PASSWORD = "is protected with a password: save a copy without the password (File > Info, or Save As) and add that"


def open_package(data: bytes, kind: str, limits: LoaderLimits) -> zipfile.ZipFile:
    """The zip package of an office file of `kind` after checking it; raises LoaderError for a zip bomb (too many
    parts, too big or too compressed unpacked), a password-protected file, an old binary Office file, damage, or
    a package of another Office type."""
    what = kind.upper()
    if data.startswith(_OLE):  # Office encrypts an OOXML file into an OLE container holding an EncryptedPackage stream
        if "EncryptedPackage".encode("utf-16-le") in data:
            raise LoaderError(f"{what} file {_PASSWORD}")
        raise LoaderError(f"not a {what} file: it is an old binary Office file (.doc, .xls or .ppt): open it and save it as .{kind}")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, EOFError):
        raise LoaderError(f"not a valid {what} file (its zip package cannot be read): is it damaged?") from None
    if len(infos) > 10_000:
        raise LoaderError(f"{what} has {len(infos)} parts, refusing a possible zip bomb")
    total = sum(i.file_size for i in infos)
    packed = max(1, sum(i.compress_size for i in infos))
    if total > limits.max_uncompressed_bytes:
        raise LoaderError(f"{what} would expand to {total} bytes, over the {limits.max_uncompressed_bytes}-byte limit (zip bomb?)")
    if total > 1_000_000 and total / packed > limits.max_compression_ratio:
        raise LoaderError(f"{what} compression ratio {total / packed:.0f}:1 is over {limits.max_compression_ratio:g}:1 (zip bomb?)")
    real = package_kind(zf)
    if real is None:
        raise LoaderError(f"not a {what} file: its zip package holds no Office document: is it damaged, or another kind of zip?")
    if real != kind:
        raise LoaderError(f"not a {what} file: it is {_NAMES[real]}: give it the .{real} extension")
    if kind in _ODF_KINDS and b"encryption-data" in _member(zf, "META-INF/manifest.xml"):
        raise LoaderError(f"{what} file {_PASSWORD}")
    return zf


def package_kind(zf: zipfile.ZipFile) -> str | None:
    """The Office kind of a zip package (docx, xlsx, pptx, odt, ods, odp) from its declared types, else None."""
    names = set(zf.namelist())
    if "mimetype" in names:
        mime = _member(zf, "mimetype", 200).decode("ascii", "replace").strip()
        return _ODF_MIMETYPES.get(mime.removeprefix("application/vnd.oasis.opendocument."))
    types = _member(zf, "[Content_Types].xml").decode("utf-8", "replace")
    for mark in re.findall(r'ContentType="application/vnd\.(?:openxmlformats-officedocument\.)?([^"]+?)\.main\+xml"', types):
        for prefix, kind in _MAIN_TYPES:
            if mark.startswith(prefix):
                return kind
    return next((kind for part, kind in _MAIN_PARTS if part in names), None)


def _member(zf: zipfile.ZipFile, name: str, cap: int = 1 << 20) -> bytes:
    """The first `cap` bytes of a part, or b"" when there is none."""
    try:
        with zf.open(name) as f:
            return f.read(cap)
    except KeyError:
        return b""


# --- values in cells -------------------------------------------------------
# languages that write 1.250,00 (or 1 250,00): a workbook in one gets its numbers so, as its authors saw them
_DECIMAL_COMMA = frozenset({"nl", "de", "fr", "es", "it", "pt", "da", "sv", "no", "nb", "fi", "pl", "cs", "sk", "ru",
                            "uk", "tr", "id", "ro", "hu", "el", "bg", "hr", "sl", "et", "lv", "lt", "is", "af"})
_SWAP = str.maketrans(",.", ".,")
_LITERALS = re.compile(r'"[^"]*"|\[[^\]]*\]|\\.|_.|\*.')  # quoted text, [$€-413] and [Red], escapes, padding


def number_text(value: float, fmt: str | None, comma: bool) -> str:
    """A number as its cell shows it, near enough: the format's decimals, thousands grouping and percent sign
    (OOXML writes formats with "," for grouping and "." for decimals whatever the locale); with `comma` in
    the Dutch way (1.250,00)."""
    shape = _number_shape(fmt or "General")
    if shape is None:
        text = str(value) if isinstance(value, int) else f"{value:.15g}"
        return text.replace(".", ",") if comma and "e" not in text else text
    spec, percent = shape
    text = format(value * 100 if percent else value, spec) + ("%" if percent else "")
    return text.translate(_SWAP) if comma else text


@functools.lru_cache(maxsize=256)
def _number_shape(fmt: str) -> tuple[str, bool] | None:
    """A number format's Python format spec and whether it is a percentage; None for General (and scientific)."""
    core = _LITERALS.sub("", fmt.split(";")[0])
    if core.strip().lower() in ("general", "") or not re.search(r"[0#?]", core) or re.search(r"[eE][+-]", core):
        return None
    decimals = len(m.group(1)) if (m := re.search(r"\.([0#?]+)", core)) else 0
    grouped = bool(re.search(r"[0#?],[0#?]", core))
    return f"{',' if grouped else ''}.{decimals}f", "%" in core


def _date_text(value: Any) -> str:
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0):
            return value.date().isoformat()
        return value.strftime("%Y-%m-%d %H:%M:%S" if value.second else "%Y-%m-%d %H:%M")
    if isinstance(value, dt.time):
        return value.strftime("%H:%M:%S" if value.second else "%H:%M")
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def _one_line(text: str) -> str:
    return " ".join(text.split())


_NUMERIC = re.compile(r"^[-+]?[\d.,\s%€$£]+$")


class SheetText:
    """A sheet's text, made row by row (add) from the texts of its cells: lines above the table (a title) as they
    are, the first row of two or more cells, mostly words, as the header, and each row after it as
    loaders.row_line makes it; a table whose first row is mostly numbers has no header, and its rows are cells
    joined by " | ". `counted` is shared by the sheets of a workbook: add raises LoaderError past max_csv_rows
    rows in all, or past the time budget."""

    def __init__(self, limits: LoaderLimits, deadline: Deadline, counted: list[int]):
        self.limits, self.deadline, self.counted = limits, deadline, counted
        self.header: list[str] | None = None
        self.lines: list[str] = []
        self.seen = 0

    def add(self, row: list[str]) -> None:
        self.seen += 1
        if self.seen % 1000 == 0:  # empty rows too: a sheet can hold a million of them
            self.deadline.check()
        filled = [c for c in row if c]
        if not filled:
            return
        self.counted[0] += 1
        if self.counted[0] > self.limits.max_csv_rows:
            raise LoaderError(f"the workbook has more than {self.limits.max_csv_rows} rows: split it")
        if self.header is None and len(filled) >= 2:
            self.header = row if sum(bool(_NUMERIC.match(c)) for c in filled) * 2 < len(filled) else []
            if self.header:
                return
        self.lines.append(row_line(self.header, row) if self.header else " | ".join(filled))

    def text(self) -> str:
        if self.header and not self.lines:  # only a header row: it is the content
            return "; ".join(c for c in self.header if c)
        return "\n\n".join(self.lines)  # a row a paragraph, as the CSV loader's


def _decimal_comma(sample: str) -> bool:
    return bool(sample.strip()) and language.detect(sample) in _DECIMAL_COMMA


# --- xlsx ------------------------------------------------------------------
def _load_xlsx(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    open_package(data, "xlsx", limits)
    import openpyxl

    deadline = Deadline(limits.time_budget_s, "reading the XLSX")
    # read_only streams each sheet's rows; data_only gives a formula the value it last showed (what Excel stored)
    wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True, keep_links=False)
    try:
        meta: dict = {}
        if wb.properties is not None and (wb.properties.title or "").strip():
            meta["title"] = wb.properties.title.strip()
        sections: list[Section] = []
        counted = [0]
        for ws in wb.worksheets:
            if getattr(ws, "sheet_state", "visible") != "visible":
                continue
            if hasattr(ws, "reset_dimensions"):  # rows as long as their cells, not as a (maybe bogus) declared size
                ws.reset_dimensions()
            sheet = SheetText(limits, deadline, counted)
            for row in _xlsx_rows(ws):
                sheet.add(row)
            sections.append(Section(sheet.text(), heading=ws.title))
            deadline.check()
    finally:
        wb.close()
    return sections, meta


def _xlsx_rows(ws: Any, sample_rows: int = 50) -> Iterator[list[str]]:
    """A sheet's rows as cell texts; numbers in the Dutch way when the words of its first rows are Dutch (or
    another language that writes a decimal comma)."""
    rows = ws.iter_rows()
    head = []
    for row in rows:
        head.append(row)
        if len(head) >= sample_rows:
            break
    words = [ws.title] + [c.value for r in head for c in r if isinstance(c.value, str)]
    comma = _decimal_comma(" ".join(words)[:2000])
    for row in head:
        yield [_xlsx_cell(c, comma) for c in row]
    for row in rows:
        yield [_xlsx_cell(c, comma) for c in row]


def _xlsx_cell(cell: Any, comma: bool) -> str:
    value = cell.value
    if value is None:
        return ""
    if isinstance(value, str):
        return _one_line(value)
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return number_text(value, getattr(cell, "number_format", None), comma)
    return _date_text(value)


# --- pptx ------------------------------------------------------------------
def _load_pptx(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    open_package(data, "pptx", limits)
    import pptx

    deadline = Deadline(limits.time_budget_s, "reading the PPTX")
    prs = pptx.Presentation(io.BytesIO(data))
    meta: dict = {}
    title = (prs.core_properties.title or "").strip()
    if title and title != "PowerPoint Presentation":  # python-pptx's made-up title for a file without one
        meta["title"] = title
    sections = []
    for n, slide in enumerate(prs.slides, start=1):
        deadline.check()
        title_shape = slide.shapes.title
        title = _one_line(title_shape.text_frame.text) if title_shape is not None and title_shape.has_text_frame else ""
        heading = f"Slide {n}: {title}" if title else f"Slide {n}"
        lines = [heading]
        for shape in _shapes(slide.shapes):
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            if shape.has_text_frame and shape.text_frame.text.strip():
                lines.append(shape.text_frame.text)
            elif getattr(shape, "has_table", False):
                lines.extend(_table_line(cell.text for cell in row.cells) for row in shape.table.rows)
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                lines.append(f"Notes: {notes}")
        sections.append(Section("\n".join(lines).replace("\v", "\n"), heading=heading))
    return sections, meta


def _shapes(shapes: Any) -> Iterator[Any]:
    """The shapes of a slide in order, those inside groups included."""
    for shape in shapes:
        if hasattr(shape, "shapes"):  # a group
            yield from _shapes(shape.shapes)
        else:
            yield shape


def _table_line(cells: Iterable[str]) -> str:
    """A table row as one line, cells joined by " | " as the DOCX and HTML loaders do (a merged cell once)."""
    out: list[str] = []
    for cell in cells:
        text = _one_line(cell)
        if text and (not out or out[-1] != text):
            out.append(text)
    return " | ".join(out)


# --- docx ------------------------------------------------------------------
def _load_docx(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    open_package(data, "docx", limits)
    import docx
    from docx.oxml.ns import qn

    deadline = Deadline(limits.time_budget_s, "reading the DOCX")
    document = docx.Document(io.BytesIO(data))
    meta: dict = {}
    try:
        from docx.opc.constants import RELATIONSHIP_TYPE as RT

        # only a title the file has: for one without core properties python-docx makes some up, titled "Word Document"
        document.part.package.part_related_by(RT.CORE_PROPERTIES)
        if document.core_properties.title:
            meta["title"] = document.core_properties.title
    except Exception:
        pass
    sections: list[Section] = []
    heading: str | None = None
    buf: list[str] = []
    body = document.element.body
    for i, child in enumerate(body.iterchildren()):
        if i % 200 == 0:
            deadline.check()
        if child.tag == qn("w:p"):
            para = docx.text.paragraph.Paragraph(child, document)
            text = para.text
            style = (para.style.name if para.style is not None else "") or ""
            if style.lower().startswith("heading") or style.lower() == "title":
                if text.strip():
                    sections.append(Section("\n".join(buf), heading=heading))
                    heading, buf = text.strip(), [text.strip()]
                    if style.lower() == "title" and "title" not in meta:
                        meta["title"] = heading
                continue
            buf.append(text)
        elif child.tag == qn("w:tbl"):
            table = docx.table.Table(child, document)
            buf.extend(_table_line(cell.text for cell in row.cells) for row in table.rows)
    sections.append(Section("\n".join(buf), heading=heading))
    deadline.check()
    return sections, meta


# --- OpenDocument ----------------------------------------------------------
_ODF_KINDS = frozenset({"odt", "ods", "odp"})
_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
}


def _q(name: str) -> str:
    prefix, local = name.split(":")
    return f"{{{_NS[prefix]}}}{local}"


_P, _H, _S, _TAB, _BR = _q("text:p"), _q("text:h"), _q("text:s"), _q("text:tab"), _q("text:line-break")
_TABLE, _ROW, _CELL, _COVERED = _q("table:table"), _q("table:table-row"), _q("table:table-cell"), _q("table:covered-table-cell")
_PAGE, _NOTES = _q("draw:page"), _q("presentation:notes")
# not the document's running text: deleted text kept for change tracking, comments, generated tables of contents
_ODF_SKIP = frozenset(map(_q, ("text:tracked-changes", "office:annotation", "text:table-of-content", "text:sequence-decls",
                               "text:alphabetical-index", "text:illustration-index", "text:table-index", "office:forms")))
_MAX_COLUMNS = 16_384  # as wide as a sheet goes (LibreOffice and Excel)


def _odf_text(el: Any) -> str:
    """The text of an element as it reads: text:s is spaces, text:tab a tab, text:line-break a new line; comments
    and tracked deletions (_ODF_SKIP) left out."""
    parts: list[str] = []
    todo: list[Any] = [el]  # elements, and the text after an element (its tail), in reverse order
    while todo:
        node = todo.pop()
        if isinstance(node, str):
            parts.append(node)
        elif node.tag == _S:
            parts.append(" " * min(100, int(node.get(_q("text:c"), "1") or 1)))
        elif node.tag == _TAB:
            parts.append("\t")
        elif node.tag == _BR:
            parts.append("\n")
        elif node.tag not in _ODF_SKIP:
            parts.append(node.text or "")
            for child in reversed(node):
                todo.extend((child.tail, child) if child.tail else (child,))
    return "".join(parts)


def _odf_blocks(el: Any) -> Iterator[tuple[str, str]]:
    """("h", heading) and ("p", text) blocks of an element in document order: paragraphs, list items, table rows
    (cells joined by " | "), text in frames; tracked deletions, comments and tables of contents left out."""
    todo = [iter(el)]
    while todo:
        child = next(todo[-1], None)
        if child is None:
            todo.pop()
            continue
        if child.tag in _ODF_SKIP:
            continue
        if child.tag == _H:
            yield "h", _one_line(_odf_text(child))
        elif child.tag == _P:
            yield "p", _odf_text(child)
        elif child.tag == _TABLE:
            for row in child.iter(_ROW):
                yield "p", _table_line(_odf_text(cell) for cell in row if cell.tag == _CELL)
        else:
            todo.append(iter(child))


def _odf_parts(data: bytes, kind: str, limits: LoaderLimits) -> tuple[zipfile.ZipFile, dict]:
    zf = open_package(data, kind, limits)
    meta: dict = {}
    raw = _member(zf, "meta.xml")
    if raw:
        from defusedxml.ElementTree import fromstring

        title = fromstring(raw).find(f".//{_q('dc:title')}")
        if title is not None and (title.text or "").strip():
            meta["title"] = title.text.strip()
    return zf, meta


def _odf_body(zf: zipfile.ZipFile, kind: str) -> Any:
    from defusedxml.ElementTree import fromstring

    root = fromstring(zf.read("content.xml"))
    body = root.find(f"{_q('office:body')}/{_q('office:text' if kind == 'odt' else 'office:presentation')}")
    if body is None:
        raise LoaderError(f"{kind.upper()} file has no document body: is it damaged?")
    return body


def _load_odt(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    zf, meta = _odf_parts(data, "odt", limits)
    deadline = Deadline(limits.time_budget_s, "reading the ODT")
    sections: list[Section] = []
    heading: str | None = None
    buf: list[str] = []
    for i, (what, text) in enumerate(_odf_blocks(_odf_body(zf, "odt"))):
        if i % 200 == 0:
            deadline.check()
        if what == "h" and text:
            sections.append(Section("\n".join(buf), heading=heading))
            heading, buf = text, [text]
        elif what == "p":
            buf.append(text)
    sections.append(Section("\n".join(buf), heading=heading))
    return sections, meta


def _load_odp(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    zf, meta = _odf_parts(data, "odp", limits)
    deadline = Deadline(limits.time_budget_s, "reading the ODP")
    sections = []
    for n, page in enumerate(_odf_body(zf, "odp").iter(_PAGE), start=1):
        deadline.check()
        title, body, notes = "", [], []
        for shape in page:
            if shape.tag == _NOTES:
                notes = [t for _, t in _odf_blocks(shape) if t.strip()]
            elif not title and shape.get(_q("presentation:class")) == "title":
                title = _one_line(" ".join(t for _, t in _odf_blocks(shape)))
            else:
                body.extend(t for _, t in _odf_blocks(shape) if t.strip())
        heading = f"Slide {n}: {title}" if title else f"Slide {n}"
        lines = [heading, *body] + ([f"Notes: {chr(10).join(notes)}"] if notes else [])
        sections.append(Section("\n".join(lines), heading=heading))
    return sections, meta


def _load_ods(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    zf, meta = _odf_parts(data, "ods", limits)
    from defusedxml.ElementTree import iterparse

    deadline = Deadline(limits.time_budget_s, "reading the ODS")
    hidden_styles: set[str] = set()  # table styles with table:display="false": those of hidden sheets
    sections: list[Section] = []
    counted = [0]
    name, sheet = "", None  # the sheet being read (None: between sheets, or in a hidden one)
    depth_in_table = 0  # a table inside a cell is part of its sheet
    with zf.open("content.xml") as f:
        for event, el in iterparse(f, events=("start", "end")):
            tag = el.tag
            if tag == _TABLE:
                depth_in_table += 1 if event == "start" else -1
                if event == "start" and depth_in_table == 1:
                    name = el.get(_q("table:name")) or f"Sheet {len(sections) + 1}"
                    hidden = el.get(_q("table:style-name")) in hidden_styles
                    sheet = None if hidden else SheetText(limits, deadline, counted)
                elif event == "end" and depth_in_table == 0:
                    if sheet is not None:
                        sections.append(Section(sheet.text(), heading=name))
                    sheet = None
                    el.clear()
            elif event == "start":
                continue
            elif tag == _q("style:style") and el.get(_q("style:family")) == "table":
                props = el.find(_q("style:table-properties"))
                if props is not None and props.get(_q("table:display")) == "false":
                    hidden_styles.add(el.get(_q("style:name")))
            elif tag == _ROW and depth_in_table == 1:
                if sheet is not None:
                    cells = _ods_row(el)  # a row repeated (a block of equal rows) counts as many rows, an empty one once
                    repeat = int(el.get(_q("table:number-rows-repeated"), "1") or 1) if cells else 1
                    for _ in range(min(repeat, limits.max_csv_rows + 1)):
                        sheet.add(cells)
                el.clear()
    return sections, meta


def _ods_row(row: Any) -> list[str]:
    """The texts of a row's cells as shown (a formula's last value, a number as formatted: 1.250,00), by column;
    [] for an empty row. Repeated cells are repeated up to the widest sheet; trailing empty ones are dropped."""
    cells: list[str] = []
    empty = 0
    for cell in row:
        if cell.tag not in (_CELL, _COVERED):
            continue
        repeat = int(cell.get(_q("table:number-columns-repeated"), "1") or 1)
        text = _one_line(" ".join(t for _, t in _odf_blocks(cell)))
        if not text:  # a value with no shown text (some writers leave it out): the value itself
            text = cell.get(_q("office:date-value")) or cell.get(_q("office:value")) or cell.get(_q("office:string-value")) or ""
        if not text:
            empty += repeat
            continue
        if len(cells) + empty >= _MAX_COLUMNS:
            break
        cells.extend([""] * empty)
        cells.extend([text] * min(repeat, _MAX_COLUMNS - len(cells)))
        empty = 0
    return cells


# --- rtf -------------------------------------------------------------------
def _load_rtf(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
    if not data.lstrip().startswith(b"{\\rtf"):
        raise LoaderError("not an RTF file (it does not start with {\\rtf): give it the extension of its real type")
    from striprtf.striprtf import rtf_to_text

    # RTF is 7-bit text; striprtf decodes its \'xx escapes with the file's own code page (\ansicpg), else cp1252
    return [Section(rtf_to_text(data.decode("latin-1"), errors="replace"))], {}


Loader = Callable[[bytes, LoaderLimits, int], tuple[list[Section], dict]]


def _refusing_entities(kind: str, load: Loader) -> Loader:
    """`load`, with defusedxml's refusal of a DTD or entity as a LoaderError that names no path (its own message
    repeats the entity's system id: a file path on this server)."""
    def guarded(data: bytes, limits: LoaderLimits, depth: int) -> tuple[list[Section], dict]:
        from defusedxml import DefusedXmlException

        try:
            return load(data, limits, depth)
        except DefusedXmlException:
            raise LoaderError(f"{kind.upper()} file's XML declares entities, which Office programs never write: "
                              "refused as a possible XML entity attack") from None
    return guarded


LOADERS: dict[str, Loader] = {kind: _refusing_entities(kind, load) for kind, load in {
    "docx": _load_docx, "xlsx": _load_xlsx, "pptx": _load_pptx,
    "odt": _load_odt, "ods": _load_ods, "odp": _load_odp, "rtf": _load_rtf,
}.items()}
