"""What an integrator meets when an existing app is pointed here instead of OpenAI, vLLM or Ollama: the real openai and
ollama clients and raw HTTP against the real server on loopback."""
from __future__ import annotations

import json
import re

import openai
import pytest

from api_helpers import KEY

MSGS = [{"role": "user", "content": "Noem een stad."}]
REQ_ID = re.compile(r"req_[0-9a-f]{32}")


@pytest.fixture()
def client(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def test_every_answer_carries_a_request_id(client, live):
    """OpenAI answers every request with x-request-id (the openai client shows it as `request_id`, on errors too, and
    users quote it); vLLM echoes the client's X-Request-Id. It was missing, so `request_id` was None."""
    raw = client.chat.completions.with_raw_response.create(model="llama", messages=MSGS, max_tokens=2)
    assert REQ_ID.fullmatch(raw.request_id or ""), raw.headers
    assert raw.parse().choices[0].message.role == "assistant"
    again = client.chat.completions.with_raw_response.create(model="llama", messages=MSGS, max_tokens=2)
    assert REQ_ID.fullmatch(again.request_id or "") and again.request_id != raw.request_id
    with client.chat.completions.with_streaming_response.create(model="llama", messages=MSGS, max_tokens=2, stream=True) as s:
        assert REQ_ID.fullmatch(s.headers.get("x-request-id", "")), s.headers
        assert any(line.startswith("data: ") for line in s.iter_lines())
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="llama", messages=MSGS, max_tokens=2, temperature=9)
    assert REQ_ID.fullmatch(e.value.request_id or ""), e.value.response.headers
    echoed = client.models.with_raw_response.list(extra_headers={"X-Request-Id": "trace-42.a:b_c"})
    assert echoed.request_id == "trace-42.a:b_c"
    unsafe = client.models.with_raw_response.list(extra_headers={"X-Request-Id": "a b\"c"})
    assert REQ_ID.fullmatch(unsafe.request_id or ""), unsafe.headers  # not echoed into a header and the log
    for path in ("/api/tags", "/v1/nope", "/health"):
        status, headers, _ = live.request("GET", path)
        assert REQ_ID.fullmatch(headers.get("x-request-id", "")), (path, status, headers)


def test_a_replayed_refusal_part_is_read_and_a_wrong_role_names_the_roles(client):
    """OpenAI's assistant messages take `refusal` content parts (a client replays an earlier refusal); they were a 400
    "this model reads text only". A role that is none of the five named only system, developer and user, as if assistant
    and tool were wrong too; the deprecated `function` role now says what to send instead."""
    refused = {"role": "assistant", "content": [{"type": "refusal", "refusal": "Dat kan ik niet."}, {"type": "text", "text": " Wel dit."}]}
    r = client.chat.completions.create(model="llama", messages=[*MSGS, refused, {"role": "user", "content": "Waarom niet?"}], max_tokens=2)
    assert r.choices[0].message.role == "assistant"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="llama", messages=[*MSGS, {"role": "robot", "content": "x"}], max_tokens=2)
    err = e.value.body
    assert err["param"] == "messages[1].role" and all(role in err["message"] for role in ("assistant", "tool", "developer")), err
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="llama", max_tokens=2, messages=[*MSGS, {"role": "function", "name": "f", "content": "x"}])
    assert e.value.body["param"] == "messages[1].role" and "tool_call_id" in e.value.body["message"], e.value.body
    with pytest.raises(openai.BadRequestError) as e:  # an image in an earlier answer is still refused, saying why
        client.chat.completions.create(model="llama", max_tokens=2, messages=[
            *MSGS, {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}])
    assert "text only" in e.value.body["message"], e.value.body


def test_prompt_cache_hints_of_the_openai_client_change_nothing(client):
    """openai 3.57's chat.completions.create takes prompt_cache_retention and prompt_cache_options (caching hints; the
    prefix cache here is automatic): they were a 400 "unknown field" on chat, and prompt_cache_options on responses too.
    Responses' reasoning {"effort": "none"} is taken as chat's reasoning_effort "none" is."""
    kw = dict(model="llama", messages=MSGS, max_tokens=3, temperature=0)
    plain = client.chat.completions.create(**kw).choices[0].message.content
    hinted = client.chat.completions.create(**kw, prompt_cache_key="k", prompt_cache_retention="24h",
                                            prompt_cache_options={"ttl": "30m"})
    assert hinted.choices[0].message.content == plain
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(**kw, extra_body={"prompt_cache_retention": "1w"})
    assert e.value.body["param"] == "prompt_cache_retention", e.value.body
    r = client.responses.create(model="llama", input="Noem een stad.", max_output_tokens=3, temperature=0,
                                prompt_cache_retention="24h", prompt_cache_options={"ttl": "30m"}, reasoning={"effort": "none"})
    assert r.status in ("completed", "incomplete") and r.output_text == plain
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="llama", input="x", max_output_tokens=2, reasoning={"effort": "high"})
    assert e.value.body["param"] == "reasoning" and "does not reason" in e.value.body["message"], e.value.body
    assert json.loads(json.dumps(r.model_dump()))["object"] == "response"
