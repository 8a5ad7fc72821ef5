"""OpenAI-shaped errors for every failure, and strict reading of JSON request bodies."""
from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from flask import Flask, Response, request
from pydantic import BaseModel, ValidationError
from werkzeug.exceptions import HTTPException

from edge_agent.services.errors import ServiceError
from edge_agent.services.paths import shown_path
from edge_agent.services.protocol import unknown_field

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

_HTTP_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}
_HTTP_MESSAGES = {
    400: "the request could not be understood",
    404: "no route matches this URL; see GET /openapi.json for the API",
    405: "this method is not allowed on this URL",
    408: "the request took too long to arrive",
    413: "the request body is too large",
    415: "the request body must be JSON (Content-Type: application/json)",
    431: "the request headers are too large",
}


# a web address or an e-mail address is kept whole (it names no file of this server: "https://host/a/b" came out as
# "https:b"); any other absolute path is scrubbed
_KEPT = r"\bhttps?://[^\s'\"<>]+|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
_ABS_PATH = r"(?<![\w.])(?:/[^\s'\":]+)+"
_KEPT_OR_PATH = re.compile(rf"(?P<kept>{_KEPT})|(?P<path>{_ABS_PATH})", re.IGNORECASE)


def scrub_paths(message: str, roots: Sequence[Path] = ()) -> str:
    """message with every absolute path in it shown as a client may see it (no server paths in responses): relative
    to the ingest root it lies under (services.paths.shown_path), else by its last part. URLs (http, https) and
    e-mail addresses are kept as they are."""

    def shown(m: re.Match) -> str:
        path = m.group("path")
        if path is None:
            return m.group(0)
        return shown_path(path.rstrip("/") or "/", roots) or path

    return _KEPT_OR_PATH.sub(shown, message)


class ApiError(Exception):
    """An HTTP error raised by the API layer itself (status, message, type, param, code, extra headers)."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code
        self.headers = headers or {}


def error_body(message: str, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_response(status: int, message: str, type: str = "invalid_request_error", param: str | None = None,
                   code: str | None = None, headers: dict[str, str] | None = None) -> Response:
    resp = Response(json.dumps(error_body(message, type, param, code)), status=status, mimetype="application/json")
    for k, v in (headers or {}).items():
        resp.headers[k] = v
    return resp


def retry_headers(e: ServiceError) -> dict[str, str]:
    """Retry-After (whole seconds, at least 1) for an error that says when to retry (queue full, documents loading)."""
    retry = getattr(e, "retry_after", None)
    return {} if retry is None else {"Retry-After": str(max(1, math.ceil(retry)))}


def http_message(status: int) -> str:
    """What an HTTP error raised by Flask or werkzeug (not by our code) tells the client."""
    return _HTTP_MESSAGES.get(status, "the request failed")


def service_error_response(e: ServiceError) -> Response:
    return error_response(e.status, e.message, e.type, e.param, e.code, retry_headers(e))


def _v1_route_of(app: Flask, path: str) -> str | None:
    """"/v1" + path when that is one of our routes and path is not (POST /chat/completions from a client whose base_url
    lacks /v1: the openai client, LiteLLM or LangChain pointed at http://host:port), else None."""
    if path.startswith(("/v1/", "/api/")) or len(path) > 200:
        return None
    try:
        app.url_map.bind("localhost").match("/v1" + path, method=request.method)
    except HTTPException:
        return None
    return "/v1" + path


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(e: ApiError):
        return error_response(e.status, e.message, e.type, e.param, e.code, e.headers)

    @app.errorhandler(ServiceError)
    def _service_error(e: ServiceError):
        return service_error_response(e)

    @app.errorhandler(HTTPException)
    def _http_error(e: HTTPException):
        status = e.code or 500
        message = http_message(status)
        if status == 404 and (under_v1 := _v1_route_of(app, request.path)):  # a client whose base_url lacks /v1
            message = (f"no route matches {request.path[:100]}; the OpenAI routes are under /v1 ({under_v1}): set the client's "
                       "base_url to http://<host>:<port>/v1")
        headers = {}
        if status == 405 and getattr(e, "valid_methods", None):
            headers["Allow"] = ", ".join(e.valid_methods)
        if request.path.startswith("/api/"):  # Ollama's routes answer in Ollama's shape, an unknown one too
            return Response(json.dumps({"error": message}), status=status, mimetype="application/json", headers=headers)
        kind = _HTTP_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
        return error_response(status, message, kind, None, None, headers)

    @app.errorhandler(Exception)
    def _unexpected(e: Exception):
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal server error; the server log has the details", "server_error", None, "internal_error")


# --- request bodies --------------------------------------------------------------
def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _check_text(value: Any, path: str = "") -> None:
    """Refuse strings that cannot be UTF-8 (lone surrogates from \\ud800-style escapes)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(400, f"invalid text in {path or 'the body'}: lone surrogate escape (not valid UTF-8)", param=path or None) from None
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_text(k, path)
            _check_text(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_text(v, f"{path}[{i}]")


def read_body(max_bytes: int) -> bytes:
    """The raw body, read with a cap (chunked bodies too). Raises ApiError 413 beyond max_bytes."""
    length = request.content_length
    if length is not None and length > max_bytes:
        raise ApiError(413, f"the request body is larger than {max_bytes} bytes", code="body_too_large")
    stream = request.stream
    chunks, total = [], 0
    while True:
        block = stream.read(min(65536, max_bytes + 1 - total))
        if not block:
            break
        chunks.append(block)
        total += len(block)
        if total > max_bytes:
            raise ApiError(413, f"the request body is larger than {max_bytes} bytes", code="body_too_large")
    return b"".join(chunks)


def _param(loc: tuple) -> str | None:
    out = ""
    for item in loc:
        if isinstance(item, int):
            out += f"[{item}]"
        elif isinstance(item, str) and item.isidentifier() and not item[0].isupper() and item not in ("str", "int", "float", "bool", "list", "none"):
            out += f".{item}" if out else item
    return out or None


_TYPE_ERRORS = {"literal_error", "model_type", "is_instance_of", "union_tag_invalid", "none_required"}


# Types a client that means JSON sends without saying so: none (requests' `data=json.dumps(...)`), and curl -d's
# form type; text/plain too (fetch with a string body). OpenAI and vLLM read such a body as JSON, so it is read as JSON
# here and refused (400) only when it is not. Browsers send these types cross-site without a preflight: the cross-site
# guard (app.SecurityGuard) has refused those before a route reads the body.
READ_AS_JSON = frozenset({"", "text/plain", "application/x-www-form-urlencoded"})


def _json_type(mimetype: str) -> bool:
    return mimetype == "application/json" or (mimetype.startswith("application/") and mimetype.endswith("+json"))


def json_error_text(e: ValueError) -> str:
    """What is wrong with a body json.loads refused, and where ("Expecting ',' delimiter at line 1, column 57"),
    as FastAPI and vLLM tell it: "not valid JSON" alone sent a client's author searching the whole body."""
    if "not valid JSON" in str(e):  # _reject_constant's own
        return str(e)
    if isinstance(e, json.JSONDecodeError):
        return f"the request body is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}"
    if "integer string conversion" in str(e):  # Python's 4300-digit limit
        return "the request body is not valid JSON here: a number in it has more than 4300 digits"
    return "the request body is not valid JSON"


def read_json(model: type[M], max_bytes: int, context: dict[str, Any] | None = None, any_type: bool = False) -> M:
    """Validate the JSON body into model. It is read as JSON under application/json (or a +json type), no Content-Type,
    text/plain or a form type (READ_AS_JSON); any_type reads it as JSON whatever its Content-Type says (as Ollama does).
    Raises ApiError: 415 (another type, or a charset other than UTF-8), 413 (too large), 400 (not JSON, or invalid)."""
    mimetype = (request.mimetype or "").lower()
    charset = (request.mimetype_params.get("charset") or "utf-8").lower()
    declared = _json_type(mimetype)
    if not (declared or any_type or mimetype in READ_AS_JSON) or charset not in ("utf-8", "utf8"):
        raise ApiError(415, "the request body must be JSON: send Content-Type: application/json (UTF-8)", code="unsupported_media_type")
    raw = read_body(max_bytes)
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")  # a byte-order mark (PowerShell, .NET), which RFC 8259 lets us ignore
    except UnicodeDecodeError:
        raise ApiError(400, "the request body is not valid UTF-8", code="invalid_encoding") from None
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ApiError(400, "the request body is nested too deeply", code="invalid_json") from None
    except ValueError as e:
        msg = json_error_text(e)
        if not declared:  # a form or plain text, perhaps not meant as JSON at all
            msg += f" (it was sent as {mimetype[:60] or 'no Content-Type'}): send a JSON object with Content-Type: application/json"
        raise ApiError(400, msg, code="invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    _check_text(data)
    try:
        return model.model_validate(data, context=context or {})
    except ValidationError as e:
        errs = e.errors(include_url=False, include_input=False)
        # Of a union's errors, a broken constraint says more than "wrong type"; then the deepest location.
        err = max(errs, key=lambda x: (not (x["type"].endswith("_type") or x["type"] in _TYPE_ERRORS), len(x["loc"])))
        param = _param(tuple(err["loc"]))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = unknown_field(param)
        elif err["type"] == "string_pattern_mismatch" and (err.get("ctx") or {}).get("pattern") == r"\S":
            msg = "must not be empty or only whitespace"
        raise ApiError(400, f"invalid value for {param!r}: {msg}" if param else msg, param=param, code="invalid_value") from None
