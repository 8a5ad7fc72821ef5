"""Sampling values that vLLM's and llama.cpp's clients send, accepted with their meaning."""
from __future__ import annotations

import json

import pytest


def test_top_k_minus_one_means_off_as_in_vllm(live):
    body = {"model": "llama", "prompt": "The fox", "max_tokens": 6, "temperature": 0.9, "seed": 7}
    status, _, plain = live.request("POST", "/v1/completions", body)
    assert status == 200, plain
    status, _, off = live.request("POST", "/v1/completions", {**body, "top_k": -1})  # was 400 'greater than or equal to 0'
    assert status == 200, off
    assert json.loads(off)["choices"][0]["text"] == json.loads(plain)["choices"][0]["text"]  # same seed, same draw: no limit
    status, _, err = live.request("POST", "/v1/completions", {**body, "top_k": -2})
    assert status == 400 and json.loads(err)["error"]["param"] == "top_k"


VLLM_DEFAULTS = {"use_beam_search": False, "length_penalty": 1.0, "truncate_prompt_tokens": None, "prompt_logprobs": None,
                 "allowed_token_ids": None, "bad_words": [], "guided_grammar": None, "logits_processors": None,
                 "return_tokens_as_token_ids": False, "return_token_ids": False, "cache_salt": None, "kv_transfer_params": None,
                 "vllm_xargs": None, "request_id": "job-7-item-3"}


def test_vllms_own_fields_at_their_defaults_change_nothing(live):
    """A client written for vLLM sends its SamplingParams and request fields (use_beam_search false, length_penalty 1,
    add_special_tokens, request_id ...): each was a 400 "unknown field" here. At the value that changes nothing they are
    taken and the answer is the same; a value that would change it is a 400 naming the field and what to do."""
    import openai

    from api_helpers import KEY

    client = openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    chat = dict(model="llama", messages=[{"role": "user", "content": "Name a fox."}], max_tokens=5, temperature=0)
    plain = client.chat.completions.create(**chat).choices[0].message.content
    extra = {**VLLM_DEFAULTS, "add_special_tokens": False, "chat_template": None, "documents": None, "mm_processor_kwargs": None}
    assert client.chat.completions.create(**chat, extra_body=extra).choices[0].message.content == plain
    comp = dict(model="llama", prompt="The fox", max_tokens=5, temperature=0)
    plain = client.completions.create(**comp).choices[0].text
    assert client.completions.create(**comp, extra_body={**VLLM_DEFAULTS, "add_special_tokens": True}).choices[0].text == plain
    for field, value in (("use_beam_search", True), ("length_penalty", 0.5), ("truncate_prompt_tokens", 20), ("prompt_logprobs", 1),
                         ("bad_words", ["fox"]), ("cache_salt", "tenant-a"), ("add_special_tokens", True), ("chat_template", "{{ x }}")):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(**chat, extra_body={field: value})
        assert e.value.body["param"] == field and "not supported" in e.value.body["message"], e.value.body
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(**comp, extra_body={"add_special_tokens": False})
    assert e.value.body["param"] == "add_special_tokens"


def test_vllms_continuous_usage_stats_false_is_taken_and_true_says_why(live):
    """vLLM's stream_options.continuous_usage_stats (usage in every chunk): false was a 400 "unknown field"; true is a 400
    saying usage comes once, in the last chunk."""
    import openai

    from api_helpers import KEY

    client = openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
    kw = dict(model="llama", messages=[{"role": "user", "content": "Name a fox."}], max_tokens=3, stream=True, extra_body={"ignore_eos": True})
    chunks = list(client.chat.completions.create(**kw, stream_options={"include_usage": True, "continuous_usage_stats": False}))
    assert chunks[-1].usage.completion_tokens == 3 and all(c.usage is None for c in chunks[:-1])
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(**kw, stream_options={"include_usage": True, "continuous_usage_stats": True})
    assert e.value.body["param"] == "stream_options.continuous_usage_stats" and "last chunk" in e.value.body["message"]
