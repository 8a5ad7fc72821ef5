"""POST /tokenize and /detokenize on the real server (tiny Llama): the counts agree with what the generation routes bill."""
from __future__ import annotations

import json

import openai
import pytest

from api_helpers import KEY

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Wat is de hoofdstad van Nederland?"}]


def _post(live, path: str, body) -> tuple[int, dict]:
    status, _, raw = live.request("POST", path, body)
    return status, json.loads(raw)


@pytest.fixture(scope="module")
def client(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def test_a_prompt_counts_as_the_completions_route_bills_it(live, client):
    prompt = "The quick brown fox <s> jumps"
    status, body = _post(live, "/tokenize", {"model": "default", "prompt": prompt})
    assert status == 200, body
    billed = client.completions.create(model="default", prompt=prompt, max_tokens=1, temperature=0).usage.prompt_tokens
    assert body["count"] == len(body["tokens"]) == billed
    assert body["max_model_len"] == live.runtime.chat.context_length
    assert "token_strs" not in body


def test_messages_count_as_the_chat_route_bills_them(live, client):
    status, body = _post(live, "/tokenize", {"messages": MSGS})
    assert status == 200, body
    billed = client.chat.completions.create(model="default", messages=MSGS, max_tokens=1, temperature=0).usage.prompt_tokens
    assert body["count"] == billed
    status, closed = _post(live, "/tokenize", {"messages": MSGS, "add_generation_prompt": False})
    assert status == 200 and closed["count"] < body["count"]  # the assistant's turn is not opened
    assert body["tokens"][: closed["count"]] == closed["tokens"]


def test_special_tokens_and_the_round_trip(live):
    text = "Dag allemaal, één test"
    _, with_bos = _post(live, "/tokenize", {"prompt": text})
    _, plain = _post(live, "/tokenize", {"prompt": text, "add_special_tokens": False})
    _, cpp = _post(live, "/tokenize", {"content": text})  # llama.cpp's default: no BOS
    bos = live.runtime.chat.engine.tokenizer.token_to_id("<s>")
    assert with_bos["tokens"] == [bos] + plain["tokens"] and cpp["tokens"] == plain["tokens"]
    status, back = _post(live, "/detokenize", {"tokens": plain["tokens"]})
    assert status == 200 and back["prompt"] == back["content"] == text


def test_pieces_and_token_strings(live):
    _, body = _post(live, "/tokenize", {"content": "hello world", "with_pieces": True, "return_token_strs": True})
    ids = [p["id"] for p in body["tokens"]]
    assert len(ids) == body["count"] == len(body["token_strs"]) and "".join(p["piece"] for p in body["tokens"]).strip() == "hello world"


@pytest.mark.parametrize("body, param_or_text", [
    ({"prompt": "a", "messages": MSGS}, "exactly one"),
    ({}, "exactly one"),
    ({"prompt": "a", "add_special_tokens": True, "add_special": False}, "disagree"),
    ({"prompt": "a", "bogus": 1}, "bogus"),
    ({"prompt": 5}, "prompt"),
])
def test_bad_tokenize_requests_are_400(live, body, param_or_text):
    status, err = _post(live, "/tokenize", body)
    assert status == 400 and param_or_text in json.dumps(err["error"]), err


def test_bad_detokenize_requests(live):
    vocab = live.runtime.chat.vocab_size
    status, err = _post(live, "/detokenize", {"tokens": [1, vocab]})
    assert status == 400 and err["error"]["param"] == "tokens" and str(vocab) in err["error"]["message"]
    status, err = _post(live, "/detokenize", {"tokens": [-1]})
    assert status == 400
    status, err = _post(live, "/tokenize", {"model": "gpt-4", "prompt": "a"})
    assert status == 404 and err["error"]["code"] == "model_not_found"
    status, _, _ = live.request("POST", "/tokenize", {"prompt": "a"}, key=None)
    assert status == 401


def test_openapi_lists_the_routes(live):
    status, _, raw = live.request("GET", "/openapi.json")
    doc = json.loads(raw)
    assert status == 200 and {"/tokenize", "/detokenize"} <= set(doc["paths"])
    assert "TokenizeRequest" in doc["components"]["schemas"] and "DetokenizeResponse" in doc["components"]["schemas"]
