"""OpenAI's Responses API: POST /v1/responses, served by the chat path (services/responses_protocol.py has the mapping).

A stream sends OpenAI's typed events (`event: <type>` and its JSON, each with a sequence_number): response.created,
response.in_progress, response.output_item.added, response.content_part.added, response.output_text.delta ...,
response.output_text.done, response.content_part.done, response.output_item.done, then response.completed (or
response.incomplete when max_output_tokens cut it); a failure after the first event ends it with response.failed.
A function call (forced by tool_choice "required" or a named function, or chosen by the model under "auto") streams its
function_call item instead: response.output_item.added (once the name is known, arguments ""),
response.function_call_arguments.delta ..., response.function_call_arguments.done, response.output_item.done; cut before
the name was written, it is a message. Under "auto" the answer is held only until it is known to be a call or not (its
first non-blank character, or with text.format its first keys), so a message's text streams as it comes.
Nothing is stored: GET, DELETE, cancel and input_items of a response id answer 404 and say so.
"""
from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Iterator

from flask import Blueprint, Response

from edge_agent.api.access_log import note_usage
from edge_agent.api.errors import ApiError
from edge_agent.api.openai import KEEPALIVE, ClientGone, _disconnected, _rag, _wait, event_stream, generation_request, live_events
from edge_agent.services import responses_protocol as r
from edge_agent.services.errors import ServiceError
from edge_agent.services.generation import ChoiceDelta, Generation
from edge_agent.services.tools import CallReader
from edge_agent.services.tools import call_id as call_id_of

log = logging.getLogger(__name__)
bp = Blueprint("responses", __name__)

@bp.post("/v1/responses")
def create_response():
    req, svc = generation_request(r.ResponseCreateRequest)
    options = req.sampling()
    gen = r.start(svc, req, options, req.priority or 0, _rag(req))
    note_usage(gen.usage)
    texts_of = svc.token_texts() if options.logprobs is not None else None  # tokens' texts for logprobs, when asked for
    if req.stream:
        return event_stream(gen, _events(req, gen, texts_of, _disconnected()))
    try:
        texts, ends, lps = _wait(gen, _disconnected())
    finally:
        gen.cancel()
    gen.note_citations(texts.values())
    done = r.finished(req, gen, texts[0], ends[0], r.logprobs_of(lps[0], texts_of))
    return Response(json.dumps(r.dump(done), ensure_ascii=False), mimetype="application/json")


@bp.route("/v1/responses/<response_id>", methods=["GET", "DELETE"])
@bp.get("/v1/responses/<response_id>/input_items")
@bp.post("/v1/responses/<response_id>/cancel")
def stored_response(response_id: str):
    """404 for any id: nothing is stored, so nothing can be fetched, listed, cancelled or deleted."""
    raise ApiError(404, f"{r.NOT_STORED}, so none can be fetched, deleted, cancelled or listed by id: keep what POST /v1/responses "
                        "returned (and send earlier output back in `input`)", code="response_not_found")


def _events(req: r.ResponseCreateRequest, gen: Generation, texts_of, disconnected: Callable[[], bool]) -> Iterator[bytes]:
    """The stream's events (see the module docstring); a client that goes away cancels the generation."""
    seq = itertools.count()

    def sse(kind: str, **data) -> bytes:
        body = json.dumps({"type": kind, "sequence_number": next(seq), **data}, ensure_ascii=False, separators=(",", ":"))
        return f"event: {kind}\ndata: {body}\n\n".encode()

    texts: list[str] = []  # the answer's text so far
    entries: list = []  # its logprobs
    call_id = call_id_of()
    events = gen.events()
    try:
        head = r.dump(r.response_object(req, gen, status="in_progress", output=[]))
        yield sse("response.created", response=head)
        yield sse("response.in_progress", response=head)
        body = _call_events if req.forced_call() is not None else _auto_events if req.may_call() else _text_events
        finish = yield from body(req, gen, sse, live_events(events, disconnected), texts, entries, texts_of, call_id)
        done = r.finished(req, gen, "".join(texts), finish, entries, call_id)
        yield sse("response.completed" if done.status == "completed" else "response.incomplete", response=r.dump(done))
    except ClientGone:
        return
    except Exception as e:  # noqa: BLE001 - the stream has begun (200 sent): a failure can only be told as its last event
        if isinstance(e, ServiceError):
            code, message = r.error_code(e.status), e.message
        else:
            log.exception("response stream %s failed", gen.id)
            code, message = "server_error", "internal server error; the server log has the details"
        so_far = r.answer_item(req, gen, "".join(texts), "length", entries, call_id)
        failed = r.response_object(req, gen, status="failed", output=[so_far], error=r.ResponseErrorInfo(code=code, message=message))
        yield sse("response.failed", response=r.dump(failed))
    finally:
        events.close()
        gen.cancel()


def _message_open(sse, gen: Generation) -> Iterator[bytes]:
    yield sse("response.output_item.added", output_index=0, item=r.output_message(gen, "in_progress").model_dump(mode="json"))
    yield sse("response.content_part.added", **_where(gen), part=r.OutputText(text="").model_dump(mode="json"))


def _message_close(sse, item: r.OutputMessage) -> Iterator[bytes]:
    part = item.content[0].model_dump(mode="json")
    where = {"item_id": item.id, "output_index": 0, "content_index": 0}
    yield sse("response.output_text.done", **where, text=part["text"], logprobs=part["logprobs"])
    yield sse("response.content_part.done", **where, part=part)
    yield sse("response.output_item.done", output_index=0, item=item.model_dump(mode="json"))


def _where(gen: Generation) -> dict:
    return {"item_id": "msg_" + gen.id, "output_index": 0, "content_index": 0}


def _text_events(req, gen, sse, events, texts: list[str], entries: list, texts_of, call_id: str):
    """A message's events, its text deltas as they come; returns the finish reason."""
    finish = "stop"
    yield from _message_open(sse, gen)
    for ev in events:
        if ev is KEEPALIVE:
            yield ev
            continue
        lps = r.logprobs_of(ev.logprobs, texts_of)
        entries += lps
        if isinstance(ev, ChoiceDelta):
            texts.append(ev.text)
            yield sse("response.output_text.delta", **_where(gen), delta=ev.text, logprobs=lps)
        else:
            finish = ev.finish_reason
    text = "".join(texts)
    gen.note_citations([text])
    yield from _message_close(sse, r.answer_item(req, gen, text, finish, entries))
    return finish


def _auto_events(req, gen, sse, events, texts: list[str], entries: list, texts_of, call_id: str):
    """tool_choice auto: the events are read until the answer is known to be a call or not (tools.CallReader), then told
    as a call's (_call_events) or a message's (_text_events); returns the finish reason."""
    seen: list = []
    reader = CallReader(req.tool_list(), None, may_answer=True)
    for ev in events:
        seen.append(ev)
        if isinstance(ev, ChoiceDelta):
            reader.feed(ev.text)
            if reader.words is not None:
                break
        elif ev is not KEEPALIVE:  # the end, still undecided: no call
            break
    body = _call_events if reader.words is False else _text_events
    return (yield from body(req, gen, sse, itertools.chain(seen, events), texts, entries, texts_of, call_id))


def _call_events(req, gen, sse, events, texts: list[str], entries: list, texts_of, call_id: str):
    """A forced call's events: the function_call item once its name is known, then its arguments as they come; returns the
    finish reason. Cut before the name was written, the text is told as a message."""
    reader = CallReader(req.tool_list(), req.forced_call() or None)
    item_id = "fc_" + gen.id
    where = {"item_id": item_id, "output_index": 0}
    finish = "stop"
    for ev in events:
        if ev is KEEPALIVE:
            yield ev
            continue
        entries += r.logprobs_of(ev.logprobs, texts_of)
        if not isinstance(ev, ChoiceDelta):
            finish = ev.finish_reason
            continue
        texts.append(ev.text)
        named, piece = reader.feed(ev.text)
        if named is not None:
            item = r.FunctionToolCall(id=item_id, call_id=call_id, name=named, arguments="", status="in_progress")
            yield sse("response.output_item.added", output_index=0, item=item.model_dump(mode="json"))
        if piece:
            yield sse("response.function_call_arguments.delta", **where, delta=piece)
    tail = reader.finish(finish)
    item = r.answer_item(req, gen, "".join(texts), finish, entries, call_id)
    if reader.name is None:  # no call: the text as a message
        yield from _message_open(sse, gen)
        if item.content[0].text:
            yield sse("response.output_text.delta", **_where(gen), delta=item.content[0].text, logprobs=item.content[0].logprobs)
        yield from _message_close(sse, item)
        return finish
    if tail:
        yield sse("response.function_call_arguments.delta", **where, delta=tail)
    yield sse("response.function_call_arguments.done", **where, arguments=item.arguments)
    yield sse("response.output_item.done", output_index=0, item=item.model_dump(mode="json"))
    return finish
