"""Reader versions: which version of its type's loader read a document, so that loader fixes reach indexed files.

A document's content hash says whether its bytes changed; it cannot say whether the text we made of them
would come out differently today. Each document therefore records the reader version of its kind when it was
read (documents.reader_version), and a file whose bytes are unchanged but whose reader version is not the
current one is read again by the next reindex (and by any ingest of it), like a changed file: the old chunks
stay searchable until the new ones are committed.

Bump a kind's number in READER_VERSIONS whenever its loader's output for the same bytes changes (the text,
where sections begin, their headings, the title): a fix in loaders.py, loaders_html.py or loaders_office.py, or in something
they share (loaders._tidy, row_line). A change in where the chunker cuts (chunking.py) changes every kind's
chunks: bump every kind. A changed chunk_tokens or chunk_overlap setting needs no bump: the index records the
chunking it was cut with, and a writer that opens it with other values clears every document's reader version
(services.document_upkeep._record_chunking), which re-reads them the same way. Per kind, not one number for the package, so that an HTML fix re-reads the HTML
files, not every PDF (the slowest to read and the most chunks to embed again). tests/rag/test_reader_versions.py
holds each kind's output on a sample file beside its version: a changed output (a parsing library's upgrade
too) fails there until the version is bumped.

An e-mail reads its HTML body and its attachments with the other loaders: its version is its own number
plus the sum of the others', so that any of their bumps (or a new kind: an attachment it skipped is read
now) re-reads the mail too.

None (NULL in SQLite) is a document read before versions were recorded, by any earlier reader: it is older
than every version, so the first reindex after the upgrade that added them reads every file once.
"""
from __future__ import annotations

from collections.abc import Mapping

# 1: the loaders as of 2026-12-02, the first versions recorded; they include the fixes of 2026-12-01 that a
# document read before then lacks: HTML heading permalinks ('¶') dropped, a page-level <div class="footer">
# treated as page chrome, a sheet's or CSV's rows as paragraphs (chunks hold whole rows); the office formats
# (xlsx, pptx, odt, ods, odp, rtf) read directly where they had failed with advice to convert them; and of
# 2026-12-02: a plain text's title is its first line where that stands alone (loaders.txt_title), not its file name.
# html 2: a field list's value is read on its field's line ("Author: Gordon McMillan", loaders_html._field_value), not as a
# paragraph of its own under a bare "Author:".
# html 3: a block's end is a break for the text after it (loaders_html._block_ends): a <dd>'s paragraph no longer runs on
# into the next <dt> as one wrapped line ("Luk Claes Finse vertaling"), nor loose text after a <p> into its last word.
READER_VERSIONS: Mapping[str, int] = {
    "txt": 1,
    "md": 1,
    "html": 3,
    "pdf": 2,  # 2: a metadata title without "Microsoft Word - " and its .docx (loaders.pdf_title)
    "eml": 1,  # plus the sum of the others: see reader_version()
    "csv": 1,
    "docx": 1,
    "xlsx": 1,
    "pptx": 1,
    "odt": 1,
    "ods": 1,
    "odp": 1,
    "rtf": 1,
}


def reader_version(kind: str, versions: Mapping[str, int] | None = None) -> int | None:
    """The current reader version of a document kind; None for a kind no loader reads ("unknown")."""
    versions = READER_VERSIONS if versions is None else versions
    own = versions.get(kind)
    if own is None:
        return None
    if kind == "eml":
        return own + sum(v for k, v in versions.items() if k != "eml")
    return own


def is_current(kind: str, stored: int | None) -> bool:
    """Whether a document of `kind` read with reader version `stored` (None: before versions were recorded) would be
    read the same way today. A stored version other than today's (an older one, or a newer one after a downgrade)
    is not current: the document is read again with the reader that runs."""
    return stored is not None and stored == reader_version(kind)
