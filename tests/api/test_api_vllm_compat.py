"""Sampling values that vLLM's and llama.cpp's clients send, accepted with their meaning."""
from __future__ import annotations

import json


def test_top_k_minus_one_means_off_as_in_vllm(live):
    body = {"model": "llama", "prompt": "The fox", "max_tokens": 6, "temperature": 0.9, "seed": 7}
    status, _, plain = live.request("POST", "/v1/completions", body)
    assert status == 200, plain
    status, _, off = live.request("POST", "/v1/completions", {**body, "top_k": -1})  # was 400 'greater than or equal to 0'
    assert status == 200, off
    assert json.loads(off)["choices"][0]["text"] == json.loads(plain)["choices"][0]["text"]  # same seed, same draw: no limit
    status, _, err = live.request("POST", "/v1/completions", {**body, "top_k": -2})
    assert status == 400 and json.loads(err)["error"]["param"] == "top_k"
