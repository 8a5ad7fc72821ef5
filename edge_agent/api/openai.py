"""OpenAI-compatible routes: /v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings."""
from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from flask import Blueprint, Response, request
from pydantic import BaseModel

from edge_agent.api import protocol as p
from edge_agent.api.context import runtime as _runtime
from edge_agent.api.access_log import note_usage
from edge_agent.api.errors import error_body, read_json
from edge_agent.services import grounding
from edge_agent.services.chat import ChatService, sampling_options
from edge_agent.services.generation import ChoiceDelta, Generation
from edge_agent.services.logprobs import TextOffsets, chat_content, completion_logprobs
from edge_agent.services.ollama_protocol import LATEST, our_name
from edge_agent.services.protocol_functions import function_call_delta
from edge_agent.services.tools import CallReader, call_id, read_answer
from edge_agent.services.errors import ModelNotFoundError, ServiceError, UnavailableError

bp = Blueprint("openai", __name__)

KEEPALIVE_S = 10.0
M = TypeVar("M", bound=BaseModel)
PROBE_S = 0.25  # how often a running request checks that its client is still there, tokens flowing or not
STREAM_START_S = 10.0  # a stream's body not read by then (the server never iterated it) cancels its generation


def ollama_tagged(name: str, ours: tuple[str, ...]) -> str:
    """The served name an Ollama-style name means ("default:latest", "Llama:latest", as /api/tags lists our models and
    Ollama's own /v1 routes take them), else name as sent: apps that list models through /api/tags and then talk to
    /v1 send those names."""
    return our_name(name, (*ours, "default")) if name.lower().endswith(LATEST) else name


def generation_request(model: type[M]) -> tuple[M, ChatService]:
    """The route's request body, validated against the server's limits, and the chat service once the body names
    a model it serves (ModelNotFoundError otherwise)."""
    rt = _runtime()
    s = rt.settings
    req = read_json(model, s.max_body_bytes, {"max_tokens_limit": s.max_tokens_limit, "max_messages": s.max_messages})
    req.model = ollama_tagged(req.model, rt.chat.names)
    try:
        rt.chat.check_model(req.model)
    except ModelNotFoundError:
        if rt.embeddings is not None and req.model in rt.embeddings.names:  # listed on /v1/models
            raise ModelNotFoundError(req.model, [], f"the model {req.model!r} is an embedding model, not a chat model: send it to "
                                     f"/v1/embeddings, and chat and completions to {rt.chat.model_name!r}") from None
        raise
    return req, rt.chat


def _json(model) -> Response:
    """The model as JSON; `sources` and `grounding` are left out unless the request asked for rag."""
    exclude = {f for f in ("sources", "grounding") if f in type(model).model_fields and getattr(model, f) is None} or None
    return Response(model.model_dump_json(exclude=exclude), mimetype="application/json")


def _rag(req: p._Sampling) -> grounding.RagOptions | None:
    r = req.rag
    if r is None:
        return None
    return grounding.RagOptions(k=r.k, filters=r.filters.to_dict() if r.filters else None, mode=r.mode)


_sources, _grounding = p.sources_of, p.grounding_of


def _with_sources(first: dict, gen: Generation) -> dict:
    """The first streamed chunk carries the sources and the grounding report (when the request asked for rag)."""
    sources = _sources(gen)
    if sources is not None:
        first["sources"] = [s.model_dump() for s in sources]
    if gen.grounding is not None:
        first["grounding"] = _grounding(gen).model_dump()
    return first


def _disconnected() -> Callable[[], bool]:
    probe = request.environ.get("waitress.client_disconnected")
    return probe if callable(probe) else (lambda: False)


def _wait(gen: Generation, disconnected: Callable[[], bool]) -> tuple[dict[int, str], dict[int, str], dict[int, list | None]]:
    """Every choice's text, finish reason and logprobs (Generation.gather); give up (cancelling) if the client goes away."""
    def check() -> None:
        if disconnected():
            gen.cancel()
            raise UnavailableError("the client disconnected")
    return gen.gather(check)


def _usage(gen: Generation) -> p.Usage:
    return p.Usage.of(gen.usage)


def _sse(data: dict | str) -> bytes:
    return b"data: " + (data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))).encode() + b"\n\n"


KEEPALIVE = b": keep-alive\n\n"  # an SSE comment: proxies and clients see the stream is alive while nothing is generated


class ClientGone(Exception):
    """The streaming client went away (live_events)."""


def live_events(events: Iterator, disconnected: Callable[[], bool]) -> Iterator:
    """A generation's events for a stream: None ticks become KEEPALIVE every KEEPALIVE_S of quiet; the client is probed
    every PROBE_S, tokens flowing or not, and ClientGone is raised once it has gone."""
    last = time.monotonic()
    probe = last + PROBE_S
    for ev in events:
        now = time.monotonic()
        if ev is None or now >= probe:
            probe = now + PROBE_S
            if disconnected():
                raise ClientGone
        if ev is None:
            if now - last > KEEPALIVE_S:
                last = now
                yield KEEPALIVE
            continue
        last = now
        yield ev


def _stream(gen: Generation, id_prefix: str, head: list[dict], chunk: Callable[[int, str | None, str | None, list | None], dict | None],
            include_usage: bool, disconnected: Callable[[], bool], fingerprint: str) -> Response:
    """Server-Sent Events: head chunks, one chunk per delta and per end, optional usage, [DONE].

    chunk(index, text, finish_reason, logprobs) makes a chunk, or None when there is nothing to send; logprobs are the
    TokenLogprob of its tokens (None unless asked for).

    A client that goes away (a failed write closes this generator; waitress' disconnect probe
    is polled between events) cancels the generation.
    """
    base = {"id": id_prefix + gen.id, "created": gen.created, "model": gen.model, "system_fingerprint": fingerprint}

    def body() -> Iterator[bytes]:
        events = gen.events()
        try:
            for h in head:
                yield _sse({**h, **base, "usage": None} if include_usage else {**h, **base})
            for ev in live_events(events, disconnected):
                if ev is KEEPALIVE:
                    yield ev
                    continue
                if isinstance(ev, ChoiceDelta):
                    out = chunk(ev.index, ev.text, None, ev.logprobs)
                else:
                    out = chunk(ev.index, None, ev.finish_reason, ev.logprobs)
                if out is None:  # nothing to say yet (a call's text held back until its name is known)
                    continue
                out.update(base)
                if include_usage:
                    out["usage"] = None
                yield _sse(out)
            if include_usage:
                last_chunk = chunk(0, None, None, None)
                yield _sse({**last_chunk, **base, "choices": [], "usage": _usage(gen).model_dump()})
            yield _sse("[DONE]")
        except ClientGone:
            return
        except ServiceError as e:
            yield _sse(error_body(e.message, e.type, e.param, e.code))
        finally:
            events.close()
            gen.cancel()

    return event_stream(gen, body())


def event_stream(gen: Generation, body: Iterator[bytes], mimetype: str = "text/event-stream") -> Response:
    """The streamed response of body (Server-Sent Events unless mimetype says otherwise), which reads gen's events; gen is
    cancelled if the body is closed or never read."""
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    resp = Response(body, mimetype=mimetype, headers=headers)
    resp.call_on_close(gen.cancel)  # closed unread (a generator never started runs no finally): free the slots
    gen.expire_unread(STREAM_START_S)  # never closed and never read: free them anyway
    return resp


def _model_cards() -> list[p.ModelCard]:
    rt = _runtime()
    cards = [p.ModelCard(id=name, created=rt.chat.created, max_model_len=rt.chat.context_length) for name in rt.chat.names]
    facts = rt.embeddings.facts() if rt.embeddings is not None else None
    if facts:  # its files' time (0: unknown)
        cards += [p.ModelCard(id=name, created=int(facts["modified"]), max_model_len=facts["window"] or None)
                  for name in rt.embeddings.names]
    return cards


@bp.get("/v1/models")
def list_models():
    return _json(p.ModelList(data=_model_cards()))


@bp.get("/v1/models/<path:model_id>")
def get_model(model_id: str):
    """One model (the openai client's models.retrieve); "default" names the chat model, as chat and completions take it,
    and an Ollama name of ours ("default:latest", as /api/tags lists it) the model it means; 404 model_not_found for any
    other id."""
    cards = _model_cards()
    model_id = ollama_tagged(model_id, tuple(c.id for c in cards))
    if model_id == "default":
        return _json(cards[0])
    for card in cards:
        if card.id == model_id:
            return _json(card)
    raise ModelNotFoundError(model_id, [c.id for c in cards])


@bp.post("/v1/chat/completions")
def chat_completions():
    req, svc = generation_request(p.ChatCompletionRequest)
    messages = [m.to_dict() for m in req.messages]
    max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    constraint = req.output_constraint()
    tools, call, may_call = req.tool_list(), req.forced_call(), req.may_call()
    gen = svc.chat(messages, sampling_options(req, max_tokens), n=req.n or 1, constraint=constraint, priority=req.priority or 0,
                   rag=_rag(req), tools=tools, call=call, template_kwargs=req.chat_template_kwargs, may_call=may_call, model=req.model)
    note_usage(gen.usage)
    disconnected = _disconnected()
    calls = call is not None or may_call  # the answer is (or may be) a call, read by tools.CallReader
    legacy = req.legacy_functions()  # asked with the deprecated `functions`: a call is given as function_call
    if req.stream:
        obj = "chat.completion.chunk"
        opening = {"role": "assistant", "content": None if calls else ""}  # a call's content is null, streamed or not
        head = [{"object": obj, "choices": [{"index": c.index, "delta": opening, "finish_reason": None, "logprobs": None}]}
                for c in gen.choices]
        _with_sources(head[0], gen)
        readers = {c.index: CallReader(tools, call or None, may_call) for c in gen.choices} if calls else {}

        def chunk(index: int, text: str | None, finish: str | None, lps: list | None) -> dict | None:
            delta = {"content": text} if text is not None else {}
            if index in readers and (text is not None or finish is not None):
                delta, finish = _call_delta(readers[index], text, finish)
                if not delta and finish is None and lps is None:
                    return None
                if legacy:
                    delta, finish = function_call_delta(delta), p.legacy_finish(finish, True)
            logprobs = None if lps is None else {"content": chat_content(lps, svc.token_texts()), "refusal": None}
            return {"object": obj, "choices": [{"index": index, "delta": delta, "finish_reason": finish, "logprobs": logprobs}]}

        include = bool(req.stream_options and req.stream_options.include_usage)
        return _stream(gen, "chatcmpl-", head, chunk, include, disconnected, svc.fingerprint)
    try:
        texts, ends, lps = _wait(gen, disconnected)
    finally:
        gen.cancel()
    choices = []
    for i in sorted(texts):
        content, made, finish = read_answer(texts[i], ends[i], tools, call or None, may_call) if calls else (texts[i], None, ends[i])
        choices.append(p.ChatChoice(index=i, message=p.AssistantMessage.of(content, made, legacy), finish_reason=p.legacy_finish(finish, legacy),
                                    logprobs=None if lps[i] is None else p.ChatLogprobs(content=chat_content(lps[i], svc.token_texts()))))
    gen.note_citations(texts.values())
    return _json(p.ChatCompletion(id=f"chatcmpl-{gen.id}", created=gen.created, model=gen.model, system_fingerprint=svc.fingerprint,
                                  choices=choices, usage=_usage(gen),
                                  sources=_sources(gen), grounding=_grounding(gen)))


def _call_delta(reader: CallReader, text: str | None, finish: str | None) -> tuple[dict, str | None]:
    """A streamed call's delta (OpenAI's shape: the first with id, type and name, then argument pieces) and finish reason;
    an answer in words (tool_choice auto) streams its text as content."""
    had_name = reader.name is not None
    if text is not None:
        named, piece = reader.feed(text)
        if reader.words:
            return ({"content": piece} if piece else {}), finish
    else:
        named, piece = None, reader.finish(finish or "stop")
        if reader.name is None:  # cut before the name was written: no call, the text as it is
            return ({"content": piece} if piece else {}), finish
        finish = "tool_calls" if finish == "stop" else finish
    if named is not None and not had_name:
        return {"tool_calls": [{"index": 0, "id": call_id(), "type": "function", "function": {"name": named, "arguments": piece}}]}, finish
    return ({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]} if piece else {}), finish


@bp.post("/v1/completions")
def completions():
    req, svc = generation_request(p.CompletionRequest)
    n = req.n or 1
    prompts = req.prompts()
    gen = svc.complete(prompts, sampling_options(req, req.max_tokens), n=n, echo=bool(req.echo), priority=req.priority or 0,
                       rag=_rag(req), constraint=req.output_constraint(), model=req.model)
    note_usage(gen.usage)
    disconnected = _disconnected()
    if req.stream:
        offsets: dict[int, TextOffsets] = {}  # per choice: where the next token's text starts

        def chunk(index: int, text: str | None, finish: str | None, lps: list | None) -> dict:
            logprobs = None
            if lps is not None:
                tt = svc.token_texts()
                logprobs = completion_logprobs(lps, tt, offsets.setdefault(index, TextOffsets(tt)))
            return {"object": "text_completion", "choices": [{"index": index, "text": text or "", "finish_reason": finish, "logprobs": logprobs}]}

        include = bool(req.stream_options and req.stream_options.include_usage)
        head = [] if gen.sources is None else [_with_sources(chunk(gen.choices[0].index, "", None, None), gen)]
        return _stream(gen, "cmpl-", head, chunk, include, disconnected, svc.fingerprint)
    try:
        texts, ends, lps = _wait(gen, disconnected)
    finally:
        gen.cancel()
    choices = [p.CompletionChoice(index=i, text=texts[i], finish_reason=ends[i],
                                  logprobs=None if lps[i] is None else completion_logprobs(lps[i], svc.token_texts(), TextOffsets(svc.token_texts())))
               for i in sorted(texts)]
    gen.note_citations(texts.values())
    return _json(p.Completion(id=f"cmpl-{gen.id}", created=gen.created, model=gen.model, system_fingerprint=svc.fingerprint,
                              choices=choices, usage=_usage(gen),
                              sources=_sources(gen), grounding=_grounding(gen)))


@bp.post("/v1/embeddings")
def embeddings():
    """OpenAI's embeddings. An input longer than the model's window (all-MiniLM-L6-v2: 256 tokens) is never cut
    silently: with `truncate` (our extension, default true as in Ollama and TEI) its first tokens are embedded and
    usage.truncated_inputs counts it; with truncate false the request is refused with 400 (OpenAI's error shape,
    code context_length_exceeded) naming the input, its length and the limit. usage.prompt_tokens counts every
    token sent, those past the window too (OpenAI counts the input, not what the model kept)."""
    rt = _runtime()
    req = read_json(p.EmbeddingRequest, rt.settings.max_body_bytes)
    svc = rt.embeddings
    req.model = ollama_tagged(req.model, svc.names if svc is not None and svc.model_name else ())
    try:
        svc.check_model(req.model)
    except ModelNotFoundError:
        if req.model in rt.chat.names:  # listed beside it on /v1/models
            raise ModelNotFoundError(req.model, [], f"the model {req.model!r} is the chat model, not an embedding model: "
                                     f"/v1/embeddings takes {svc.model_name!r} (or \"default\")") from None
        raise
    texts = [req.input] if isinstance(req.input, str) else list(req.input)
    out = svc.embed_texts(texts, dimensions=req.dimensions, truncate=req.truncate)
    note_usage(out.tokens)
    as_b64 = req.encoding_format == "base64"
    data = [
        p.EmbeddingData(index=i, embedding=base64.b64encode(v.astype("<f4").tobytes()).decode() if as_b64 else v.tolist())
        for i, v in enumerate(out.vectors)
    ]
    usage = p.EmbeddingUsage(prompt_tokens=out.tokens, total_tokens=out.tokens, truncated_inputs=out.truncated)
    return _json(p.EmbeddingList(data=data, model=svc.model_name or req.model, usage=usage))
