"""Ollama's tool calling on /api/chat through the real `ollama` client: with `tools` the model answers in words or with one
call (message.tool_calls, the arguments an object), a grammar keeping a call to its function's schema; calls and results
in the history are read back. The tiny model's random weights choose neither on purpose, so a spy on the scheduler
pushes its first token towards "{" (a model that decides to call) or away from it (one that answers in words)."""
from __future__ import annotations

import json

import ollama
import pytest

from api_helpers import KEY, lean_first_token

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"]}}}
MSGS = [{"role": "user", "content": "Wat voor weer is het in Parijs?"}]
OPTS = {"temperature": 0, "num_predict": 120}  # the tiny tokenizer spends ~40 tokens on the call's frame


@pytest.fixture(scope="module")
def client(live):
    return ollama.Client(host=live.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)


def test_a_model_that_calls_answers_with_the_call_its_arguments_an_object(live, client, monkeypatch):
    lean_first_token(live, monkeypatch, 50)
    r = client.chat(model="default", messages=MSGS, tools=[WEATHER], options=OPTS)
    assert r.message.tool_calls, (r.message.content, r.done_reason, r.eval_count)
    [call] = r.message.tool_calls
    assert call.function.name == "get_weather" and isinstance(call.function.arguments, dict)
    assert isinstance(call.function.arguments["city"], str) and r.message.content == "" and r.done_reason == "stop"
    status, _, raw = live.request("POST", "/api/chat", {"model": "default", "messages": MSGS, "tools": [WEATHER], "options": OPTS})
    *parts, last = [json.loads(x) for x in raw.decode().splitlines()]
    [with_call] = [p for p in parts if p["message"].get("tool_calls")]  # one line with the whole call, as Ollama streams it
    assert with_call["message"]["tool_calls"][0]["function"] == {"index": 0, "name": "get_weather", "arguments": call.function.arguments}
    assert with_call["message"]["tool_calls"][0]["id"].startswith("call_")
    assert "".join(p["message"]["content"] for p in parts) == "" and last["done"] is True
    # Ollama's tool loop: the answer's message goes back into the history as the client parsed it, then the result
    history = [*MSGS, r.message, {"role": "tool", "content": "18 graden", "tool_name": call.function.name}]
    assert client.chat(model="default", messages=history, tools=[WEATHER], options={"num_predict": 2}).done


def test_a_model_that_answers_in_words_streams_them(live, client, monkeypatch):
    lean_first_token(live, monkeypatch, -50)
    r = client.chat(model="default", messages=MSGS, tools=[WEATHER], options=OPTS)
    assert r.message.content.strip() and not r.message.tool_calls
    parts = list(client.chat(model="default", messages=MSGS, tools=[WEATHER], options=OPTS, stream=True))
    assert "".join(p.message.content for p in parts) == r.message.content and len(parts) > 2


def test_calls_and_results_in_the_history_are_read(live, client, monkeypatch):
    """The loop an Ollama client runs: the call it got back (arguments an object, no id) and the result (tool_name) go into
    the next request, tools still listed; the model reads them and answers."""
    history = [*MSGS, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Parijs"}}}]},
               {"role": "tool", "content": "18 graden en zon", "tool_name": "get_weather"}]
    seen: list[list[int]] = []
    submit = live.runtime.scheduler.submit
    monkeypatch.setattr(live.runtime.scheduler, "submit", lambda ids, params, **kw: seen.append(list(ids)) or submit(ids, params, **kw))
    r = client.chat(model="default", messages=history, tools=[WEATHER], options=OPTS)
    assert r.done
    prompt = live.runtime.chat.engine.tokenizer.decode(seen[0])
    assert '"name": "get_weather", "arguments": {"city": "Parijs"}' in prompt and "Result of get_weather: 18 graden en zon" in prompt


def test_show_lists_tools_among_the_capabilities(client):
    assert "tools" in client.show("default").capabilities
