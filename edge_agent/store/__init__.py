"""SQLite storage: connection, numbered migrations; all SQL lives in this package."""
from edge_agent.store.db import Migration, MigrationError, SqliteDatabase
from edge_agent.store.documents import ChunkRecord, DocumentRecord, DocumentStore

__all__ = ["Migration", "MigrationError", "SqliteDatabase", "ChunkRecord", "DocumentRecord", "DocumentStore"]
