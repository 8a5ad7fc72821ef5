"""Office formats (.xlsx, .pptx, .odt, .ods, .odp, .rtf) on real files written here by the libraries that write
them; through the loaders, then the real DocumentService (SQLite, FAISS, BM25, the embedding model in tmp_path);
bad files give a clear LoaderError and store nothing."""
from __future__ import annotations

import datetime as dt
import io
import zipfile

import pytest
from office_docs import make_ods, make_odp, make_odt, make_pptx, make_rtf, make_xlsx, make_xlsx_with_formulas
from rag_docs import make_docx

from edge_agent.rag.loaders import LoaderError, LoaderLimits, load_bytes

INVOICES = {
    "Facturen": [
        ["Facturen eerste kwartaal 2026"],  # a title above the table
        [],
        ["Klant", "Omschrijving", "Bedrag", "Datum", "Notitie"],
        ["Jansen Zorg BV", "Onderhoud beademingsapparatuur", 1250, dt.date(2026, 3, 1), None],
        ["Huisartsenpraktijk De Linde", "Licentie patiëntendossier", 4780.5, dt.datetime(2026, 2, 14, 9, 30), "spoed"],
    ],
    "Archief": [["Klant", "Bedrag"], ["Geheime BV", 1]],
}


def _xlsx() -> bytes:
    return make_xlsx(INVOICES, hidden=("Archief",), formats={"C4": "#,##0.00", "C5": "#,##0.00"})


def test_xlsx_sheets_read_as_csv_rows_with_dutch_amounts_and_dates():
    doc = load_bytes(_xlsx(), "facturen.xlsx")
    assert doc.kind == "xlsx" and doc.mime.endswith("spreadsheetml.sheet")
    assert [s.heading for s in doc.sections] == ["Facturen"]  # the hidden sheet is left out
    assert doc.sections[0].text == (
        "Facturen eerste kwartaal 2026\n\n"
        "Klant: Jansen Zorg BV; Omschrijving: Onderhoud beademingsapparatuur; Bedrag: 1.250,00; Datum: 2026-03-01.\n\n"
        "Klant: Huisartsenpraktijk De Linde; Omschrijving: Licentie patiëntendossier; Bedrag: 4.780,50; "
        "Datum: 2026-02-14 09:30; Notitie: spoed."
    )
    csv_doc = load_bytes(b"Klant;Bedrag\nJansen;12\nDe Vries;13\n", "f.csv")  # the same row form as the CSV loader's
    assert csv_doc.sections[0].text == "Klant: Jansen; Bedrag: 12.\n\nKlant: De Vries; Bedrag: 13."


def test_xlsx_formulas_give_their_last_values_and_english_sheets_keep_english_numbers():
    nl = load_bytes(make_xlsx_with_formulas([["Post", "Bedrag"], ["Huur", 1000], ["Energie", 250]],
                                            {"B4": ("=SUM(B2:B3)", 1250)}, fmt="#,##0.00"), "begroting.xlsx")
    assert nl.sections[0].text.split("\n\n")[-1] == "Bedrag: 1.250,00."  # the value Excel showed, not "=SUM(B2:B3)"
    en = load_bytes(make_xlsx({"Budget": [["Item", "Amount", "Share"], ["Rent of the office", 1250, 0.25]]},
                              formats={"B2": "#,##0.00", "C2": "0%"}), "budget.xlsx")
    assert en.sections[0].text == "Item: Rent of the office; Amount: 1,250.00; Share: 25%."


def test_pptx_slides_are_sections_with_titles_tables_and_notes():
    data = make_pptx([
        {"title": "Wachtlijsten 2027", "bullets": ["Fysiotherapie: zes weken", "Revalidatie: vier weken"],
         "notes": "Noem de extra avondspreekuren in Utrecht"},
        {"title": "Budget", "table": [["Post", "Bedrag"], ["Personeel", "1.250.000"]]},
    ], title="Jaarplan zorg")
    doc = load_bytes(data, "jaarplan.pptx")
    assert doc.title == "Jaarplan zorg"
    assert [(s.heading, s.text) for s in doc.sections] == [
        ("Slide 1: Wachtlijsten 2027", "Slide 1: Wachtlijsten 2027\nFysiotherapie: zes weken\nRevalidatie: vier weken\n"
                                       "Notes: Noem de extra avondspreekuren in Utrecht"),
        ("Slide 2: Budget", "Slide 2: Budget\nPost | Bedrag\nPersoneel | 1.250.000"),
    ]
    assert load_bytes(make_pptx([{"title": "Only"}]), "x.pptx").title == "x"  # python-pptx's made-up title is not used


def test_odt_headings_become_sections_and_tables_rows():
    data = make_odt([("h1", "Inleiding"), ("p", "Deze nota gaat over de zorgkosten."), ("h2", "Kosten"),
                     ("p", "De kosten stijgen."), ("table", "Post|Bedrag"), ("table", "Huur|1.250,00")], title="Zorgnota")
    doc = load_bytes(data, "nota.odt")
    assert doc.title == "Zorgnota" and doc.kind == "odt"
    assert [(s.heading, s.text) for s in doc.sections] == [
        ("Inleiding", "Inleiding\nDeze nota gaat over de zorgkosten."),
        ("Kosten", "Kosten\nDe kosten stijgen.\nPost | Bedrag\nHuur | 1.250,00"),
    ]


def test_ods_shows_numbers_as_the_sheet_did_and_skips_hidden_sheets():
    data = make_ods({"Begroting": [["Post", "Bedrag", "", "Opmerking"], ["Huur", (1250, "1.250,00"), "", "per maand"],
                                   ["", "", "", ""], ["Energie", (310.4, "310,40")]],
                     "Verborgen": [["Post", "Bedrag"], ["Geheim", (1, "1")]]}, hidden=("Verborgen",))
    doc = load_bytes(data, "begroting.ods")
    assert [(s.heading, s.text) for s in doc.sections] == [
        ("Begroting", "Post: Huur; Bedrag: 1.250,00; Opmerking: per maand.\n\nPost: Energie; Bedrag: 310,40."),
    ]


def test_odp_slides_with_titles_and_notes():
    doc = load_bytes(make_odp([{"title": "Welkom", "bullets": ["Agenda van de raad"], "notes": "Begin om negen uur"},
                               {"title": "Besluiten"}]), "raad.odp")
    assert [(s.heading, s.text) for s in doc.sections] == [
        ("Slide 1: Welkom", "Slide 1: Welkom\nAgenda van de raad\nNotes: Begin om negen uur"),
        ("Slide 2: Besluiten", "Slide 2: Besluiten"),
    ]


def test_rtf_letter_in_its_code_page():
    doc = load_bytes(make_rtf(["Geachte mevrouw Özdemir,", "Uw aanvraag voor de ketel is goedgekeurd. Met vriendelijke groet."]),
                     "brief.rtf")
    assert doc.kind == "rtf" and doc.sections[0].text == (
        "Geachte mevrouw Özdemir,\nUw aanvraag voor de ketel is goedgekeurd. Met vriendelijke groet.")
    with pytest.raises(LoaderError, match="not an RTF file"):
        load_bytes(b"Just text, named .rtf", "brief.rtf")


def _encrypted(data: bytes) -> bytes:
    from msoffcrypto.format.ooxml import OOXMLFile

    out = io.BytesIO()
    OOXMLFile(io.BytesIO(data)).encrypt("geheim", out)
    return out.getvalue()


def _encrypted_odt() -> bytes:
    """An ODT as LibreOffice saves one with a password: the manifest declares encryption-data, content.xml is ciphertext."""
    src = zipfile.ZipFile(io.BytesIO(make_odt([("p", "geheim")])))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "content.xml":
                data = bytes(range(256)) * 8
            elif info.filename == "META-INF/manifest.xml":
                entry = b'manifest:full-path="content.xml" manifest:media-type="text/xml"'
                assert entry + b"/>" in data
                data = data.replace(entry + b"/>", entry + b'><manifest:encryption-data manifest:checksum-type="SHA1/1K"/>'
                                                           b"</manifest:file-entry>")
            zf.writestr(info, data)
    return out.getvalue()


def _bomb(part: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr(part, b"<" + b"a" * (30 * 1024 * 1024))
    return out.getvalue()


@pytest.mark.parametrize("make,name,words", [
    (lambda: _encrypted(_xlsx()), "facturen.xlsx", "XLSX file is protected with a password"),
    (lambda: _encrypted(make_pptx([{"title": "x"}])), "dia.pptx", "PPTX file is protected with a password"),
    (_encrypted_odt, "nota.odt", "ODT file is protected with a password"),
    (lambda: make_docx([("p", "brief")]), "brief.xlsx", "not a XLSX file: it is a Word document: give it the .docx extension"),
    (lambda: make_ods({"A": [["a", "b"]]}), "tabel.xlsx", "it is an OpenDocument spreadsheet: give it the .ods extension"),
    (lambda: _xlsx(), "facturen.odt", "it is an Excel workbook: give it the .xlsx extension"),
    (lambda: _xlsx()[:3000], "kapot.xlsx", "damaged"),
    (lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600, "oud.xlsx", "old binary Office file"),
    (lambda: _bomb("xl/workbook.xml"), "bom.xlsx", "ratio"),
    (lambda: _bomb("content.xml"), "bom.ods", "ratio"),
])
def test_bad_office_files_give_a_clear_error(make, name, words):
    with pytest.raises(LoaderError) as e:
        load_bytes(make(), name)
    assert words in str(e.value)
    assert "Traceback" not in str(e.value) and "/" not in str(e.value).replace("File > Info", "")


def test_a_long_sheet_is_chunked_at_row_boundaries(embedder):
    """A row is a paragraph, so the chunker packs whole rows: a question matching a row finds all its cells in one
    chunk (rows joined by one new line were one long paragraph, cut at every "; " and ": ", so most chunks began
    in the middle of a row)."""
    from edge_agent.rag.chunking import TokenChunker

    rows = [["Factuurnummer", "Klant", "Omschrijving", "Bedrag"]] + [
        [f"F-{i:04d}", f"Klant {i} BV", f"onderhoud van de installatie in gebouw {i}", 100 + i] for i in range(300)]
    doc = load_bytes(make_xlsx({"Facturen": rows}), "facturen.xlsx")
    chunks = TokenChunker(embedder.tokenizer, chunk_tokens=120, overlap=20).chunk(doc.sections)
    assert len(chunks) > 20
    assert all(c.text.startswith("Factuurnummer: F-") and c.text.endswith(".") for c in chunks)


def test_a_workbook_over_the_row_limit_is_refused_whole():
    rows = [["Klant", "Bedrag"]] + [[f"klant {i}", i] for i in range(30)]
    with pytest.raises(LoaderError, match="more than 20 rows"):
        load_bytes(make_xlsx({"A": rows}), "groot.xlsx", LoaderLimits(max_csv_rows=20))
    with pytest.raises(LoaderError, match="more than 20 rows"):
        load_bytes(make_ods({"A": rows}), "groot.ods", LoaderLimits(max_csv_rows=20))


def test_office_files_are_searchable_through_the_document_service(service, docs_root):
    files = {
        "facturen.xlsx": _xlsx(),
        "jaarplan.pptx": make_pptx([{"title": "Wachtlijsten", "bullets": ["Fysiotherapie zes weken"]},
                                    {"title": "Avondspreekuur", "notes": "The evening clinic in Utrecht opens on Thursdays"}]),
        "nota.odt": make_odt([("h1", "Parkeerbeleid"), ("p", "Bezoekers parkeren gratis op het achterterrein.")]),
        "begroting.ods": make_ods({"Declaraties": [["Post", "Bedrag"], ["Kilometervergoeding", (0.23, "0,23")]]}),
        "raad.odp": make_odp([{"title": "Besluitenlijst", "notes": "Het college besluit over de nieuwe sporthal"}]),
        "brief.rtf": make_rtf(["The boiler in block D is replaced in May by Hendriks Installatie."]),
    }
    for name, data in files.items():
        (docs_root / name).write_bytes(data)
    results = service.add_path(docs_root)
    assert [(r.status, r.error) for r in results] == [("added", None)] * len(files)

    def top(query: str):
        hit = service.retrieve(query, k=1)[0]
        return hit.title, hit.location["heading"], hit.text

    title, heading, text = top("Onderhoud beademingsapparatuur 1.250,00")  # a phrase from a cell, the amount as shown
    assert (title, heading) == ("facturen", "Facturen") and "Bedrag: 1.250,00" in text
    assert top("evening clinic Utrecht Thursdays")[:2] == ("jaarplan", "Slide 2: Avondspreekuur")  # from a note
    assert top("bezoekers parkeren achterterrein")[:2] == ("nota", "Parkeerbeleid")
    assert top("Kilometervergoeding")[:2] == ("begroting", "Declaraties")
    assert top("college sporthal")[:2] == ("raad", "Slide 1: Besluitenlijst")
    assert top("boiler block D Hendriks")[0] == "brief"
    # each slide, sheet and heading is its chunks' heading, which the chunk's BM25 header is made of
    headings = {r.title: [c["heading"] for c in service.get(r.document_id)["chunks"]] for r in results}
    assert headings["jaarplan"] == ["Slide 1: Wachtlijsten", "Slide 2: Avondspreekuur"]
    assert headings["facturen"] == ["Facturen"] and headings["begroting"] == ["Declaraties"]
    assert headings["nota"] == ["Parkeerbeleid"] and headings["brief"] == [None]


def test_a_bad_office_file_is_listed_failed_and_stores_no_chunks(service, docs_root):
    (docs_root / "brief.xlsx").write_bytes(make_docx([("p", "Geachte heer")]))
    res = service.add_file(docs_root / "brief.xlsx")
    assert res.status == "failed" and "give it the .docx extension" in res.error and str(docs_root) not in res.error
    assert service.stats()["chunks"] == 0


def _with_part(data: bytes, name: str, change) -> bytes:
    """The package with one part's bytes changed."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for info in src.infolist():
            part = src.read(info.filename)
            zf.writestr(info.filename, change(part) if info.filename == name else part)
    return out.getvalue()


def _doctype(part: bytes, entities: str, use: bytes, at: bytes) -> bytes:
    """An XML part with a DOCTYPE declaring `entities` and `use` (an entity reference) put in before `at`."""
    assert at in part
    head, sep, body = part.partition(b"?>") if part.lstrip().startswith(b"<?xml") else (b"", b"", part)
    body = body.replace(at, use + at, 1)
    root = body.lstrip()[1:].split(None, 1)[0].decode()
    return head + sep + f"<!DOCTYPE {root} [{entities}]>".encode() + body


LAUGHS = '<!ENTITY a "hahahahahahahahahaha">' + "".join(
    f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))


@pytest.mark.parametrize("kind,part,at", [
    ("ods", "content.xml", b"Huur</text:p>"),
    ("odt", "content.xml", b"huur</text:p>"),
    ("xlsx", "xl/worksheets/sheet1.xml", b"Huur</t>"),  # openpyxl writes strings inline
    ("pptx", "ppt/slides/slide1.xml", b"Huur</a:t>"),
])
def test_xml_entities_neither_expand_nor_read_server_files(kind, part, at, tmp_path):
    """Billion laughs and an external entity naming a file on the server, in each format's main XML: the file is refused
    with a LoaderError, or read with the entity left out; never a 10^9-character text, never the file's content."""
    secret = tmp_path / "secret.txt"
    secret.write_text("GEHEIM-7731")
    base = {"ods": lambda: make_ods({"A": [["Post", "Bedrag"], ["Huur", "12"]]}),
            "odt": lambda: make_odt([("p", "huur")]),
            "xlsx": lambda: make_xlsx({"A": [["Post", "Bedrag"], ["Huur", 12]]}),
            "pptx": lambda: make_pptx([{"title": "Huur"}])}[kind]()
    for entities, use in ((LAUGHS, b"&i;"), (f'<!ENTITY x SYSTEM "file://{secret}">', b"&x;")):
        data = _with_part(base, part, lambda xml: _doctype(xml, entities, use, at))
        try:
            doc = load_bytes(data, f"aanval.{kind}")
        except LoaderError as e:
            assert str(tmp_path) not in str(e) and "secret" not in str(e)
            continue
        text = "\n".join(s.text for s in doc.sections)
        assert "GEHEIM" not in text and "hahahaha" not in text and len(text) < 1000


def test_an_email_attachment_in_an_office_format_is_read():
    from rag_docs import make_eml

    sheet = make_xlsx({"Rooster": [["Dag", "Dienst"], ["maandag", "nachtdienst Anna"]]})
    mime = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    doc = load_bytes(make_eml("Rooster week 12", "Zie bijlage.", [("rooster.xlsx", sheet, mime)]), "mail.eml")
    assert doc.metadata["attachments"] == [{"name": "rooster.xlsx", "kind": "xlsx"}]
    assert [(s.heading, s.text) for s in doc.sections[1:]] == [("Attachment rooster.xlsx - Rooster", "Dag: maandag; Dienst: nachtdienst Anna.")]


def test_ods_as_libreoffice_saves_it_with_repeated_rows_and_columns():
    """LibreOffice writes a sheet's unused area as repeats (1,017 empty columns a row, 1,048,560 empty rows at the end)
    and equal neighbouring cells or rows once with a count: empty repeats cost nothing, a repeated value is each cell."""
    from odf import table, text
    from odf.opendocument import OpenDocumentSpreadsheet

    doc = OpenDocumentSpreadsheet()
    sheet = table.Table(name="Rooster")

    def row(*cells, repeat=1):
        tr = table.TableRow(numberrowsrepeated=repeat) if repeat > 1 else table.TableRow()
        for value, n in cells:
            tc = table.TableCell(numbercolumnsrepeated=n) if n > 1 else table.TableCell()
            if value:
                tc.setAttribute("valuetype", "string")
                tc.addElement(text.P(text=value))
            tr.addElement(tc)
        sheet.addElement(tr)

    row(("Dag", 1), ("Ochtend", 1), ("Middag", 1), ("", 1017))
    row(("maandag", 1), ("Anna", 2), ("", 1017))  # Anna works both shifts: one cell, repeated
    row(("", 1020), repeat=3)
    row(("dinsdag", 1), ("", 1), ("Bram", 1), ("", 1017), repeat=2)  # two equal rows
    row(("", 1020), repeat=1048560)
    doc.spreadsheet.addElement(sheet)
    out = io.BytesIO()
    doc.save(out)
    loaded = load_bytes(out.getvalue(), "rooster.ods")
    assert loaded.sections[0].text == ("Dag: maandag; Ochtend: Anna; Middag: Anna.\n\n"
                                       "Dag: dinsdag; Middag: Bram.\n\nDag: dinsdag; Middag: Bram.")
