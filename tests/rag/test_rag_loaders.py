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


def _with_title(data: bytes, title: str) -> bytes:
    import pypdf

    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(data)))
    writer.add_metadata({"/Title": title})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.mark.parametrize("meta, title", [
    ("Microsoft Word - Huurcontract Delft.docx", "Huurcontract Delft"),  # Office's print to PDF
    ("Microsoft PowerPoint - kwartaalcijfers.pptx", "kwartaalcijfers"),
    ("Declaratieregeling 2026", "Declaratieregeling 2026"),  # an author's title stays as it is
    ("Microsoft Word - .docx", "scan_0042"),  # nothing left: the file's name
    ("Word and Excel tips", "Word and Excel tips"),
])
def test_a_pdfs_title_is_its_authors_not_a_converters(meta, title):
    doc = load_bytes(_with_title(make_pdf(["De huur is 900 euro."]), meta), "scan_0042.pdf")
    assert doc.title == title


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


@pytest.mark.parametrize("text, title", [
    ("De CPU is terug: heroverweging van de splitsing\n\nInferentie bestaat echter niet uit één model.", "De CPU is terug: heroverweging van de splitsing"),
    ("\ufeff\r\n  Notulen overleg 3 maart  \r\n\r\nAanwezig: Jan en Piet.", "Notulen overleg 3 maart"),
    ("CPU of GPU: wat is sneller?\n\nHet antwoord is niet zo simpel.", "CPU of GPU: wat is sneller?"),
    ("Dit is de eerste zin van de tekst.\n\nEn dit de tweede.", "000_94fa26dffe373ccf"),  # a sentence, not a title
    ("2026-12-01 10:00:01 INFO starting\n2026-12-01 10:00:02 INFO ready\n", "000_94fa26dffe373ccf"),  # a log's first line
    ("Een regel zonder tekst eronder\n", "000_94fa26dffe373ccf"),
    (" ".join(["woord"] * 25) + "\n\nMeer tekst.", "000_94fa26dffe373ccf"),  # too long for a title
])
def test_a_plain_texts_title_is_its_first_line_when_that_stands_alone(text, title):
    """Sources showed a .txt document as "000_94fa26dffe373ccf" where its first line is its title (and the retrieval
    bench ingests those articles under that line); the text itself is kept whole."""
    doc = load_bytes(text.encode("utf-8"), "000_94fa26dffe373ccf.txt")
    assert doc.title == title
    assert doc.sections[0].text.strip().startswith(text.lstrip("\ufeff\r\n ")[:10])


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


def test_html_permalinks_are_not_text():
    # Sphinx (Python's docs) and MkDocs put a "¶" link in every heading and definition: it is not part of the heading
    html = ("""<html><body><h2>Cursor objects<a class="headerlink" href="#cursor-objects" title="Permalink">¶</a></h2>
    <dl><dt id="sqlite3.connect">sqlite3.connect(database)<a class="headerlink" href="#sqlite3.connect">¶</a></dt>
    <dd><p>Open a connection. See <a href="#cursor-objects">Cursor objects</a> and <a href="#notes">#</a>
    <a href="other.html#x">¶</a>.</p></dd></dl></body></html>""").encode()
    doc = load_bytes(html, "sqlite3.html")
    assert [s.heading for s in doc.sections] == ["Cursor objects"]
    text = doc.sections[0].text
    assert "sqlite3.connect(database)\n" in text and "See Cursor objects and" in text, text
    assert text.count("¶") == 1  # the link to another page stays (it is not this page's permalink)


def test_html_field_list_values_are_read_on_their_fields_line():
    # Sphinx and docutils write "Author: Gordon McMillan" as a <dt> and a <dd>: the value belongs on its field's line, or a
    # quote of the field is a bare "Author:" and the name a paragraph of its own; a definition (no ":") and a long or
    # many-paragraph <dd> stay blocks of their own
    html = ("""<html><body><h1>Socket Programming HOWTO</h1><dl class="field-list simple">
    <dt class="field-odd">Author<span class="colon">:</span></dt><dd class="field-odd"><p>Gordon McMillan</p></dd>
    <dt>Datum:</dt><dd>3 maart 2026</dd></dl>
    <dl><dt>socket.close()</dt><dd><p>Close the socket.</p></dd>
    <dt>Notes:</dt><dd><p>First paragraph.</p><p>Second paragraph.</p></dd></dl></body></html>""").encode()
    text = load_bytes(html, "sockets.html").sections[0].text
    assert "\nAuthor: Gordon McMillan\n" in text and "\nDatum: 3 maart 2026\n" in text, text
    assert "socket.close()\n" in text and "\nClose the socket." in text, text  # a definition stays under its term
    assert "Notes:\n" in text and "First paragraph.\n\nSecond paragraph." in text, text


def test_html_text_after_a_block_starts_a_paragraph_of_its_own():
    # a block's end is a break as its start is: DocBook's credits (aptitude's manual) write each name as a <dd>'s paragraph
    # before the next <dt>, and the name ran on into the next term as one wrapped line ("Luk Claes Finse vertaling"), so no
    # sentence held the name alone; loose text after a paragraph inside a <div> was glued to its last word
    from edge_agent.services.sentences import split_units

    html = ("""<html><body><dl class="variablelist"><dt><span class="term">Nederlandse vertaling</span></dt><dd><p>
      Luk Claes
    </p></dd><dt><span class="term">Finse vertaling</span></dt><dd><p>Jaakko Kangasharju</p></dd></dl>
    <div><p>Zie de lijst hierboven</p>Nog een losse zin.</div>
    <ul><li>een</li><li>twee</li></ul>
    <table><tr><td><p>cel</p>rest</td><td>b</td></tr></table></body></html>""").encode()
    text = load_bytes(html, "credits.html").sections[0].text
    assert "Luk Claes\n\nFinse vertaling" in text, text
    assert "hierboven\n\nNog een losse zin." in text, text
    assert "een\ntwee" in text and "cel rest | b" in text, text  # list items stay lines, a table row one line
    units = [u.text for u in split_units(text)]
    assert not any("Luk Claes" in u and "Finse" in u for u in units), units
    assert not any("hierbovenNog" in u for u in units), units


def test_html_page_footer_div_is_chrome_but_an_articles_is_not():
    # Sphinx's classic theme closes every page with <div class="footer">: copyright, licence, "Please donate."
    page = ("""<html><body><div class="document"><h1>zipfile</h1><p>Extracting the same archive twice overwrites files.</p>
    <p>""" + "The module reads and writes ZIP archives, with or without compression, member by member. " * 4 + """</p>
    <article><p>Een artikel.</p><div class="footer">Geschreven door Jan, 3 maart.</div></article></div>
    <div class="footer">&copy; Copyright 2001-2026, Python Software Foundation. The Python Software Foundation is a
    non-profit corporation. <a href="https://www.python.org/psf/donations/">Please donate.</a></div></body></html>""").encode()
    text = " ".join(s.text for s in load_bytes(page, "zipfile.html").sections)
    assert "overwrites files" in text and "Geschreven door Jan" in text
    assert "Copyright" not in text and "non-profit" not in text


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


def test_html_page_chrome_is_dropped():
    # an intranet page as generators write it: a banner with a menu, breadcrumbs, a table of contents of the page's own
    # headings (DocBook's and Word's markers, and one marked by nothing but its links), a prev/next bar and a footer
    html = b"""<html><head><title>Verlof</title></head><body>
    <header><a href="/">Intranet</a> Voor medewerkers <nav><a href="/hr">HR</a> <a href="/it">IT</a> <a href="/fin">Financien</a></nav></header>
    <div class="breadcrumbs"><a href="/">Home</a> &gt; <a href="/hr">HR</a> &gt; Verlof</div>
    <div class="navheader"><table><tr><th>Hoofdstuk 3. Verlof aanvragen</th></tr></table></div>
    <h1>Hoofdstuk 3. Verlof aanvragen</h1>
    <div class="toc"><p>Inhoudsopgave</p><dl><dt><a href="#aanvraag">3.1. Hoe vraag ik verlof aan?</a></dt>
    <dt><a href="#saldo">3.2. Waar zie ik mijn saldo?</a></dt><dt><a href="#ziek">3.3. Ziek tijdens verlof</a></dt></dl></div>
    <p class="MsoToc1"><a href="#_Toc1">Hoe vraag ik verlof aan? 2</a></p>
    <ul><li><a href="#aanvraag">Hoe vraag ik verlof aan?</a></li><li><a href="#saldo">Waar zie ik mijn saldo?</a></li>
    <li><a href="#ziek">Ziek tijdens verlof</a></li></ul>
    <h2 id="aanvraag"><a name="_Toc1"></a>3.1. Hoe vraag ik verlof aan?</h2><p>Dien de aanvraag twee weken vooraf in via het
    formulier.</p>
    <h2 id="saldo">3.2. Waar zie ik mijn saldo?</h2><p>Het saldo staat op uw loonstrook.</p>
    <h2 id="ziek">3.3. Ziek tijdens verlof</h2><p>Meld u ziek bij uw leidinggevende.</p>
    <div><a href="h2.html">&lt;&lt; Hoofdstuk 2. Salaris</a> <a href="index.html">Omhoog</a>
    <a href="h4.html">Hoofdstuk 4. Reizen &gt;&gt;</a></div>
    <div role="contentinfo">Laatst bijgewerkt door P&amp;O</div>
    <footer><a href="/privacy">Privacy</a> | <a href="/contact">Contact</a></footer></body></html>"""
    doc = load_bytes(html, "verlof.html")
    assert doc.title == "Verlof"
    assert [s.heading for s in doc.sections] == [
        "3.1. Hoe vraag ik verlof aan?", "3.2. Waar zie ik mijn saldo?", "3.3. Ziek tijdens verlof"]
    # the chapter title has nothing under it but navigation: it leads the first section instead of being a chunk alone
    assert doc.sections[0].text == ("Hoofdstuk 3. Verlof aanvragen\n\n3.1. Hoe vraag ik verlof aan?\n\n"
                                    "Dien de aanvraag twee weken vooraf in via het formulier.")
    assert [s.text for s in doc.sections[1:]] == ["3.2. Waar zie ik mijn saldo?\n\nHet saldo staat op uw loonstrook.",
                                                  "3.3. Ziek tijdens verlof\n\nMeld u ziek bij uw leidinggevende."]


def test_html_links_in_content_are_kept():
    # a paragraph that leans on its links (62% link text), a list of cross-references to definitions, printed URLs, an
    # article's own header, and a block marked "nav" by its class that holds the page's text: all content; the menu
    # beside them, marked by nothing but its links, is not
    html = b"""<html><body><div><a href="/nieuws">Nieuws</a> | <a href="/agenda">Agenda</a> | <a href="/wie">Wie is wie</a></div>
    <div class="nav-open"><article><header><h1>Pakketten</h1><p>Door <a href="/team">het team</a>,
    <a href="/2024">2024</a>, <a href="/tags/apt">apt</a></p></header>
    <p>Debian bevat <a href="https://packages.debian.org">59100 pakketten</a> voor
    <a href="ports.html">9 architecturen</a>; zie de <a href="faq.html">FAQ</a> en de
    <a href="handboek.html">handleiding</a>.</p>
    <p>Vlaggen:</p><ul><li><a href="#RWF_DSYNC">RWF_DSYNC</a></li><li><a href="#RWF_SYNC">RWF_SYNC</a></li>
    <li><a href="#RWF_APPEND">RWF_APPEND</a></li></ul>
    <dl><dt id="RWF_DSYNC">RWF_DSYNC</dt><dd>schrijft synchroon</dd><dt id="RWF_SYNC">RWF_SYNC</dt><dd>idem</dd>
    <dt id="RWF_APPEND">RWF_APPEND</dt><dd>voegt toe</dd></dl>
    <ul><li><a href="https://www.intern/ca.pem">https://www.intern/ca.pem</a></li>
    <li><a href="https://www.intern/ca.crt">https://www.intern/ca.crt</a></li>
    <li><a href="https://www.intern/ca.der">https://www.intern/ca.der</a></li></ul></article></div></body></html>"""
    text = load_bytes(html, "p.html").sections[0].text
    assert "Agenda" not in text
    assert text.startswith("Pakketten\n\nDoor het team, 2024, apt")
    assert "Debian bevat 59100 pakketten voor 9 architecturen; zie de FAQ en de handleiding." in text
    assert "Vlaggen:\n\nRWF_DSYNC\nRWF_SYNC\nRWF_APPEND" in text
    assert "https://www.intern/ca.pem\nhttps://www.intern/ca.crt\nhttps://www.intern/ca.der" in text


def test_html_page_header_keeps_its_title():
    html = b"""<html><body><header><h1>Verlofregeling 2025</h1><nav><a href="/">Home</a> <a href="/hr">HR</a>
    <a href="/it">IT</a></nav></header><main><p>Elke medewerker heeft 25 verlofdagen.</p></main>
    <footer><h4>Contact</h4><p>P&amp;O, kamer 2.14</p></footer></body></html>"""
    doc = load_bytes(html, "regeling.html")
    assert [(s.heading, s.text) for s in doc.sections] == [
        ("Verlofregeling 2025", "Verlofregeling 2025\n\nElke medewerker heeft 25 verlofdagen.")]


def test_html_page_of_only_links_keeps_them():
    html = b"""<html><body><ul><li><a href="a.html">Declaraties</a></li><li><a href="b.html">Verlof</a></li>
    <li><a href="c.html">Thuiswerken</a></li></ul></body></html>"""
    assert load_bytes(html, "links.html").sections[0].text == "Declaraties\nVerlof\nThuiswerken"


def test_html_table_rows_stay_one_line():
    # cells of a row are joined as the DOCX loader joins them; a layout row (a cell with a heading or preformatted
    # text, as in a DocBook Q and A) is still read as blocks
    html = b"""<html><body><table><tr><th>Pakket</th><th>Versie</th><th>Licentie</th></tr>
    <tr><td><p><code>apt</code></p></td><td>2.6.1</td><td>GPL-2+</td></tr>
    <tr><td>dpkg</td><td></td><td>GPL-2+<br>(deels <b>publiek</b> domein)</td></tr></table>
    <table><tr><td><h3>Vraag</h3><p>Waarom?</p></td><td><pre>apt-get update
apt-get upgrade</pre></td></tr></table></body></html>"""
    text = "\n\n".join(s.text for s in load_bytes(html, "t.html").sections)
    assert text.startswith("Pakket | Versie | Licentie\napt | 2.6.1 | GPL-2+\ndpkg | GPL-2+ (deels publiek domein)\n")
    assert "Waarom?\n\napt-get update\napt-get upgrade" in text


def test_markdown_sections_and_csv_rows():
    md = load_bytes(b"# Titel\nintro\n## Deel A\ntekst\n```\n# geen kop\n```\n", "x.md")
    assert [s.heading for s in md.sections] == ["Titel", "Deel A"] and md.title == "Titel"
    csv_doc = load_bytes(b"product;prijs\nWidget;3\nGadget;4\n", "prijzen.csv")
    assert csv_doc.sections[0].text == "product: Widget; prijs: 3.\n\nproduct: Gadget; prijs: 4."


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
