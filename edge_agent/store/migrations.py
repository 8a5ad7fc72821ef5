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

JOBS_V2 = """
CREATE TABLE jobs (
    id              TEXT PRIMARY KEY,               -- job_<hex>
    name            TEXT NOT NULL UNIQUE,
    kind            TEXT NOT NULL,
    params          TEXT NOT NULL DEFAULT '{}',     -- JSON, normalised by the kind
    schedule_cron   TEXT,                           -- NULL = run only on demand
    schedule_tz     TEXT,                           -- IANA time zone of the cron expression
    enabled         INTEGER NOT NULL DEFAULT 1,
    limits          TEXT NOT NULL DEFAULT '{}',     -- JSON: concurrency, max_items, deadline
    source          TEXT NOT NULL DEFAULT 'api',    -- api | config
    next_run_at     REAL,                           -- epoch s of the next scheduled run
    last_success_at REAL,                           -- started_at of the last successful run
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL
);

CREATE TABLE job_runs (
    id              TEXT PRIMARY KEY,               -- run_<hex>
    job_id          TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    kind            TEXT NOT NULL,
    params          TEXT NOT NULL,                  -- JSON, as the run started
    status          TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    trigger         TEXT NOT NULL DEFAULT 'manual', -- manual | schedule | startup
    since           REAL,                           -- only items changed after this (NULL = all)
    total_items     INTEGER NOT NULL DEFAULT 0,
    succeeded_items INTEGER NOT NULL DEFAULT 0,
    failed_items    INTEGER NOT NULL DEFAULT 0,
    concurrency     INTEGER NOT NULL DEFAULT 8,
    max_items       INTEGER,
    deadline_at     REAL,                           -- epoch s; the run stops there, the rest carries over
    stop_reason     TEXT,                           -- deadline | max_items | cancelled | error
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    carried_from    TEXT,                           -- run whose unfinished items this run took over
    resumes         INTEGER NOT NULL DEFAULT 0,     -- times the run was resumed after a restart
    error           TEXT,
    bundle_id       TEXT,
    prompt_version  TEXT,
    generated_tokens INTEGER NOT NULL DEFAULT 0,
    owner           TEXT,                           -- host:pid:token of the process running it
    heartbeat_at    REAL,                           -- the owner's last sign of life (a stale one is taken over)
    created_at      REAL NOT NULL,
    started_at      REAL,
    finished_at     REAL,
    updated_at      REAL NOT NULL
);
CREATE INDEX job_runs_job ON job_runs(job_id, created_at);
CREATE INDEX job_runs_status ON job_runs(status);

CREATE TABLE run_items (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id         TEXT NOT NULL REFERENCES job_runs(id) ON DELETE CASCADE,
    item_key       TEXT NOT NULL,
    ordinal        INTEGER NOT NULL,
    payload        TEXT NOT NULL,                   -- JSON; a resumed run needs no re-listing
    status         TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed', 'skipped')),
    result         TEXT,                            -- JSON
    error          TEXT,
    bundle_id      TEXT,
    prompt_version TEXT,
    attempts       INTEGER NOT NULL DEFAULT 0,
    started_at     REAL,
    finished_at    REAL,
    UNIQUE (run_id, item_key)
);
CREATE INDEX run_items_status ON run_items(run_id, status, ordinal);

CREATE TABLE document_summaries (
    document_id    INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    summary        TEXT NOT NULL,
    content_hash   TEXT NOT NULL,                   -- the document's hash when summarized
    run_id         TEXT,
    bundle_id      TEXT,
    prompt_version TEXT,
    created_at     REAL NOT NULL
);
"""

FILES_V3 = """
CREATE TABLE files (
    id         TEXT PRIMARY KEY,                    -- file-<hex>
    purpose    TEXT NOT NULL,                       -- batch (uploaded) | batch_output (written by a batch run)
    filename   TEXT NOT NULL,
    bytes      INTEGER NOT NULL,
    sha256     TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX files_created ON files(created_at);

CREATE TABLE batches (
    id                TEXT PRIMARY KEY,             -- batch_<hex>
    job_id            TEXT NOT NULL,
    run_id            TEXT,
    input_file_id     TEXT NOT NULL,
    endpoint          TEXT NOT NULL,
    completion_window TEXT NOT NULL,
    metadata          TEXT,                         -- JSON or NULL
    output_file_id    TEXT,
    error_file_id     TEXT,
    created_at        REAL NOT NULL
);
CREATE INDEX batches_created ON batches(created_at);
CREATE INDEX batches_run ON batches(run_id);

CREATE TABLE document_labels (
    document_id    INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    label_set      TEXT NOT NULL,                   -- the classify job's name
    label          TEXT NOT NULL,
    score          REAL NOT NULL,
    method         TEXT NOT NULL,                   -- likelihood | embedding
    content_hash   TEXT,                            -- the document's hash when labelled
    run_id         TEXT,
    bundle_id      TEXT,
    prompt_version TEXT,
    created_at     REAL NOT NULL,
    PRIMARY KEY (document_id, label_set)
);
"""

REEMBED_V4 = """
CREATE TABLE chunk_vectors_next (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    model    TEXT NOT NULL,                          -- the embedding model id these vectors come from
    vector   BLOB NOT NULL                           -- float32, little-endian, L2-normalised
);
"""

ITEM_STARTS_V5 = """
-- how many times an item was started by a process that then died before the item ended
-- (a clean stop gives the count back): an item the daemon keeps dying on is failed, not retried forever
ALTER TABLE run_items ADD COLUMN unfinished_starts INTEGER NOT NULL DEFAULT 0;
"""

# A CHECK constraint cannot be altered: the table is rebuilt as SQLite's ALTER TABLE page says (migrate() runs with
# foreign_keys off, so dropping the old table leaves the chunks, summaries and labels that reference it alone).
DOCUMENT_PROCESSING_V6 = """
CREATE TABLE documents_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    source_key   TEXT NOT NULL UNIQUE,          -- absolute path, upload:<name> or text:<title>
    title        TEXT NOT NULL,
    path         TEXT,                          -- resolved file path for server-side files, else NULL
    kind         TEXT NOT NULL,                 -- txt, md, html, pdf, docx, eml, csv or unknown
    mime         TEXT,
    content_hash TEXT NOT NULL,
    size         INTEGER NOT NULL,
    mtime        REAL,
    status       TEXT NOT NULL CHECK (status IN ('ready', 'failed', 'processing')),  -- processing: a background upload
    error        TEXT,
    chunk_count  INTEGER NOT NULL DEFAULT 0,
    created_at   REAL NOT NULL,
    updated_at   REAL NOT NULL
);
INSERT INTO documents_new SELECT * FROM documents;
UPDATE sqlite_sequence SET seq = (SELECT seq FROM sqlite_sequence WHERE name = 'documents') WHERE name = 'documents_new';
DROP TABLE documents;
ALTER TABLE documents_new RENAME TO documents;
CREATE INDEX documents_path ON documents(path);
CREATE INDEX documents_kind ON documents(kind);
"""

# A run that ends cancelled (or failed) marks the items it did not do 'cancelled', so its counts add up
# (succeeded + failed + cancelled = total) and no item of a finished run reads as still to come.
RUN_ITEM_CANCELLED_V7 = """
CREATE TABLE run_items_new (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id         TEXT NOT NULL REFERENCES job_runs(id) ON DELETE CASCADE,
    item_key       TEXT NOT NULL,
    ordinal        INTEGER NOT NULL,
    payload        TEXT NOT NULL,                   -- JSON; a resumed run needs no re-listing
    status         TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed', 'skipped', 'cancelled')),
    result         TEXT,                            -- JSON
    error          TEXT,
    bundle_id      TEXT,
    prompt_version TEXT,
    attempts       INTEGER NOT NULL DEFAULT 0,
    started_at     REAL,
    finished_at    REAL,
    unfinished_starts INTEGER NOT NULL DEFAULT 0,
    UNIQUE (run_id, item_key)
);
INSERT INTO run_items_new(id, run_id, item_key, ordinal, payload, status, result, error, bundle_id, prompt_version, attempts,
                          started_at, finished_at, unfinished_starts)
    SELECT id, run_id, item_key, ordinal, payload, status, result, error, bundle_id, prompt_version, attempts,
           started_at, finished_at, unfinished_starts FROM run_items;
UPDATE sqlite_sequence SET seq = (SELECT seq FROM sqlite_sequence WHERE name = 'run_items') WHERE name = 'run_items_new';
DROP TABLE run_items;
ALTER TABLE run_items_new RENAME TO run_items;
CREATE INDEX run_items_status ON run_items(run_id, status, ordinal);
UPDATE run_items SET status = 'cancelled', error = 'not done: the run was cancelled'
    WHERE status = 'pending' AND run_id IN (SELECT id FROM job_runs WHERE status IN ('cancelled', 'failed'));
"""

RUN_DEADLINE_ZONE_V8 = """
-- the zone a run's deadline was read in ('Europe/Amsterdam', '+01:00', 'UTC'), shown back with it
ALTER TABLE job_runs ADD COLUMN deadline_tz TEXT;
"""

READER_VERSION_V9 = """
-- the version of its kind's loader that read the document (edge_agent.rag.reader_version); NULL: read before
-- versions were recorded, by an unknown older reader, so a reindex reads the file again like a changed one
ALTER TABLE documents ADD COLUMN reader_version INTEGER;
"""

SUMMARY_METHOD_V10 = """
-- how a stored summary was made: whole, lead, sections (the model's), extract (the document's lead sentences, stored
-- where the model gave no usable summary); NULL: stored before methods were recorded (one of the model's)
ALTER TABLE document_summaries ADD COLUMN method TEXT;
"""

MIGRATIONS: list[Migration] = [
    Migration(1, "documents, chunks and their vectors", DOCUMENTS_V1),
    Migration(2, "jobs, their runs and run items; document summaries", JOBS_V2),
    Migration(3, "uploaded and batch output files, OpenAI batches, document labels", FILES_V3),
    Migration(4, "vectors of a new embedding model, staged while the index re-embeds", REEMBED_V4),
    Migration(5, "run items count the starts a dying process left unfinished", ITEM_STARTS_V5),
    Migration(6, "documents may be processing (an upload finished in the background)", DOCUMENT_PROCESSING_V6),
    Migration(7, "run items may be cancelled (the items a cancelled or failed run did not do)", RUN_ITEM_CANCELLED_V7),
    Migration(8, "runs record the zone their deadline was read in", RUN_DEADLINE_ZONE_V8),
    Migration(9, "documents record the reader version they were read with", READER_VERSION_V9),
    Migration(10, "summaries record how they were made (the model's, or the document's lead)", SUMMARY_METHOD_V10),
]
