"""A JSON schema that lists properties and says nothing of extra keys gets no extra keys (as llama.cpp and vLLM do)."""
from __future__ import annotations

import json

import openai

from api_helpers import KEY
from edge_agent.services.constrained import MAX_JSON_NUMBER, tightened_schema

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


def test_tightened_schema_keeps_what_the_schema_says():
    assert tightened_schema({"type": "object"}) == {"type": "object"}  # json_object mode: any object
    open_ = {"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}}
    assert tightened_schema(open_) == open_
    nested = tightened_schema({"type": "array", "items": {"properties": {"properties": {"type": "string"}}}})
    assert nested["items"]["additionalProperties"] is False and nested["items"]["properties"] == {"properties": {"type": "string"}}
    parts = tightened_schema({"allOf": [{"properties": {"a": {}}}, {"properties": {"b": {}}}]})
    assert all("additionalProperties" not in p for p in parts["allOf"]) and "additionalProperties" not in parts
    refs = tightened_schema({"$defs": {"p": {"properties": {"x": {}}}}, "anyOf": [{"$ref": "#/$defs/p"}]})
    assert refs["$defs"]["p"]["additionalProperties"] is False


def test_unbounded_numbers_get_fifteen_digits_and_bounded_ones_keep_theirs():
    t = tightened_schema({"type": "object", "properties": {"bedrag": {"type": "number"}, "n": {"type": ["integer", "null"]},
                                                            "pct": {"type": "number", "minimum": 0, "exclusiveMaximum": 100},
                                                            "k": {"type": "integer", "enum": [1, 2]}}})
    p = t["properties"]
    assert p["bedrag"]["maximum"] == MAX_JSON_NUMBER == -p["bedrag"]["minimum"] and len(str(MAX_JSON_NUMBER)) == 15
    assert p["n"]["maximum"] == MAX_JSON_NUMBER
    assert p["pct"] == {"type": "number", "minimum": 0, "exclusiveMaximum": 100} and p["k"] == {"type": "integer", "enum": [1, 2]}


def test_integer_digits_cannot_run_to_max_tokens(live):
    """The grammar of an unbounded integer takes 15 digits and then only the end of the number (llama.cpp: 16)."""
    from edge_agent.services.constrained import OutputConstraint, compile_matcher, grammar_tokenizer

    engine = live.runtime.chat.engine
    lltok = grammar_tokenizer(engine.tokenizer, live.runtime.chat.vocab_size, engine.stop_token_ids)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}
    for digits, whole in ((15, True), (16, False), (40, False)):
        text = '{"n": ' + "7" * digits + "}"
        ids = lltok.tokenize_str(text)
        matcher = compile_matcher(lltok, OutputConstraint.json_schema(schema))
        ok = matcher.validate_tokens(ids)
        assert (ok == len(ids)) is whole, (digits, lltok.decode_str(ids[:ok]))
        if not whole:
            assert lltok.decode_str(ids[:ok]).count("7") <= 15
