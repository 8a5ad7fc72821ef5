"""A damaged new version of a document (re-upload or changed file) is refused and the indexed version is kept:
a 422 must not erase what was searchable. Real SQLite, FAISS and embedding model in tmp_path."""
from __future__ import annotations

from rag_docs import make_pdf

GOOD = make_pdf(["Minutes of the board", "The Zeeland archive opens at nine on weekdays"])
DAMAGED = GOOD[:300]  # a copy cut short: pypdf cannot read it


def _found(service, doc_id: int) -> bool:
    return any(h.document_id == doc_id for h in service.retrieve("when does the Zeeland archive open?", k=3, mode="bm25"))


def test_a_damaged_reupload_keeps_the_indexed_version(service):
    first = service.add_upload("minutes.pdf", GOOD)
    assert first.status == "added" and _found(service, first.document_id)
    chunks = service.stats()["chunks"]
    again = service.add_upload("minutes.pdf", DAMAGED)
    assert again.status == "failed" and "kept" in again.error  # the API answers 422 with this error
    doc = service.get(first.document_id)  # was: status failed, 0 chunks, the text gone from search
    assert doc["status"] == "ready" and doc["chunk_count"] > 0 and service.stats()["chunks"] == chunks
    assert _found(service, first.document_id)
    assert service.add_upload("fresh.pdf", DAMAGED).status == "failed"  # a new damaged upload still fails alone


def test_a_file_damaged_on_disk_keeps_its_indexed_version(service, docs_root):
    path = docs_root / "minutes.pdf"
    path.write_bytes(GOOD)
    first = service.add_file(path)
    assert first.status == "added"
    path.write_bytes(DAMAGED)  # e.g. a nightly reindex while the file is being copied over
    assert service.add_file(path).status == "failed"
    assert service.get(first.document_id)["status"] == "ready" and _found(service, first.document_id)
