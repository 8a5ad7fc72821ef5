"""A JSON schema that lists properties and says nothing of extra keys gets no extra keys (as llama.cpp and vLLM do)."""
from __future__ import annotations

import json

import openai

from api_helpers import KEY
from edge_agent.services.constrained import closed_objects

# as users write it by hand: no additionalProperties
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["ok"]}


def test_objects_without_a_word_on_extra_keys_are_closed(live):
    """The tiny random model, free to add keys, invents them and runs out of tokens; closed, every choice ends as a valid object."""
    client = openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=120)
    r = client.chat.completions.create(
        model="llama", messages=[{"role": "user", "content": "JSON please"}], n=8, temperature=1.0, seed=3, max_tokens=200,
        response_format={"type": "json_schema", "json_schema": {"name": "check", "schema": SCHEMA, "strict": True}})
    for c in r.choices:
        assert c.finish_reason == "stop", c.message.content
        doc = json.loads(c.message.content)
        assert "ok" in doc and set(doc) <= {"ok", "n"}, doc


def test_closed_objects_keeps_what_the_schema_says():
    assert closed_objects({"type": "object"}) == {"type": "object"}  # json_object mode: any object
    open_ = {"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}}
    assert closed_objects(open_) == open_
    nested = closed_objects({"type": "array", "items": {"properties": {"properties": {"type": "string"}}}})
    assert nested["items"]["additionalProperties"] is False and nested["items"]["properties"] == {"properties": {"type": "string"}}
    parts = closed_objects({"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]})
    assert all("additionalProperties" not in p for p in parts["allOf"]) and "additionalProperties" not in parts
    refs = closed_objects({"$defs": {"p": {"properties": {"x": {}}}}, "anyOf": [{"$ref": "#/$defs/p"}]})
    assert refs["$defs"]["p"]["additionalProperties"] is False
