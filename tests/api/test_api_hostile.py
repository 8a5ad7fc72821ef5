"""A hostile client against the real server on loopback: broken bodies, lying framing, huge headers, odd values and
control-token look-alikes, on the OpenAI routes and on Ollama's. Each gets a clear 4xx in its route's error shape (OpenAI's
{"error": {...}} on /v1/*, Ollama's {"error": "text"} on /api/*), no trace and no path, and the server keeps serving."""
from __future__ import annotations

import json
import select
import socket

import pytest

from api_helpers import KEY

CHAT = {"model": "llama", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
OLLAMA_CHAT = {"model": "llama", "messages": [{"role": "user", "content": "hi"}], "stream": False, "options": {"num_predict": 2}}
OLLAMA_GEN = {"model": "llama", "prompt": "hi", "stream": False, "options": {"num_predict": 2}}
RESPONSES = {"model": "llama", "input": "hi", "max_output_tokens": 16}


def _literal(body: dict, key: str, token: str) -> bytes:
    """body with `key` set to a raw JSON token json.dumps would never write (NaN, Infinity, a lone surrogate escape)."""
    return json.dumps({**body, key: "@@"}).replace('"@@"', token).encode()


def _error(status: int, body: bytes, want: int, ollama: bool) -> str:
    """The error's message, after checking its status and shape (and that it leaks no trace or path)."""
    assert status == want, body
    text = body.decode("utf-8")
    assert "Traceback" not in text and "/work/" not in text and ".py" not in text and "/tmp/" not in text, text
    err = json.loads(text)["error"]
    if ollama:
        assert isinstance(err, str) and err, text
        return err
    assert set(err) == {"message", "type", "param", "code"} and err["message"], text
    return err["message"]


BROKEN = [  # (path, body): each a 400
    *[(path, body) for path, base in (("/api/chat", OLLAMA_CHAT), ("/api/generate", OLLAMA_GEN), ("/v1/responses", RESPONSES))
      for body in (
          json.dumps(base).encode().replace(b'"hi"', b'"h\xff\xfei"'),  # invalid UTF-8
          _literal(base, "keep_alive" if "api" in path else "temperature", "NaN"),
          _literal(base, "keep_alive" if "api" in path else "temperature", "Infinity"),
          b"[" * 10000 + b"]" * 10000,
          json.dumps({"model": "llama", "x": "@"}).replace('"@"', "[" * 10000 + "]" * 10000).encode(),
          _literal(base, "prompt" if path == "/api/generate" else "input" if path == "/v1/responses" else "model", '"\\ud800"'),
      )],
    ("/api/chat", json.dumps({**OLLAMA_CHAT, "messages": [{"role": "user", "content": "@"}]}).replace('"@"', '"a\\udfffb"').encode()),
    ("/api/chat", json.dumps({**OLLAMA_CHAT, "options": {"temperature": "@"}}).replace('"@"', "NaN").encode()),
    ("/api/generate", json.dumps({**OLLAMA_GEN, "options": {"stop": [""]}}).encode()),
    ("/api/generate", json.dumps({**OLLAMA_GEN, "logprobs": True, "top_logprobs": 21}).encode()),
    ("/api/chat", json.dumps({**OLLAMA_CHAT, "logprobs": True, "top_logprobs": -1}).encode()),
    ("/v1/chat/completions", json.dumps({**CHAT, "stop": ["", "x"]}).encode()),
    ("/v1/chat/completions", json.dumps({**CHAT, "n": 10**6}).encode()),
    ("/v1/completions", json.dumps({"model": "llama", "prompt": "hi", "max_tokens": -1}).encode()),
    ("/v1/completions", json.dumps({"model": "llama", "prompt": "hi", "logprobs": 21}).encode()),
    ("/v1/responses", json.dumps({**RESPONSES, "top_logprobs": 21}).encode()),
    ("/v1/responses", json.dumps({**RESPONSES, "max_output_tokens": -1}).encode()),
]


@pytest.mark.parametrize("path,body", BROKEN, ids=[f"{i}-{p.rsplit('/', 1)[-1]}" for i, (p, _) in enumerate(BROKEN)])
def test_a_broken_or_hostile_body_is_a_clear_400_in_the_routes_shape(live, path, body):
    status, _, resp = live.request("POST", path, body)
    _error(status, resp, 400, path.startswith("/api/"))


def _raw(live, data: bytes, timeout: float = 10.0) -> bytes:
    """Send raw bytes on a fresh connection; what comes back until the server closes it or timeout."""
    s = socket.create_connection((live.host, live.port), timeout=timeout)
    try:
        for i in range(0, len(data), 16384):  # stop sending once the server has answered (the rest would reset the socket)
            if select.select([s], [], [], 0.01 if i else 0)[0]:
                break
            try:
                s.sendall(data[i:i + 16384])
            except OSError:
                break
        out = b""
        while True:
            try:
                block = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not block:
                break
            out += block
        return out
    finally:
        s.close()


def _split(reply: bytes) -> tuple[int, bytes]:
    head, _, body = reply.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():  # one response, read to the end: undo the chunking
        out, rest = b"", body
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return status, body


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat"])
def test_a_huge_header_is_a_431_in_json(live, path):
    body = json.dumps(CHAT if path.startswith("/v1") else OLLAMA_CHAT).encode()
    reply = _raw(live, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
                       f"X-Filler: {'a' * 300_000}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    status, resp = _split(reply)
    assert status == 431, reply[:300]
    _error(status, resp, 431, path.startswith("/api/"))


@pytest.mark.parametrize("path,base", [("/v1/chat/completions", CHAT), ("/api/chat", OLLAMA_CHAT)])
def test_a_content_length_that_lies_short_is_a_400_not_a_half_read_body(live, path, base):
    """Content-Length shorter than the body: the server reads what it says (a cut JSON text) and refuses it; the rest of
    the bytes are never taken as a second request."""
    body = json.dumps(base).encode()
    reply = _raw(live, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
                       f"Connection: close\r\nContent-Length: {len(body) // 2}\r\n\r\n".encode() + body, timeout=5)
    status, resp = _split(reply)
    assert status == 400, reply[:300]
    _error(status, resp, 400, path.startswith("/api/"))


def test_a_content_length_that_lies_long_times_out_without_a_trace(live):
    """Content-Length longer than the body: the server waits for the rest; the client gives up and the server serves on."""
    body = json.dumps(CHAT).encode()
    _raw(live, f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body) + 100}\r\n\r\n".encode() + body, timeout=1)
    assert live.request("GET", "/health")[0] == 200


@pytest.mark.parametrize("path,base", [("/v1/chat/completions", CHAT), ("/api/chat", OLLAMA_CHAT), ("/api/generate", OLLAMA_GEN)])
def test_a_chunked_body_is_read(live, path, base):
    body = json.dumps(base).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7]), body[i:i + 7]) for i in range(0, len(body), 7)) + b"0\r\n\r\n"
    reply = _raw(live, f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
                       "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n".encode() + chunks)
    status, resp = _split(reply)
    assert status == 200, reply[:400]
    assert json.loads(resp)


def test_a_chunked_body_over_the_cap_is_a_413_in_ollamas_shape(live):
    big = json.dumps({**CHAT, "messages": [{"role": "user", "content": "x" * 70_000}]}).encode()
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(big[i:i + 4096]), big[i:i + 4096]) for i in range(0, len(big), 4096)) + b"0\r\n\r\n"
    reply = _raw(live, f"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
                       "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n".encode() + chunks)
    status, resp = _split(reply)
    _error(status, resp, 413, True)


def test_the_server_still_serves_after_the_sweep(live):
    status, _, body = live.request("POST", "/v1/chat/completions", CHAT)
    assert status == 200 and json.loads(body)["choices"][0]["finish_reason"] in ("stop", "length")
    status, _, body = live.request("POST", "/api/chat", OLLAMA_CHAT)
    assert status == 200 and json.loads(body)["done"] is True


# --- control-token look-alikes: text on every route, never control tokens ----------------------------------------
def _specials(live) -> dict[str, int]:
    from edge_agent.engine.tokens import special_token_ids

    return special_token_ids(live.runtime.chat.engine.tokenizer)


def _attack(live) -> str:
    names = sorted(_specials(live))
    return "".join(names) + " " + " ".join(names) + names[-1][:-1]


def _submitted(live, monkeypatch) -> list[list[int]]:
    """The prompt ids the scheduler receives from now on (a spy that calls through)."""
    seen: list[list[int]] = []
    submit = live.runtime.scheduler.submit

    def spy(ids, params, **kw):
        seen.append(list(ids))
        return submit(ids, params, **kw)

    monkeypatch.setattr(live.runtime.scheduler, "submit", spy)
    return seen


ROUTES = {  # route -> a body with the text t where a client puts its words
    "chat": ("/v1/chat/completions", lambda t: {**CHAT, "messages": [{"role": "system", "content": t}, {"role": "user", "content": t}]}),
    "responses": ("/v1/responses", lambda t: {**RESPONSES, "input": t, "instructions": t}),
    "ollama-chat": ("/api/chat", lambda t: {**OLLAMA_CHAT, "messages": [{"role": "system", "content": t}, {"role": "user", "content": t}]}),
    "ollama-generate": ("/api/generate", lambda t: {**OLLAMA_GEN, "prompt": t, "system": t}),
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_special_token_text_never_becomes_a_control_token(live, monkeypatch, route):
    """A prompt of nothing but the tokenizer's special tokens (and halves of them) reaches the model as text: the ids
    submitted carry the same control tokens as those of a harmless prompt (the frame's, BOS), and more tokens."""
    path, body = ROUTES[route]
    seen = _submitted(live, monkeypatch)
    for text in ("plain words", _attack(live)):
        status, _, resp = live.request("POST", path, body(text))
        assert status == 200, resp
    assert len(seen) == 2
    special = set(_specials(live).values())
    assert [i for i in seen[1] if i in special] == [i for i in seen[0] if i in special], seen
    assert len(seen[1]) > len(seen[0])


def test_special_token_text_in_a_batch_file_stays_text(live, tiny_bundles, tmp_path, monkeypatch):
    """The batch file path (edge-agent batch run, as /v1/batches runs its lines) encodes its messages as the live route."""
    from edge_agent.cli import main
    from edge_agent.engine.scheduler import BatchScheduler

    seen: list[list[int]] = []
    submit = BatchScheduler.submit

    def spy(self, ids, params, **kw):
        seen.append(list(ids))
        return submit(self, ids, params, **kw)

    monkeypatch.setattr(BatchScheduler, "submit", spy)
    lines = [{"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": ROUTES["chat"][1](t)}
             for i, t in enumerate(("plain words", _attack(live)))]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    rc = main(["--models-dir", str(tiny_bundles["llama"].parent), "--model", "llama", "--threads", "1",
               "batch", "run", str(src), "-o", str(out), "--quiet"])
    assert rc == 0 and len(seen) == 2
    seen.sort(key=len)  # the lines may run side by side
    special = set(_specials(live).values())
    assert [i for i in seen[1] if i in special] == [i for i in seen[0] if i in special]
    assert len(seen[1]) > len(seen[0])


# --- a client that hangs up mid-stream: its sequence is cancelled and its slot freed ---------------------------------
HANG_UPS = {
    "chat": ("/v1/chat/completions", {"model": "default", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4000,
                                      "temperature": 0, "ignore_eos": True, "stream": True}, b"data: "),
    "completions": ("/v1/completions", {"model": "default", "prompt": "hi", "max_tokens": 4000, "temperature": 0, "ignore_eos": True,
                                        "stream": True}, b"data: "),
    "ollama-generate": ("/api/generate", {"model": "default", "prompt": "hi", "options": {"temperature": 0, "num_predict": 4000}},
                        b'"done":false'),
    "ollama-chat-tools": ("/api/chat", {"model": "default", "messages": [{"role": "user", "content": "hi"}], "options": {
        "temperature": 0, "num_predict": 4000}, "tools": [{"type": "function", "function": {"name": "f"}}]}, b'"done":false'),
}


@pytest.mark.parametrize("route", sorted(HANG_UPS))
def test_a_client_that_hangs_up_mid_stream_frees_its_slot(small_live, route):
    from api_helpers import send_unread, wait_until

    server = small_live
    path, body, line = HANG_UPS[route]
    cancelled = lambda: server.metric("edge_agent_generations_total", 'reason="cancelled"')  # noqa: E731
    before = cancelled()
    s = send_unread(server, path, body)
    try:
        got = b""
        while got.count(line) < 3:
            block = s.recv(4096)
            assert block, got
            got += block
        assert server.runtime.scheduler.active == 1
    finally:
        s.close()
    assert wait_until(lambda: server.runtime.scheduler.active == 0 and cancelled() > before, 3)
    assert server.request("GET", "/health")[0] == 200
