"""Each loader's output on one sample file per kind, fingerprinted beside the kind's reader version: a change to what a
loader returns (its code, a shared helper, a parsing library's upgrade) fails here until the kind's version is bumped
in rag/reader_version.py, so that the files it read before are read again by the next reindex."""
from __future__ import annotations

import datetime as dt
import hashlib
import json

import pytest
from office_docs import make_ods, make_odp, make_odt, make_pptx, make_rtf, make_xlsx
from rag_docs import make_docx, make_eml, make_pdf

from edge_agent.rag.loaders import KINDS, load_bytes
from edge_agent.rag.reader_version import READER_VERSIONS, reader_version

ROWS = [["Klant", "Omschrijving", "Bedrag", "Datum"], ["De Vries BV", "Onderhoud ketel", 1250.5, dt.date(2026, 3, 1)],
        ["Bakker", "Licentie", 99, dt.date(2026, 3, 2)], ["Jansen", "", 12, None]]
PAGE = """<html><head><title>zipfile</title></head><body><nav><a href="/">Home</a> <a href="/lib">Library</a>
<a href="/faq">FAQ</a></nav><div class="document"><h1>zipfile<a class="headerlink" href="#zipfile">¶</a></h1>
<dl class="field-list"><dt>Author<span class="colon">:</span></dt><dd><p>A. N. Author</p></dd></dl>
<p>The ZIP file format is a common archive standard.
This module reads and writes ZIP files.</p><h2>ZipFile objects<a class="headerlink" href="#objects">¶</a></h2>
<table><tr><th>Mode</th><th>Meaning</th></tr><tr><td>r</td><td>read</td></tr></table><pre>zf = ZipFile(path)
zf.close()</pre></div><div class="footer">&copy; Copyright 2001-2026, Python Software Foundation.
<a href="https://www.python.org/psf/donations/">Please donate.</a></div></body></html>"""


def _samples() -> dict[str, bytes]:
    """One file per kind with what its loader treats specially (headings, tables, rows, chrome, notes, pages)."""
    blocks = [("h1", "Huurcontract"), ("p", "De huurder betaalt de huur voor de eerste van de maand."),
              ("h2", "Opzegging"), ("p", "De opzegtermijn is twee maanden.")]
    return {
        "txt": "Eerste alinea over de ketel.\r\n\r\nTweede   alinea\tmet ruimte.\n".encode(),
        "md": b"# Titel\n\nInleiding met *nadruk* en een [link](https://example.nl).\n\n## Deel twee\n\n- punt een\n- punt twee\n",
        "html": PAGE.encode(),
        "pdf": make_pdf(["Pagina een over de huur.", "Pagina twee over de opzegging."]),
        "eml": make_eml("Offerte ketel", "Beste Anna,\n\nHierbij de offerte.\n",
                        [("offerte.csv", b"post,bedrag\nketel,1250\nmontage,300\n", "text/csv"),
                         ("pagina.html", PAGE.encode(), "text/html")]),
        "csv": b"Klant;Bedrag;Notitie\nDe Vries BV;1.250,50;eerste\nBakker;99,00;\n",
        "docx": make_docx(blocks, title="Huurcontract"),
        "xlsx": make_xlsx({"Facturen": ROWS, "Verborgen": [["geheim"]]}, hidden=("Verborgen",)),
        "pptx": make_pptx([{"title": "Plan", "bullets": ["Stap een", "Stap twee"], "notes": "Spreek langzaam."},
                           {"title": "Cijfers", "table": [["Jaar", "Omzet"], ["2025", "10"]]}]),
        "odt": make_odt(blocks, title="Huurcontract"),
        "ods": make_ods({"Facturen": ROWS}),
        "odp": make_odp([{"title": "Plan", "bullets": ["Stap een", "Stap twee"], "notes": "Spreek langzaam."}]),
        "rtf": make_rtf(["Geachte heer Jansen,", "Hierbij bevestigen wij de afspraak van 3 maart."]),
    }


# kind -> (its reader version, rag.reader_version.reader_version(kind), and the fingerprint of its output on the sample)
RECORDED: dict[str, tuple[int, str]] = {
    "txt": (1, "ea69815ebb9a55ce"),
    "md": (1, "8b772fd448aa51ac"),
    "html": (3, "ba8468e4d6afbcdb"),
    "pdf": (2, "d01439cd2809f37e"),
    "eml": (16, "4a39af72cb77cf26"),  # its own 1 and the 15 of the others
    "csv": (1, "ef0f1aef94695443"),
    "docx": (1, "ead676cdfe27e17b"),
    "xlsx": (1, "17c5f67f18c24eec"),
    "pptx": (1, "28c18cae6baf340d"),
    "odt": (1, "9c88e333bf236f61"),
    "ods": (1, "31dba011b888d255"),
    "odp": (1, "aceb0950dddd28e8"),
    "rtf": (1, "a03edada82c68914"),
}


def _fingerprint(kind: str, data: bytes) -> str:
    doc = load_bytes(data, f"sample.{next(s for s, k in KINDS.items() if k == kind).lstrip('.')}")
    shape = {"title": doc.title, "kind": doc.kind, "sections": [[s.text, s.page, s.heading] for s in doc.sections]}
    return hashlib.sha256(json.dumps(shape, ensure_ascii=False).encode()).hexdigest()[:16]


def test_every_kind_has_a_sample():
    assert set(_samples()) == set(KINDS.values()) == set(READER_VERSIONS)


@pytest.mark.parametrize("kind", sorted(set(KINDS.values())))
def test_a_loaders_output_changes_only_with_its_reader_version(kind):
    version, fingerprint = reader_version(kind), _fingerprint(kind, _samples()[kind])
    recorded_version, recorded = RECORDED[kind]
    assert fingerprint == recorded or version != recorded_version, (
        f"the {kind} loader's output on its sample changed ({fingerprint}, recorded {recorded}) but its reader version did "
        f"not: bump READER_VERSIONS[{kind!r}] in edge_agent/rag/reader_version.py (or that of the loader whose change this "
        "is: an e-mail's version follows the others'), so that the files read before are read again; then record it here")
    assert (version, fingerprint) == (recorded_version, recorded), (
        f"record the {kind} reader's version {version} and its output's fingerprint {fingerprint!r} here (RECORDED)")
