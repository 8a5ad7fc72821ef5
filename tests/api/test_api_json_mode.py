"""Constrained output through llguidance masks: a tiny random model writes valid, schema-following JSON only when masked.

The tiny Llama has random weights: left alone it writes byte soup. Every test that checks the
output is valid also has a twin (or a branch) with the mask switched off that must fail, so
the tests cannot pass without the mask.
"""
from __future__ import annotations

import json

import openai
import pytest

from api_helpers import KEY, api_settings
from edge_agent.engine.types import SamplingParams
from edge_agent.services import constrained
from edge_agent.services.chat import SamplingOptions
from edge_agent.services.constrained import GrammarLogitsProcessor, OutputConstraint
from edge_agent.services.errors import InvalidRequestError

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "legs": {"type": "integer", "minimum": 0, "maximum": 99},
        "wild": {"type": "boolean"},
        "color": {"enum": ["red", "brown", "grey"]},
    },
    "required": ["name", "legs", "wild", "color"],
    "additionalProperties": False,
}
MSGS = [{"role": "user", "content": "Describe a fox as JSON."}]


def follows_schema(text: str) -> bool:
    """SCHEMA checked by hand (no JSON-schema validator among the dependencies)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return (
        isinstance(doc, dict) and set(doc) == {"name", "legs", "wild", "color"}
        and isinstance(doc["name"], str) and len(doc["name"]) <= 12
        and type(doc["legs"]) is int and 0 <= doc["legs"] <= 99
        and isinstance(doc["wild"], bool) and doc["color"] in ("red", "brown", "grey")
    )


@pytest.fixture(scope="module")
def rt(tiny_bundles, api_tmp):
    from edge_agent.runtime import build_runtime

    runtime = build_runtime(api_settings(tiny_bundles["llama"], api_tmp, max_batch=4), load_documents=False)
    yield runtime
    runtime.close()


def _unmasked(monkeypatch):
    monkeypatch.setattr(GrammarLogitsProcessor, "__call__", lambda self, ids, logits: logits)


def _schema_runs(rt) -> list[tuple[str, str]]:
    out = []
    for temperature in (0.0, 0.9):
        gen = rt.chat.chat(MSGS, SamplingOptions(max_tokens=200, temperature=temperature, seed=3), n=2,
                           constraint=OutputConstraint.json_schema(SCHEMA, instruction="Answer in JSON."))
        out += [(r.text, r.finish_reason) for r in gen.collect()]
    return out


def test_json_schema_greedy_and_sampled_follow_the_schema(rt):
    for text, reason in _schema_runs(rt):
        assert reason == "stop", text
        assert follows_schema(text), text


def test_without_the_mask_the_same_requests_do_not_follow_the_schema(rt, monkeypatch):
    _unmasked(monkeypatch)
    runs = _schema_runs(rt)
    assert not any(follows_schema(text) for text, _ in runs), runs


def test_json_object_mode_and_its_unmasked_twin(rt, monkeypatch):
    def run():
        # a random tiny model seldom closes a JSON string within 200 tokens (about 1 sample in 5 stops): 12
        # samples, so that the check on the stopped ones is not vacuous whatever the weights' rounding
        gen = rt.chat.chat(MSGS, SamplingOptions(max_tokens=200, temperature=0.8, seed=11), n=12, json_object=True)
        return gen.collect()

    def is_object(text):
        try:
            return isinstance(json.loads(text), dict)
        except ValueError:
            return False

    masked = run()
    assert all(is_object(r.text) for r in masked if r.finish_reason == "stop"), masked
    assert sum(r.finish_reason == "stop" for r in masked) >= 1
    _unmasked(monkeypatch)
    assert not any(is_object(r.text) for r in run())


def test_cut_by_max_tokens_is_length_and_not_patched(rt):
    gen = rt.chat.chat(MSGS, SamplingOptions(max_tokens=4, temperature=0), constraint=OutputConstraint.json_schema(SCHEMA, instruction="Answer in JSON."))
    [r] = gen.collect()
    assert r.finish_reason == "length"
    assert r.text.lstrip().startswith("{")
    with pytest.raises(ValueError):
        json.loads(r.text)  # left as the model wrote it: no closing braces added


def test_guided_choice_for_classifiers(rt, monkeypatch):
    labels = ["invoice", "complaint", "newsletter", 'a "quoted" label']
    prompt = "Classify: the parcel arrived broken.\nLabel:"
    gen = rt.chat.complete([prompt], SamplingOptions(max_tokens=40, temperature=0.7, seed=5), n=4, constraint=OutputConstraint.choice(labels))
    got = gen.collect()
    assert all(r.text in labels and r.finish_reason == "stop" for r in got), got
    # the lower-level hook, straight on the scheduler
    proc = constrained.choice_processor(rt.chat.engine, labels)
    ids = rt.chat.engine.encode(prompt)
    fin = rt.scheduler.submit(ids, SamplingParams(max_tokens=40, logits_processor=proc)).result()
    assert fin.text in labels and fin.finish_reason == "stop"
    _unmasked(monkeypatch)
    free = rt.chat.complete([prompt], SamplingOptions(max_tokens=40, temperature=0.7, seed=5), n=4,
                            constraint=OutputConstraint.choice(labels)).collect()
    assert not any(r.text in labels for r in free)


def test_bad_schema_and_bad_requests_are_400s(rt):
    with pytest.raises(InvalidRequestError, match="output format"):
        rt.chat.chat(MSGS, SamplingOptions(max_tokens=8), constraint=OutputConstraint.json_schema({"type": "objekt"}))
    with pytest.raises(InvalidRequestError, match="ignore_eos"):
        rt.chat.chat(MSGS, SamplingOptions(max_tokens=8, ignore_eos=True), json_object=True)
    with pytest.raises(InvalidRequestError):
        OutputConstraint.choice([])


@pytest.fixture(scope="module")
def client(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def test_openai_client_json_schema_response_format(client, live):
    fmt = {"type": "json_schema", "json_schema": {"name": "animal", "schema": SCHEMA, "strict": True}}
    r = client.chat.completions.create(model="default", messages=MSGS, max_tokens=180, temperature=0, response_format=fmt)
    assert r.choices[0].finish_reason == "stop" and follows_schema(r.choices[0].message.content), r
    chunks = client.chat.completions.create(model="default", messages=MSGS, max_tokens=180, temperature=0, response_format=fmt, stream=True)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == r.choices[0].message.content
    r = client.chat.completions.create(model="default", messages=MSGS, max_tokens=60, temperature=0, response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "length" or isinstance(json.loads(r.choices[0].message.content), dict)
    for bad in ({"type": "json_schema"}, {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "objekt"}}},
                {"type": "json_object", "json_schema": {"name": "x", "schema": {}}}, {"type": "yaml"}):
        status, _, body = live.request("POST", "/v1/chat/completions", {"model": "default", "messages": MSGS, "response_format": bad})
        assert status == 400, (bad, body)
        err = json.loads(body)["error"]
        assert err["type"] == "invalid_request_error" and "Traceback" not in err["message"] and "/" not in err["message"].split(":")[0]


def test_a_bad_pattern_in_a_schema_says_what_is_wrong(client):
    """llguidance reports a regex error over several lines (the pattern, a caret, then the error); only the first,
    "regex parse error:", reached the client, which could not tell what to fix."""
    fmt = {"type": "json_schema", "json_schema": {"name": "code", "schema": {"type": "string", "pattern": "[A-Z]{2}-(\\d+"}}}
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="default", messages=MSGS, max_tokens=8, response_format=fmt)
    message = e.value.body["message"]
    assert e.value.body["param"] == "response_format"
    assert "regex parse error" in message and "unclosed group" in message and "[A-Z]{2}-(" in message, message
    assert "| start:" not in message and "x-guidance" not in message  # not the compiled grammar's listing
    assert "\n" not in message
