"""Every bad input gets its 4xx in the OpenAI error shape (no trace, no path), and the server keeps answering."""
from __future__ import annotations

import http.client
import json

import pytest

from api_helpers import KEY

CHAT = {"model": "llama", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
COMP = {"model": "llama", "prompt": "hi", "max_tokens": 4}
EMB = {"model": "default", "input": "hi"}


def with_(base: dict, **kw) -> str:
    out = dict(base)
    for k, v in kw.items():
        if v is ...:
            out.pop(k, None)
        else:
            out[k] = v
    return json.dumps(out)


def raw(base: dict, key: str, literal: str) -> str:
    """base with `key` set to a literal JSON token (NaN, Infinity ... that json.dumps will not write)."""
    return json.dumps({**base, key: "@@"}).replace('"@@"', literal)


BAD = [
    # path, body, status, param
    ("/v1/chat/completions", with_(CHAT, temperature="0.5"), 400, "temperature"),
    ("/v1/chat/completions", with_(CHAT, temperature=-1), 400, "temperature"),
    ("/v1/chat/completions", with_(CHAT, temperature=2.5), 400, "temperature"),
    ("/v1/chat/completions", raw(CHAT, "temperature", "NaN"), 400, None),
    ("/v1/chat/completions", raw(CHAT, "temperature", "Infinity"), 400, None),
    ("/v1/chat/completions", raw(CHAT, "temperature", "-Infinity"), 400, None),
    ("/v1/chat/completions", raw(CHAT, "temperature", "1e999"), 400, "temperature"),
    ("/v1/chat/completions", with_(CHAT, top_p=-0.1), 400, "top_p"),
    ("/v1/chat/completions", with_(CHAT, top_p=1.5), 400, "top_p"),
    ("/v1/chat/completions", raw(CHAT, "top_p", "NaN"), 400, None),
    ("/v1/chat/completions", with_(CHAT, max_tokens=0), 400, "max_tokens"),
    ("/v1/chat/completions", with_(CHAT, max_tokens=-5), 400, "max_tokens"),
    ("/v1/chat/completions", with_(CHAT, max_tokens=257), 400, "max_tokens"),
    ("/v1/chat/completions", with_(CHAT, max_tokens=10**30), 400, "max_tokens"),
    ("/v1/chat/completions", with_(CHAT, max_tokens=1.5), 400, "max_tokens"),
    ("/v1/chat/completions", with_(CHAT, max_tokens="4"), 400, "max_tokens"),
    ("/v1/chat/completions", with_(CHAT, max_tokens=True), 400, "max_tokens"),
    ("/v1/chat/completions", with_(CHAT, max_completion_tokens=0), 400, "max_completion_tokens"),
    ("/v1/chat/completions", with_(CHAT, messages=[]), 400, "messages"),
    ("/v1/chat/completions", with_(CHAT, messages=[{"role": "user", "content": "x"}] * 257), 400, "messages"),
    ("/v1/chat/completions", with_(CHAT, messages=[{"role": "tool", "content": "x"}]), 400, "messages[0].tool_call_id"),
    ("/v1/chat/completions", with_(CHAT, messages=[{"role": "critic", "content": "x"}]), 400, "messages[0].role"),
    ("/v1/chat/completions", with_(CHAT, messages=[{"role": "user", "content": 5}]), 400, "messages[0].content"),
    ("/v1/chat/completions", with_(CHAT, messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]), 400, None),
    ("/v1/chat/completions", with_(CHAT, messages=[{"role": "user"}]), 400, "messages[0].content"),
    ("/v1/chat/completions", with_(CHAT, messages="hi"), 400, "messages"),
    ("/v1/chat/completions", with_(CHAT, model=""), 400, "model"),  # left out, it is the chat model (vLLM, llama.cpp)
    ("/v1/chat/completions", with_(CHAT, model=5), 400, "model"),
    ("/v1/chat/completions", with_(CHAT, foo=1), 400, "foo"),
    ("/v1/chat/completions", with_(CHAT, n=0), 400, "n"),
    ("/v1/chat/completions", with_(CHAT, n=9), 400, "n"),
    ("/v1/chat/completions", with_(CHAT, stop=["a", "b", "c", "d", "e"]), 400, "stop"),
    ("/v1/chat/completions", with_(CHAT, stop=""), 400, "stop"),
    ("/v1/chat/completions", with_(CHAT, seed="x"), 400, "seed"),
    ("/v1/chat/completions", with_(CHAT, seed=2**65), 400, "seed"),
    ("/v1/chat/completions", with_(CHAT, logprobs=True, top_logprobs=21), 400, "top_logprobs"),
    ("/v1/completions", with_(COMP, logprobs=-1), 400, "logprobs"),
    ("/v1/chat/completions", with_(CHAT, response_format={"type": "json_schema"}), 400, "response_format"),  # no schema
    ("/v1/chat/completions", with_(CHAT, response_format={"type": "yaml"}), 400, "response_format.type"),
    ("/v1/chat/completions", with_(CHAT, presence_penalty=2.5), 400, "presence_penalty"),  # OpenAI's range: -2..2
    ("/v1/chat/completions", with_(CHAT, stream="yes"), 400, "stream"),
    ("/v1/chat/completions", with_(CHAT, stream_options={"include_usage": 1}), 400, "stream_options.include_usage"),
    # stream_options only with stream: true (OpenAI's and vLLM's 400), also when stream is false or left out
    ("/v1/chat/completions", with_(CHAT, stream_options={"include_usage": True}), 400, "stream_options"),
    ("/v1/chat/completions", with_(CHAT, stream=False, stream_options={"include_usage": True}), 400, "stream_options"),
    ("/v1/completions", with_(COMP, stream_options={"include_usage": True}), 400, "stream_options"),
    ("/v1/chat/completions", with_(CHAT, priority=10), 400, "priority"),
    ("/v1/chat/completions", with_(CHAT, min_tokens=-1), 400, "min_tokens"),
    ("/v1/chat/completions", with_(CHAT, min_tokens="2"), 400, "min_tokens"),
    ("/v1/chat/completions", with_(CHAT, min_tokens=1.5), 400, "min_tokens"),
    ("/v1/chat/completions", with_(CHAT, min_tokens=257), 400, "min_tokens"),
    ("/v1/chat/completions", with_(CHAT, min_tokens=5), 400, "min_tokens"),  # more than max_tokens (4)
    ("/v1/chat/completions", with_(CHAT, max_tokens=..., max_completion_tokens=3, min_tokens=4), 400, "min_tokens"),
    ("/v1/chat/completions", with_(CHAT, min_tokens=2, response_format={"type": "json_object"}), 400, "min_tokens"),
    ("/v1/chat/completions", "[]", 400, None),
    ("/v1/chat/completions", "{", 400, None),
    ("/v1/chat/completions", "[" * 30000 + "]" * 30000, 400, None),
    ("/v1/chat/completions", with_(CHAT, messages=[{"role": "user", "content": "\\ud800"}]).replace("\\\\ud800", "\\ud800"), 400, None),
    ("/v1/completions", with_(COMP, prompt=[]), 400, "prompt"),
    ("/v1/completions", with_(COMP, prompt=[[]]), 400, "prompt[0]"),
    ("/v1/completions", with_(COMP, prompt=[10**9]), 400, "prompt"),
    ("/v1/completions", with_(COMP, prompt=[-1]), 400, "prompt[0]"),
    ("/v1/completions", with_(COMP, prompt=[1, "a"]), 400, None),
    ("/v1/completions", with_(COMP, suffix="x"), 400, "suffix"),
    ("/v1/completions", with_(COMP, best_of=2), 400, "best_of"),
    ("/v1/completions", with_(COMP, echo="yes"), 400, "echo"),
    ("/v1/completions", with_(COMP, max_tokens=300), 400, "max_tokens"),
    ("/v1/completions", with_(COMP, max_tokens=..., min_tokens=17), 400, "min_tokens"),  # the default max_tokens is 16
    ("/v1/embeddings", with_(EMB, input=[]), 400, "input"),
    ("/v1/embeddings", with_(EMB, input=""), 400, "input"),
    ("/v1/embeddings", with_(EMB, input=5), 400, "input"),
    ("/v1/embeddings", with_(EMB, encoding_format="hex"), 400, "encoding_format"),
]


def check_error(status: int, body: bytes, expected: int) -> dict:
    assert status == expected, body
    text = body.decode("utf-8")
    assert "Traceback" not in text and "/work/" not in text and ".py" not in text
    err = json.loads(text)["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return err


@pytest.mark.parametrize("path,body,status,param", BAD, ids=[f"{i}-{b[0].rsplit('/', 1)[-1]}" for i, b in enumerate(BAD)])
def test_bad_input_gets_4xx(live, path, body, status, param):
    code, _, resp = live.request("POST", path, body)
    err = check_error(code, resp, status)
    if param is not None:
        assert err["param"] == param, err
    assert err["type"] == "invalid_request_error"


def test_invalid_utf8_body(live):
    body = json.dumps(CHAT).encode().replace(b'"hi"', b'"h\xff\xfei"')
    err = check_error(*live.request("POST", "/v1/chat/completions", body)[::2], 400)
    assert "UTF-8" in err["message"]


def test_context_overflow_states_the_counts(live):
    long = "fox " * 400  # ~ hundreds of tokens; context is 512
    status, _, body = live.request("POST", "/v1/chat/completions", with_(CHAT, messages=[{"role": "user", "content": long}], max_tokens=256))
    err = check_error(status, body, 400)
    assert err["code"] == "context_length_exceeded" and "512" in err["message"] and "256" in err["message"]
    huge = "fox " * 2000
    status, _, body = live.request("POST", "/v1/chat/completions", with_(CHAT, messages=[{"role": "user", "content": huge}], max_tokens=...))
    err = check_error(status, body, 400)
    assert err["code"] == "context_length_exceeded" and "512" in err["message"]


def _longest_piece_text(tok) -> str:
    """The text of one of the tokenizer's longest byte-level pieces (valid UTF-8): its floor is exactly one token."""
    from edge_agent.engine.tokens import byte_level_table

    to_byte = byte_level_table()
    vocab = tok.get_vocab(with_added_tokens=False)
    longest = max(len(s) for s in vocab)
    for s in vocab:
        if len(s) == longest:
            try:
                return bytes(to_byte[c] for c in s).decode()
            except UnicodeDecodeError:
                continue
    raise AssertionError("no longest piece is valid UTF-8")


def test_a_prompt_that_cannot_fit_is_refused_before_it_is_tokenized(live, monkeypatch):
    """Its fewest possible tokens (UTF-8 bytes / the longest token's bytes) already overflow the context: 400 at once
    (a 2 MB prompt held a server thread 3.7 s in the tokenizer first). The same text is never encoded."""
    chat = live.runtime.chat
    encoded: list[int] = []
    for owner in (chat.engine, chat.formatter.encoder):
        real = owner.encode
        monkeypatch.setattr(owner, "encode", lambda text, *a, _real=real, **k: encoded.append(len(text)) or _real(text, *a, **k))
    huge = "The quick brown fox jumps over the lazy dog. " * 1200  # 54 KB; context 512
    for path, body in (("/v1/chat/completions", with_(CHAT, messages=[{"role": "user", "content": huge}], max_tokens=...)),
                       ("/v1/completions", with_(COMP, prompt=huge)), ("/v1/completions", with_(COMP, prompt=["hi", huge]))):
        err = check_error(*live.request("POST", path, body)[::2], 400)
        assert err["code"] == "context_length_exceeded" and "at least" in err["message"] and "512" in err["message"], err
        assert err["param"] == ("messages" if "chat" in path else "prompt"), err  # the field the client sent
    assert not [n for n in encoded if n >= len(huge)], encoded  # only "hi" was encoded
    searched: list[str] = []
    monkeypatch.setattr(chat, "_retrieve", lambda query, rag: searched.append(query) or [])
    body = with_(CHAT, messages=[{"role": "user", "content": huge}], max_tokens=..., rag={})
    err = check_error(*live.request("POST", "/v1/chat/completions", body)[::2], 400)  # with rag: before the search
    assert err["code"] == "context_length_exceeded" and not searched, err


def test_a_prompt_that_fits_exactly_is_never_refused_by_the_floor(live):
    """The other side: a prompt of the longest piece repeated (floor = its real count, give or take BOS) that leaves
    exactly max_tokens of room runs; one token more of max_tokens is refused by the real count."""
    chat = live.runtime.chat
    text = _longest_piece_text(chat.engine.tokenizer) * 470
    real = len(chat.engine.encode(text))
    from edge_agent.engine.tokens import fewest_tokens

    assert real - 2 <= fewest_tokens(chat.engine.tokenizer, text) <= real  # a tight floor: the case where a wrong one would bite
    room = 512 - real
    status, _, body = live.request("POST", "/v1/completions", with_(COMP, prompt=text, max_tokens=room))
    assert status == 200 and json.loads(body)["usage"]["prompt_tokens"] == real, body
    err = check_error(*live.request("POST", "/v1/completions", with_(COMP, prompt=text, max_tokens=room + 1))[::2], 400)
    assert err["code"] == "context_length_exceeded" and "at least" not in err["message"] and err["param"] == "prompt", err


def _nested(depth: int, kind: str) -> str:
    """A schema nested depth deep as JSON text (json.dumps of it would itself hit Python's recursion limit)."""
    head, tail = ('{"type": "array", "items": ', "}") if kind == "array" else ('{"type": "object", "properties": {"a": ', "}}")
    return head * depth + '{"type": "string"}' + tail * depth


HOSTILE_SCHEMAS = {  # each was a 500, a hang or a crash risk, or must stay a 400
    "ref-to-itself": {"$ref": "#"},
    "ref-cycle": {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
    "any-of-itself": {"anyOf": [{"$ref": "#"}]},
    "property-to-itself": {"type": "object", "properties": {"a": {"$ref": "#/properties/a"}}},  # dead end after {"a":
    "required-forever": {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]},  # infinitely deep
    "unknown-ref": {"$ref": "#/$defs/missing"},
    "remote-ref": {"$ref": "http://schemas.example/a.json"},
    "bad-pattern": {"type": "string", "pattern": "["},
    "deeply-nested-arrays": _nested(900, "array"),  # JSON 900 deep: json.loads takes it, llguidance stops at its limit
    "deeply-nested-objects": _nested(400, "object"),
    "not-an-object": 5,
    "a-list": [{"type": "string"}],
}


@pytest.mark.parametrize("name", list(HOSTILE_SCHEMAS))
def test_a_schema_that_cannot_be_compiled_is_a_400(live, name):
    schema = HOSTILE_SCHEMAS[name]
    schema = schema if isinstance(schema, str) else json.dumps(schema)
    fmt = json.dumps({"type": "json_schema", "json_schema": {"name": "x", "schema": "@@"}}).replace('"@@"', schema)
    body = raw(CHAT, "response_format", fmt)
    assert len(body) < 64 * 1024, len(body)  # under the server's max_body_bytes: the schema itself is what is refused
    err = check_error(*live.request("POST", "/v1/chat/completions", body)[::2], 400)
    assert err["type"] == "invalid_request_error" and err["param"] and err["param"].startswith("response_format"), err
    tool = json.dumps([{"type": "function", "function": {"name": "f", "parameters": "@@"}}]).replace('"@@"', schema)
    forced = {**CHAT, "tool_choice": {"type": "function", "function": {"name": "f"}}}
    err = check_error(*live.request("POST", "/v1/chat/completions", raw(forced, "tools", tool))[::2], 400)
    assert err["type"] == "invalid_request_error" and err["param"].startswith("tools[0].function.parameters"), err  # a forced call
    assert live.request("POST", "/v1/chat/completions", CHAT)[0] == 200  # and the server still answers


@pytest.mark.parametrize("schema", [
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"},
                                                                                                      {"type": "null"}]}},
                        "required": ["v", "next"]}}, "$ref": "#/$defs/node"},  # a linked list
    {"type": "object", "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}},
     "required": ["name", "children"]},  # a tree: children may be []
    {"properties": {"a": {"$ref": "#"}}, "required": ["a"]},  # no type: 5 is a value
], ids=["linked-list", "tree", "untyped"])
def test_recursive_schemas_with_a_way_out_are_served(live, schema):
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    status, _, body = live.request("POST", "/v1/chat/completions", with_(CHAT, response_format=fmt, max_tokens=8))
    assert status == 200, body


def test_unknown_model_route_and_method(live):
    err = check_error(*live.request("POST", "/v1/chat/completions", with_(CHAT, model="gpt-4o"))[::2], 404)
    assert err["code"] == "model_not_found" and err["param"] == "model"
    check_error(*live.request("GET", "/v1/nothing")[::2], 404)
    status, headers, body = live.request("GET", "/v1/chat/completions")
    check_error(status, body, 405)
    assert "POST" in headers["allow"]
    check_error(*live.request("DELETE", "/v1/models")[::2], 405)


def test_a_json_body_without_its_content_type_is_read_as_json(live):
    """requests' `post(url, data=json.dumps(body))` sends no Content-Type, curl -d sends a form type, fetch with a string
    body text/plain: OpenAI and vLLM read each as JSON, and it was a 415 here. A body that is not JSON is a 400 that says
    how to send it; a type that is neither JSON nor one of those (and a charset other than UTF-8) stays a 415."""
    import requests

    url, auth = live.url + "/v1/chat/completions", {"Authorization": f"Bearer {KEY}"}
    r = requests.post(url, data=json.dumps(CHAT), headers=auth, timeout=30)
    assert "Content-Type" not in r.request.headers and r.status_code == 200, r.text
    assert r.json()["object"] == "chat.completion"
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "text/plain; charset=UTF-8", "application/vnd.api+json"):
        status, _, body = live.request("POST", "/v1/chat/completions", json.dumps(CHAT), headers={"Content-Type": ctype})
        assert status == 200 and json.loads(body)["choices"], (ctype, body)
    conn = http.client.HTTPConnection(live.host, live.port, timeout=10)
    conn.request("POST", "/v1/completions", body=json.dumps(COMP).encode(), headers={"Authorization": f"Bearer {KEY}"})
    r2 = conn.getresponse()
    assert r2.status == 200 and json.loads(r2.read())["object"] == "text_completion", r2.status
    conn.close()
    for ctype, data in (("application/x-www-form-urlencoded", "model=llama&prompt=hi"), ("text/plain", "hi"), (None, "")):
        r = requests.post(live.url + "/v1/completions", data=data, headers={**auth, **({"Content-Type": ctype} if ctype else {})}, timeout=30)
        err = check_error(r.status_code, r.content, 400)
        assert err["code"] == "invalid_json" and "Content-Type: application/json" in err["message"], err
    for ctype in ("application/xml", "multipart/form-data; boundary=x", "application/json; charset=latin-1", "text/plain; charset=latin-1"):
        status, _, body = live.request("POST", "/v1/chat/completions", json.dumps(CHAT), headers={"Content-Type": ctype})
        assert check_error(status, body, 415)["code"] == "unsupported_media_type", ctype


def test_a_compressed_body_is_refused_by_its_content_encoding(live):
    """A gzip body (a client with request compression on) was read as raw JSON: "the request body is not valid
    UTF-8", which sent its user hunting for a text problem; a body merely labelled br was served as if plain."""
    import gzip

    body = gzip.compress(json.dumps(CHAT).encode())
    for encoding, data in (("gzip", body), ("br", json.dumps(CHAT).encode())):
        status, _, raw_body = live.request("POST", "/v1/chat/completions", data, headers={"Content-Encoding": encoding})
        err = check_error(status, raw_body, 415)
        assert err["code"] == "unsupported_media_type" and f"Content-Encoding {encoding}" in err["message"], err
    ok, _, _ = live.request("POST", "/v1/chat/completions", json.dumps(CHAT), headers={"Content-Encoding": "identity"})
    assert ok == 200


def test_body_limit_with_and_without_content_length(live):
    limit = live.runtime.settings.max_body_bytes
    big = with_(CHAT, messages=[{"role": "user", "content": "x" * (limit + 10)}]).encode()
    err = check_error(*live.request("POST", "/v1/chat/completions", big)[::2], 413)
    assert err["code"] == "body_too_large"

    def chunked(total: int):
        piece = b"x" * 8192
        yield b'{"model": "llama", "messages": [{"role": "user", "content": "'
        sent = 0
        while sent < total:
            yield piece
            sent += len(piece)
        yield b'"}]}'

    conn = http.client.HTTPConnection(live.host, live.port, timeout=30)
    conn.request("POST", "/v1/chat/completions", body=chunked(limit + 10), encode_chunked=True,
                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    r = conn.getresponse()
    err = check_error(r.status, r.read(), 413)
    conn.close()
    small = json.dumps(CHAT).encode()
    conn = http.client.HTTPConnection(live.host, live.port, timeout=30)
    conn.request("POST", "/v1/chat/completions", body=iter([small[:20], small[20:]]), encode_chunked=True,
                 headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    r = conn.getresponse()
    assert r.status == 200, r.read()
    r.read()
    conn.close()


def test_waitress_own_413_is_counted_in_metrics(live):
    """A body over waitress' cap is refused before Flask runs; /metrics still counts it (route "(waitress)")."""
    import socket

    from edge_agent.server import WAITRESS_ROUTE

    labels = f'method="POST",route="{WAITRESS_ROUTE}",status="413"'
    before = live.metric("edge_agent_http_requests_total", labels)
    cap = live.srv.server.adj.max_request_body_size
    with socket.create_connection((live.host, live.port), timeout=10) as s:
        s.sendall(f"POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
                  f"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: {cap + 1}\r\n\r\n".encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert json.loads(body)["error"]["code"] == "body_too_large"
    assert live.metric("edge_agent_http_requests_total", labels) == before + 1


def test_a_method_the_route_lacks_is_counted_under_the_route(live):
    """A GET on a POST-only route (405) was counted under route "unmatched", with the 404s: it is a matched route."""
    before = live.metric("edge_agent_http_requests_total", 'method="GET",route="/v1/chat/completions",status="405"')
    unmatched = live.metric("edge_agent_http_requests_total", 'method="GET",route="unmatched",status="405"')
    status, _, body = live.request("GET", "/v1/chat/completions")
    assert status == 405 and json.loads(body)["error"]
    status, _, _ = live.request("GET", "/v1/no-such-route")
    assert status == 404
    assert live.metric("edge_agent_http_requests_total", 'method="GET",route="/v1/chat/completions",status="405"') == before + 1
    assert live.metric("edge_agent_http_requests_total", 'method="GET",route="unmatched",status="405"') == unmatched
    assert live.metric("edge_agent_http_requests_total", 'method="GET",route="unmatched",status="404"') >= 1
    # a route with an id in its path is labelled with its template, never the id
    status, _, _ = live.request("PUT", "/v1/files/file-abc123")
    assert status == 405
    assert live.metric("edge_agent_http_requests_total", 'method="PUT",route="/v1/files/<file_id>",status="405"') >= 1


def test_server_still_answers_after_all_that(live):
    assert live.request("GET", "/health", key=None)[0] == 200
    status, _, body = live.request("POST", "/v1/chat/completions", CHAT)
    assert status == 200 and json.loads(body)["choices"][0]["message"]["role"] == "assistant"
    status, _, body = live.request("GET", "/ready")
    ready = json.loads(body)
    assert status == 200 and ready["status"] == "ready", (ready["waiting_for"], [ready["parts"].get(p) for p in ready["waiting_for"]])


def test_a_broken_body_says_where_it_breaks(live):
    """"not valid JSON" alone: a client's author searched the whole body for the stray comma."""
    broken = '{"model": "llama", "prompt": "hi" "max_tokens": 2}'
    status, _, body = live.request("POST", "/v1/completions", broken, headers={"Content-Type": "application/json"})
    err = check_error(status, body, 400)
    assert err["code"] == "invalid_json" and "Expecting ',' delimiter at line 1, column 35" in err["message"], err
    huge = '{"model": "llama", "prompt": "hi", "max_tokens": 1' + "0" * 5000 + "}"
    status, _, body = live.request("POST", "/v1/completions", huge, headers={"Content-Type": "application/json"})
    err = check_error(status, body, 400)
    assert err["code"] == "invalid_json" and "more than 4300 digits" in err["message"], err
