"""Continuous batching over HTTP: many concurrent streams, batch invariance, 429 when full, disconnects free slots."""
from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai

from api_helpers import KEY, wait_until

PROMPTS = [f"Tell me about item number {i} and the fox." for i in range(16)]


def _stream_count(url: str, prompt: str, max_tokens: int) -> tuple[str, int, str, int]:
    c = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=120)
    text, chunks, finish, usage = [], 0, None, None
    for ch in c.completions.create(model="default", prompt=prompt, max_tokens=max_tokens, temperature=0, stream=True,
                                   stream_options={"include_usage": True}, extra_body={"ignore_eos": True}):
        if ch.choices:
            text.append(ch.choices[0].text)
            chunks += 1
            finish = ch.choices[0].finish_reason or finish
        if ch.usage:
            usage = ch.usage.completion_tokens
    return "".join(text), chunks, finish, usage


def test_16_concurrent_streams_finish_with_right_counts_and_batch(live):
    batches_before = live.metric("edge_agent_batch_size_count")
    big_before = live.metric("edge_agent_batch_size_bucket", 'le="1.0"')
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda p: _stream_count(live.url, p, 40), PROMPTS))
    for text, chunks, finish, usage in results:
        assert finish == "length" and usage == 40
        assert chunks >= 2
    # Steps with more than one sequence happened: the streams ran batched.
    steps = live.metric("edge_agent_batch_size_count") - batches_before
    single = live.metric("edge_agent_batch_size_bucket", 'le="1.0"') - big_before
    assert steps > 0 and single < steps


def test_batched_greedy_equals_alone(live):
    alone = _stream_count(live.url, PROMPTS[3], 32)[0]
    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(_stream_count, live.url, PROMPTS[3] if i % 2 else PROMPTS[i], 32) for i in range(8)]
        together = [f.result()[0] for i, f in enumerate(futures) if i % 2]
    assert together and all(t == alone for t in together)


def _open_stream(server, max_tokens: int) -> socket.socket:
    """Start a streaming completion on a raw socket and read until the first content chunk."""
    body = json.dumps({"model": "default", "prompt": "hello", "max_tokens": max_tokens, "temperature": 0, "stream": True,
                       "ignore_eos": True}).encode()
    s = socket.create_connection((server.host, server.port), timeout=30)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    buf = b""
    while b'"text"' not in buf:
        part = s.recv(4096)
        assert part, buf
        buf += part
    assert buf.startswith(b"HTTP/1.1 200"), buf[:200]
    return s


def test_queue_full_gives_429_at_once_and_disconnect_frees_the_slot(small_live):
    server = small_live
    cancelled_before = server.metric("edge_agent_generations_total", 'reason="cancelled"')
    running = _open_stream(server, 4000)  # holds the only slot for seconds
    assert wait_until(lambda: server.metric("edge_agent_active_sequences") == 1, 2)
    queued_result = {}

    def queued():
        c = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
        queued_result["r"] = c.completions.create(model="default", prompt="hi", max_tokens=3, temperature=0)

    t = threading.Thread(target=queued)
    t.start()
    assert wait_until(lambda: server.metric("edge_agent_queue_depth") == 1, 2)

    t0 = time.perf_counter()
    status, headers, body = server.request("POST", "/v1/completions", {"model": "default", "prompt": "x", "max_tokens": 2})
    elapsed = time.perf_counter() - t0
    assert status == 429, body
    assert int(headers["retry-after"]) >= 1
    err = json.loads(body)["error"]
    assert err["type"] == "rate_limit_error" and err["code"] == "queue_full"
    assert elapsed < 0.5
    c = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    try:
        c.completions.create(model="default", prompt="x", max_tokens=2)
        raise AssertionError("expected 429")
    except openai.RateLimitError:
        pass

    # The client of the running stream hangs up: its slot frees within a second.
    running.close()
    closed = time.monotonic()
    assert wait_until(lambda: server.metric("edge_agent_generations_total", 'reason="cancelled"') > cancelled_before, 1.0)
    assert time.monotonic() - closed < 1.0
    t.join(30)
    assert queued_result["r"].choices[0].finish_reason in ("stop", "length")  # the queued request then ran
    assert wait_until(lambda: server.metric("edge_agent_active_sequences") == 0, 2)


def test_disconnect_while_queued_frees_the_queue_place(small_live):
    server = small_live
    running = _open_stream(server, 4000)
    body = json.dumps({"model": "default", "prompt": "hello", "max_tokens": 5, "stream": True}).encode()
    waiting = socket.create_connection((server.host, server.port), timeout=30)
    waiting.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    assert wait_until(lambda: server.metric("edge_agent_queue_depth") == 1, 2)
    waiting.close()
    assert wait_until(lambda: server.metric("edge_agent_queue_depth") == 0, 1.5)
    running.close()
    assert wait_until(lambda: server.metric("edge_agent_active_sequences") == 0, 1.5)


def test_request_wall_clock_limit(long_bundle, api_tmp):
    from api_helpers import api_settings

    from edge_agent.api.app import create_app
    from edge_agent.runtime import build_runtime

    settings = api_settings(long_bundle, api_tmp, max_batch=2, context_length=4096, max_tokens_limit=4096, request_timeout_s=0.3)
    rt = build_runtime(settings, load_documents=False)
    try:
        client = create_app(rt).test_client()
        auth = {"Authorization": f"Bearer {KEY}"}
        body = {"model": "default", "prompt": "hello", "max_tokens": 4000, "ignore_eos": True}
        t0 = time.monotonic()
        r = client.post("/v1/completions", json=body, headers=auth)
        assert r.status_code == 504 and r.get_json()["error"]["type"] == "timeout_error"
        assert time.monotonic() - t0 < 3
        r = client.post("/v1/completions", json={**body, "stream": True}, headers=auth)
        events = [e for e in r.get_data(as_text=True).split("\n\n") if e.startswith("data: ")]
        assert json.loads(events[-1][6:])["error"]["code"] == "timeout"
        assert rt.scheduler.active == 0
    finally:
        rt.close()
