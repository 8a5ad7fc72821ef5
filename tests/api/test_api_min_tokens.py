"""min_tokens through the real server and the official openai client (extra_body, as with vLLM)."""
from __future__ import annotations

import json

import openai
import pytest

from api_helpers import KEY

PROMPT = "The quick brown fox"
MSG = [{"role": "user", "content": "Say something about foxes."}]


@pytest.fixture(scope="module")
def client(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def _expect(head: str, full: str) -> tuple[str, str]:
    """A stop string taken from the first token's text, and the answer it gives once that token is past."""
    stop = head.strip()[-1:] or head[-1:]
    assert stop and full.startswith(head), (head, full)
    cut = full.find(stop, len(head))
    return stop, (full if cut < 0 else full[:cut])


def test_completion_stop_string_waits_for_min_tokens(client):
    kw = dict(model="llama", prompt=PROMPT, temperature=0)
    head = client.completions.create(**kw, max_tokens=1, extra_body={"ignore_eos": True}).choices[0].text
    full = client.completions.create(**kw, max_tokens=16, extra_body={"ignore_eos": True}).choices[0].text
    stop, expect = _expect(head, full)
    early = client.completions.create(**kw, max_tokens=16, stop=[stop], extra_body={"ignore_eos": True})
    assert len(early.choices[0].text) < len(head)  # without min_tokens it ends inside the first token's text
    r = client.completions.create(**kw, max_tokens=16, stop=[stop], extra_body={"ignore_eos": True, "min_tokens": 1})
    assert r.choices[0].text == expect and r.usage.completion_tokens >= 1
    streamed = client.completions.create(**kw, max_tokens=16, stop=[stop], stream=True,
                                         extra_body={"ignore_eos": True, "min_tokens": 1})
    assert "".join(c.choices[0].text for c in streamed if c.choices) == expect


def test_chat_stop_string_waits_for_min_tokens(client):
    kw = dict(model="llama", messages=MSG, temperature=0)
    head = client.chat.completions.create(**kw, max_tokens=1, extra_body={"ignore_eos": True}).choices[0].message.content
    full = client.chat.completions.create(**kw, max_tokens=16, extra_body={"ignore_eos": True}).choices[0].message.content
    stop, expect = _expect(head, full)
    r = client.chat.completions.create(**kw, max_tokens=16, stop=stop, extra_body={"ignore_eos": True, "min_tokens": 1})
    assert r.choices[0].message.content == expect


def test_bad_min_tokens_is_a_typed_400(client):
    for body, words in (({"min_tokens": 9}, "at most max_tokens (8)"), ({"min_tokens": -1}, "min_tokens")):
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model="llama", prompt=PROMPT, max_tokens=8, extra_body=body)
        assert e.value.status_code == 400 and words in e.value.message
        assert e.value.body["param"] == "min_tokens"


def test_openapi_documents_min_tokens_with_its_limit(live):
    status, _, body = live.request("GET", "/openapi.json")
    assert status == 200
    schemas = json.loads(body)["components"]["schemas"]
    limit = live.runtime.settings.max_tokens_limit
    for name in ("ChatCompletionRequest", "CompletionRequest"):
        prop = json.dumps(schemas[name]["properties"]["min_tokens"])
        assert '"minimum": 0' in prop and f'"maximum": {limit}' in prop, prop
