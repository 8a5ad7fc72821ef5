"""POST /v1/responses (OpenAI's Responses API) against the real server, through the official openai client.

The tiny Llama has random weights, so its words mean nothing; what these tests hold is the mapping: greedy decoding
is deterministic, so a Responses request and the chat request it stands for must give the same text and token counts.
"""
from __future__ import annotations

import json

import openai
import pytest
from pydantic import BaseModel

from api_helpers import KEY

Q = "Say something about foxes."
FLAG = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
LIFECYCLE = ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]


@pytest.fixture(scope="module")
def client(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def _chat(client, messages, max_tokens, **kw):
    return client.chat.completions.create(model="default", messages=messages, max_tokens=max_tokens, temperature=0, **kw)


def _events(live, body: dict) -> list[tuple[str, dict]]:
    """The raw SSE of a streamed request: (event line, data) pairs."""
    status, headers, raw = live.request("POST", "/v1/responses", {**body, "stream": True})
    assert status == 200 and headers["content-type"].startswith("text/event-stream"), raw
    out = []
    for block in raw.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        if lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_text_in_text_out_is_the_chat_answer(client):
    r = client.responses.create(model="default", input=Q, max_output_tokens=12, temperature=0)
    chat = _chat(client, [{"role": "user", "content": Q}], 12)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == chat.model
    assert r.output_text == chat.choices[0].message.content and r.output_text
    item = r.output[0]
    assert len(r.output) == 1 and item.type == "message" and item.role == "assistant" and item.id.startswith("msg_")
    assert [(c.type, c.annotations) for c in item.content] == [("output_text", [])]
    u = r.usage
    assert (u.input_tokens, u.output_tokens) == (chat.usage.prompt_tokens, chat.usage.completion_tokens)
    assert u.total_tokens == u.input_tokens + u.output_tokens
    assert u.output_tokens_details.reasoning_tokens == 0 and 0 <= u.input_tokens_details.cached_tokens <= u.input_tokens
    finished = "completed" if chat.choices[0].finish_reason == "stop" else "incomplete"
    assert r.status == item.status == finished
    assert r.model_dump()["store"] is False and r.tools == [] and r.temperature == 0 and r.max_output_tokens == 12


def test_message_list_with_instructions_is_the_chat_conversation(client):
    items = [{"role": "user", "content": [{"type": "input_text", "text": "Hello there."}]},
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi.", "annotations": []}]},
             {"role": "developer", "content": "Keep it short."},
             {"role": "user", "content": Q}]
    r = client.responses.create(model="default", input=items, instructions="You are terse.", max_output_tokens=10, temperature=0)
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello there."},
                {"role": "assistant", "content": "Hi."}, {"role": "developer", "content": "Keep it short."}, {"role": "user", "content": Q}]
    chat = _chat(client, messages, 10)
    assert r.output_text == chat.choices[0].message.content
    assert r.usage.input_tokens == chat.usage.prompt_tokens
    assert r.instructions == "You are terse."
    bare = client.responses.create(model="default", input=items, max_output_tokens=1, temperature=0)
    assert bare.usage.input_tokens < r.usage.input_tokens  # the instructions are in the prompt
    # an earlier response's output items sent back as they came (the client's own models)
    again = client.responses.create(model="default", input=[{"role": "user", "content": Q}, *r.output, {"role": "user", "content": "More."}],
                                    max_output_tokens=4, temperature=0)
    chat = _chat(client, [{"role": "user", "content": Q}, {"role": "assistant", "content": r.output_text}, {"role": "user", "content": "More."}], 4)
    assert again.output_text == chat.choices[0].message.content


def test_cached_tokens_are_the_prefix_cache_hits(client):
    """A repeated long prompt finds its 64-token blocks in the prefix cache; usage says how many tokens."""
    kw = dict(model="default", instructions="You answer short questions about animals in the wild. " * 5, input=Q,
              max_output_tokens=1, temperature=0)
    first = client.responses.create(**kw)
    again = client.responses.create(**kw)
    assert first.usage.input_tokens > 128
    cached = again.usage.input_tokens_details.cached_tokens
    assert 64 <= cached < again.usage.input_tokens and cached % 64 == 0, again.usage


def test_max_output_tokens_makes_it_incomplete(client, live):
    r = client.responses.create(model="default", input=Q, max_output_tokens=3, temperature=0)
    assert r.usage.output_tokens == 3, r
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.output[0].status == "incomplete" and r.output_text
    events = _events(live, {"model": "default", "input": Q, "max_output_tokens": 3, "temperature": 0})
    kind, last = events[-1]
    assert kind == last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"} and last["response"]["status"] == "incomplete"
    assert last["response"]["output"][0]["content"][0]["text"] == r.output_text


def test_stream_events_in_openai_order(client, live):
    body = {"model": "default", "input": Q, "max_output_tokens": 12, "temperature": 0}
    whole = client.responses.create(**body)
    events = _events(live, body)
    kinds = [k for k, _ in events]
    assert [d["type"] for _, d in events] == kinds
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    n = kinds.count("response.output_text.delta")
    assert n >= 1 and kinds == LIFECYCLE + ["response.output_text.delta"] * n + [
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.completed" if whole.status == "completed" else "response.incomplete"]
    data = [d for _, d in events]
    assert data[0]["response"]["status"] == "in_progress" and data[0]["response"]["output"] == []
    assert len({d["response"]["id"] for d in data if "response" in d}) == 1
    deltas = "".join(d["delta"] for d in data if d["type"] == "response.output_text.delta")
    assert deltas == data[-4]["text"] == whole.output_text
    assert data[-2]["item"]["content"][0]["text"] == whole.output_text
    final = data[-1]["response"]
    assert final["usage"]["output_tokens"] == whole.usage.output_tokens and final["output"][0]["id"] == data[2]["item"]["id"]


def test_stream_through_the_client_helpers(client):
    """responses.stream() accumulates the events into the final response; create(stream=True) types every event."""
    kw = dict(model="default", input="Is a fox a dog?", max_output_tokens=60, temperature=0, text={"format": {
        "type": "json_schema", "name": "flag", "schema": FLAG, "strict": True}})
    whole = client.responses.create(**kw)
    assert whole.status == "completed", whole  # the grammar ends the answer well before 60 tokens
    with client.responses.stream(**kw) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == whole.output_text
    assert final.usage.output_tokens == whole.usage.output_tokens
    typed = list(client.responses.create(**kw, stream=True, stream_options={"include_obfuscation": False}))
    assert type(typed[0]).__name__ == "ResponseCreatedEvent" and type(typed[-1]).__name__ == "ResponseCompletedEvent"
    assert typed[-1].response.output_text == whole.output_text


class Flag(BaseModel):
    ok: bool


def test_json_schema_output_parses(client):
    r = client.responses.create(model="default", input="Is a fox a dog?", max_output_tokens=60, temperature=0,
                                text={"format": {"type": "json_schema", "name": "flag", "schema": FLAG, "strict": True}})
    assert r.status == "completed" and isinstance(json.loads(r.output_text)["ok"], bool), r.output_text
    assert r.text.format.type == "json_schema" and r.text.format.name == "flag"
    parsed = client.responses.parse(model="default", input="Is a fox a dog?", max_output_tokens=60, temperature=0, text_format=Flag)
    assert isinstance(parsed.output_parsed, Flag)
    free = client.responses.create(model="default", input="Is a fox a dog?", max_output_tokens=60, temperature=0)
    assert free.output_text != r.output_text  # the format, not chance, made it JSON
    obj = client.responses.create(model="default", input="A fox as JSON.", max_output_tokens=60, temperature=0,
                                  text={"format": {"type": "json_object"}})
    assert obj.status == "incomplete" or isinstance(json.loads(obj.output_text), dict), obj.output_text


def test_logprobs_are_the_chat_logprobs(client):
    r = client.responses.create(model="default", input=Q, max_output_tokens=5, temperature=0,
                                include=["message.output_text.logprobs"], top_logprobs=2)
    chat = _chat(client, [{"role": "user", "content": Q}], 5, logprobs=True, top_logprobs=2)
    got = r.output[0].content[0].logprobs
    want = chat.choices[0].logprobs.content
    assert [(g.token, g.logprob, len(g.top_logprobs)) for g in got] == [(w.token, w.logprob, len(w.top_logprobs)) for w in want]
    assert len(got) == r.usage.output_tokens
    plain = client.responses.create(model="default", input=Q, max_output_tokens=5, temperature=0)
    assert plain.output[0].content[0].logprobs == []


BAD = [
    ({"input": Q, "tools": [{"type": "web_search"}]}, "tools[0]", "offline"),
    ({"input": Q, "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}, "tools[0]", "rag"),
    ({"input": Q, "tool_choice": "required"}, "tool_choice", "tools"),
    ({"input": Q, "previous_response_id": "resp_123"}, "previous_response_id", "not stored"),
    ({"input": [{"type": "function_call_output", "call_id": "c1", "output": "42"}]}, "input[0].call_id", "no earlier function_call"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0]", "not stored"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://example.com/a.png"}]}]},
     "input[0].content[0]", "text only"),
    ({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]}, "input[0].content[0]", "text only"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input[0].role", "user"),
    ({"input": []}, "input", "at least 1"),
    ({"input": Q, "max_output_tokens": 100000}, "max_output_tokens", "at most"),
    ({"input": Q, "max_output_tokens": 0}, "max_output_tokens", "greater than"),
    ({"input": Q, "temperature": 9}, "temperature", "less than"),
    ({"input": Q, "stop": ["\n"]}, "stop", "unknown field"),
    ({"input": Q, "text": {"format": {"type": "json_schema", "schema": FLAG}}}, "text.format", "name"),
    ({"input": Q, "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "objekt"}}}}, "text.format", ""),
    ({"input": Q, "text": {"format": {"type": "yaml"}}}, "text.format.type", ""),
    ({"input": Q, "reasoning": {"effort": "high"}}, "reasoning", "reason"),
    ({"input": Q, "background": True}, "background", "not stored"),
    ({"input": Q, "truncation": "auto"}, "truncation", "auto"),
    ({"input": Q, "top_logprobs": 2}, "top_logprobs", "include"),
    # stream_options only with stream: true, as on /v1/chat/completions
    ({"input": Q, "stream_options": {"include_obfuscation": False}}, "stream_options", "stream: true"),
    ({"input": Q, "stream": False, "stream_options": {}}, "stream_options", "stream: true"),
    ({"input": "x " * 2000}, "input", "context"),
    ({"instructions": "You answer short questions about animals in the wild. " * 8, "input": Q, "max_output_tokens": 256},
     "input", "lower max_output_tokens"),
]


@pytest.mark.parametrize("body,param,says", BAD, ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD)])
def test_bad_input_is_a_400_naming_the_param(live, body, param, says):
    status, _, raw = live.request("POST", "/v1/responses", {"model": "default", **body})
    assert status == 400, raw
    err = json.loads(raw)["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param, err
    assert says in err["message"], err
    text = raw.decode()
    assert "Traceback" not in text and ".py" not in text and "/work" not in text and "/tmp" not in text


def test_harmless_fields_are_accepted(client):
    r = client.responses.create(model="default", input=Q, max_output_tokens=2, temperature=0, store=True, metadata={"ticket": "42"},
                                user="u1", truncation="disabled", tool_choice="auto", tools=[], parallel_tool_calls=False,
                                service_tier="auto", include=[], stream_options=None)
    assert r.metadata == {"ticket": "42"} and r.parallel_tool_calls is False and r.usage.output_tokens == 2


def test_nothing_is_stored(client, live):
    r = client.responses.create(model="default", input=Q, max_output_tokens=2, temperature=0)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.retrieve(r.id)
    assert "not stored" in e.value.message and e.value.body["code"] == "response_not_found"
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="default", input="And then?", previous_response_id=r.id)
    assert e.value.param == "previous_response_id" and "not stored" in e.value.message


def test_same_auth_limits_metrics_and_openapi_as_chat(live):
    body = {"model": "default", "input": Q, "max_output_tokens": 1}
    assert live.request("POST", "/v1/responses", body, key=None)[0] == 401
    assert live.request("POST", "/v1/responses", body, key="wrong")[0] == 401
    assert live.request("GET", "/v1/responses/resp_1", key=None)[0] == 401  # not even "not found" without the key
    status, _, raw = live.request("POST", "/v1/responses", {"model": "default", "input": "x" * (70 * 1024)})
    assert status == 413 and json.loads(raw)["error"]["code"] == "body_too_large"
    status, _, raw = live.request("POST", "/v1/responses", {**body, "model": "gpt-4o"})
    assert status == 404 and json.loads(raw)["error"]["code"] == "model_not_found"
    labels = 'method="POST",route="/v1/responses",status="200"'
    before = live.metric("edge_agent_http_requests_total", labels)
    assert live.request("POST", "/v1/responses", body)[0] == 200
    assert live.metric("edge_agent_http_requests_total", labels) == before + 1
    status, _, raw = live.request("GET", "/openapi.json")
    doc = json.loads(raw)
    post = doc["paths"]["/v1/responses"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/ResponseCreateRequest")
    assert "text/event-stream" in post["responses"]["200"]["content"] and "400" in post["responses"]
    props = doc["components"]["schemas"]["ResponseCreateRequest"]["properties"]
    assert props["model"]["enum"] == [live.runtime.chat.model_name, "default"]
    assert "404" in doc["paths"]["/v1/responses/{response_id}"]["get"]["responses"]


def test_a_failure_mid_stream_ends_with_response_failed(live, monkeypatch):
    """The engine fails after text was sent: the stream's last event is response.failed (no hang, no internals)."""
    from edge_agent.services import generation
    from edge_agent.services.errors import GenerationFailedError

    def failing_end(self, c, fin):
        raise GenerationFailedError("the generation failed; retry, and report it if it persists")
        yield  # a generator, as the real one

    monkeypatch.setattr(generation.Generation, "_end", failing_end)
    events = _events(live, {"model": "default", "input": Q, "max_output_tokens": 4, "temperature": 0})
    kinds = [k for k, _ in events]
    assert kinds[:4] == LIFECYCLE and kinds[-1] == "response.failed" and "response.completed" not in kinds
    failed = events[-1][1]["response"]
    assert failed["status"] == "failed" and failed["error"] == {"code": "server_error", "message": failed["error"]["message"]}
    assert "retry" in failed["error"]["message"]
    assert failed["output"][0]["content"][0]["text"] == "".join(d["delta"] for k, d in events if k == "response.output_text.delta")

    def broken_end(self, c, fin):
        raise RuntimeError("boom in /secret/place.py")
        yield

    monkeypatch.setattr(generation.Generation, "_end", broken_end)
    events = _events(live, {"model": "default", "input": Q, "max_output_tokens": 4, "temperature": 0})
    assert events[-1][0] == "response.failed"
    raw = json.dumps(events[-1][1])
    assert "boom" not in raw and "/secret" not in raw and "server log" in raw
    monkeypatch.undo()
    assert live.request("POST", "/v1/responses", {"model": "default", "input": Q, "max_output_tokens": 1})[0] == 200


def test_a_stream_client_that_hangs_up_frees_its_slot(small_live):
    """As chat's streams: the socket going away mid-stream cancels the generation (the tiny model never stops by itself)."""
    import socket

    from api_helpers import wait_until

    server = small_live
    cancelled = lambda: server.metric("edge_agent_generations_total", 'reason="cancelled"')  # noqa: E731
    before = cancelled()
    raw = json.dumps({"model": "default", "input": "hello", "max_output_tokens": 4000, "temperature": 0, "stream": True}).encode()
    s = socket.create_connection((server.host, server.port), timeout=30)
    s.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(raw)}\r\n\r\n".encode() + raw)
    buf = b""
    while b"response.output_text.delta" not in buf:
        buf += s.recv(4096)
    assert server.runtime.scheduler.active == 1
    s.close()
    assert wait_until(lambda: cancelled() > before, 5)
    assert wait_until(lambda: server.metric("edge_agent_active_sequences") == 0, 5)
