"""Real office files built in tests with the libraries that write them: openpyxl and XlsxWriter (.xlsx),
python-pptx (.pptx), odfpy (.odt, .ods, .odp); an RTF is text."""
from __future__ import annotations

import io
from typing import Any


def make_xlsx(sheets: dict[str, list[list[Any]]], hidden: tuple[str, ...] = (), formats: dict[str, str] | None = None,
              title: str | None = None) -> bytes:
    """A workbook with openpyxl: sheet name -> rows; `formats` sets a cell's number format by its address."""
    import openpyxl

    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
        if name in hidden:
            ws.sheet_state = "hidden"
        for address, fmt in (formats or {}).items():
            ws[address].number_format = fmt
    if title:
        wb.properties.title = title
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


def make_xlsx_with_formulas(rows: list[list[Any]], formulas: dict[str, tuple[str, Any]], fmt: str | None = None) -> bytes:
    """A one-sheet workbook with XlsxWriter, which stores a formula's last value as Excel does (openpyxl stores
    none): `formulas` maps an address to (formula, value); `fmt` is their number format."""
    import xlsxwriter

    out = io.BytesIO()
    wb = xlsxwriter.Workbook(out, {"in_memory": True})
    ws = wb.add_worksheet("Begroting")
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            ws.write(r, c, value)
    style = wb.add_format({"num_format": fmt}) if fmt else None
    for address, (formula, value) in formulas.items():
        ws.write_formula(address, formula, style, value)
    wb.close()
    return out.getvalue()


def make_pptx(slides: list[dict], title: str | None = None) -> bytes:
    """A deck with python-pptx: each slide a dict with title, bullets (list), table (rows), notes."""
    import pptx
    from pptx.util import Inches

    prs = pptx.Presentation()
    if title:
        prs.core_properties.title = title
    for spec in slides:
        slide = prs.slides.add_slide(prs.slide_layouts[1 if spec.get("bullets") else 5])  # title+content, title only
        slide.shapes.title.text = spec.get("title", "")
        if spec.get("bullets"):
            body = slide.placeholders[1].text_frame
            body.text = spec["bullets"][0]
            for line in spec["bullets"][1:]:
                body.add_paragraph().text = line
        if spec.get("table"):
            rows = spec["table"]
            shape = slide.shapes.add_table(len(rows), len(rows[0]), Inches(1), Inches(2), Inches(6), Inches(2))
            for r, row in enumerate(rows):
                for c, value in enumerate(row):
                    shape.table.cell(r, c).text = value
        if spec.get("notes"):
            slide.notes_slide.notes_text_frame.text = spec["notes"]
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()


def _save(doc: Any) -> bytes:
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def make_odt(blocks: list[tuple[str, str]], title: str | None = None) -> bytes:
    """An ODT with odfpy from (style, text) pairs: 'h1'/'h2' headings, 'p' paragraphs, 'table' a row "a|b|c"."""
    from odf import dc, table, text
    from odf.opendocument import OpenDocumentText

    doc = OpenDocumentText()
    if title:
        doc.meta.addElement(dc.Title(text=title))
    grid = None
    for style, value in blocks:
        if style == "table":
            if grid is None:
                grid = table.Table(name="Tabel1")
                doc.text.addElement(grid)
            tr = table.TableRow()
            for cell in value.split("|"):
                tc = table.TableCell()
                tc.addElement(text.P(text=cell))
                tr.addElement(tc)
            grid.addElement(tr)
            continue
        grid = None
        if style.startswith("h"):
            doc.text.addElement(text.H(outlinelevel=int(style[1:]), text=value))
        else:
            doc.text.addElement(text.P(text=value))
    return _save(doc)


def make_ods(sheets: dict[str, list[list[Any]]], hidden: tuple[str, ...] = ()) -> bytes:
    """An ODS with odfpy: sheet name -> rows of cells; a cell is a string, or (value, shown text) for a number
    as a Dutch LibreOffice shows it (float 1250 shown as "1.250,00"); a hidden sheet has display false."""
    from odf import style, table, text
    from odf.opendocument import OpenDocumentSpreadsheet

    doc = OpenDocumentSpreadsheet()
    hide = style.Style(name="ta-hidden", family="table")
    hide.addElement(style.TableProperties(display="false"))
    doc.automaticstyles.addElement(hide)
    for name, rows in sheets.items():
        sheet = table.Table(name=name, stylename=hide if name in hidden else None) if name in hidden else table.Table(name=name)
        for row in rows:
            tr = table.TableRow()
            for cell in row:
                if isinstance(cell, tuple):
                    tc = table.TableCell(valuetype="float", value=str(cell[0]))
                    tc.addElement(text.P(text=cell[1]))
                elif cell in ("", None):
                    tc = table.TableCell()
                else:
                    tc = table.TableCell(valuetype="string")
                    tc.addElement(text.P(text=str(cell)))
                tr.addElement(tc)
            sheet.addElement(tr)
        doc.spreadsheet.addElement(sheet)
    return _save(doc)


def make_odp(slides: list[dict]) -> bytes:
    """An ODP with odfpy: each slide a dict with title, bullets (list) and notes."""
    from odf import draw, presentation, style, text
    from odf.namespaces import PRESENTATIONNS
    from odf.opendocument import OpenDocumentPresentation

    def frame_of(kind: str, y: str) -> Any:  # odfpy sets presentation:class only as a qualified attribute
        frame = draw.Frame(width="20cm", height="3cm", x="1cm", y=y)
        frame.setAttrNS(PRESENTATIONNS, "class", kind)
        return frame

    doc = OpenDocumentPresentation()
    layout = style.PageLayout(name="pl")
    doc.automaticstyles.addElement(layout)
    master = style.MasterPage(name="Standaard", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    for n, spec in enumerate(slides, start=1):
        page = draw.Page(name=f"dia{n}", masterpagename=master)
        doc.presentation.addElement(page)
        frame = frame_of("title", "1cm")
        box = draw.TextBox()
        box.addElement(text.P(text=spec.get("title", "")))
        frame.addElement(box)
        page.addElement(frame)
        if spec.get("bullets"):
            frame = frame_of("outline", "5cm")
            box = draw.TextBox()
            for line in spec["bullets"]:
                box.addElement(text.P(text=line))
            frame.addElement(box)
            page.addElement(frame)
        if spec.get("notes"):
            notes = presentation.Notes()
            frame = frame_of("notes", "15cm")
            box = draw.TextBox()
            box.addElement(text.P(text=spec["notes"]))
            frame.addElement(box)
            notes.addElement(frame)
            page.addElement(notes)
    return _save(doc)


def make_rtf(paragraphs: list[str]) -> bytes:
    """An RTF in code page 1252 (as Word and WordPad write it): accents as \\'xx escapes."""
    def escape(s: str) -> str:
        return "".join(c if ord(c) < 128 and c not in "\\{}" else f"\\'{c.encode('cp1252')[0]:02x}" for c in s)

    body = "".join(f"\\pard {escape(p)}\\par\n" for p in paragraphs)
    return ("{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0 Calibri;}}\n" + body + "}").encode("ascii")
