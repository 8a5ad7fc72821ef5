"""OpenAI's Responses API: POST /v1/responses, served by the chat path (services/responses_protocol.py has the mapping).

A stream sends OpenAI's typed events (`event: <type>` and its JSON, each with a sequence_number): response.created,
response.in_progress, response.output_item.added, response.content_part.added, response.output_text.delta ...,
response.output_text.done, response.content_part.done, response.output_item.done, then response.completed (or
response.incomplete when max_output_tokens cut it); a failure after the first event ends it with response.failed.
Nothing is stored: GET, DELETE, cancel and input_items of a response id answer 404 and say so.
"""
from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Iterator

from flask import Blueprint, Response

from edge_agent.api.access_log import note_usage
from edge_agent.api.context import runtime as _runtime
from edge_agent.api.errors import ApiError, read_json
from edge_agent.api.openai import KEEPALIVE, ClientGone, _context, _disconnected, _rag, _wait, event_stream, live_events
from edge_agent.services import responses_protocol as r
from edge_agent.services.errors import ServiceError
from edge_agent.services.generation import ChoiceDelta, Generation

log = logging.getLogger(__name__)
bp = Blueprint("responses", __name__)

@bp.post("/v1/responses")
def create_response():
    rt = _runtime()
    req = read_json(r.ResponseCreateRequest, rt.settings.max_body_bytes, _context())
    svc = rt.chat
    svc.check_model(req.model)
    options = req.sampling()
    with r.named_for_responses():
        gen = svc.chat(req.messages(), options, constraint=req.constraint(), priority=req.priority or 0, rag=_rag(req))
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

    where = {"item_id": "msg_" + gen.id, "output_index": 0, "content_index": 0}
    texts: list[str] = []
    entries: list = []
    finish = "stop"
    events = gen.events()
    try:
        head = r.dump(r.response_object(req, gen, status="in_progress", output=[]))
        yield sse("response.created", response=head)
        yield sse("response.in_progress", response=head)
        yield sse("response.output_item.added", output_index=0, item=r.output_message(gen, "in_progress").model_dump(mode="json"))
        yield sse("response.content_part.added", **where, part=r.OutputText(text="").model_dump(mode="json"))
        for ev in live_events(events, disconnected):
            if ev is KEEPALIVE:
                yield ev
                continue
            lps = r.logprobs_of(ev.logprobs, texts_of)
            entries += lps
            if isinstance(ev, ChoiceDelta):
                texts.append(ev.text)
                yield sse("response.output_text.delta", **where, delta=ev.text, logprobs=lps)
            else:
                finish = ev.finish_reason
        text = "".join(texts)
        gen.note_citations([text])
        done = r.finished(req, gen, text, finish, entries)
        item = done.output[0]
        part = item.content[0].model_dump(mode="json")
        yield sse("response.output_text.done", **where, text=text, logprobs=part["logprobs"])
        yield sse("response.content_part.done", **where, part=part)
        yield sse("response.output_item.done", output_index=0, item=item.model_dump(mode="json"))
        yield sse("response.completed" if done.status == "completed" else "response.incomplete", response=r.dump(done))
    except ClientGone:
        return
    except Exception as e:  # noqa: BLE001 - the stream has begun (200 sent): a failure can only be told as its last event
        if isinstance(e, ServiceError):
            code, message = r.error_code(e.status), e.message
        else:
            log.exception("response stream %s failed", gen.id)
            code, message = "server_error", "internal server error; the server log has the details"
        failed = r.response_object(req, gen, status="failed", output=[r.output_message(gen, "incomplete", "".join(texts), entries)],
                         error=r.ResponseErrorInfo(code=code, message=message))
        yield sse("response.failed", response=r.dump(failed))
    finally:
        events.close()
        gen.cancel()
