"""Documents API: upload / add, list, get, delete documents and retrieve chunks (thin routes over DocumentService).

Errors of the document service (DocumentError) are mapped here; everything else (bad JSON,
refused keys or hosts, unexpected failures) goes to the app's handlers like any other route.
"""
from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from flask import Blueprint, Response, request
from pydantic import BaseModel, Discriminator, Field, RootModel, Tag
from pydantic.json_schema import models_json_schema

from edge_agent.api import protocol as p
from edge_agent.api.context import runtime as _runtime
from edge_agent.api.errors import ApiError, error_body, error_response, read_json
from edge_agent.api.errors import scrub_paths as _scrub
from edge_agent.services.documents import DocumentError, DocumentNotFoundError, FileTooLargeError, IngestResult, PathRefusedError
from edge_agent.services.grounding import DocumentsUnavailableError
from edge_agent.services.ingest_tasks import FolderTask, TooManyTasksError
from edge_agent.services.storage import InsufficientStorageError

bp = Blueprint("documents", __name__)

MAX_LIMIT = 1000
UPLOAD_SLACK = 1024 * 1024  # multipart headers and boundaries on top of the file


# --- protocol ---------------------------------------------------------------
class AddTextRequest(p._Request):
    """A text document; one with the same title is replaced."""

    title: str = Field(min_length=1, max_length=500, pattern=r"\S")
    text: str = Field(min_length=1, pattern=r"\S")


class AddPathRequest(p._Request):
    """A file or folder (recursively) under one of the server's ingest roots."""

    path: str = Field(min_length=1, max_length=4096)


# {title, text} or {path}, told apart by `path`, so a bad body gets the errors of the shape it was sent in (as a plain
# union {"path": ""} was answered "invalid value for 'title': Field required").
def _shape(body: Any) -> str:
    return "AddPathRequest" if isinstance(body, dict) and "path" in body else "AddTextRequest"  # (a capital: no param)


_AddDocument = Annotated[Annotated[AddTextRequest, Tag("AddTextRequest")] | Annotated[AddPathRequest, Tag("AddPathRequest")],
                         Discriminator(_shape)]


class AddDocumentRequest(RootModel[_AddDocument]):
    """A text document ({title, text}) or a file or folder under an ingest root ({path})."""


class RetrieveRequest(p._Request):
    query: str = Field(min_length=1, max_length=8000, pattern=r"\S")
    k: p.Int(ge=1, le=100) = 5
    filters: p.RagFilters | None = None
    mode: Literal["hybrid", "dense", "bm25"] = "hybrid"
    diversity: float | None = Field(None, ge=0.0, le=1.0, description="MMR: 0 ranks by relevance alone, 1 by difference alone")
    neighbors: p.Int(ge=0, le=3) = 0  # each hit's text widened by this many chunks either side
    group: Literal["chunk", "document"] = "chunk"  # document: the k best documents, each by its best chunk


IngestStatus = Literal["added", "updated", "unchanged", "failed", "processing"]  # processing: 202, finished in the background


class IngestedDocument(BaseModel):
    object: Literal["document.ingest"] = "document.ingest"
    status: IngestStatus
    source: str
    document_id: int | None = None
    title: str | None = None
    chunks: int
    error: str | None = None


class IngestCounts(BaseModel):
    added: int
    updated: int
    unchanged: int
    failed: int
    processing: int = 0


class IngestList(BaseModel):
    object: Literal["list"] = "list"
    data: list[IngestedDocument]
    counts: IngestCounts


class IngestTask(BaseModel):
    """A folder ingestion running in the background (poll `url`)."""

    object: Literal["document.ingest_task"] = "document.ingest_task"
    id: str
    url: str
    path: str
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    files_total: int | None = None
    files_done: int
    counts: IngestCounts
    data: list[IngestedDocument]
    error: str | None = None
    error_code: str | None = None
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None


class Document(BaseModel):
    object: Literal["document"] = "document"
    id: int
    source_key: str
    title: str
    path: str | None = None
    kind: str
    mime: str | None = None
    content_hash: str
    size: int
    mtime: float | None = None
    status: str = Field(description="ready, failed (error says why) or processing (an upload finished in the background)")
    error: str | None = None
    chunk_count: int
    created_at: float
    updated_at: float = Field(description="when it was last stored with a new content or text; a re-read whose title "
                              "and text came out the same keeps it (changed_only jobs select by it)")
    reader_version: int | None = Field(None, description="the version of its type's reader that read it; null: read before "
                                       "versions were recorded. A reindex reads a file again when an older reader read it")


class ChunkInfo(BaseModel):
    id: int
    ordinal: int
    page: int | None = None
    heading: str | None = None
    char_start: int
    char_end: int
    token_count: int


class DocumentSummary(BaseModel):
    """The summary a summarize job stored (content_hash: the document's content it was made from)."""

    summary: str
    method: str | None = Field(None, description="How it was made: whole, lead or sections (the model's summary of the "
                               "whole text, of its beginning, or of its sections' summaries); extract: the document's "
                               "own first sentences, stored because the model gave no usable summary (fallback "
                               "\"extract\"); null: stored before methods were recorded.")
    content_hash: str = Field(description="the document's content_hash when summarized; \"stale:<hash>\" when the "
                              "document was read again since (a newer reader) and its text changed: the next summarize "
                              "run redoes it")
    run_id: str | None = None
    bundle_id: str | None = None
    prompt_version: str | None = None
    created_at: float


class DocumentLabel(BaseModel):
    """The label a classify job stored for the document in one label set."""

    label_set: str
    label: str
    score: float
    method: str
    run_id: str | None = None
    bundle_id: str | None = None
    prompt_version: str | None = None
    created_at: float


class DocumentDetail(Document):
    summary: DocumentSummary | None = None
    labels: list[DocumentLabel] = Field(default_factory=list, description="Labels stored by classify jobs, one per label set.")
    chunks: list[ChunkInfo]


class DocumentList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Document]
    total: int
    offset: int
    limit: int


class DocumentDeleted(BaseModel):
    id: int
    object: Literal["document"] = "document"
    deleted: Literal[True] = True


class RetrievedChunk(BaseModel):
    object: Literal["retrieval.chunk"] = "retrieval.chunk"
    document_id: int
    chunk_id: int
    title: str
    path: str | None = None
    type: str
    location: p.SourceLocation
    score: float
    text: str
    snippet: str
    dense_rank: int | None = None
    bm25_rank: int | None = None


class RetrieveList(BaseModel):
    object: Literal["list"] = "list"
    data: list[RetrievedChunk]


# --- helpers ----------------------------------------------------------------
def _service():
    """The DocumentService; raises DocumentsUnavailableError (503, Retry-After) while it loads."""
    runtime = _runtime()
    svc = getattr(runtime, "documents", None)
    if svc is None:
        why = getattr(runtime, "documents_status", None) or "not loaded"
        raise DocumentsUnavailableError(f"the document index is unavailable: {why}; retry shortly")
    return svc


def _max_body() -> int:
    settings = getattr(_runtime(), "settings", None)
    return int(getattr(settings, "max_body_bytes", 8 * 1024 * 1024))


def _json(model: BaseModel, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status=status, mimetype="application/json")


def _ingested(res: IngestResult, svc) -> IngestedDocument:
    out = res.to_dict()
    out["source"] = _scrub(svc.shown_key(out["source"]))
    if out.get("error"):
        out["error"] = _scrub(out["error"])
    return IngestedDocument.model_validate(out)


def _query_int(name: str, default: int, lo: int, hi: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"[0-9]{1,19}", raw) or not lo <= int(raw) <= hi:
        raise ApiError(400, f"{name} must be an integer from {lo} to {hi}", param=name, code="invalid_value")
    return int(raw)


def _shown(svc, doc: dict[str, Any]) -> dict[str, Any]:
    """A document without server paths: path and source_key relative to their ingest root."""
    return {**doc, "path": svc.shown_path(doc.get("path")), "source_key": svc.shown_key(doc["source_key"])}


def _task_json(svc, task: FolderTask) -> IngestTask:
    results = list(task.results)
    return IngestTask(
        id=task.id, url=f"/v1/documents/tasks/{task.id}", path=task.shown, status=task.status, files_total=task.files_total,
        files_done=len(results), counts=IngestCounts(**task.counts()), data=[_ingested(r, svc) for r in results],
        error=_scrub(task.error) if task.error else None, error_code=task.error_code, created_at=task.created_at,
        started_at=task.started_at, finished_at=task.finished_at,
    )


def _insufficient(exc: InsufficientStorageError, kept: list[IngestResult] | None = None, svc=None) -> Response:
    """507: nothing of the failing document was written; `data` lists what earlier files of the request kept."""
    body = error_body(_scrub(str(exc)), "server_error", None, exc.code)
    body["error"]["needed_bytes"] = exc.needed or None
    body["error"]["free_bytes"] = exc.free
    if kept is not None:
        body["data"] = [_ingested(r, svc).model_dump() for r in kept]
    return Response(json.dumps(body), status=507, mimetype="application/json")


@bp.errorhandler(DocumentError)
def _on_document_error(exc: DocumentError):
    if isinstance(exc, InsufficientStorageError):
        return _insufficient(exc)
    if isinstance(exc, TooManyTasksError):
        return error_response(429, str(exc), "rate_limit_error", "path", exc.code, headers={"Retry-After": "10"})
    if isinstance(exc, DocumentNotFoundError):
        return error_response(404, _scrub(str(exc)), "not_found_error", exc.param, "document_not_found")
    if isinstance(exc, PathRefusedError):
        return error_response(403, _scrub(str(exc)), "permission_error", "path", "path_not_allowed")
    if isinstance(exc, FileTooLargeError):  # as a body over the upload limit is (_uploads)
        return error_response(413, _scrub(str(exc)), "invalid_request_error", exc.param, exc.code)
    return error_response(400, _scrub(str(exc)), "invalid_request_error", exc.param, exc.code)


# --- routes -----------------------------------------------------------------
def _uploads() -> list:
    limit = int(getattr(_service().limits, "max_file_bytes", 50 * 1024 * 1024)) + UPLOAD_SLACK
    if request.content_length is not None and request.content_length > limit:
        raise ApiError(413, f"the upload is larger than {limit} bytes", code="body_too_large")
    request.max_content_length = limit
    files = request.files.getlist("file")
    if not files:
        raise ApiError(400, "send the document as a multipart part named `file` with a file name", param="file", code="invalid_value")
    return files


_QUOTED_FILENAME = re.compile(r'(?:^|;)\s*filename="((?:[^"\\]|\\.)*)"', re.IGNORECASE)


def _upload_name(part) -> str:
    """A part's file name as the client wrote it, any path left on (the service keeps the last component).

    werkzeug reads filename="..." as an RFC 2616 quoted-string, where a backslash escapes the next character, so the
    bare Windows path IE and old Edge send (C:\\Users\\jan\\notulen.txt) became C:Usersjannotulen.txt. Browsers
    never escape a backslash there (WHATWG: only " and newlines, as %22 %0A %0D): when the quoted name holds one, take
    it as sent, only \\" read as a quote. An RFC 5987 filename* (werkzeug decodes it) is left to werkzeug."""
    disposition = part.headers.get("Content-Disposition", "")
    m = _QUOTED_FILENAME.search(disposition)
    if m and "\\" in m.group(1) and "filename*" not in disposition.lower():
        return m.group(1).replace('\\"', '"')
    return part.filename or ""


def _wait_param() -> bool | None:
    """?wait=true / false (one of them, once), or None; raises ApiError (400) for anything else."""
    values = request.args.getlist("wait")
    if not values:
        return None
    if len(values) > 1 or values[0] not in ("true", "false"):
        raise ApiError(400, "wait must be given once, as true or false", param="wait", code="invalid_value")
    return values[0] == "true"


def _in_background(svc, wait: bool | None, size: int) -> bool:
    """Whether an upload of `size` bytes is processed in the background: ?wait=false or Prefer: respond-async
    (RFC 7240) ask for it, ?wait=true refuses it, else uploads over upload_async_bytes do."""
    if wait is not None:
        return not wait
    prefer = [x.strip().lower() for x in request.headers.get("Prefer", "").split(",")]
    threshold = int(getattr(svc, "upload_async_bytes", 0) or 0)
    return "respond-async" in prefer or (threshold > 0 and size > threshold)


@bp.post("/v1/documents")
def add_documents():
    """Multipart upload (field `file`, repeatable), JSON {title, text}, or JSON {path} under an ingest root.

    An upload or a JSON text over upload_async_bytes, or any with Prefer: respond-async or ?wait=false, answers 202
    with its document id and status "processing" (Location: the document); the daemon finishes it in the background."""
    wait = _wait_param()
    svc = _service()
    if (request.mimetype or "").lower() == "multipart/form-data":
        results: list[IngestResult] = []
        for f in _uploads():
            data = f.read()
            try:
                add = svc.start_upload if _in_background(svc, wait, len(data)) else svc.add_upload
                results.append(add(_upload_name(f), data))
            except InsufficientStorageError as exc:  # the files before it are kept: say which
                return _insufficient(exc, results, svc) if results else _insufficient(exc)
            except DocumentError as exc:  # a later file refused (its name, its size): the earlier ones are kept, say which
                if not results:
                    raise
                body = error_body(_scrub(str(exc)), "invalid_request_error", exc.param, exc.code)
                body["data"] = [_ingested(r, svc).model_dump() for r in results]
                return Response(json.dumps(body), status=413 if isinstance(exc, FileTooLargeError) else 400, mimetype="application/json")
    else:
        body = read_json(AddDocumentRequest, _max_body()).root
        if isinstance(body, AddPathRequest):
            if svc.is_folder(body.path):
                task = svc.start_folder(body.path)
                resp = _json(_task_json(svc, task), 202)
                resp.headers["Location"] = f"/v1/documents/tasks/{task.id}"
                return resp
            results = [svc.add_file(body.path, confined=True)]
        else:
            add = svc.start_text if _in_background(svc, wait, len(body.text.encode("utf-8", "surrogatepass"))) else svc.add_text
            results = [add(body.title, body.text)]
    if len(results) == 1:
        res = results[0]
        if res.status == "failed":
            return _unreadable(res)
        if res.status == "processing":
            return _accepted(_json(_ingested(res, svc), 202), res.document_id)
        return _json(_ingested(res, svc), 201 if res.status in ("added", "updated") else 200)
    counts = IngestCounts(**{s: sum(r.status == s for r in results) for s in ("added", "updated", "unchanged", "failed", "processing")})
    out = IngestList(data=[_ingested(r, svc) for r in results], counts=counts)
    if counts.processing:
        return _accepted(_json(out, 202), next(r.document_id for r in results if r.status == "processing"))
    return _json(out, 201 if counts.added + counts.updated else 200)


def _unreadable(res: IngestResult) -> Response:
    """422. An upload stored nothing; a file under an ingest root is recorded failed (the record mirrors the file on
    disk, as a folder ingestion's are), and the error names that document (`document_id`)."""
    message = _scrub(res.error or "the document could not be read")
    param = "file" if res.source.startswith(("upload:", "text:")) else "path"
    if res.document_id is None:
        return error_response(422, message, "invalid_request_error", param, "unreadable_document")
    body = error_body(f"{message} (listed as document {res.document_id} with status failed until the file is fixed "
                      "and added again, or the document deleted)", "invalid_request_error", param, "unreadable_document")
    body["error"]["document_id"] = res.document_id
    return Response(json.dumps(body), status=422, mimetype="application/json")


def _accepted(resp: Response, document_id: int | None) -> Response:
    """A 202 for uploads finished in the background: Location names the (first) document to poll."""
    resp.headers["Location"] = f"/v1/documents/{document_id}"
    if "respond-async" in request.headers.get("Prefer", "").lower():
        resp.headers["Preference-Applied"] = "respond-async"
    return resp


@bp.get("/v1/documents")
def list_documents():
    offset = _query_int("offset", 0, 0, p.ID_MAX)
    limit = _query_int("limit", 50, 1, MAX_LIMIT)
    svc = _service()
    items, total = svc.list(offset, limit)
    return _json(DocumentList(data=[Document.model_validate(_shown(svc, d)) for d in items], total=total, offset=offset, limit=limit))


@bp.get("/v1/documents/tasks/<task_id>")
def get_task(task_id: str):
    svc = _service()
    task = svc.folder_tasks.get(task_id) if re.fullmatch(r"ingest_[0-9a-f]{16}", task_id) else None
    if task is None:
        raise DocumentNotFoundError("no folder ingestion with that id (tasks are forgotten when the daemon restarts)", param="task_id")
    return _json(_task_json(svc, task))


def _document_id(raw: str) -> int:
    """The path's id; one that is no id ("abc", -1) is unknown like any other (404 naming document_id), not "no route"."""
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19 and 1 <= int(raw) <= p.ID_MAX):
        raise DocumentNotFoundError(f"no document with id {raw[:40]!r}" if not raw.isdigit() else f"no document with id {raw}",
                                    param="document_id")
    return int(raw)


@bp.get("/v1/documents/<document_id>")
def get_document(document_id: str):
    svc = _service()
    return _json(DocumentDetail.model_validate(_shown(svc, svc.get(_document_id(document_id)))))


@bp.delete("/v1/documents/<document_id>")
def delete_document(document_id: str):
    doc_id = _document_id(document_id)
    _service().delete(doc_id)
    return _json(DocumentDeleted(id=doc_id))


@bp.post("/v1/retrieve")
def retrieve():
    req = read_json(RetrieveRequest, _max_body())
    filters = req.filters.to_dict() if req.filters else None
    svc = _service()
    hits = svc.retrieve(req.query, req.k, filters, req.mode, diversity=req.diversity, neighbors=req.neighbors, group=req.group)
    return _json(RetrieveList(data=[RetrievedChunk.model_validate({**h.to_dict(), "path": svc.shown_path(h.path)}) for h in hits]))


# --- OpenAPI ----------------------------------------------------------------
_MODELS = [
    (AddTextRequest, "validation"), (AddPathRequest, "validation"), (RetrieveRequest, "validation"),
    (IngestedDocument, "serialization"), (IngestList, "serialization"), (DocumentList, "serialization"),
    (DocumentDetail, "serialization"), (DocumentDeleted, "serialization"), (RetrieveList, "serialization"),
    (IngestTask, "serialization"),
]
_REF = "#/components/schemas/{model}"


def openapi_schemas() -> dict[str, Any]:
    """Component schemas of the document routes' bodies."""
    _, top = models_json_schema(_MODELS, ref_template=_REF)
    return top.get("$defs", {})


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


_ERRORS = {
    400: "Invalid request.", 401: "Missing or wrong API key.", 403: "Host or CORS origin not allowed, or a path outside the ingest roots.",
    404: "No such document, or a path that does not exist.", 413: "Request body too large.", 415: "Body is neither JSON nor multipart.",
    422: "The document could not be read (unsupported, encrypted, empty or broken); nothing of an upload is stored.", 500: "Internal error.",
    503: "The document index is still loading (see Retry-After) or failed to load.",
    429: "Too many folder ingestions are waiting (see Retry-After).",
    507: "Insufficient storage: nothing of the failing document was written (`data` lists earlier files of the request that were kept).",
}


def _responses(ok: dict[str, Any], codes: tuple[int, ...], secured: bool) -> dict[str, Any]:
    out = dict(ok)
    for code in codes:
        if code != 401 or secured:
            out[str(code)] = {"description": _ERRORS[code], "content": {"application/json": {"schema": _ref("ErrorResponse")}}}
    return out


def openapi_paths(runtime) -> dict[str, Any]:
    """OpenAPI path items of the document routes (their schemas: openapi_schemas())."""
    secured = bool(runtime.settings.accepted_keys())

    def js(name: str, description: str) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": _ref(name)}}}

    ingest_ok = {"oneOf": [_ref("IngestedDocument"), _ref("IngestList")]}
    upload = {"type": "object", "required": ["file"], "properties": {"file": {"type": "string", "format": "binary"}}}
    doc_id = {"name": "document_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1, "maximum": p.ID_MAX}}
    paging = [
        {"name": "offset", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0, "maximum": p.ID_MAX, "default": 0}},
        {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 50}},
    ]
    created = {"description": "Added or updated: one document, or a list for several uploads.", "content": {"application/json": {"schema": ingest_ok}}}
    accepted = {"description": "A folder: its ingestion runs in the background; poll the task's `url` (also in Location). "
                               "An upload or JSON text over upload_async_bytes (or with Prefer: respond-async or ?wait=false): status "
                               "processing and its document_id; poll GET /v1/documents/{id} (also in Location) until ready or failed.",
                "content": {"application/json": {"schema": {"oneOf": [_ref("IngestTask"), ingest_ok]}}}}
    task_id = {"name": "task_id", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^ingest_[0-9a-f]{16}$"}}
    unchanged = {"description": "Already indexed with the same content (or, for a folder, nothing changed).",
                 "content": {"application/json": {"schema": ingest_ok}}}
    return {
        "/v1/documents": {
            "post": {
                "summary": "Add documents: a multipart upload, JSON {title, text}, or JSON {path} under an ingest root",
                "operationId": "addDocuments",
                "parameters": [
                    {"name": "wait", "in": "query", "required": False, "schema": {"type": "string", "enum": ["true", "false"]},
                     "description": "Uploads and JSON texts: false processes them in the background (202), true in the request; "
                                    "by default those over upload_async_bytes go to the background."},
                    {"name": "Prefer", "in": "header", "required": False, "schema": {"type": "string"},
                     "description": "respond-async (RFC 7240): process uploads and JSON texts in the background (202)."},
                ],
                "requestBody": {"required": True, "content": {
                    "application/json": {"schema": {"oneOf": [_ref("AddTextRequest"), _ref("AddPathRequest")]}},
                    "multipart/form-data": {"schema": upload},
                }},
                "responses": _responses({"201": created, "200": unchanged, "202": accepted},
                                        (400, 401, 403, 404, 413, 415, 422, 429, 500, 503, 507), secured),
            },
            "get": {
                "summary": "Documents, oldest first, one page at a time", "operationId": "listDocuments", "parameters": paging,
                "responses": _responses({"200": js("DocumentList", "One page of documents.")}, (400, 401, 403, 500, 503), secured),
            },
        },
        "/v1/documents/tasks/{task_id}": {
            "get": {
                "summary": "A folder ingestion: its state and what happened to each file so far", "operationId": "getIngestTask",
                "parameters": [task_id],
                "responses": _responses({"200": js("IngestTask", "The task.")}, (401, 403, 404, 500, 503), secured),
            },
        },
        "/v1/documents/{document_id}": {
            "get": {
                "summary": "A document and where its chunks lie", "operationId": "getDocument", "parameters": [doc_id],
                "responses": _responses({"200": js("DocumentDetail", "The document.")}, (401, 403, 404, 500, 503), secured),
            },
            "delete": {
                "summary": "Delete a document, its chunks and vectors", "operationId": "deleteDocument", "parameters": [doc_id],
                "responses": _responses({"200": js("DocumentDeleted", "Deleted.")}, (401, 403, 404, 500, 503), secured),
            },
        },
        "/v1/retrieve": {
            "post": {
                "summary": "The best chunks for a query (hybrid: dense + BM25 fused by normalised score)", "operationId": "retrieve",
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("RetrieveRequest")}}},
                "responses": _responses({"200": js("RetrieveList", "Scored chunks, best first.")}, (400, 401, 403, 413, 415, 500, 503), secured),
            },
        },
    }

