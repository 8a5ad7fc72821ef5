"""Function calling through the real openai client on the loopback server: forced calls are masked by a grammar.

The tiny Llama has random weights, so arguments that parse and follow the schema come from the mask
alone (tests/api/test_api_json_mode.py shows the unmasked twin writing byte soup).
"""
from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from api_helpers import KEY, api_settings

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 12},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "unit", "days"],
}
TIME = {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The forecast for a city.", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get-time", "description": "The time in a zone.", "parameters": TIME}},
    {"type": "function", "function": {"name": "ping"}},  # no parameters: {}
]
SCHEMAS = {"get_weather": WEATHER, "get-time": TIME, "ping": {"type": "object", "properties": {}, "additionalProperties": False}}
MSGS = [{"role": "user", "content": "What is the weather in Utrecht?"}]


@pytest.fixture(scope="module")
def client(tools_live):
    return openai.OpenAI(base_url=tools_live.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


def _valid(name: str, arguments: str) -> dict:
    args = json.loads(arguments)
    jsonschema.validate(args, SCHEMAS[name])
    return args


def test_named_call_follows_its_schema(client):
    r = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, max_tokens=200, temperature=0.8, seed=1, n=2,
                                       tool_choice={"type": "function", "function": {"name": "get_weather"}})
    ids = set()
    for c in r.choices:
        assert c.finish_reason == "tool_calls" and c.message.content is None, c
        [call] = c.message.tool_calls
        assert call.type == "function" and call.function.name == "get_weather" and call.id.startswith("call_")
        _valid("get_weather", call.function.arguments)
        ids.add(call.id)
    assert len(ids) == 2  # n > 1: each choice its own call


def test_a_tool_without_parameters_gets_an_empty_object(client):
    r = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, max_tokens=50, temperature=0,
                                       tool_choice={"type": "function", "function": {"name": "ping"}})
    assert json.loads(r.choices[0].message.tool_calls[0].function.arguments) == {}


@pytest.mark.parametrize("parameters", [{}, {"properties": {"stad": {"type": "string"}}}, {"type": ["array", "object"]}])
def test_a_forced_call_always_has_an_object_of_arguments(client, parameters):
    """A call's arguments are the function's named arguments: clients json.loads them and pass them as keywords (the
    Agents SDK validates them as an object). A schema without "type" let the grammar write any JSON value: the default
    model answered parameters {} with '["1", "2", "3", ' and a schema of properties alone with '["a", "b"]'."""
    tools = [{"type": "function", "function": {"name": "weer", "parameters": parameters}}]
    r = client.chat.completions.create(model="default", messages=[{"role": "user", "content": "Give me 5"}], tools=tools,
                                       tool_choice="required", max_tokens=40, temperature=0)
    arguments = r.choices[0].message.tool_calls[0].function.arguments
    assert arguments.lstrip().startswith("{"), arguments


@pytest.mark.parametrize("kind", ["string", ["string", "integer"], "array"])
def test_parameters_that_cannot_be_an_object_are_a_400(live, kind):
    """As OpenAI's: parameters {"type": "string"} gave a forced call the arguments '"x"', which no client can pass on."""
    body = {"model": "default", "messages": MSGS, "max_tokens": 4,
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": kind}}}]}
    status, _, raw = live.request("POST", "/v1/chat/completions", body)
    err = json.loads(raw)["error"]
    assert status == 400 and err["param"] == "tools[0].function.parameters" and '"type": "object"' in err["message"], err


def test_required_call_names_a_tool_and_follows_its_schema(client):
    names = set()
    for seed in range(4):
        r = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, tool_choice="required", max_tokens=200,
                                           temperature=1.0, seed=seed)
        c = r.choices[0]
        assert c.finish_reason == "tool_calls" and c.message.content is None, c
        call = c.message.tool_calls[0]
        _valid(call.function.name, call.function.arguments)
        names.add(call.function.name)
    assert names <= set(SCHEMAS)


def _reassemble(chunks) -> dict[int, dict]:
    out: dict[int, dict] = {}
    for ch in chunks:
        for c in ch.choices:
            got = out.setdefault(c.index, {"id": None, "name": None, "arguments": "", "finish": None, "content": "", "role": None})
            got["role"] = got["role"] or c.delta.role
            got["content"] += c.delta.content or ""
            for tc in c.delta.tool_calls or ():
                assert tc.index == 0
                if tc.id:
                    assert got["id"] is None and tc.type == "function" and tc.function.name
                    got["id"], got["name"] = tc.id, tc.function.name
                else:
                    assert got["id"] is not None and tc.function.name is None  # the name comes first, once
                got["arguments"] += tc.function.arguments or ""
            if c.finish_reason:
                got["finish"] = c.finish_reason
    return out


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get-time"}}])
def test_stream_deltas_reassemble_to_the_same_call(client, choice):
    kw = dict(model="default", messages=MSGS, tools=TOOLS, tool_choice=choice, max_tokens=200, temperature=0.7, seed=5)
    whole = client.chat.completions.create(**kw).choices[0]
    chunks = list(client.chat.completions.create(**kw, stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    got = _reassemble(chunks)[0]
    assert got["finish"] == "tool_calls" and got["content"] == ""
    assert all(c.choices[0].delta.role or c.choices[0].delta.tool_calls or c.choices[0].finish_reason for c in chunks)  # no empty chunks
    call = whole.message.tool_calls[0]
    assert (got["name"], got["arguments"]) == (call.function.name, call.function.arguments)
    assert got["id"].startswith("call_")
    _valid(got["name"], got["arguments"])


def test_stream_n2_gives_each_choice_its_call(client):
    chunks = list(client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, tool_choice="required", n=2,
                                                 max_tokens=200, temperature=1.0, seed=9, stream=True))
    got = _reassemble(chunks)
    assert set(got) == {0, 1} and got[0]["id"] != got[1]["id"]
    for g in got.values():
        assert g["finish"] == "tool_calls"
        _valid(g["name"], g["arguments"])


def test_a_cut_call_ends_with_length(client):
    r = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, max_tokens=3, temperature=0,
                                       tool_choice={"type": "function", "function": {"name": "get_weather"}})
    c = r.choices[0]
    assert c.finish_reason == "length" and c.message.tool_calls[0].function.name == "get_weather"


def test_a_required_call_cut_before_its_name_is_no_call(client):
    """Cut inside '{"name": "': no name to report, so no tool_calls; the text comes back as content, streamed or not."""
    kw = dict(model="default", messages=MSGS, tools=TOOLS, tool_choice="required", max_tokens=2, temperature=0)
    c = client.chat.completions.create(**kw).choices[0]
    assert c.finish_reason == "length" and c.message.tool_calls is None
    assert c.message.content and '{"name": "'.startswith(c.message.content.lstrip(" \n"))
    got = _reassemble(client.chat.completions.create(**kw, stream=True))[0]
    assert (got["finish"], got["id"], got["content"]) == ("length", None, c.message.content)


def test_none_answers_in_text(client):
    """tool_choice "none"; "auto" (the model chooses) is tests/api/test_api_tools_auto.py's."""
    r = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, tool_choice="none", max_tokens=4)
    assert r.choices[0].finish_reason in ("stop", "length") and r.choices[0].message.tool_calls is None
    assert isinstance(r.choices[0].message.content, str)


def test_history_with_a_tool_result_is_accepted(client, tools_live):
    first = client.chat.completions.create(model="default", messages=MSGS, tools=TOOLS, max_tokens=200, temperature=0,
                                           tool_choice={"type": "function", "function": {"name": "get_weather"}})
    asked = first.choices[0].message
    history = [*MSGS, asked.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": asked.tool_calls[0].id, "content": "12 degrees, rain"}]
    r = client.chat.completions.create(model="default", messages=history, tools=TOOLS, max_tokens=8)
    assert isinstance(r.choices[0].message.content, str)
    prompt = tools_live.runtime.chat.formatter.format_chat([
        *MSGS, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city": "Utrecht"}'}]},
        {"role": "tool", "tool_call_id": "c1", "content": "12 degrees, rain"}]).text
    assert '{"name": "get_weather", "arguments": {"city": "Utrecht"}}' in prompt and "Result of get_weather: 12 degrees, rain" in prompt
    again = client.chat.completions.create(model="default", messages=history, tools=TOOLS, tool_choice="required", max_tokens=200,
                                           temperature=0)
    _valid(again.choices[0].message.tool_calls[0].function.name, again.choices[0].message.tool_calls[0].function.arguments)


def test_the_prompt_describes_the_tools(tools_live):
    from edge_agent.services.tools import Tool, call_constraint

    tools = [Tool("get_weather", "The forecast for a city.", WEATHER)]
    text = tools_live.runtime.chat.formatter.format_chat(MSGS, instruction=call_constraint(tools, "get_weather").instruction).text
    assert '{"name": "get_weather", "description": "The forecast for a city.", "parameters": {"type": "object"' in text
    assert '"maxLength": 12' in text and "Call get_weather" in text


BAD = [
    (dict(tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice.function.name", "not among the tools"),
    (dict(tools=[TOOLS[0], TOOLS[0]]), "tools", "unique"),
    (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "nonsense"}}}]),
     "tools[0].function.parameters", "JSON schema"),
    (dict(tools=[{"type": "function", "function": {"name": "f", "parameters": ["x"]}}]), "tools[0].function.parameters", None),
    (dict(tools=[{"type": "function", "function": {"name": "bad name!"}}]), "tools[0].function.name", None),
    (dict(tools=[{"type": "web_search", "function": {"name": "f"}}]), "tools[0].type", "function"),
    (dict(tools=None, tool_choice="required"), "tool_choice", "needs tools"),
    (dict(messages=[*MSGS, {"role": "tool", "tool_call_id": "call_x", "content": "12"}]), "messages[1].tool_call_id", "no earlier"),
    (dict(messages=[*MSGS, {"role": "tool", "content": "12"}]), "messages[1].tool_call_id", "tool_call_id"),
    (dict(messages=[*MSGS, {"role": "assistant", "content": None}]), "messages[1].content", "tool_calls"),
    (dict(messages=[{"role": "user", "content": "x", "tool_call_id": "c"}]), "messages[0].tool_call_id", "unknown field"),
    (dict(messages=[{"role": {}, "content": ""}]), "messages[0].role", None),  # once a 500 (schemathesis)
    (dict(functions=[{"name": "f"}]), "functions", "tools"),  # the deprecated functions are served, but not beside tools
    (dict(function_call={"name": "f"}), "function_call", "tool_choice"),  # nor a function_call without functions
    (dict(tool_choice="required", response_format={"type": "json_object"}), "response_format", "tool call"),
]


@pytest.mark.parametrize("kwargs,param,says", BAD)
def test_bad_tool_requests_are_400_with_param(tools_live, kwargs, param, says):
    body = {"model": "default", "messages": MSGS, "tools": TOOLS, "max_tokens": 4, **kwargs}
    status, _, raw = tools_live.request("POST", "/v1/chat/completions", {k: v for k, v in body.items() if v is not None})
    text = raw.decode()
    assert status == 400 and "Traceback" not in text and ".py" not in text, text
    err = json.loads(text)["error"]
    assert err["param"] == param and (says is None or says in err["message"]), err


def test_openapi_documents_tools_as_real_fields(tools_live):
    """tools, tool_choice, tool_calls and the tool role are fields now, not "Not supported"; answers document the call."""
    status, _, body = tools_live.request("GET", "/openapi.json")
    schemas = json.loads(body)["components"]["schemas"]
    req = schemas["ChatCompletionRequest"]["properties"]
    assert "Not supported" not in req["tools"]["description"] and "required" in json.dumps(req["tool_choice"])
    assert schemas["ToolMessage"]["properties"]["role"]["const"] == "tool" and "tool_call_id" in schemas["ToolMessage"]["required"]
    assert "tool_calls" in schemas["AssistantMessage"]["properties"] and "tool_calls" in schemas["ChatDelta"]["properties"]
    assert "tool_calls" in json.dumps(schemas["ChatChoice"]["properties"]["finish_reason"])
    assert "Deprecated" in req["functions"]["description"] and "function_call" in schemas["ChatDelta"]["properties"]


TOOLS_TEMPLATE = (  # a tools-aware template in the style of Qwen's and Llama 3.1's: tools listed, calls and results native
    "{% if tools %}TOOLS {{ tools | tojson }}\n{% endif %}{% for m in messages %}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}CALL {{ c.function.name }} {{ c.function.arguments | tojson }}\n{% endfor %}"
    "{% elif m.role == 'tool' %}RESULT {{ m.tool_call_id }}: {{ m.content }}\n"
    "{% else %}{{ m.role }}: {{ m.content }}\n{% endif %}{% endfor %}assistant: "
)
ALTERNATING = (  # Gemma's kind: no tools, roles must alternate
    "{% for m in messages %}{% if (m.role == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('roles must alternate user/assistant') }}{% endif %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant: "
)
HISTORY = [*MSGS, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city": "<s>Utrecht"}'}]},
           {"role": "tool", "tool_call_id": "c1", "content": "12 degrees <s>"}, {"role": "user", "content": "And tomorrow?"}]


def test_a_tools_template_gets_the_tools_and_the_calls_natively(llama_engine):
    from edge_agent.services.prompts import PromptFormatter
    from edge_agent.services.tools import Tool

    tok = llama_engine.tokenizer
    f = PromptFormatter({"type": "chat", "template": TOOLS_TEMPLATE}, tok, bos_token_id=1)
    assert f.takes_tools
    out = f.format_chat(HISTORY, tools=[Tool("get_weather", "The forecast <s>.", WEATHER).listing()])
    assert out.text.startswith('TOOLS [{"type": "function", "function": {"name": "get_weather", "parameters": ')
    assert 'CALL get_weather {"city": "<s>Utrecht"}\nRESULT c1: 12 degrees <s>\nuser: And tomorrow?' in out.text
    assert out.ids.count(1) == 1  # "<s>" in a description, the arguments or a result stays text (data), BOS once


def test_a_template_without_tools_reads_calls_and_results_as_text(llama_engine):
    from edge_agent.services.prompts import PromptFormatter

    f = PromptFormatter({"type": "chat", "template": ALTERNATING}, llama_engine.tokenizer)
    assert not f.takes_tools
    out = f.format_chat(HISTORY)  # the result becomes the user's turn, joined with the next user message: roles still alternate
    assert ('assistant: {"name": "get_weather", "arguments": {"city": "<s>Utrecht"}}\n'
            "user: Result of get_weather: 12 degrees <s>\n\nAnd tomorrow?\nassistant: ") in out.text



def tools_template_runtime(long_bundle, tmp_path):
    """A runtime over a copy of the tiny long-context bundle whose chat template takes `tools` (TOOLS_TEMPLATE)."""
    import shutil

    from edge_agent.runtime import build_runtime

    dst = tmp_path / "models" / "tiny-tools"
    shutil.copytree(long_bundle, dst)
    m = json.loads((dst / "manifest.json").read_text())
    m["prompt_format"], m["name"] = {"type": "chat", "template": TOOLS_TEMPLATE}, "tiny-tools"
    (dst / "manifest.json").write_text(json.dumps(m))
    return build_runtime(api_settings(dst, tmp_path, context_length=2048, max_batch=2), load_documents=False)


def test_a_forced_call_through_a_tools_template(long_bundle, tmp_path):
    """A bundle whose template takes tools gets them there (not in the system text) and still answers a valid call."""
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.tools import Tool, read_answer

    rt = tools_template_runtime(long_bundle, tmp_path)
    try:
        seen = []
        real = rt.chat.formatter.format_chat
        rt.chat.formatter.format_chat = lambda *a, **kw: seen.append(kw) or real(*a, **kw)
        tools = [Tool("get-time", "The time in a zone.", TIME), Tool("ping")]
        gen = rt.chat.chat(MSGS, SamplingOptions(max_tokens=100, temperature=0), tools=tools, call="")
        [r] = gen.collect()
        content, made, finish = read_answer(r.text, r.finish_reason, tools, None)
        assert finish == "tool_calls" and content is None and made["name"] in ("get-time", "ping")
        _valid(made["name"], made["arguments"])
        [kw] = seen
        assert [t["function"]["name"] for t in kw["tools"]] == ["get-time", "ping"]
        assert "Available functions" not in kw["instruction"]  # the template lists them
    finally:
        rt.close()


def test_the_deprecated_functions_are_served_in_their_own_shape(client, tools_live):
    """Clients written before tools send `functions` and `function_call`, read message.function_call and answer with a
    `function` message; OpenAI still serves them, and here each was a 400 "send them as tools". They are taken as tools:
    the forced call follows the function's schema and comes back as function_call (finish_reason function_call, no
    tool_calls), streamed as delta.function_call pieces, and the history with it is taken for the next turn."""
    functions = [t["function"] for t in TOOLS]
    r = client.chat.completions.create(model="default", messages=MSGS, max_tokens=120, functions=functions,
                                       function_call={"name": "get_weather"})
    choice = r.choices[0]
    assert choice.finish_reason == "function_call" and choice.message.tool_calls is None, choice
    assert choice.message.function_call.name == "get_weather" and _valid("get_weather", choice.message.function_call.arguments)
    chunks = list(client.chat.completions.create(model="default", messages=MSGS, max_tokens=120, functions=functions,
                                                 function_call={"name": "get-time"}, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert all(d.tool_calls is None for d in deltas) and [d.function_call.name for d in deltas if d.function_call and d.function_call.name] == ["get-time"]
    assert _valid("get-time", "".join(d.function_call.arguments or "" for d in deltas if d.function_call))
    assert chunks[-1].choices[0].finish_reason == "function_call"
    history = [*MSGS, {"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": choice.message.function_call.arguments}},
               {"role": "function", "name": "get_weather", "content": "Sunny, 21 degrees."}]
    follow = client.chat.completions.create(model="default", messages=history, max_tokens=4, functions=functions, function_call="none")
    assert follow.choices[0].finish_reason in ("stop", "length") and follow.choices[0].message.function_call is None
    plain = client.chat.completions.create(model="default", messages=history, max_tokens=4, temperature=0, function_call="none",
                                           functions=functions)
    as_tools = client.chat.completions.create(model="default", max_tokens=4, temperature=0, tools=TOOLS, tool_choice="none", messages=[
        *MSGS, {"role": "assistant", "content": None, "tool_calls": [{"id": "call_fn_1", "type": "function", "function": history[1]["function_call"]}]},
        {"role": "tool", "tool_call_id": "call_fn_1", "content": "Sunny, 21 degrees."}])
    assert plain.usage.prompt_tokens == as_tools.usage.prompt_tokens  # the same conversation as with tools
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="default", messages=MSGS, max_tokens=4, functions=functions, tools=TOOLS)
    assert "functions" in e.value.message
