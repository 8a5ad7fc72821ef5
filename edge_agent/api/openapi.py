"""The OpenAPI 3.1 document, generated from the protocol models and this server's limits and models."""
from __future__ import annotations

import copy
from typing import Any

from pydantic.json_schema import models_json_schema

from edge_agent.api import protocol as p

_REF = "#/components/schemas/{model}"
_ERROR_TEXT = {
    400: "Invalid request (type, range, limits, context length, JSON, UTF-8).",
    401: "Missing or wrong API key.",
    403: "Host header not allowed, or CORS origin not allowed.",
    404: "Unknown model or URL.",
    413: "Request body too large.",
    415: "Body is not JSON.",
    429: "Queue full; retry after the Retry-After header's seconds.",
    500: "Generation failed.",
    503: "Not ready, shutting down, no embedding model loaded (embeddings), or the documents not loaded yet (rag; see Retry-After).",
    504: "The request ran past its time limit.",
}
_POST_ERRORS = (400, 401, 403, 404, 413, 415, 429, 500, 503, 504)
_GET_ERRORS = (401, 403, 500)


def _schemas() -> tuple[dict, dict]:
    pairs = [
        (p.ChatCompletionRequest, "validation"), (p.CompletionRequest, "validation"), (p.EmbeddingRequest, "validation"),
        (p.ResponseCreateRequest, "validation"), (p.ResponseObject, "serialization"),
        (p.ChatCompletion, "serialization"), (p.ChatCompletionChunk, "serialization"), (p.Completion, "serialization"),
        (p.EmbeddingList, "serialization"), (p.ModelList, "serialization"), (p.ModelCard, "serialization"), (p.ErrorResponse, "serialization"),
        (p.Health, "serialization"), (p.Readiness, "serialization"),
    ]
    keymap, top = models_json_schema(pairs, ref_template=_REF)
    refs = {model.__name__: ref for (model, _), ref in keymap.items()}
    return refs, top.get("$defs", {})


_CACHE: tuple[dict, dict] | None = None


def _cached() -> tuple[dict, dict]:
    global _CACHE
    if _CACHE is None:
        _CACHE = _schemas()
    return copy.deepcopy(_CACHE)


def _walk_ints(schema: Any, **bounds: int) -> None:
    """Set bounds on every integer schema under `schema`."""
    if isinstance(schema, dict):
        if schema.get("type") == "integer":
            schema.update(bounds)
        for v in schema.values():
            _walk_ints(v, **bounds)
    elif isinstance(schema, list):
        for v in schema:
            _walk_ints(v, **bounds)


def _patch_limits(defs: dict, runtime) -> None:
    s = runtime.settings
    for name in ("ChatCompletionRequest", "CompletionRequest", "ResponseCreateRequest"):
        props = defs[name]["properties"]
        for field in ("max_tokens", "max_completion_tokens", "min_tokens", "max_output_tokens"):
            if field in props:
                _walk_ints(props[field], maximum=s.max_tokens_limit)
        props["model"]["enum"] = [runtime.chat.model_name, "default"]
    defs["ChatCompletionRequest"]["properties"]["messages"]["maxItems"] = s.max_messages
    for variant in defs["ResponseCreateRequest"]["properties"]["input"]["anyOf"]:
        if variant.get("type") == "array":
            variant["maxItems"] = s.max_messages
    _walk_ints(defs["CompletionRequest"]["properties"]["prompt"], maximum=runtime.chat.vocab_size - 1)
    emb = runtime.embeddings.model_name if runtime.embeddings is not None else None
    if emb:
        defs["EmbeddingRequest"]["properties"]["model"]["enum"] = [emb, "default"]


def _responses(ok: dict, errors: tuple[int, ...], err_ref: dict, secured: bool) -> dict:
    out = {"200": ok}
    for code in errors:
        if code == 401 and not secured:
            continue
        out[str(code)] = {"description": _ERROR_TEXT[code], "content": {"application/json": {"schema": err_ref}}}
    return out


def build_openapi(runtime, extra_paths: dict | None = None, extra_schemas: dict | None = None) -> dict[str, Any]:
    """The document for this runtime: its models, limits and whether API keys are required.

    extra_paths / extra_schemas: path items and component schemas of other blueprints (documents).
    """
    refs, defs = _cached()
    for name, schema in (extra_schemas or {}).items():
        defs.setdefault(name, copy.deepcopy(schema))
    _patch_limits(defs, runtime)
    secured = bool(runtime.settings.accepted_keys())
    err = refs["ErrorResponse"]

    def js(ref: dict, description: str) -> dict:
        return {"description": description, "content": {"application/json": {"schema": ref}}}

    def post(summary: str, req: str, ok: dict) -> dict:
        return {"post": {
            "summary": summary, "operationId": req[0].lower() + req[1:].removesuffix("Request"),
            "requestBody": {"required": True, "content": {"application/json": {"schema": refs[req]}}},
            "responses": _responses(ok, _POST_ERRORS, err, secured),
        }}

    def get(summary: str, op: str, ok: dict, errors: tuple[int, ...] = _GET_ERRORS, public: bool = False) -> dict:
        out = {"get": {"summary": summary, "operationId": op, "responses": _responses(ok, errors, err, secured and not public)}}
        if public:
            out["get"]["security"] = []
        return out

    sse = ("One Server-Sent Event. `data` holds a chunk as JSON (ChatCompletionChunk or Completion), then the last "
           "event's data is `[DONE]`; a mid-stream error is sent as data `{\"error\": {...}}` (ErrorResponse). "
           "With `rag`, the first chunk also has `sources` (a list of Source) and `grounding` (GroundingReport); a base "
           "model's grounded answer is checked before it is sent, so it arrives as one chunk.")
    stream_schema = {"type": "object", "description": sse, "required": ["data"],
                     "properties": {"data": {"type": "string"}, "event": {"type": "string"}, "id": {"type": "string"}, "retry": {"type": "integer"}}}
    chat_ok = {"description": "The completion (stream false) or a stream of ChatCompletionChunk events (stream true).",
               "content": {"application/json": {"schema": refs["ChatCompletion"]}, "text/event-stream": {"schema": stream_schema}}}
    comp_ok = {"description": "The completion, or a stream of Completion chunks.",
               "content": {"application/json": {"schema": refs["Completion"]}, "text/event-stream": {"schema": stream_schema}}}
    resp_sse = ("One Server-Sent Event: `event` is its type and `data` its JSON (with `type` and `sequence_number`), in OpenAI's "
                "order: response.created, response.in_progress, response.output_item.added, response.content_part.added, "
                "response.output_text.delta (one per piece of text), response.output_text.done, response.content_part.done, "
                "response.output_item.done, then response.completed, or response.incomplete when max_output_tokens cut the "
                "answer; a failure after the first event ends the stream with response.failed (its `response.error` says why). "
                "A forced function call streams its function_call item instead of the message: response.output_item.added, "
                "response.function_call_arguments.delta ..., response.function_call_arguments.done, response.output_item.done. "
                "The lifecycle events' `response` is a ResponseObject.")
    resp_ok = {"description": "The response (stream false) or its typed events (stream true).",
               "content": {"application/json": {"schema": refs["ResponseObject"]},
                           "text/event-stream": {"schema": {**stream_schema, "description": resp_sse}}}}
    not_stored = {"404": {"description": "Always: responses are not stored, so no id is ever found.",
                          "content": {"application/json": {"schema": err}}}}
    for code in (401, 403):
        if code != 401 or secured:
            not_stored[str(code)] = {"description": _ERROR_TEXT[code], "content": {"application/json": {"schema": err}}}
    id_param = [{"name": "response_id", "in": "path", "required": True, "schema": {"type": "string"}}]
    ready = get("Readiness: the model is loaded and requests are accepted", "ready", js(refs["Readiness"], "Ready."))
    ready["get"]["responses"]["503"] = js(refs["Readiness"], "Not ready (starting or shutting down).")
    paths: dict[str, Any] = {
        "/v1/models": get("Models served", "listModels", js(refs["ModelList"], "The models.")),
        "/v1/models/{model}": {**get("One model served (404 for any other id)", "retrieveModel", js(refs["ModelCard"], "The model."), (401, 403, 404, 500)),
                               "parameters": [{"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}]},
        "/v1/chat/completions": post("Chat completion (OpenAI-compatible)", "ChatCompletionRequest", chat_ok),
        "/v1/completions": post("Text completion (OpenAI-compatible)", "CompletionRequest", comp_ok),
        "/v1/responses": post("Response (OpenAI's Responses API, served by the chat path; nothing is stored)", "ResponseCreateRequest",
                              resp_ok),
        "/v1/responses/{response_id}": {
            "get": {"summary": "Not available: responses are not stored (always 404)", "operationId": "retrieveResponse",
                    "responses": not_stored},
            "delete": {"summary": "Not available: responses are not stored (always 404)", "operationId": "deleteResponse",
                       "responses": not_stored},
            "parameters": id_param},
        "/v1/embeddings": post("Embeddings (OpenAI-compatible)", "EmbeddingRequest", js(refs["EmbeddingList"], "The embeddings.")),
        "/health": get("Liveness (no API key needed)", "health", js(refs["Health"], "Alive."), (), public=True),
        "/ready": ready,
        "/metrics": get("Prometheus metrics", "metrics", {"description": "Prometheus text format.", "content": {"text/plain": {"schema": {"type": "string"}}}}),
        "/openapi.json": get("This document", "openapi", {"description": "OpenAPI 3.1.", "content": {"application/json": {"schema": {"type": "object"}}}}),
    }
    paths.update(extra_paths or {})
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "edge-agent", "version": _version(), "description": "Offline assistant daemon: OpenAI-compatible API."},
        "paths": paths,
        "components": {"schemas": defs},
    }
    if secured:
        doc["components"]["securitySchemes"] = {"bearerAuth": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearerAuth": []}]
    return doc


def _version() -> str:
    try:
        from edge_agent import __version__

        return str(__version__)
    except ImportError:  # pragma: no cover
        return "0"
