"""Sampling limits have one source of truth: engine/types.py; the API's request models and the engine agree on every edge."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from edge_agent.engine import types as t
from edge_agent.services.protocol import ChatCompletionRequest

EDGES = [
    ("temperature", 0.0, True), ("temperature", t.MAX_TEMPERATURE, True), ("temperature", t.MAX_TEMPERATURE + 0.01, False),
    ("temperature", -0.01, False),
    ("repetition_penalty", t.MIN_REPETITION_PENALTY, True), ("repetition_penalty", t.MAX_REPETITION_PENALTY, True),
    ("repetition_penalty", t.MAX_REPETITION_PENALTY + 0.5, False), ("repetition_penalty", t.MIN_REPETITION_PENALTY / 2, False),
    ("top_k", 0, True), ("top_k", t.MAX_TOP_K, True), ("top_k", t.MAX_TOP_K + 1, False),
]


@pytest.mark.parametrize("name,value,ok", EDGES)
def test_api_and_engine_agree(name, value, ok):
    body = {"model": "default", "messages": [{"role": "user", "content": "hi"}], name: value}
    try:
        ChatCompletionRequest.model_validate(body)
        api_ok = True
    except ValidationError:
        api_ok = False
    try:
        t.SamplingParams(**{name: value}).validate()
        engine_ok = True
    except ValueError:
        engine_ok = False
    assert (api_ok, engine_ok) == (ok, ok)
