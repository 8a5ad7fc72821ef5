"""tool_choice "auto" (or left out: OpenAI's default with tools, what LangChain's bind_tools and agent frameworks send) on
/v1/chat/completions and /v1/responses through the real openai client: the model answers in words or with one call, as it
chooses, a grammar keeping a call to its function's schema (services/tools.auto_constraint).

The tiny Llama's random weights choose by chance, so a bias on the tokens a call can begin with ("{") decides: logit_bias
+100 makes a model that calls, -100 one that answers in words (on /v1/responses, which has no logit_bias, the same push
on the first token: api_helpers.lean_first_token).
"""
from __future__ import annotations

import json

import jsonschema
import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.responses import ResponseFunctionToolCall

from api_helpers import KEY, brace_ids, lean_first_token
from test_api_tools import MSGS, SCHEMAS, TOOLS, _reassemble, _valid

RESPONSE_TOOLS = [{"type": "function", **t["function"]} for t in TOOLS]


@pytest.fixture(scope="module")
def client(tools_live):
    return openai.OpenAI(base_url=tools_live.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def calls(tools_live) -> dict[str, float]:
    """logit_bias that makes the model call."""
    return {str(i): 100 for i in brace_ids(tools_live)}


@pytest.fixture(scope="module")
def words(tools_live) -> dict[str, float]:
    """logit_bias that makes it answer in words."""
    return {str(i): -100 for i in brace_ids(tools_live)}


def _a_call(choice) -> None:
    assert choice.finish_reason == "tool_calls" and choice.message.content is None, choice
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    _valid(call.function.name, call.function.arguments)


@pytest.mark.parametrize("tool_choice", ["auto", openai.NOT_GIVEN])
def test_a_model_that_calls_answers_with_a_call_the_client_parses(client, calls, tool_choice):
    r = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, tool_choice=tool_choice, logit_bias=calls,
                                       max_tokens=200, temperature=0.8, seed=3, n=2)
    for c in r.choices:
        _a_call(c)
    assert r.choices[0].message.tool_calls[0].id != r.choices[1].message.tool_calls[0].id


def test_a_model_that_answers_in_words_gets_no_tool_calls(client, words):
    r = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, logit_bias=words, max_tokens=12, temperature=0)
    c = r.choices[0]
    assert c.finish_reason in ("stop", "length") and c.message.tool_calls is None
    assert c.message.content.strip() and not c.message.content.lstrip().startswith("{")


def test_each_choice_decides_on_its_own(client, tools_live):
    """n choices of one request: each is read on its own, a call or words. A bias of +4 on "{" leaves the tiny model
    undecided, so some of 8 sampled choices call and some do not (seeded: the same every run)."""
    bias = {str(i): 4 for i in brace_ids(tools_live)}
    r = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, logit_bias=bias, max_tokens=200,
                                       temperature=1.0, seed=11, n=8)
    kinds = set()
    for c in r.choices:
        if c.message.tool_calls:
            _a_call(c)
            kinds.add("call")
        else:
            assert c.finish_reason in ("stop", "length") and not c.message.content.lstrip(" \n").startswith("{")
            kinds.add("words")
    assert kinds == {"call", "words"}, [c.finish_reason for c in r.choices]


def _accumulated(stream):
    """The openai client's own accumulation of a stream (its chat.completions.stream helper's snapshot: get_final_completion
    would refuse a choice cut by max_tokens)."""
    state = ChatCompletionStreamState()
    chunks = list(stream)
    for ch in chunks:
        state.handle_chunk(ch)
    return state.current_completion_snapshot, chunks


@pytest.mark.parametrize("bias", ["calls", "words"])
def test_the_stream_accumulates_to_the_same_answer(client, request, bias):
    kw = dict(model="default", messages=MSGS, tools=TOOLS, logit_bias=request.getfixturevalue(bias), max_tokens=200,
              temperature=0.7, seed=5, n=2)
    whole = client.chat.completions.create(**kw)
    streamed, chunks = _accumulated(client.chat.completions.create(**kw, stream=True))
    got = _reassemble(chunks)  # the name once in the first delta with the id, then argument pieces
    for w, s in zip(whole.choices, streamed.choices, strict=True):
        assert (s.finish_reason, s.message.content) == (w.finish_reason, w.message.content)
        if bias == "calls":
            _a_call(w)
            [sc], [wc] = s.message.tool_calls, w.message.tool_calls
            assert (sc.function.name, sc.function.arguments) == (wc.function.name, wc.function.arguments)
            assert sc.id == got[s.index]["id"] and sc.id.startswith("call_")
            assert got[s.index]["content"] == ""
        else:
            assert not s.message.tool_calls and w.message.content.strip()
    if bias == "words":
        assert sum(1 for ch in chunks for c in ch.choices if c.delta.content) > 4  # words stream as they come


def test_tool_choice_none_never_calls(client, calls):
    """Even a model pushed to write "{": no grammar, no call, text as it comes."""
    r = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, tool_choice="none", logit_bias=calls,
                                       max_tokens=8, temperature=0)
    c = r.choices[0]
    assert c.message.tool_calls is None and c.finish_reason in ("stop", "length") and c.message.content.startswith("{")


def test_a_call_cut_by_max_tokens_ends_with_length_as_a_forced_one(client, calls):
    """As the forced path: cut after its name, still a call (arguments unfinished) with finish_reason length; cut before
    the name was written, no call but the text, streamed or not."""
    kw = dict(model="default", messages=MSGS, tools=TOOLS, logit_bias=calls, temperature=0)
    c = client.chat.completions.create(**kw, max_tokens=40).choices[0]
    assert c.finish_reason == "length" and c.message.content is None and c.message.tool_calls[0].function.name in SCHEMAS
    early = client.chat.completions.create(**kw, max_tokens=3).choices[0]
    assert early.finish_reason == "length" and early.message.tool_calls is None and early.message.content.lstrip().startswith("{")
    got = _reassemble(client.chat.completions.create(**kw, max_tokens=3, stream=True))[0]
    assert (got["finish"], got["id"], got["content"]) == ("length", None, early.message.content)


def test_the_request_langchain_sends_gets_a_call(tools_live, calls):
    """langchain-openai's bind_tools: tools, no tool_choice, n and stream false; parallel_tool_calls false is accepted."""
    body = {"model": "default", "messages": MSGS, "stream": False, "n": 1, "temperature": 0.0, "tools": TOOLS,
            "parallel_tool_calls": False, "logit_bias": calls, "max_tokens": 200}
    status, _, raw = tools_live.request("POST", "/v1/chat/completions", body)
    assert status == 200, raw
    [choice] = json.loads(raw)["choices"]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    [call] = choice["message"]["tool_calls"]
    assert set(call) == {"id", "type", "function"} and set(call["function"]) == {"name", "arguments"}
    _valid(call["function"]["name"], call["function"]["arguments"])


def test_the_follow_up_turn_with_the_call_and_its_result_is_answered(client, calls, words):
    first = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, logit_bias=calls, max_tokens=200,
                                           temperature=0).choices[0].message
    history = [*MSGS, first.model_dump(), {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "12 degrees, rain"}]
    r = client.chat.completions.create(model="default", messages=history, tools=TOOLS, logit_bias=words, max_tokens=8, temperature=0)
    assert r.choices[0].message.content and r.choices[0].message.tool_calls is None
    again = client.chat.completions.create(model="default", messages=history, tools=TOOLS, logit_bias=calls, max_tokens=200,
                                           temperature=0)
    _a_call(again.choices[0])  # an agent's loop: the next call, after the first one's result


NESTED = {"type": "object", "$defs": {"stop": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                                                                          "nights": {"type": "integer", "minimum": 1, "maximum": 9}},
                                              "required": ["city", "nights"]}},
          "properties": {"trip": {"type": "array", "items": {"$ref": "#/$defs/stop"}, "minItems": 1, "maxItems": 2},
                         "note": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}},
          "required": ["trip", "note"]}


def test_a_nested_strict_schema_is_followed_by_a_chosen_call(client, calls):
    """$defs and $ref, arrays of objects, anyOf with null; strict true changes nothing (every call follows its schema)."""
    tools = [{"type": "function", "function": {"name": "plan", "parameters": NESTED, "strict": True}}]
    r = client.chat.completions.create(model="default", messages=MSGS, tools=tools, logit_bias=calls, max_tokens=256, temperature=0)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    jsonschema.validate(json.loads(c.message.tool_calls[0].function.arguments), NESTED)


@pytest.mark.parametrize("keyword", [{"not": {"type": "string"}}, {"uniqueItems": True}, {"if": {}, "then": {}}])
def test_schema_keywords_the_grammar_cannot_enforce_are_a_400(tools_live, keyword):
    parameters = {"type": "object", "properties": {"x": {"type": "array", **keyword}}}
    body = {"model": "default", "messages": MSGS, "max_tokens": 4, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": parameters, "strict": True}}]}
    status, _, raw = tools_live.request("POST", "/v1/chat/completions", body)
    err = json.loads(raw)["error"]
    assert status == 400 and err["param"] == "tools[0].function.parameters" and "not a usable JSON schema" in err["message"], err


AUTO_REFUSED = [
    (dict(guided_choice=["a", "b"]), "guided_choice"),
    (dict(guided_regex="[ab]+"), "guided_regex"),
    (dict(structured_outputs={"choice": ["a", "b"]}), "structured_outputs"),
    (dict(rag={"k": 2}), "rag"),
    (dict(tool_choice="auto", rag={"k": 2}), "rag"),
]


@pytest.mark.parametrize("kwargs,param", AUTO_REFUSED)
def test_rag_or_a_format_that_is_not_json_with_tools_the_model_may_call_is_a_400(tools_live, kwargs, param):
    """A grounded answer, a choice or a regex match is neither a call nor a JSON answer that parts from one: refused with
    what to do, never dropped."""
    body = {"model": "default", "messages": MSGS, "tools": TOOLS, "max_tokens": 4, **kwargs}
    status, _, raw = tools_live.request("POST", "/v1/chat/completions", body)
    err = json.loads(raw)["error"]
    assert status == 400 and err["param"] == param and 'tool_choice "none"' in err["message"], err


def test_a_format_with_tool_choice_none_is_answered_in_it(client):
    r = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, tool_choice="none", max_tokens=60,
                                       temperature=0, response_format={"type": "json_object"})
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content.lstrip().startswith("{")


ANSWER = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 20}}, "required": ["answer"]}
ANSWER_FORMAT = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER}}


@pytest.fixture(scope="module")
def name_start(tools_live) -> list[int]:
    """The tokens that can begin the key "name" (after its quote, or with it): a call goes on {"name..., an ANSWER {"answer..."""
    tok = tools_live.runtime.chat.engine.tokenizer
    return [i for i in range(tok.get_vocab_size()) if tok.decode([i]).lstrip(' "').startswith("n")]


@pytest.mark.parametrize("bias", [100, -100])
def test_tools_with_a_response_format_answer_with_a_call_or_in_the_format(client, calls, name_start, bias):
    """The OpenAI Agents SDK's agent with tools and an output_type: tools, response_format json_schema, no tool_choice. The
    answer is a call, or JSON that follows the format; the keys tell which, so both begin with "{"."""
    kw = dict(model="default", messages=MSGS, tools=TOOLS, response_format=ANSWER_FORMAT, max_tokens=200, temperature=0.5, seed=2,
              n=2, logit_bias={**calls, **{str(i): bias for i in name_start}})
    whole = client.chat.completions.create(**kw)
    streamed, _ = _accumulated(client.chat.completions.create(**kw, stream=True))
    for w, s in zip(whole.choices, streamed.choices, strict=True):
        if bias > 0:
            _a_call(w)
            assert (s.finish_reason, s.message.tool_calls[0].function.arguments) == ("tool_calls", w.message.tool_calls[0].function.arguments)
        else:
            assert w.finish_reason == "stop" and w.message.tool_calls is None, w
            jsonschema.validate(json.loads(w.message.content), ANSWER)
            assert (s.finish_reason, s.message.content, s.message.tool_calls) == ("stop", w.message.content, None)


def test_openapi_says_auto_may_call(tools_live):
    status, _, body = tools_live.request("GET", "/openapi.json")
    schemas = json.loads(body)["components"]["schemas"]
    for req, choice in (("ChatCompletionRequest", "tool_choice"), ("ResponseCreateRequest", "tool_choice")):
        said = schemas[req]["properties"][choice]["description"]
        assert "auto (the default" in said and "answers in text" not in said, said
        assert "forced" not in schemas[req]["properties"]["parallel_tool_calls"]["description"]


# --- /v1/responses ---------------------------------------------------------------------------------------------------------
def test_responses_a_model_that_calls_gives_a_function_call_item(client, tools_live, monkeypatch):
    lean_first_token(tools_live, monkeypatch, 100)
    r = client.responses.create(model="default", input=MSGS[0]["content"], tools=RESPONSE_TOOLS, max_output_tokens=200,
                                temperature=0)
    [item] = r.output
    assert isinstance(item, ResponseFunctionToolCall) and item.call_id.startswith("call_") and r.status == "completed"
    _valid(item.name, item.arguments)
    with client.responses.stream(model="default", input=MSGS[0]["content"], tools=RESPONSE_TOOLS, max_output_tokens=200,
                                 temperature=0) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    [streamed] = final.output
    assert (streamed.type, streamed.name, streamed.arguments) == ("function_call", item.name, item.arguments)
    assert "response.function_call_arguments.delta" in kinds and "response.output_text.delta" not in kinds


def test_responses_a_model_that_answers_in_words_gives_a_message(client, tools_live, monkeypatch):
    lean_first_token(tools_live, monkeypatch, -100)
    kw = dict(model="default", input=MSGS[0]["content"], tools=RESPONSE_TOOLS, tool_choice="auto", max_output_tokens=12, temperature=0)
    r = client.responses.create(**kw)
    assert [o.type for o in r.output] == ["message"] and r.output_text.strip()
    events = list(client.responses.create(**kw, stream=True))
    kinds = [e.type for e in events]
    assert kinds[-1] == ("response.completed" if r.status == "completed" else "response.incomplete")
    assert events[-1].response.output_text == r.output_text and kinds.count("response.output_text.delta") > 4


def test_responses_a_text_format_beside_tools_gives_a_message_in_it(client, tools_live, monkeypatch):
    lean_first_token(tools_live, monkeypatch, 100)  # "{" first: the keys decide (the tiny model's own weights here)
    fmt = {"type": "json_schema", "name": "answer", "schema": ANSWER}
    kw = dict(model="default", input=MSGS[0]["content"], tools=RESPONSE_TOOLS, text={"format": fmt}, max_output_tokens=200, temperature=0)
    r = client.responses.create(**kw)
    [item] = r.output
    if item.type == "function_call":
        _valid(item.name, item.arguments)
    else:
        jsonschema.validate(json.loads(r.output_text), ANSWER)
    [streamed] = list(client.responses.create(**kw, stream=True))[-1].response.output
    assert streamed.type == item.type and (streamed.arguments == item.arguments if item.type == "function_call"
                                           else streamed.content[0].text == r.output_text)


def test_responses_rag_with_tools_the_model_may_call_is_a_400(tools_live):
    status, _, raw = tools_live.request("POST", "/v1/responses", {"model": "default", "input": "hi", "tools": RESPONSE_TOOLS,
                                                                  "rag": {"k": 2}})
    err = json.loads(raw)["error"]
    assert status == 400 and err["param"] == "rag" and 'tool_choice "none"' in err["message"], err


def test_a_tools_template_gets_the_tools_and_the_model_still_chooses(long_bundle, tmp_path):
    """A bundle whose chat template takes tools (Qwen's, SmolLM2-Instruct's kind) gets them there; the instruction only
    says how to call; a model that calls answers a valid call, one that does not answers in words."""
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.tools import AUTO_HOW, Tool, read_answer
    from test_api_tools import TIME, tools_template_runtime

    rt = tools_template_runtime(long_bundle, tmp_path)
    try:
        seen = []
        real = rt.chat.formatter.format_chat
        rt.chat.formatter.format_chat = lambda *a, **kw: seen.append(kw) or real(*a, **kw)
        tools = [Tool("get-time", "The time in a zone.", TIME), Tool("ping")]
        tok = rt.chat.engine.tokenizer
        brace, blanks = tok.token_to_id("{"), tok.encode(" \n", add_special_tokens=False).ids  # this prompt: blanks until cut
        answers = []
        for bias in ({brace: 100.0}, {brace: -100.0, **{i: -100.0 for i in blanks}}):
            gen = rt.chat.chat(MSGS, SamplingOptions(max_tokens=100, temperature=0, logit_bias=bias), tools=tools, may_call=True)
            [r] = gen.collect()
            answers.append(read_answer(r.text, r.finish_reason, tools, None, may_answer=True))
        (none, made, finish), (words, no_call, end) = answers
        assert finish == "tool_calls" and none is None and made["name"] in ("get-time", "ping")
        _valid(made["name"], made["arguments"])
        assert no_call is None and words.strip() and end in ("stop", "length")
        assert [t["function"]["name"] for t in seen[0]["tools"]] == ["get-time", "ping"] and seen[0]["instruction"] == AUTO_HOW
    finally:
        rt.close()
