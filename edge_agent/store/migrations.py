"""Numbered schema migrations. Append new ones with the next version number; never edit an applied one."""
from __future__ import annotations

from edge_agent.store.db import Migration

DOCUMENTS_V1 = """
CREATE TABLE documents (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    source_key   TEXT NOT NULL UNIQUE,          -- absolute path, upload:<name> or text:<title>
    title        TEXT NOT NULL,
    path         TEXT,                          -- resolved file path for server-side files, else NULL
    kind         TEXT NOT NULL,                 -- txt, md, html, pdf, docx, eml, csv or unknown
    mime         TEXT,
    content_hash TEXT NOT NULL,
    size         INTEGER NOT NULL,
    mtime        REAL,
    status       TEXT NOT NULL CHECK (status IN ('ready', 'failed')),
    error        TEXT,
    chunk_count  INTEGER NOT NULL DEFAULT 0,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL
);
CREATE INDEX documents_path ON documents(path);
CREATE INDEX documents_kind ON documents(kind);

CREATE TABLE chunks (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,  -- also the FAISS id; never reused
    document_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal     INTEGER NOT NULL,
    text        TEXT NOT NULL,
    page        INTEGER,
    heading     TEXT,
    char_start  INTEGER NOT NULL,
    char_end    INTEGER NOT NULL,
    token_count INTEGER NOT NULL,
    UNIQUE (document_id, ordinal)
);

CREATE TABLE chunk_vectors (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    vector   BLOB NOT NULL                           -- float32, little-endian, L2-normalised
);

CREATE TABLE index_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""

MIGRATIONS: list[Migration] = [
    Migration(1, "documents, chunks and their vectors", DOCUMENTS_V1),
]
