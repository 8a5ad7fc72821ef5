"""OpenAI files and batches: /v1/files (multipart upload, purpose=batch) and /v1/batches, as the official client calls them."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from flask import Blueprint, Response, current_app, request, send_file
from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema
from werkzeug.exceptions import RequestEntityTooLarge

from edge_agent.api.context import runtime
from edge_agent.api.errors import ApiError, read_json
from edge_agent.jobs.batch import COMPLETION_WINDOWS, ENDPOINTS
from edge_agent.jobs.batch_files import BatchService

bp = Blueprint("batches", __name__)

MAX_LIST = 100
FORM_OVERHEAD = 64 * 1024  # multipart boundaries and the purpose field around the file
BLOCK = 1 << 20
_REF = "#/components/schemas/{model}"


# --- protocol ------------------------------------------------------------------------
class BatchCreateRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    input_file_id: str = Field(min_length=1, max_length=64, description="The id of an uploaded file (purpose batch).")
    endpoint: Literal[ENDPOINTS] = Field(description="The url every request line uses.")  # type: ignore[valid-type]
    completion_window: Literal[COMPLETION_WINDOWS] = Field(description="Only 24h (runs here do not expire).")  # type: ignore[valid-type]
    metadata: Annotated[dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]], Field(max_length=16)] | None = None
    output_expires_after: dict[str, Any] | None = Field(None, description="Accepted and ignored: output files are kept until deleted.")


class FileObject(BaseModel):
    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: Literal["batch", "batch_output"]
    status: Literal["uploaded", "processed", "error"] = "processed"
    expires_at: int | None = None
    status_details: str | None = None


class FileList(BaseModel):
    object: Literal["list"] = "list"
    data: list[FileObject]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class FileDeleted(BaseModel):
    id: str
    object: Literal["file"] = "file"
    deleted: bool


class BatchError(BaseModel):
    code: str | None = None
    message: str | None = None
    param: str | None = None
    line: int | None = None


class BatchErrors(BaseModel):
    object: Literal["list"] = "list"
    data: list[BatchError]


class BatchRequestCounts(BaseModel):
    total: int
    completed: int
    failed: int


class Batch(BaseModel):
    id: str
    object: Literal["batch"] = "batch"
    endpoint: str
    errors: BatchErrors | None = None
    input_file_id: str
    completion_window: str
    status: Literal["validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling", "cancelled"]
    output_file_id: str | None = None
    error_file_id: str | None = None
    created_at: int
    in_progress_at: int | None = None
    expires_at: int | None = None
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    request_counts: BatchRequestCounts
    metadata: dict[str, str] | None = None


class BatchList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Batch]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


_MODELS = [(BatchCreateRequest, "validation"), (FileObject, "serialization"), (FileList, "serialization"),
           (FileDeleted, "serialization"), (Batch, "serialization"), (BatchList, "serialization")]


# --- routes ------------------------------------------------------------------------------
def _service() -> BatchService:
    ext = current_app.extensions
    svc = ext.get("edge_agent.batches")
    if svc is None:
        rt = runtime()
        jobs = getattr(rt, "jobs", None)
        if jobs is None:
            raise ApiError(503, "batches are not served by this process (the jobs service is off); use `edge-agent batch run`",
                           "server_error", code="unavailable")
        svc = ext["edge_agent.batches"] = BatchService(rt.settings, jobs)
    return svc


def _json(model: type[BaseModel], data: dict, status: int = 200) -> Response:
    return Response(model.model_validate(data).model_dump_json(), status=status, mimetype="application/json")


def _limit(default: int) -> int:
    raw = request.args.get("limit")
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIST:
        raise ApiError(400, f"limit must be an integer from 1 to {MAX_LIST}", param="limit", code="invalid_value")
    return int(raw)


def _id_arg(name: str) -> str | None:
    v = request.args.get(name)
    if v is not None and not 1 <= len(v) <= 64:
        raise ApiError(400, f"{name} must be an id of 1 to 64 characters", param=name, code="invalid_value")
    return v


@bp.post("/v1/files")
def upload_file():
    svc = _service()
    if (request.mimetype or "").lower() != "multipart/form-data":
        raise ApiError(415, "send the file as multipart/form-data with fields file and purpose=batch", code="unsupported_media_type")
    limit = int(svc.settings.max_batch_file_bytes)
    request.max_content_length = limit + FORM_OVERHEAD
    try:
        form, files = request.form, request.files
    except RequestEntityTooLarge:
        raise ApiError(413, f"the file is larger than {limit} bytes (max_batch_file_bytes): split the requests into several batch files",
                       code="file_too_large") from None
    purpose = form.get("purpose")
    if purpose is None:
        raise ApiError(400, "purpose is required: send purpose=batch", param="purpose", code="invalid_value")
    upload = files.get("file")
    if upload is None:
        raise ApiError(400, "file is required: send the JSONL batch file as the multipart field `file`", param="file", code="invalid_value")
    stream = upload.stream

    def blocks():
        while True:
            b = stream.read(BLOCK)
            if not b:
                return
            yield b

    return _json(FileObject, svc.upload(purpose, upload.filename or "batch.jsonl", blocks()))


@bp.get("/v1/files")
def list_files():
    order = request.args.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ApiError(400, "order must be asc or desc", param="order", code="invalid_value")
    purpose = request.args.get("purpose")
    if purpose is not None and purpose not in ("batch", "batch_output"):
        raise ApiError(400, "purpose must be batch or batch_output", param="purpose", code="invalid_value")
    return _json(FileList, _service().files(purpose, _limit(MAX_LIST), _id_arg("after"), order))


@bp.get("/v1/files/<file_id>")
def get_file(file_id: str):
    return _json(FileObject, _service().file(file_id))


@bp.delete("/v1/files/<file_id>")
def delete_file(file_id: str):
    return _json(FileDeleted, _service().delete_file(file_id))


@bp.get("/v1/files/<file_id>/content")
def file_content(file_id: str):
    path, rec = _service().content(file_id)
    return send_file(path, mimetype="application/octet-stream", as_attachment=True, download_name=rec.filename, conditional=False,
                     etag=False, max_age=None)


@bp.post("/v1/batches")
def create_batch():
    svc = _service()
    req = read_json(BatchCreateRequest, svc.settings.max_body_bytes)
    return _json(Batch, svc.create_batch(req.input_file_id, req.endpoint, req.completion_window, req.metadata))


@bp.get("/v1/batches")
def list_batches():
    return _json(BatchList, _service().batches(_limit(20), _id_arg("after")))


@bp.get("/v1/batches/<batch_id>")
def get_batch(batch_id: str):
    return _json(Batch, _service().batch(batch_id))


@bp.post("/v1/batches/<batch_id>/cancel")
def cancel_batch(batch_id: str):
    return _json(Batch, _service().cancel(batch_id))


# --- OpenAPI -----------------------------------------------------------------------------
def openapi_schemas() -> dict[str, Any]:
    """Component schemas of the file and batch routes."""
    _, top = models_json_schema(_MODELS, ref_template=_REF)
    return top.get("$defs", {})


_ERRORS = {
    400: "Invalid request.", 401: "Missing or wrong API key.", 403: "Host or CORS origin not allowed.", 404: "No such file or batch.",
    409: "The batch has finished (completed, failed, expired, cancelled): it cannot be cancelled.",
    413: "File or body too large.", 415: "Body is not multipart (files) or JSON (batches).", 500: "Internal error.",
    503: "The jobs service is not running in this process.", 507: "Not enough disk space for the file; nothing was stored.",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": _REF.format(model=name)}


def openapi_paths(runtime) -> dict[str, Any]:
    """OpenAPI path items of the file and batch routes (their schemas: openapi_schemas())."""
    secured = bool(runtime.settings.accepted_keys())

    def responses(ok: str, description: str, codes: tuple[int, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {"200": {"description": description, "content": {"application/json": {"schema": _ref(ok)}}}}
        for code in codes:
            if code != 401 or secured:
                out[str(code)] = {"description": _ERRORS[code], "content": {"application/json": {"schema": _ref("ErrorResponse")}}}
        return out

    def path_id(name: str) -> dict[str, Any]:
        return {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1, "maxLength": 64}}

    limit = {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIST}}
    after = {"name": "after", "in": "query", "required": False, "schema": {"type": "string", "minLength": 1, "maxLength": 64}}
    upload = {"type": "object", "required": ["file", "purpose"], "properties": {  # other fields (expires_after) are ignored
        "file": {"type": "string", "format": "binary", "description": "The JSONL batch file."},
        "purpose": {"type": "string", "enum": ["batch"]},
    }}
    read = (401, 403, 404, 500, 503)
    content = {"200": {"description": "The file's bytes.", "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}
    content.update({k: v for k, v in responses("FileObject", "", read).items() if k != "200"})
    return {
        "/v1/files": {
            "post": {"summary": "Upload a batch input file (multipart: file, purpose=batch)", "operationId": "createFile",
                     "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": upload}}},
                     "responses": responses("FileObject", "The stored file.", (400, 401, 403, 413, 415, 500, 503, 507))},
            "get": {"summary": "Files, newest first", "operationId": "listFiles", "parameters": [
                {"name": "purpose", "in": "query", "required": False, "schema": {"type": "string", "enum": ["batch", "batch_output"]}},
                limit, after, {"name": "order", "in": "query", "required": False, "schema": {"type": "string", "enum": ["asc", "desc"]}}],
                "responses": responses("FileList", "One page of files.", (400, 401, 403, 500, 503))},
        },
        "/v1/files/{file_id}": {
            "get": {"summary": "A file's metadata", "operationId": "retrieveFile", "parameters": [path_id("file_id")],
                    "responses": responses("FileObject", "The file.", read)},
            "delete": {"summary": "Delete a file", "operationId": "deleteFile", "parameters": [path_id("file_id")],
                       "responses": responses("FileDeleted", "Deleted.", read)},
        },
        "/v1/files/{file_id}/content": {
            "get": {"summary": "A file's content", "operationId": "retrieveFileContent", "parameters": [path_id("file_id")],
                    "responses": content},
        },
        "/v1/batches": {
            "post": {"summary": "Create and start a batch from an uploaded file", "operationId": "createBatch",
                     "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("BatchCreateRequest")}}},
                     "responses": responses("Batch", "The batch.", (400, 401, 403, 404, 413, 415, 500, 503))},
            "get": {"summary": "Batches, newest first", "operationId": "listBatches", "parameters": [limit, after],
                    "responses": responses("BatchList", "One page of batches.", (400, 401, 403, 500, 503))},
        },
        "/v1/batches/{batch_id}": {
            "get": {"summary": "A batch: status, request counts, output and error files", "operationId": "retrieveBatch",
                    "parameters": [path_id("batch_id")], "responses": responses("Batch", "The batch.", read)},
        },
        "/v1/batches/{batch_id}/cancel": {
            "post": {"summary": "Cancel a batch (finished requests keep their results)", "operationId": "cancelBatch",
                     "parameters": [path_id("batch_id")], "responses": responses("Batch", "The batch.", (*read, 409))},
        },
    }
