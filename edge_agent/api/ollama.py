"""Ollama's REST API beside the OpenAI routes, over the same services: /api/version, /api/tags, /api/show, /api/ps,
/api/chat, /api/generate, /api/embed and /api/embeddings (services/ollama_protocol.py has the models and what is refused).

/api/chat and /api/generate stream by default (Ollama's default): NDJSON lines (application/x-ndjson), each with a piece
of the answer and done false, then one with done true, done_reason ("stop" or "length"), the token counts (the same as
the OpenAI routes' usage) and the durations in nanoseconds (/api/generate's also `context`, unless raw); stream false
answers the same fields in one JSON object. With `tools` on /api/chat the model answers in words (streamed as any answer)
or with one call, held back and sent whole in one line's message.tool_calls, as Ollama sends it. A
failure after the first line is told as a last line {"error": "..."}, as Ollama does; a client that hangs up frees its
slot. Errors are Ollama's {"error": "text"} on these routes (the API key, Host and CORS checks answer before any route,
in the OpenAI shape as everywhere). A model is named by its id or "default", with or without ":latest", in any case (as
Ollama matches names). A body is read as JSON whatever its Content-Type, as Ollama reads it (its docs post with `curl -d`,
which sends a form type).
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from flask import Blueprint, Response
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from werkzeug.exceptions import HTTPException

from edge_agent.api.access_log import note_usage
from edge_agent.api.context import runtime as _runtime
from edge_agent.api.errors import ApiError, http_message, read_json, retry_headers
from edge_agent.api.openai import ClientGone, _disconnected, event_stream, live_events
from edge_agent.services import ollama_protocol as o
from edge_agent.services.errors import InvalidRequestError, ServiceError, UnavailableError
from edge_agent.services.generation import ChoiceDelta, ChoiceEnd, Generation
from edge_agent.services.logprobs import chat_content
from edge_agent.services.tools import Tool, answer_call, call_id

log = logging.getLogger(__name__)
bp = Blueprint("ollama", __name__)
NDJSON = "application/x-ndjson"
NEVER = "9999-12-31T23:59:59Z"  # /api/ps's expires_at: models stay loaded


# --- errors: Ollama's {"error": "text"} ------------------------------------------------
def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps({"error": message}), status=status, mimetype="application/json", headers=headers)


@bp.errorhandler(ApiError)
def _api_error(e: ApiError):
    return _error(e.status, e.message, e.headers)


@bp.errorhandler(ServiceError)
def _service_error(e: ServiceError):
    return _error(e.status, e.message, retry_headers(e))


@bp.errorhandler(HTTPException)
def _http_error(e: HTTPException):
    return _error(e.code or 500, http_message(e.code or 500))


@bp.errorhandler(Exception)
def _unexpected(e: Exception):
    log.exception("unhandled error on an Ollama route")
    return _error(500, "internal server error; the server log has the details")


# --- helpers -----------------------------------------------------------------------
def _json(reply: BaseModel) -> Response:
    return Response(reply.model_dump_json(exclude_none=True), mimetype="application/json")


def _read(model):
    rt = _runtime()
    s = rt.settings
    return read_json(model, s.max_body_bytes, {"max_messages": s.max_messages}, any_type=True), rt  # Ollama ignores Content-Type


def _chat_service(rt, name: str):
    """The chat service when name means the chat model; 400 for the embedding model's name, 404 for any other."""
    if o.served(name, *rt.chat.names):
        return rt.chat
    if rt.embeddings is not None and o.served(name, *rt.embeddings.names):
        raise InvalidRequestError(f"model {name!r} does not support chat or generate: it is an embedding model", param="model")
    raise o.OllamaModelNotFound(name)


def _embedding_service(rt, name: str):
    """The embedding service when name means its model (or "default"); 400 for the chat model's name, 404 for any other."""
    if o.served(name, *(rt.embeddings.names if rt.embeddings is not None else ()), "default"):
        return rt.embeddings
    if o.served(name, *rt.chat.names):
        raise InvalidRequestError(f"model {name!r} does not support embeddings: it is the chat model", param="model")
    raise o.OllamaModelNotFound(name)


def _line(reply: BaseModel | dict) -> bytes:
    text = reply.model_dump_json(exclude_none=True) if isinstance(reply, BaseModel) else json.dumps(reply, ensure_ascii=False)
    return text.encode() + b"\n"


class _Run:
    """One answer read from its Generation: the pieces of text, then the final fields (counts, durations in ns)."""

    def __init__(self, gen: Generation, t0: int, encode: Callable[[str], list[int]]):
        self.gen, self.t0, self.encode = gen, t0, encode
        self.text: list[str] = []  # the answer so far (the final line's `context` ends with its ids)
        self.started = time.perf_counter_ns()
        self.first: int | None = None
        self.finish = "stop"
        self.last_logprobs: list | None = None  # with logprobs: the TokenLogprob no piece carried (ChoiceEnd's)

    def pieces(self, disconnected: Callable[[], bool]) -> Iterator[tuple[str, list | None]]:
        """The answer's text as it comes, each piece with its tokens' TokenLogprob (None unless asked for); raises ClientGone
        once the client has gone, and as Generation.events() does."""
        events = self.gen.events()
        try:
            for ev in live_events(events, disconnected):
                if isinstance(ev, ChoiceDelta):
                    self.first = self.first or time.perf_counter_ns()
                    self.text.append(ev.text)
                    yield ev.text, ev.logprobs
                elif isinstance(ev, ChoiceEnd):
                    self.finish, self.last_logprobs = ev.finish_reason, ev.logprobs
        finally:
            events.close()
            self.gen.cancel()

    def done(self) -> dict[str, Any]:
        end = time.perf_counter_ns()
        first = self.first or end
        u = self.gen.usage
        out = {"done": True, "done_reason": self.finish, "total_duration": end - self.t0, "load_duration": 0,
               "prompt_eval_count": u.prompt_tokens, "prompt_eval_duration": first - self.started,
               "eval_count": u.completion_tokens, "eval_duration": end - first}
        if self.gen.prompt_ids is not None:  # /api/generate's context, as Ollama makes it: the prompt and the answer's text, tokenized
            out["context"] = [*self.gen.prompt_ids, *self.encode("".join(self.text))]
        return out


def _with_calls(pieces: Iterator[tuple[str, list | None]], run: _Run, tools: list[Tool]) -> Iterator[tuple[str, list | None, list | None]]:
    """(text, logprobs, calls) of an answer that may be a call (tools.auto_constraint): words stream as they come; a call
    (its first non-blank character "{") is held back and given whole, its arguments an object, as Ollama gives it."""
    held: list[str] = []
    held_lps: list = []
    words = False
    for text, lps in pieces:
        if words:
            yield text, lps, None
            continue
        held.append(text)
        held_lps += lps or []
        lead = "".join(held).lstrip(" \n")
        if lead and not lead.startswith("{"):
            words = True
            yield "".join(held), held_lps or None, None
    if not words and held:
        whole = "".join(held)
        call = answer_call(whole, run.finish, tools)
        if call is None:  # cut before its arguments closed: the text as it is
            yield whole, held_lps or None, None
        else:
            yield "", held_lps or None, [o.OllamaResponseToolCall(id=call_id(), function=o.OllamaCalled(name=call[0], arguments=call[1]))]


def _answer(req, gen: Generation, t0: int, reply: Callable[..., BaseModel], texts: Callable, encode: Callable[[str], list[int]],
            tools: list[Tool] | None = None) -> Response:
    """The answer as NDJSON lines (stream) or one object; reply(text, calls, **fields) makes a line; texts() gives the
    model's TokenTexts (for logprobs); encode(text) its token ids as data (for `context`); with tools the answer may be a
    call (_with_calls)."""
    note_usage(gen.usage)
    run, disconnected = _Run(gen, t0, encode), _disconnected()
    head = {"model": req.model}

    def logprobs(lps: list | None) -> dict[str, Any]:
        return {"logprobs": o.ollama_logprobs(chat_content(lps, texts()))} if lps else {}

    def answer() -> Iterator[tuple[str, list | None, list | None]]:
        pieces = run.pieces(disconnected)
        try:
            yield from _with_calls(pieces, run, tools) if tools else ((t, lps, None) for t, lps in pieces)
        finally:
            pieces.close()

    if not req.stream:
        try:
            parts = list(answer())
        except ClientGone:
            raise UnavailableError("the client disconnected") from None
        lps = [e for _, p, _ in parts for e in p or ()] + (run.last_logprobs or [])
        calls = next((c for _, _, c in parts if c), None)
        return _json(reply("".join(t for t, _, _ in parts), calls, **head, created_at=o.now(), **run.done(), **logprobs(lps)))

    def body() -> Iterator[bytes]:
        pieces = answer()
        try:
            for text, lps, calls in pieces:
                yield _line(reply(text, calls, **head, created_at=o.now(), done=False, **logprobs(lps)))
            yield _line(reply("", None, **head, created_at=o.now(), **run.done(), **logprobs(run.last_logprobs)))
        except ClientGone:
            return
        except ServiceError as e:
            yield _line({"error": e.message})
        finally:
            pieces.close()

    return event_stream(gen, body(), NDJSON)


# --- routes ------------------------------------------------------------------------
def _generation(model: type[o.OllamaChatRequest] | type[o.OllamaGenerateRequest], reply: Callable[..., BaseModel]) -> Response:
    """/api/chat's and /api/generate's answer: done_reason "load" (or "unload", keep_alive 0) when the request asks nothing,
    else the generation."""
    t0 = time.perf_counter_ns()
    req, rt = _read(model)
    svc = _chat_service(rt, req.model)
    if req.asks_nothing():
        return _json(reply("", None, model=req.model, created_at=o.now(), done=True, done_reason=req.done_reason_of_nothing(),
                           total_duration=time.perf_counter_ns() - t0, load_duration=0))
    tools = req.tool_list() if isinstance(req, o.OllamaChatRequest) else None
    return _answer(req, req.start(svc), t0, reply, svc.token_texts, svc.formatter.encode_data, tools)


@bp.post("/api/chat")
def chat():
    return _generation(o.OllamaChatRequest, lambda text, calls, **fields: o.OllamaChatResponse(
        message=o.OllamaChatMessage(content=text, tool_calls=calls), **fields))


@bp.post("/api/generate")
def generate():
    return _generation(o.OllamaGenerateRequest, lambda text, calls, **fields: o.OllamaGenerateResponse(response=text, **fields))


@bp.post("/api/embed")
def embed():
    t0 = time.perf_counter_ns()
    req, rt = _read(o.OllamaEmbedRequest)
    svc = _embedding_service(rt, req.model)
    if not req.input:  # "" or []: Ollama's request to load the model, answered with no embeddings
        return _json(o.OllamaEmbedResponse(model=req.model, embeddings=[], total_duration=time.perf_counter_ns() - t0))
    out = svc.embed_texts([req.input] if isinstance(req.input, str) else list(req.input), dimensions=req.dimensions, truncate=req.truncate)
    note_usage(out.tokens)
    return _json(o.OllamaEmbedResponse(model=req.model, embeddings=out.vectors.tolist(), total_duration=time.perf_counter_ns() - t0,
                                       load_duration=0, prompt_eval_count=out.tokens))


@bp.post("/api/embeddings")
def embeddings():
    """Ollama's older route: one prompt, one vector."""
    req, rt = _read(o.OllamaEmbeddingsRequest)
    svc = _embedding_service(rt, req.model)
    if not req.prompt:  # Ollama's request to load the model
        return _json(o.OllamaEmbeddingsResponse(embedding=[]))
    out = svc.embed_texts([req.prompt])
    note_usage(out.tokens)
    return _json(o.OllamaEmbeddingsResponse(embedding=out.vectors[0].tolist()))


def _models(rt) -> list[tuple[o.OllamaModel, dict[str, Any], list[str], int]]:
    """Each model served, then each alias (Settings.model_aliases, embedding_model_aliases) as a model of its own, as
    Ollama lists a copied model: its listing, model_info, capabilities and context length."""
    card, info = o.chat_model(rt.chat)
    out = [(card, info, o.chat_capabilities(rt.chat), rt.chat.context_length)]
    emb = o.embedding_model(rt.embeddings.facts() if rt.embeddings is not None else None)
    if emb is not None:
        out.append((emb[0], emb[1], ["embedding"], emb[1]["bert.context_length"]))
    named = {"completion": rt.chat.aliases, "embedding": rt.embeddings.aliases if rt.embeddings is not None else ()}
    for card, info, caps, ctx in list(out):
        for alias in named[caps[0]]:
            tag = alias if ":" in alias else alias + o.LATEST
            out.append((card.model_copy(update={"name": tag, "model": tag}), info, caps, ctx))
    return out


@bp.get("/")
def root():
    """Ollama's probe (GET or HEAD /): its client's heartbeat and other tools ask it before anything else."""
    return Response("Ollama is running", mimetype="text/plain")


@bp.get("/api/version")
def version():
    return _json(o.OllamaVersion(version=o.API_VERSION))


@bp.get("/api/tags")
def tags():
    return _json(o.OllamaTags(models=[m[0] for m in _models(_runtime())]))


@bp.get("/api/ps")
def ps():
    return _json(o.OllamaPs(models=[o.OllamaRunning(**card.model_dump(), expires_at=NEVER, context_length=ctx)
                                    for card, _, _, ctx in _models(_runtime())]))


@bp.post("/api/show")
def show():
    req, rt = _read(o.OllamaShowRequest)
    name = req.named()
    for card, info, capabilities, _ in _models(rt):  # the chat model first: "default" names it, as on /v1/models/default
        if o.served(name, card.model.removesuffix(o.LATEST)):
            chat = capabilities[0] == "completion"
            return _json(o.OllamaShow(
                parameters=o.parameters(rt.chat.defaults) if chat else "",
                template=o.template_of(rt.chat.formatter) if chat else "",
                details=card.details, model_info=info, capabilities=capabilities, modified_at=card.modified_at))
    raise o.OllamaModelNotFound(name)


@bp.route("/api/<any(pull, push, create, copy, delete):action>", methods=["POST", "DELETE"])
def manage(action: str):
    """Ollama's model management: never here (offline; `edge-agent model` installs bundles), said in Ollama's shape."""
    done = {"pull": "pulled", "push": "pushed", "create": "created", "copy": "copied", "delete": "deleted"}[action]
    raise ApiError(400, f"models are not {done} through this API: this server is offline; "
                   "copy the model file onto it and run `edge-agent model import FILE --name NAME` (see `edge-agent model list`)")


# --- /openapi.json -------------------------------------------------------------------
_REF = "#/components/schemas/{model}"


def openapi_schemas(runtime) -> dict[str, Any]:
    """The models' schemas, with the names of the models served (those known when the app is made) as `model`'s enum."""
    models = [(m, "validation") for m in o.REQUESTS] + [(m, "serialization") for m in o.REPLIES]
    _, top = models_json_schema(models, ref_template=_REF)
    defs = top.get("$defs", {})

    def tagged(*names: str | None) -> list[str]:
        return [n + tag for n in names if n for tag in ("", o.LATEST)]

    chat, emb = runtime.chat.model_name, runtime.embeddings.model_name if runtime.embeddings is not None else None
    enums = {"OllamaChatRequest": tagged(chat, "default"), "OllamaGenerateRequest": tagged(chat, "default"),
             "OllamaShowRequest": tagged(chat, "default", emb), "OllamaEmbedRequest": tagged("default", emb),
             "OllamaEmbeddingsRequest": tagged("default", emb)}
    for name, names in enums.items():
        prop = defs[name]["properties"]["model"]
        next((alt for alt in prop.get("anyOf", ()) if alt.get("type") == "string"), prop)["enum"] = names  # null stays taken
    return defs


def openapi_paths(runtime) -> dict[str, Any]:
    def ref(name: str) -> dict:
        return {"schema": {"$ref": _REF.format(model=name)}}

    def errors(*codes: int) -> dict[str, Any]:
        text = {400: "Invalid request.", 404: "Unknown model.", 413: "Request body too large.", 415: "Body is not JSON.",
                429: "Queue full; retry after Retry-After.", 500: "Generation failed.", 503: "Not ready, shutting down, or no "
                "embedding model loaded.", 504: "The request ran past its time limit."}
        out = {str(c): {"description": text[c], "content": {"application/json": ref("OllamaError")}} for c in codes}
        openai_shaped = {"content": {"application/json": ref("ErrorResponse")}}
        out["403"] = {"description": "Host or origin not allowed (the OpenAI error shape).", **openai_shaped}
        if runtime.settings.accepted_keys():
            out["401"] = {"description": "Missing or wrong API key (the OpenAI error shape).", **openai_shaped}
        return out

    post_errors = errors(400, 404, 413, 415, 429, 500, 503, 504)
    ndjson = {"schema": {"type": "string", "description": "NDJSON: one JSON object a line (OllamaChatResponse or "
                         "OllamaGenerateResponse), the last with done true; a failure after the first line is a line "
                         "{\"error\": \"...\"}."}}

    def post(summary: str, op: str, req: str, ok: str, stream: bool = False) -> dict[str, Any]:
        content = {"application/json": ref(ok), **({NDJSON: ndjson} if stream else {})}
        return {"post": {"summary": summary, "operationId": op,
                         "requestBody": {"required": True, "content": {"application/json": ref(req)}},
                         "responses": {"200": {"description": "The answer (stream false) or its NDJSON lines." if stream else "OK.",
                                               "content": content}, **post_errors}}}

    def get(summary: str, op: str, ok: str) -> dict[str, Any]:
        return {"get": {"summary": summary, "operationId": op, "responses": {
            "200": {"description": "OK.", "content": {"application/json": ref(ok)}}, **errors(500)}}}

    return {
        "/": {"get": {"summary": "Ollama's liveness probe: \"Ollama is running\"", "operationId": "ollamaRoot", "responses": {
            "200": {"description": "OK.", "content": {"text/plain": {"schema": {"type": "string"}}}}, **errors(500)}}},
        "/api/version": get("The Ollama API version these routes follow", "ollamaVersion", "OllamaVersion"),
        "/api/tags": get("Models served (Ollama)", "ollamaTags", "OllamaTags"),
        "/api/ps": get("Models loaded (Ollama): all of them, always", "ollamaPs", "OllamaPs"),
        "/api/show": post("One model's details (Ollama)", "ollamaShow", "OllamaShowRequest", "OllamaShow"),
        "/api/chat": post("Chat (Ollama); streams NDJSON unless stream is false", "ollamaChat", "OllamaChatRequest", "OllamaChatResponse", True),
        "/api/generate": post("Completion of a prompt (Ollama); streams NDJSON unless stream is false", "ollamaGenerate",
                              "OllamaGenerateRequest", "OllamaGenerateResponse", True),
        "/api/embed": post("Embeddings (Ollama)", "ollamaEmbed", "OllamaEmbedRequest", "OllamaEmbedResponse"),
        "/api/embeddings": post("One embedding (Ollama's older route)", "ollamaEmbeddings", "OllamaEmbeddingsRequest",
                                "OllamaEmbeddingsResponse"),
    }
