"""Function tools in POST /v1/responses through the real openai client: the chat path's forced calls, in Responses shapes.

The tiny Llama has random weights, so arguments that parse and follow the schema come from the grammar alone.
"""
from __future__ import annotations

import json

import jsonschema
import openai
import pytest
from openai.types.responses import ResponseFunctionToolCall

from api_helpers import KEY, lean_first_token
from test_api_tools import SCHEMAS, TIME, WEATHER
from test_api_tools import TOOLS as CHAT_TOOLS

TOOLS = [
    {"type": "function", "name": "get_weather", "description": "The forecast for a city.", "parameters": WEATHER, "strict": True},
    {"type": "function", "name": "get-time", "description": "The time in a zone.", "parameters": TIME},
    {"type": "function", "name": "ping"},
]
Q = "What is the weather in Utrecht?"
WEATHER_CHOICE = {"type": "function", "name": "get_weather"}


@pytest.fixture(scope="module")
def client(tools_live):
    return openai.OpenAI(base_url=tools_live.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


def _call(r) -> ResponseFunctionToolCall:
    [item] = r.output
    assert isinstance(item, ResponseFunctionToolCall), item
    assert item.type == "function_call" and item.id.startswith("fc_") and item.call_id.startswith("call_")
    jsonschema.validate(json.loads(item.arguments), SCHEMAS[item.name])
    return item


def test_named_call_is_a_function_call_item(client):
    r = client.responses.create(model="default", input=Q, tools=TOOLS, tool_choice=WEATHER_CHOICE, max_output_tokens=200,
                                temperature=0.8)
    call = _call(r)
    assert call.name == "get_weather" and call.status == r.status == "completed" and r.output_text == ""
    assert r.tool_choice.type == "function" and r.tool_choice.name == "get_weather"  # echoed as sent
    assert [t.name for t in r.tools] == ["get_weather", "get-time", "ping"] and r.tools[0].parameters == WEATHER


def test_required_call_names_a_tool_and_follows_its_schema(client):
    for seed in range(3):
        r = client.responses.create(model="default", input=Q, tools=TOOLS, tool_choice="required", max_output_tokens=200,
                                    temperature=1.0, extra_body={"seed": seed})
        assert _call(r).name in SCHEMAS and r.tool_choice == "required"


def test_chat_and_responses_make_the_same_call(client):
    """One generation path: greedy, the same request through both APIs writes the same arguments."""
    r = client.responses.create(model="default", input=Q, tools=TOOLS, tool_choice="required", max_output_tokens=200, temperature=0)
    chat = client.chat.completions.create(
        model="default", messages=[{"role": "user", "content": Q}], max_tokens=200, temperature=0, tool_choice="required",
        tools=[{"type": "function", "function": {k: v for k, v in t.items() if k != "type"}} for t in TOOLS])
    made = chat.choices[0].message.tool_calls[0].function
    assert (_call(r).name, _call(r).arguments) == (made.name, made.arguments)


@pytest.mark.parametrize("choice", ["required", {"type": "function", "name": "get-time"}])
def test_stream_reassembles_to_the_same_call(client, choice):
    kw = dict(model="default", input=Q, tools=TOOLS, tool_choice=choice, max_output_tokens=200, temperature=0)
    whole = _call(client.responses.create(**kw))
    events = list(client.responses.create(**kw, stream=True))
    kinds = [e.type for e in events]
    n = kinds.count("response.function_call_arguments.delta")
    assert n >= 1 and kinds == ["response.created", "response.in_progress", "response.output_item.added"] + [
        "response.function_call_arguments.delta"] * n + ["response.function_call_arguments.done", "response.output_item.done",
                                                         "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    added = events[2].item
    assert isinstance(added, ResponseFunctionToolCall) and added.arguments == "" and added.name == whole.name
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert deltas == events[-3].arguments == whole.arguments
    done = events[-2].item
    assert (done.id, done.call_id) == (added.id, added.call_id) and done.status == "completed"
    final = _call(events[-1].response)
    assert (final.call_id, final.name, final.arguments) == (added.call_id, whole.name, whole.arguments)
    with client.responses.stream(**kw) as stream:  # the client's accumulator
        got = _call(stream.get_final_response())
    assert (got.name, got.arguments) == (whole.name, whole.arguments)


def test_a_cut_call_is_incomplete(client):
    r = client.responses.create(model="default", input=Q, tools=TOOLS, tool_choice=WEATHER_CHOICE, max_output_tokens=3, temperature=0)
    [item] = r.output
    assert r.status == "incomplete" and item.type == "function_call" and item.status == "incomplete" and item.name == "get_weather"


def test_a_required_call_cut_before_its_name_is_a_message(client):
    """Cut inside '{"name": "': no name to report, so no function_call; the text is a message, streamed or not."""
    kw = dict(model="default", input=Q, tools=TOOLS, tool_choice="required", max_output_tokens=2, temperature=0)
    r = client.responses.create(**kw)
    [item] = r.output
    assert r.status == "incomplete" and item.type == "message" and '{"name": "'.startswith(r.output_text.lstrip(" \n"))
    events = list(client.responses.create(**kw, stream=True))
    assert [e.type for e in events][2:5] == ["response.output_item.added", "response.content_part.added", "response.output_text.delta"]
    assert events[-1].type == "response.incomplete" and events[-1].response.output_text == r.output_text


def test_a_failure_mid_call_ends_with_response_failed(tools_live, monkeypatch):
    from edge_agent.services import generation
    from edge_agent.services.errors import GenerationFailedError

    def failing_end(self, c, fin):
        raise GenerationFailedError("the generation failed; retry, and report it if it persists")
        yield

    monkeypatch.setattr(generation.Generation, "_end", failing_end)
    status, _, raw = tools_live.request("POST", "/v1/responses", {"model": "default", "input": Q, "tools": TOOLS, "stream": True,
                                                                  "tool_choice": WEATHER_CHOICE, "max_output_tokens": 6, "temperature": 0})
    last = json.loads(raw.decode().strip().split("\n\n")[-1].split("data: ", 1)[1])
    assert status == 200 and last["type"] == "response.failed" and "retry" in last["response"]["error"]["message"]
    [item] = last["response"]["output"]
    assert (item["type"], item["name"], item["status"]) == ("function_call", "get_weather", "incomplete")


def test_follow_up_with_the_call_and_its_output_answers_in_text(client, tools_live, monkeypatch):
    first = client.responses.create(model="default", input=Q, tools=TOOLS, tool_choice=WEATHER_CHOICE, max_output_tokens=200,
                                    temperature=0)
    call = _call(first)
    history = [{"role": "user", "content": Q}, *first.output,  # the client's own output item, sent back
               {"type": "function_call_output", "call_id": call.call_id, "output": "12 degrees, rain"}]
    lean_first_token(tools_live, monkeypatch, -100)  # "auto": a model that answers in words
    r = client.responses.create(model="default", input=history, tools=TOOLS, max_output_tokens=8, temperature=0)
    assert r.output[0].type == "message" and isinstance(r.output_text, str) and r.tool_choice == "auto"
    chat = client.chat.completions.create(model="default", max_tokens=8, temperature=0, tools=CHAT_TOOLS, messages=[
        {"role": "user", "content": Q},
        {"role": "assistant", "tool_calls": [{"id": call.call_id, "type": "function",
                                              "function": {"name": call.name, "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.call_id, "content": "12 degrees, rain"}])
    assert r.output_text == chat.choices[0].message.content and r.usage.input_tokens == chat.usage.prompt_tokens
    none = client.responses.create(model="default", input=history, tools=TOOLS, tool_choice="none", max_output_tokens=2)
    assert none.tool_choice == "none" and none.output[0].type == "message"


BAD = [
    ({"tool_choice": {"type": "function", "name": "nope"}}, "tool_choice.name", "not among the tools"),
    ({"tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}}, "tool_choice", "not available here"),
    ({"tools": None, "tool_choice": "required"}, "tool_choice", "needs tools"),
    ({"input": [{"role": "user", "content": Q}, {"type": "function_call_output", "call_id": "call_x", "output": "12"}]},
     "input[1].call_id", "no earlier function_call"),
    ({"tools": [{"type": "web_search"}]}, "tools[0]", "offline"),
    ({"tools": [TOOLS[0], {"type": "file_search", "vector_store_ids": ["vs_1"]}]}, "tools[1]", "rag"),
    ({"tools": [TOOLS[0], TOOLS[0]]}, "tools", "unique"),
    ({"tools": [{"type": "function", "name": "f", "parameters": {"type": "nonsense"}}]}, "tools[0].parameters", "JSON schema"),
    ({"tools": [{"type": "function", "name": "bad name!"}]}, "tools[0].name", ""),
    ({"input": [{"type": {}, "role": "user", "content": Q}]}, "input[0].type", ""),  # once a 500 (schemathesis: an unhashable type)
    ({"tool_choice": "required", "text": {"format": {"type": "json_object"}}}, "text.format", "forced function call"),
]


@pytest.mark.parametrize("body,param,says", BAD, ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD)])
def test_bad_tool_requests_are_400_with_param(tools_live, body, param, says):
    full = {"model": "default", "input": Q, "tools": TOOLS, "max_output_tokens": 4, **body}
    status, _, raw = tools_live.request("POST", "/v1/responses", {k: v for k, v in full.items() if v is not None})
    text = raw.decode()
    assert status == 400 and "Traceback" not in text and ".py" not in text, text
    err = json.loads(text)["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == param and says in err["message"], err
