"""Uploaded file names: a name no file system allows is refused, nothing stored."""
from __future__ import annotations

import pytest

from edge_agent.services.documents import DocumentError


def test_an_upload_name_over_255_characters_is_refused(service):
    with pytest.raises(DocumentError, match="longer than 255"):  # was stored, its 5000-character title in every chunk header
        service.add_upload("a" * 5000 + ".txt", b"The canteen serves soup on Mondays.")
    assert service.stats()["documents"] == 0
    assert service.add_upload("a" * 251 + ".txt", b"The canteen serves soup on Mondays.").status == "added"


def test_file_names_are_logged_at_debug_only_info_lines_name_the_document_id(service, docs_root, caplog):
    """In a hospital or a law firm a file name is often personal data: the journal (INFO and up) gets document ids."""
    import logging
    import time

    caplog.set_level(logging.DEBUG, logger="edge_agent")
    assert service.add_upload("Jansen-divorce.txt", b"The hearing is on the third of May.").status == "added"
    assert service.add_upload("Jansen-medical.pdf", b"%PDF-1.4 not really a pdf").status == "failed"  # refused, not stored
    (docs_root / "Bakker-estate.pdf").write_bytes(b"%PDF-1.4 damaged")
    bakker = service.add_file(docs_root / "Bakker-estate.pdf")  # recorded failed
    assert bakker.status == "failed"
    ok = service.start_upload("Pieters-will.txt", b"The will names the eldest daughter as executor.")
    broken = service.start_upload("Pieters-scan.pdf", b"%PDF-1.4 also damaged")
    end = time.monotonic() + 60
    while time.monotonic() < end and any(service.store.get_by_key(f"upload:Pieters-{n}").status == "processing"
                                         for n in ("will.txt", "scan.pdf")):
        time.sleep(0.05)
    assert [service.store.get_by_key(f"upload:Pieters-{n}").status for n in ("will.txt", "scan.pdf")] == ["ready", "failed"]
    names = ("Jansen", "Bakker", "Pieters")
    shown = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert shown and not [m for m in shown if any(n in m for n in names)], shown  # was "refused upload:Jansen-medical.pdf: ..."
    assert any(f"document {bakker.document_id}:" in m for m in shown), shown
    assert any(f"background upload of document {ok.document_id}: " in m for m in shown), shown
    assert any(f"document {broken.document_id}:" in m and "could not" in m for m in shown), shown
    debug = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
    assert all(n in debug for n in ("Jansen-medical.pdf", "Bakker-estate.pdf", "Pieters-will.txt", "Pieters-scan.pdf")), debug
