"""Each loader on small real files made here; bad files give a clear LoaderError."""
from __future__ import annotations

import io
import zipfile

import pytest
from rag_docs import encrypt_pdf, make_docx, make_eml, make_pdf

from edge_agent.rag.loaders import LoaderError, LoaderLimits, UnsupportedTypeError, load_bytes, load_path


def test_pdf_keeps_page_numbers():
    doc = load_bytes(make_pdf(["Alpha on the first page", "Beta on page two", "Gamma closes"]), "report.pdf")
    assert doc.kind == "pdf"
    assert [(s.page, s.text) for s in doc.sections] == [
        (1, "Alpha on the first page"), (2, "Beta on page two"), (3, "Gamma closes"),
    ]


def test_encrypted_pdf_is_a_clear_error():
    with pytest.raises(LoaderError, match="encrypted"):
        load_bytes(encrypt_pdf(make_pdf(["secret text"])), "locked.pdf")


def test_broken_pdf_is_a_clear_error():
    data = make_pdf(["some text"])
    with pytest.raises(LoaderError, match="PDF"):
        load_bytes(data[: len(data) // 3], "broken.pdf")


def test_pdf_time_budget():
    with pytest.raises(LoaderError, match="budget"):
        load_bytes(make_pdf(["x"] * 50), "slow.pdf", LoaderLimits(time_budget_s=0.0))


def test_docx_headings_become_sections():
    data = make_docx([("h1", "Installatie"), ("p", "Plaats het apparaat."), ("h2", "Onderhoud"), ("p", "Jaarlijks.")])
    doc = load_bytes(data, "handleiding.docx")
    assert [(s.heading, s.text) for s in doc.sections] == [
        ("Installatie", "Installatie\nPlaats het apparaat."), ("Onderhoud", "Onderhoud\nJaarlijks."),
    ]


def test_docx_zip_bomb_refused():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", b"<" + b"a" * (30 * 1024 * 1024))
    with pytest.raises(LoaderError, match="zip bomb"):
        load_bytes(out.getvalue(), "bomb.docx", LoaderLimits(max_uncompressed_bytes=10 * 1024 * 1024))
    with pytest.raises(LoaderError, match="ratio"):
        load_bytes(out.getvalue(), "bomb.docx")


def test_email_with_attachments():
    pdf = make_pdf(["Prijs per stuk: 12 euro"])
    data = make_eml(
        "Offerte warmtepomp", "Beste team,\nzie de bijlage.\nGroet, Anna",
        [("notes.txt", b"Levering in week 12", "text/plain"), ("offerte.pdf", pdf, "application/pdf"),
         ("logo.png", b"\x89PNG....", "image/png")],
    )
    doc = load_bytes(data, "mail.eml")
    assert doc.title == "Offerte warmtepomp"
    assert "Anna de Vries" in doc.metadata["from"] and "2026" in doc.metadata["date"]
    body = doc.sections[0].text
    assert "Subject: Offerte warmtepomp" in body and "zie de bijlage" in body
    by_heading = {s.heading: s for s in doc.sections[1:]}
    assert by_heading["Attachment notes.txt"].text == "Levering in week 12"
    assert by_heading["Attachment offerte.pdf"].page == 1
    assert [a["name"] for a in doc.metadata["attachments"]] == ["notes.txt", "offerte.pdf"]


def test_html_headings_and_no_scripts():
    html = b"""<html><head><title>Handboek</title><style>p{color:red}</style></head><body>
    <h1>Start</h1><p>Eerste <b>alinea</b>.</p><script>alert('x')</script>
    <h2>Vervolg</h2><ul><li>een</li><li>twee</li></ul></body></html>"""
    doc = load_bytes(html, "page.html")
    assert doc.title == "Handboek"
    assert [s.heading for s in doc.sections] == ["Start", "Vervolg"]
    text = " ".join(s.text for s in doc.sections)
    assert "Eerste alinea." in text and "alert" not in text and "color" not in text


def test_html_source_line_wraps_are_spaces():
    # hard-wrapped HTML source (DocBook, the Debian FAQ): a newline in text is a space, not a line break, so "\n2. " does
    # not become a numbered list item and a heading is one line; <pre> keeps its lines; paragraphs end in a blank line
    html = b"""<html><body><h2>8.1. Welke programma's heeft
Debian?</h2><p>Zie Hoofdstuk
2. Pakketbeheer voor meer
informatie.</p><p>Tweede alinea.</p><pre>regel een
regel twee</pre></body></html>"""
    doc = load_bytes(html, "faq.html")
    assert [s.heading for s in doc.sections] == ["8.1. Welke programma's heeft Debian?"]
    assert doc.sections[0].text == ("8.1. Welke programma's heeft Debian?\n\nZie Hoofdstuk 2. Pakketbeheer voor meer informatie."
                                    "\n\nTweede alinea.\n\nregel een\nregel twee")


def test_markdown_sections_and_csv_rows():
    md = load_bytes(b"# Titel\nintro\n## Deel A\ntekst\n```\n# geen kop\n```\n", "x.md")
    assert [s.heading for s in md.sections] == ["Titel", "Deel A"] and md.title == "Titel"
    csv_doc = load_bytes(b"product;prijs\nWidget;3\nGadget;4\n", "prijzen.csv")
    assert csv_doc.sections[0].text == "product: Widget; prijs: 3.\nproduct: Gadget; prijs: 4."


def test_unsupported_empty_and_too_big(tmp_path):
    with pytest.raises(UnsupportedTypeError):
        load_bytes(b"data", "image.png")
    with pytest.raises(LoaderError, match="empty"):
        load_bytes(b"  \n", "empty.txt")
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * 2000)
    with pytest.raises(LoaderError, match="limit"):
        load_path(big, LoaderLimits(max_file_bytes=1000))
    with pytest.raises(LoaderError, match="damaged"):
        load_bytes(b"PK\x03\x04 not really a zip", "broken.docx")
