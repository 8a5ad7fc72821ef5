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
