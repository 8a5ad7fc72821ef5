"""Documents API: upload / add, list, get, delete documents and retrieve chunks (thin routes over DocumentService)."""
from __future__ import annotations

import logging
import re
from typing import Any, Literal

from flask import Blueprint, Response, current_app, jsonify, request
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from werkzeug.exceptions import HTTPException

from edge_agent.services.documents import DocumentError, DocumentNotFoundError, IngestResult, PathRefusedError

log = logging.getLogger(__name__)

bp = Blueprint("documents", __name__)

_ABS_PATH = re.compile(r"(?<![\w.])(/[^\s'\":]+)+")


# --- protocol ---------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AddTextRequest(_Strict):
    title: str = Field(min_length=1, max_length=500)
    text: str = Field(min_length=1)


class AddPathRequest(_Strict):
    path: str = Field(min_length=1, max_length=4096)


class RetrieveFilters(_Strict):
    document_ids: list[int] | None = Field(None, max_length=10_000)
    path_prefix: str | None = Field(None, max_length=4096)
    types: list[str] | None = Field(None, max_length=20)
    type: str | None = Field(None, max_length=20)

    @model_validator(mode="after")
    def _one_type_field(self) -> "RetrieveFilters":
        if self.type is not None:
            self.types = [*(self.types or []), self.type]
            self.type = None
        return self


class RetrieveRequest(_Strict):
    query: str = Field(min_length=1, max_length=8000)
    k: int = Field(5, ge=1, le=100)
    filters: RetrieveFilters | None = None
    mode: Literal["hybrid", "dense", "bm25"] = "hybrid"


# --- helpers ----------------------------------------------------------------
class _Unavailable(Exception):
    """The document service is not loaded (yet)."""


def _service():
    runtime = current_app.extensions["edge_agent"]
    svc = getattr(runtime, "documents", None)
    if svc is None:
        raise _Unavailable(getattr(runtime, "documents_status", None) or "not loaded")
    return svc


def _scrub(message: str) -> str:
    """Replace absolute paths in a message by their last part (no server paths in responses)."""
    return _ABS_PATH.sub(lambda m: m.group(0).rstrip("/").rsplit("/", 1)[-1], message)


def error_response(status: int, message: str, type_: str = "invalid_request_error", param: str | None = None,
                   code: str | None = None) -> tuple[Response, int]:
    return jsonify({"error": {"message": _scrub(message), "type": type_, "param": param, "code": code}}), status


def _validation_error(exc: ValidationError) -> tuple[Response, int]:
    first = exc.errors()[0]
    param = ".".join(str(p) for p in first.get("loc", ())) or None
    return error_response(400, f"{param or 'body'}: {first.get('msg', 'invalid value')}", param=param, code="invalid_value")


def _json_body() -> dict[str, Any]:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise DocumentError("request body must be a JSON object (or multipart/form-data with a file)")
    return body


def _result(res: IngestResult) -> dict[str, Any]:
    out = res.to_dict()
    out["source"] = _scrub(out["source"])
    if out.get("error"):
        out["error"] = _scrub(out["error"])
    out["object"] = "document.ingest"
    return out


@bp.errorhandler(ValidationError)
def _on_validation(exc: ValidationError):
    return _validation_error(exc)


@bp.errorhandler(DocumentError)
def _on_document_error(exc: DocumentError):
    if isinstance(exc, DocumentNotFoundError):
        return error_response(404, str(exc), param=exc.param, code="document_not_found")
    if isinstance(exc, PathRefusedError):
        return error_response(403, str(exc), "permission_error", param="path", code="path_not_allowed")
    return error_response(400, str(exc), param=exc.param, code=exc.code)


@bp.errorhandler(_Unavailable)
def _on_unavailable(exc: _Unavailable):
    resp, status = error_response(503, f"the document index is unavailable: {exc}; retry shortly", "server_error",
                                  code="documents_unavailable")
    resp.headers["Retry-After"] = "5"
    return resp, status


@bp.errorhandler(Exception)
def _on_unexpected(exc: Exception):
    if isinstance(exc, HTTPException):
        return error_response(exc.code or 500, exc.description or exc.name, code=exc.name.lower().replace(" ", "_"))
    log.exception("documents API error")
    return error_response(500, "internal error while handling documents; see the server log", "server_error")


# --- routes -----------------------------------------------------------------
@bp.post("/v1/documents")
def add_documents():
    """Multipart upload (field `file`, repeatable), JSON {title, text}, or JSON {path} under an ingest root."""
    svc = _service()
    if request.files:
        files = request.files.getlist("file") or [f for _, f in request.files.items(multi=True)]
        results = [svc.add_upload(f.filename or "", f.read()) for f in files]
    else:
        body = _json_body()
        if "path" in body:
            results = svc.add_path(AddPathRequest.model_validate(body).path, confined=True)
        else:
            req = AddTextRequest.model_validate(body)
            results = [svc.add_text(req.title, req.text)]
    if len(results) == 1:
        res = results[0]
        if res.status == "failed":
            return error_response(422, res.error or "document could not be read", param="file", code="unreadable_document")
        return jsonify(_result(res)), 201 if res.status in ("added", "updated") else 200
    data = [_result(r) for r in results]
    counts = {s: sum(r.status == s for r in results) for s in ("added", "updated", "unchanged", "failed")}
    return jsonify({"object": "list", "data": data, "counts": counts}), 201 if counts["added"] + counts["updated"] else 200


@bp.get("/v1/documents")
def list_documents():
    try:
        offset = int(request.args.get("offset", 0))
        limit = int(request.args.get("limit", 50))
    except ValueError:
        return error_response(400, "offset and limit must be integers", param="limit", code="invalid_value")
    items, total = _service().list(offset, limit)
    return jsonify({"object": "list", "data": [dict(d, object="document") for d in items], "total": total,
                    "offset": offset, "limit": limit})


@bp.get("/v1/documents/<int:document_id>")
def get_document(document_id: int):
    return jsonify(dict(_service().get(document_id), object="document"))


@bp.delete("/v1/documents/<int:document_id>")
def delete_document(document_id: int):
    _service().delete(document_id)
    return jsonify({"id": document_id, "object": "document", "deleted": True})


@bp.post("/v1/retrieve")
def retrieve():
    req = RetrieveRequest.model_validate(_json_body())
    filters = req.filters.model_dump(exclude_none=True) if req.filters else None
    hits = _service().retrieve(req.query, req.k, filters, req.mode)
    return jsonify({"object": "list", "data": [dict(h.to_dict(), object="retrieval.chunk") for h in hits]})
