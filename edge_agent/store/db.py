"""SQLite connection handling: WAL, busy timeout, one serialised writer, numbered migrations."""
from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence


@dataclass(frozen=True)
class Migration:
    """One schema change; `version` numbers are unique and applied in ascending order."""

    version: int
    name: str
    sql: str


class MigrationError(RuntimeError):
    """The database's schema is newer than this program, or a migration failed."""


class SqliteDatabase:
    """A SQLite file in WAL mode: per-thread reader connections and one writer behind a lock.

    Every write goes through `write()`, which serialises writers in this process
    (SQLite's own lock plus the busy timeout serialises them across processes).
    Durability: synchronous=FULL, so a write that returned survives a power loss (the WAL is
    fsynced at each commit; an answer that says "stored" is true after a reboot). A write that
    only a successor process needs (a run's heartbeat, the record that an item started) may pass
    durable=False: it survives the process being killed, not a power loss, and costs no fsync.
    Whatever the mode, a transaction is all or nothing.
    One process opens its database once and shares it (`share()`): each user closes its
    share, and the connections close with the last one.
    """

    def __init__(self, path: Path | str, migrations: Sequence[Migration] | None = None, busy_timeout_ms: int = 10_000,
                 read_only: bool = False):
        """Open (creating and migrating) the file; read_only opens an existing one for reading only (a read-only
        file or mount too), writes nothing, and raises FileNotFoundError when it is missing, MigrationError when it
        lacks migrations (a writer, e.g. the daemon, applies them)."""
        self.path = Path(path)
        self.read_only = read_only
        self._uri = None
        if read_only:
            if not self.path.is_file():
                raise FileNotFoundError(f"no database at {self.path}")
            self._uri = f"{self.path.resolve().as_uri()}?mode=ro"
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.busy_timeout_ms = busy_timeout_ms
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._users = 1
        self._writer = self._open()
        if migrations is None:
            from edge_agent.store.migrations import MIGRATIONS

            migrations = MIGRATIONS
        try:
            if read_only:
                missing = sorted({m.version for m in migrations} - set(self.schema_versions()))
                if missing:
                    raise MigrationError(f"database {self.path} lacks schema versions {missing}: open it once with a "
                                         "writer (start the daemon, or run a command that writes)")
            else:
                self.migrate(migrations)
        except BaseException:
            self.close()  # no connection left open behind a failed open
            raise

    def _open(self) -> sqlite3.Connection:
        if self._uri is not None:
            return self._open_read_only()
        conn = sqlite3.connect(
            str(self.path), timeout=self.busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # pragma: no cover - e.g. a read-only or network file system
            raise sqlite3.OperationalError(f"could not switch {self.path} to WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _open_read_only(self) -> sqlite3.Connection:
        """mode=ro; where SQLite cannot even create the WAL's shared-memory file (a read-only folder or mount),
        immutable=1 (then nobody may be writing: a read-only mount has no writer)."""
        assert self._uri is not None
        for uri in (self._uri, self._uri + "&immutable=1"):
            conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout_ms / 1000, isolation_level=None,
                                   check_same_thread=False)
            try:
                conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.OperationalError:
                conn.close()
                continue
            conn.row_factory = sqlite3.Row
            return conn
        raise sqlite3.OperationalError(f"cannot open {self.path} for reading")

    # --- connections ------------------------------------------------------
    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A reader connection for this thread (autocommit; each statement sees committed data)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        yield conn

    @contextmanager
    def write(self, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """The writer connection inside one IMMEDIATE transaction; commits on exit, rolls back on error.

        durable=False commits without an fsync (synchronous=NORMAL for this transaction): kept when the
        process dies, possibly lost (whole) on a power loss; a later durable commit fsyncs it too.
        Raises sqlite3.Error (the transaction is rolled back).
        """
        with self._write_lock:
            conn = self._writer
            if conn.in_transaction:  # nested use by the same thread: join the outer transaction
                yield conn
                return
            if not durable:
                conn.execute("PRAGMA synchronous=NORMAL")
            try:
                self._begin(conn)
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    # a failed COMMIT (disk full) may leave the transaction open, or SQLite may have rolled it back
                    # already: never leave it open, or the next write would join it
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            finally:
                if not durable:
                    conn.execute("PRAGMA synchronous=FULL")

    def _begin(self, conn: sqlite3.Connection) -> None:
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    # --- migrations -------------------------------------------------------
    def migrate(self, migrations: Sequence[Migration]) -> list[int]:
        """Apply the migrations not yet recorded in `schema_migrations`; returns the versions applied.

        Raises MigrationError if the file holds a version this program does not know.
        """
        versions = [m.version for m in migrations]
        if len(set(versions)) != len(versions):
            raise MigrationError("duplicate migration version numbers")
        applied: list[int] = []
        self._writer.execute("PRAGMA foreign_keys=OFF")  # a table rebuild (SQLite's 12 steps) must not cascade; checked below
        try:
            self._migrate(migrations, versions, applied)
        finally:
            self._writer.execute("PRAGMA foreign_keys=ON")
        return applied

    def _migrate(self, migrations: Sequence[Migration], versions: list[int], applied: list[int]) -> None:
        with self.write() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            unknown = done - set(versions)
            if unknown:
                raise MigrationError(
                    f"database {self.path} has schema versions {sorted(unknown)} that this program does not know: "
                    "upgrade edge-agent or use another data_dir"
                )
            for m in sorted(migrations, key=lambda m: m.version):
                if m.version in done:
                    continue
                for statement in _split_sql(m.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                    (m.version, m.name, time.time()),
                )
                applied.append(m.version)
            if applied and conn.execute("PRAGMA foreign_key_check").fetchone() is not None:
                raise MigrationError(f"migrations {applied} broke a foreign key in {self.path}: nothing was changed")

    def schema_versions(self) -> list[int]:
        """Versions recorded in `schema_migrations`, ascending."""
        with self.read() as conn:
            return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]

    def share(self) -> "SqliteDatabase":
        """This database for one more user (a service that closes it when it closes); returns self."""
        with self._write_lock:
            self._users += 1
        return self

    def close(self) -> None:
        """Close this user's share; the last one closes every connection this object opened."""
        with self._write_lock:
            self._users -= 1
            if self._users > 0:
                return
        with self._readers_lock:
            for conn in self._readers:
                try:
                    conn.close()
                except sqlite3.Error:  # pragma: no cover
                    pass
            self._readers.clear()
        self._local = threading.local()
        with self._write_lock:
            self._writer.close()


def _split_sql(sql: str) -> list[str]:
    """Split a migration script into complete statements (sqlite3.complete_statement aware)."""
    out, buf = [], ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
