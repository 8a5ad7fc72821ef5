"""The `reindex` kind: bring the document index in line with configured folders under `ingest_roots`.

Each file under the folders is one item (added, updated, or left unchanged when its content
hash is the same; skipped, saying why, while it is empty or binary under a text extension, so it
does not fail every night; a file added with the content of a document indexed already, e.g. renamed,
takes over its summary and labels), and each indexed document whose file is gone is one item (removed); all go
through the DocumentService, which must be the writable one: the daemon owns the index while it
runs, so a reindex from the command line at that time fails and says to use the daemon.

A file whose bytes are unchanged but which an older reader read (rag.reader_version: a loader fix since) is read
again ("updated", result "reread": "done"), its old chunks searchable until the new ones commit. An upgrade
may leave a whole corpus so: at most `reread_limit` such files per run (REREAD_LIMIT unless set; null: no
limit) are read again, the rest stay as they are ("unchanged", "reread": "later") for the next runs, so new and
changed files are never stuck behind a corpus being read again. A deadline or max_items bounds the run as ever.
A re-read whose text changed marks the document's summary and labels stale (store.text_state: the next summarize
and classify runs redo them); one whose text came out the same leaves them current. Its result says which:
"text": "changed" (the title or the chunks differ) or "same".
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from edge_agent.jobs.kinds import InvalidJobError, Item, ItemError, JobContext, ListingStopped, ThreadPending, WriteGate
from edge_agent.services.document_results import DocumentError, DocumentNotFoundError, escaped_name, file_name_error
from edge_agent.services.errors import UnavailableError
from edge_agent.services.paths import PathNotAllowedError, resolve_confined, shown_path, walk_folders
from edge_agent.store.summaries import SummaryStore
from edge_agent.store.labels import LabelStore

log = logging.getLogger(__name__)

PARAMS = {"folders", "remove_deleted", "reread_limit", "stall_timeout_s"}
# a folder listing, an existence check or a file's stat, open or read that makes no progress this long is taken for a network
# share that does not answer (NFS hard mounts wait for good): that folder's item fails saying so, the run goes on
STALL_TIMEOUT_S = 60
# How long a job's create (and each run's start) waits for a folder to be found: a request must not hang on a share
# that does not answer (its check goes on in a daemon thread; the request gets a 400 that says so).
CHECK_TIMEOUT_S = 10.0
NOT_ANSWERING = ("folder {folder!r} did not answer within {s:g} s while {what} (a network share that does not answer "
                 "looks like this): none of its files were read and none of its documents removed. Check the share; the "
                 "next run tries again")
STILL_HUNG = ("folder {folder!r} still does not answer: {what} started {ago:.0f} s ago has not returned (a network share "
              "that does not answer looks like this); it was not tried again. Check the share; a run after it answers goes on")
# files read again per run only because an older reader read them (new and changed files are not counted): re-reading
# ran at 8.5 chunks/s with multilingual-e5-small on 2 shared cores (scripts/bench_reread.py), so 500 documents of
# 8-26 chunks are 8-25 minutes added to a night's run
REREAD_LIMIT = 500
# a folder that lists no file while documents are indexed from it: what a network share that did not mount (an empty
# mount point) looks like, on a configured folder or on a folder under it (_empty_folder). Removing them all lost every
# summary and label and re-embedded everything the next night.
EMPTY_FOLDER = ("folder {folder!r} has no files, but {n} documents are indexed from it: none was removed (a share that is "
                "not mounted looks like this). Mount it; if its files are really gone, run the job with \"remove_deleted\": "
                "\"all\" once")
DAEMON_HINT = ("another edge-agent process (the daemon) owns the document index: run the job through it "
               "(`POST /v1/jobs/{id}/run`), or stop the daemon first")


class _Hung:
    """File-system work given up on while it still hangs, by the configured folder it is in: while one is alive, that
    folder is not listed or read again (each try would leave one more thread waiting on the share)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_folder: dict[str, tuple[Callable[[], bool], float, str]] = {}

    def add(self, folder: str, alive: Callable[[], bool], what: str) -> None:
        with self._lock:
            self._by_folder[folder] = (alive, time.monotonic(), what)

    def get(self, folder: str) -> tuple[float, str] | None:
        """(seconds since it began, what it is) of the work still hanging in folder, or None."""
        with self._lock:
            got = self._by_folder.get(folder)
            if got is None:
                return None
            alive, since, what = got
            if not alive():
                del self._by_folder[folder]
                return None
            return time.monotonic() - since, what


HUNG = _Hung()


class _FolderScan:
    """One configured folder's file-system work for list_items, in a thread of its own: is it there, its files (and the
    folders that list one), and which of its indexed documents' files are gone (with the empty folder each is kept
    for). The run loop waits for it only while it makes progress (tick()): a listing or stat on a share that does not
    answer hangs in this thread, not in the run loop."""

    def __init__(self, folder: str, indexed: list[dict], check_gone: bool, keep_empty: bool, outdated: set[str]):
        self.folder = folder
        self.step = "listing it"
        self.last = time.monotonic()
        self.files: list[Path] = []
        self.filled: set[str] = set()
        self.gone: list[dict] = []
        self.outdated: set[Path] = set()  # the files listed that an older reader read
        self.missing = False
        self.error: BaseException | None = None
        self._finished = threading.Event()
        self._args = (indexed, check_gone, keep_empty, outdated)
        threading.Thread(target=self._work, name=f"reindex list {Path(folder).name}"[:64], daemon=True).start()

    def tick(self) -> None:
        self.last = time.monotonic()

    def alive(self) -> bool:
        return not self._finished.is_set()

    def wait(self, stall_s: float, cancelled: Callable[[], bool]) -> bool:
        """True when the scan finished; False when it made no progress for stall_s. Raises ListingStopped on a cancel."""
        while not self._finished.wait(0.05):
            if time.monotonic() - self.last >= stall_s:
                return False
            if cancelled():
                raise ListingStopped("the run was cancelled while its folders were listed")
        return True

    def _work(self) -> None:
        try:
            self._scan(*self._args)
        except BaseException as e:  # handed to list_items in the run loop's thread
            self.error = e
        finally:
            self._finished.set()

    def _scan(self, indexed: list[dict], check_gone: bool, keep_empty: bool, outdated: set[str]) -> None:
        folder = self.folder
        if not os.path.isdir(folder):
            self.missing = True
            return
        self.tick()
        for dirpath, names in walk_folders(folder, self.tick):  # a tick per entry listed
            self.files.extend(Path(dirpath) / n for n in names)
            if names:
                parent = Path(dirpath)
                while True:
                    self.filled.add(str(parent))
                    if str(parent) == folder or parent == parent.parent:
                        break
                    parent = parent.parent
        if outdated:  # stored under its resolved path: a symlinked file's target (the folder itself is resolved)
            self.step = "checking which files an older reader read"
            for path in self.files:
                self.tick()
                if str(path) in outdated or path.is_symlink() and os.path.realpath(path) in outdated:
                    self.outdated.add(path)
        if not check_gone:
            return
        self.step = "checking which indexed files are gone"
        listed = {str(p) for p in self.files}
        for doc in indexed:
            if not doc["path"] or doc["path"] in listed:
                continue  # listed just now: there (a symlinked file is stored under its target, so it is checked)
            self.tick()
            if os.path.exists(doc["path"]):
                continue
            if keep_empty:
                empty = _empty_folder(doc["path"], folder, self.filled)
                if empty is not None:
                    doc["kept_in"] = empty
            self.gone.append(doc)


class _NoAnswer(Exception):
    """A check that did not return in time (_within)."""


def _within(timeout: float, check: Callable[[], tuple[Path, bool]]) -> tuple[Path, bool]:
    """check() run in a daemon thread, its result or its exception; _NoAnswer when it has not returned after timeout
    seconds (a stat on a dead network share can block for minutes; the thread is left to finish on its own)."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = check()
        except BaseException as e:  # handed to the caller
            box["error"] = e

    t = threading.Thread(target=run, name="reindex folder check", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        raise _NoAnswer
    if "error" in box:
        raise box["error"]
    return box["value"]


def _folder_check(folder: str, roots: list) -> tuple[Path, bool]:
    real = resolve_confined(folder, roots)
    return real, real.is_dir()


def _folder_of(path: str | None, folders: list[str]) -> str | None:
    """The configured folder (the longest) that path lies in, or None."""
    inside = [f for f in folders if path and (path == f or path.startswith(f.rstrip("/") + "/"))]
    return max(inside, key=len) if inside else None


def _shown(folder: str, ctx: JobContext) -> str:
    return shown_path(folder, list(ctx.settings.ingest_roots)) or Path(folder).name


def _empty_folder(path: str, folder: str, filled: set[str]) -> str | None:
    """The folder a gone file's document is kept for, or None (it is removed): the nearest folder above the file that
    still exists, up to the configured `folder`, when it lists no file (`filled`: the folders that list one). A share
    mounted on the configured folder or on a folder under it that did not mount is such an empty folder; a file
    deleted, or a folder deleted with its files, leaves a nearest folder that lists files or none that exists."""
    parent = Path(path).parent
    while str(parent) != folder and not parent.is_dir():
        if parent == parent.parent or not str(parent).startswith(folder.rstrip("/") + "/"):
            return None
        parent = parent.parent
    return None if str(parent) in filled else str(parent)


class ReindexKind:
    """Add new, update changed and remove deleted files of folders under the ingest roots."""

    name = "reindex"
    prompt_version = "reindex-1"
    max_inflight = 1  # one file at a time, as when items ran in the run loop's thread (the embedder has the cores)

    def validate(self, params: dict, ctx: JobContext) -> dict:
        """Normalised params (folders resolved); raises InvalidJobError for a folder outside ingest_roots."""
        params = dict(params or {})
        unknown = set(params) - PARAMS
        if unknown:
            raise InvalidJobError(
                f"unknown reindex params: {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(PARAMS))}", param="params")
        folders = params.get("folders")
        if isinstance(folders, str):
            folders = [folders]
        if not isinstance(folders, list) or not folders or not all(isinstance(f, str) and f.strip() for f in folders):
            raise InvalidJobError("folders must be a non-empty list of folders under the ingest roots", param="params.folders")
        roots = list(ctx.settings.ingest_roots)
        resolved = []
        for folder in folders:
            try:
                real, is_dir = _within(CHECK_TIMEOUT_S, lambda f=folder: _folder_check(f, roots))
            except _NoAnswer:
                raise InvalidJobError(f"folder {folder!r} did not answer within {CHECK_TIMEOUT_S:g} s (a network share that "
                                      "is down?): try again when it is back", param="params.folders") from None
            except PathNotAllowedError as e:
                raise InvalidJobError(f"folder {folder!r} refused: {e}", param="params.folders") from None
            except (FileNotFoundError, NotADirectoryError):
                raise InvalidJobError(f"folder {folder!r} does not exist under the ingest roots", param="params.folders") from None
            except OSError as e:
                raise InvalidJobError(f"folder {folder!r} cannot be opened: {e.strerror or type(e).__name__}",
                                      param="params.folders") from None
            if not is_dir:
                raise InvalidJobError(f"{folder!r} is a file, not a folder", param="params.folders")
            resolved.append(str(real))
        remove = params.get("remove_deleted", True)
        if not (isinstance(remove, bool) or remove == "all"):
            raise InvalidJobError('remove_deleted must be true, false or "all" (also when a folder has no file left)',
                                  param="params.remove_deleted")
        limit = params.get("reread_limit", REREAD_LIMIT)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidJobError("reread_limit must be a whole number >= 0 (files an older reader read, read again per run) "
                                  "or null (no limit)", param="params.reread_limit")
        stall = params.get("stall_timeout_s", STALL_TIMEOUT_S)
        if isinstance(stall, bool) or not isinstance(stall, (int, float)) or not 1 <= stall <= 3600:
            raise InvalidJobError("stall_timeout_s must be a number of seconds from 1 to 3600 (how long a folder listing "
                                  "or a file's read may make no progress before its share is taken for one that "
                                  "does not answer)", param="params.stall_timeout_s")
        out = {"folders": sorted(set(resolved)), "remove_deleted": remove, "reread_limit": limit}
        return out if "stall_timeout_s" not in params else {**out, "stall_timeout_s": stall}

    def _service(self, ctx: JobContext):
        docs = ctx.documents()
        if docs is None:
            raise UnavailableError("the document service is not loaded yet")
        if getattr(docs, "read_only", False):
            raise InvalidJobError(DAEMON_HINT)
        return docs

    def list_items(self, params: dict, ctx: JobContext, since: float | None) -> Iterator[Item]:
        """Files under the folders (file:<path>), then indexed documents whose file is gone (remove:<id>). A file an
        older reader read has "reread" in its payload: True for the first `reread_limit` of them, then False. A folder
        whose listing or existence checks make no progress for stall_timeout_s (a share that does not answer) gives one
        failed item (folder:<name>) instead, and none of its documents is removed. Raises ListingStopped on a cancel."""
        docs = self._service(ctx)
        roots = list(ctx.settings.ingest_roots)
        seen = set()
        limit = params.get("reread_limit", REREAD_LIMIT)
        stall_s = float(params.get("stall_timeout_s", STALL_TIMEOUT_S))
        rereads = 0
        remove = params.get("remove_deleted", True)
        store = SummaryStore(ctx.db)
        scans: list[_FolderScan] = []
        for folder in params["folders"]:
            shown = _shown(folder, ctx)
            hung = HUNG.get(folder)
            if hung is not None:
                yield Item(f"folder:{shown}", {"action": "refuse", "path": folder, "error": STILL_HUNG.format(
                    folder=shown, what=hung[1], ago=hung[0])})
                continue
            indexed = store.documents_under(folder) if remove else []
            scan = _FolderScan(folder, indexed, bool(remove), remove != "all", docs.outdated_files(folder))
            if not scan.wait(stall_s, ctx.cancelled):
                HUNG.add(folder, scan.alive, "a listing" if scan.step == "listing it" else "a check of its files")
                log.warning("reindex: folder %s did not answer within %g s while %s; its files and documents are left as "
                            "they are", folder, stall_s, scan.step)
                yield Item(f"folder:{shown}", {"action": "refuse", "path": folder, "error": NOT_ANSWERING.format(
                    folder=shown, s=stall_s, what=scan.step)})
                continue
            if scan.error is not None:
                raise scan.error
            if scan.missing:
                raise InvalidJobError(f"folder {Path(folder).name!r} no longer exists; fix or delete the job")
            scans.append(scan)
        for scan in scans:
            for path in scan.files:
                why = file_name_error(shown_path(str(path), roots) or path.name)
                shown = escaped_name(str(path))  # a name not UTF-8 could not even be stored as the item's key
                key = f"file:{shown}"
                if key in seen:
                    continue
                seen.add(key)
                if why is not None:
                    yield Item(key, {"action": "refuse", "path": shown, "error": why})
                    continue
                payload = {"action": "add", "path": str(path)}
                if path in scan.outdated:
                    payload["reread"] = limit is None or rereads < limit
                    rereads += payload["reread"]
                yield Item(key, payload)
        if remove:
            for scan in scans:
                emptied: dict[str, int] = {}  # an empty folder -> how many of the gone documents were under it
                for doc in scan.gone:
                    if "kept_in" in doc:
                        emptied[doc["kept_in"]] = emptied.get(doc["kept_in"], 0) + 1
                for empty in sorted(emptied):  # a share that did not mount (here or in a folder under it): keep them
                    shown = _shown(empty, ctx)
                    yield Item(f"folder:{shown}", {"action": "refuse", "path": empty, "error": EMPTY_FOLDER.format(
                        folder=shown, n=emptied[empty])})
                for doc in scan.gone:
                    if "kept_in" not in doc:
                        yield Item(f"remove:{doc['id']}", {"action": "remove", "document_id": doc["id"], "path": doc["path"]})

    @staticmethod
    def _carry_over(db, document_id: int, gate: WriteGate | None = None) -> None:
        """A file added (new to the index) takes the summary and labels of a document with the same content (the file
        before a rename, or a copy). Done at once, not in the item's commit: the item that removes the old path's
        document may run before that commit. Idempotent (a document that has them keeps its own)."""
        with gate.write() if gate is not None else contextlib.nullcontext(), db.write() as conn:
            SummaryStore.carry_effect(document_id)(conn)
            LabelStore.carry_effect(document_id)(conn)

    def start_item(self, item: Item, params: dict, ctx: JobContext) -> ThreadPending:
        """Runs the item in a thread of its own (ingestion is I/O and embedding, not generation): a read that hangs (a
        network share) or a slow loader leaves the run loop free to stop the run at a cancel or its deadline; the work
        it gave up on then stores nothing (WriteGate) and the item stays pending for the next run."""
        docs = self._service(ctx)
        refused = item.payload.get("action") == "refuse"  # its own error says why (the folder that did not answer)
        folder = None if refused else _folder_of(item.payload.get("path"), params.get("folders", []))
        hung = HUNG.get(folder) if folder else None
        if hung is not None:  # one more thread waiting on a share that does not answer helps no one
            raise ItemError(STILL_HUNG.format(folder=_shown(folder, ctx), what=hung[1], ago=hung[0]))
        name = f"reindex {item.key.rsplit('/', 1)[-1]}"[:64]
        stall_s = float(params.get("stall_timeout_s", STALL_TIMEOUT_S))

        def stalled(pending: ThreadPending) -> str:
            if folder:
                HUNG.add(folder, pending.alive, f"a read of {Path(item.payload['path']).name!r}")
            log.warning("reindex: %s did not answer within %g s; the item failed", item.payload.get("path"), stall_s)
            return (f"the file did not answer within {stall_s:g} s (a network share that does not answer looks like "
                    "this): nothing was changed for it, and the rest of its folder waits for the next run while the "
                    "read hangs. Check the share")

        return ThreadPending(lambda gate: self._run(docs, item.payload, ctx.db, gate), name=name, stall_s=stall_s,
                             on_stall=stalled)

    @classmethod
    def _run(cls, docs, payload: dict, db=None, gate: WriteGate | None = None) -> dict:
        if gate is None:
            return cls._run_guarded(docs, payload, db, None)
        with docs.guarded_writes(gate.write):  # every write of the service in this thread passes the gate
            return cls._run_guarded(docs, payload, db, gate)

    @classmethod
    def _run_guarded(cls, docs, payload: dict, db, gate: WriteGate | None) -> dict:
        path = payload["path"]
        if payload["action"] == "refuse":  # skipped, saying why (a name with a control or bidi-override character)
            raise ItemError(payload["error"])
        io = gate.io if gate is not None else contextlib.nullcontext
        if payload["action"] == "remove":
            with io():
                there = os.path.exists(path)
            if there:
                return {"action": "kept", "document_id": payload["document_id"], "path": path}
            try:
                docs.delete(int(payload["document_id"]))
            except DocumentNotFoundError:
                return {"action": "already_removed", "document_id": payload["document_id"], "path": path}
            return {"action": "removed", "document_id": payload["document_id"], "path": path}
        try:
            with io():  # the file's first open and read: where a share that does not answer hangs
                skip = docs.skip_reason(path)
        except OSError:
            skip = None  # add_file says what is wrong
        if skip is not None:  # looked at again each run: once it has text, it is added
            return {"action": "skipped", "reason": skip, "path": path}
        try:
            res = docs.add_file(path, confined=True, reread=payload.get("reread", True), io=io)  # its open and read watched too
        except DocumentError as e:
            raise ItemError(str(e)) from None
        if res.status == "failed":
            raise ItemError(res.error or "the file could not be read")
        if res.status == "added" and db is not None and res.document_id is not None:
            cls._carry_over(db, int(res.document_id), gate)
        out = {"action": res.status, "document_id": res.document_id, "path": path, "chunks": res.chunks}
        if "reread" in payload:  # an older reader had read it: read again now, or left for a later run (reread_limit)
            out["reread"] = "later" if not payload["reread"] and res.status == "unchanged" else "done"
        if res.text is not None:  # read again with its bytes unchanged: did the text come out differently?
            out["text"] = res.text
        return out
