"""POST /tokenize and /detokenize (vLLM's and llama.cpp's routes): the chat model's tokens of a prompt or a conversation."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, Response
from pydantic.json_schema import models_json_schema

from edge_agent.api.context import runtime as _runtime
from edge_agent.api.errors import read_json
from edge_agent.services import tokenization as t

bp = Blueprint("tokenize", __name__)
_REF = "#/components/schemas/{model}"
_MODELS = [(t.TokenizeRequest, "validation"), (t.DetokenizeRequest, "validation"),
           (t.TokenizeResponse, "serialization"), (t.DetokenizeResponse, "serialization")]


def _read(model):
    rt = _runtime()
    s = rt.settings
    req = read_json(model, s.max_body_bytes, {"max_messages": s.max_messages})
    if req.model is not None:
        rt.chat.check_model(req.model)
    return req, rt.chat


@bp.post("/tokenize")
def tokenize():
    req, chat = _read(t.TokenizeRequest)
    return Response(t.tokenize(chat, req).model_dump_json(exclude_none=True), mimetype="application/json")


@bp.post("/detokenize")
def detokenize():
    req, chat = _read(t.DetokenizeRequest)
    return Response(t.detokenize(chat, req).model_dump_json(), mimetype="application/json")


def openapi_schemas() -> dict[str, Any]:
    _, top = models_json_schema(_MODELS, ref_template=_REF)
    return top.get("$defs", {})


def openapi_paths(runtime) -> dict[str, Any]:
    secured = bool(runtime.settings.accepted_keys())
    error = {"content": {"application/json": {"schema": {"$ref": _REF.format(model="ErrorResponse")}}}}
    errors = {"400": {"description": "Invalid request (one of prompt, content or messages; a token id outside the vocabulary).", **error},
              "403": {"description": "Host or origin not allowed.", **error},
              "404": {"description": "Unknown model.", **error}, "413": {"description": "Request body too large.", **error},
              "415": {"description": "Body is not JSON.", **error}, "500": {"description": "Internal error.", **error},
              "503": {"description": "Not ready, or shutting down.", **error}}
    if secured:
        errors["401"] = {"description": "Missing or wrong API key.", **error}

    def post(summary: str, op: str, req: str, ok: str) -> dict[str, Any]:
        return {"post": {"summary": summary, "operationId": op,
                         "requestBody": {"required": True, "content": {"application/json": {"schema": {"$ref": _REF.format(model=req)}}}},
                         "responses": {"200": {"description": ok, "content": {"application/json": {"schema": {
                             "$ref": _REF.format(model=ok)}}}}, **errors}}}

    return {"/tokenize": post("The chat model's tokens of a prompt or messages (vLLM's and llama.cpp's route)", "tokenize",
                              "TokenizeRequest", "TokenizeResponse"),
            "/detokenize": post("The text of token ids (vLLM's and llama.cpp's route)", "detokenize", "DetokenizeRequest", "DetokenizeResponse")}
