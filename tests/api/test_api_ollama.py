"""Ollama's REST API (/api/*) on the real server over the tiny Llama, through raw HTTP and the real `ollama` client:
NDJSON framing, the final line's fields, counts equal to the OpenAI routes' usage, format, names, errors, hang-ups."""
from __future__ import annotations

import json

import numpy as np
import ollama
import openai
import pytest

from api_helpers import KEY, REPO, api_settings, send_unread, start_server, wait_until

MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Wat is de hoofdstad van Nederland?"}]
GREEDY = {"temperature": 0, "num_predict": 12}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "legs": {"type": "integer", "minimum": 0, "maximum": 9}},
          "required": ["name", "legs"], "additionalProperties": False}
FINAL = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration")


@pytest.fixture(scope="module")
def oa(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def client(live):
    return ollama.Client(host=live.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)


def _lines(live, path: str, body: dict) -> tuple[int, dict, list[dict]]:
    status, headers, raw = live.request("POST", path, body)
    text = raw.decode()
    assert status != 200 or text.endswith("\n"), text
    return status, headers, [json.loads(line) for line in text.splitlines()]


def test_chat_streams_ndjson_by_default_with_the_openai_routes_counts(live, oa):
    status, headers, lines = _lines(live, "/api/chat", {"model": "default", "messages": MSGS, "options": GREEDY})
    assert status == 200 and headers["content-type"].startswith("application/x-ndjson"), headers
    *parts, last = lines
    assert parts and all(p["done"] is False and p["message"]["role"] == "assistant" and p["model"] == "default" for p in parts)
    assert all(not set(FINAL) & set(p) for p in parts)
    assert last["done"] is True and last["message"]["content"] == "" and last["created_at"].endswith("Z")
    assert all(isinstance(last[f], int) and last[f] >= 0 for f in FINAL) and last["total_duration"] >= last["eval_duration"]
    ref = oa.chat.completions.create(model="default", messages=MSGS, temperature=0, max_tokens=12)
    assert "".join(p["message"]["content"] for p in parts) == ref.choices[0].message.content
    assert (last["prompt_eval_count"], last["eval_count"]) == (ref.usage.prompt_tokens, ref.usage.completion_tokens)
    assert last["done_reason"] == ref.choices[0].finish_reason


def test_the_ollama_client_chats_streamed_and_not(client):
    whole = client.chat(model="llama:latest", messages=MSGS, options=GREEDY)
    assert whole.done and whole.message.role == "assistant" and whole.message.content and whole.eval_count <= 12
    parts = list(client.chat(model="llama", messages=MSGS, options=GREEDY, stream=True))
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert parts[-1].done and parts[-1].done_reason == whole.done_reason and parts[-1].eval_count == whole.eval_count
    assert parts[-1].prompt_eval_count == whole.prompt_eval_count > 0
    short = client.chat(model="default", messages=MSGS, options={"temperature": 0, "num_predict": 2})
    assert short.eval_count <= 2 and short.done_reason == ("length" if short.eval_count == 2 else "stop")


def test_generate_formats_the_prompt_as_chat_unless_raw(client, oa):
    prompt = "Noem drie kleuren"
    r = client.generate(model="default", prompt=prompt, options=GREEDY)
    ref = oa.chat.completions.create(model="default", messages=[{"role": "user", "content": prompt}], temperature=0, max_tokens=12)
    assert (r.response, r.prompt_eval_count, r.eval_count) == (ref.choices[0].message.content, ref.usage.prompt_tokens, ref.usage.completion_tokens)
    with_system = client.generate(model="default", prompt=prompt, system="Be brief.", options=GREEDY)
    assert with_system.prompt_eval_count > r.prompt_eval_count
    raw = list(client.generate(model="default", prompt=prompt, raw=True, options=GREEDY, stream=True))
    ref = oa.completions.create(model="default", prompt=prompt, temperature=0, max_tokens=12)
    assert "".join(p.response for p in raw) == ref.choices[0].text and raw[-1].prompt_eval_count == ref.usage.prompt_tokens
    assert all(not p.done for p in raw[:-1]) and raw[-1].done and raw[-1].response == ""


def test_an_empty_prompt_or_conversation_loads_the_model(live, client):
    r = client.generate(model="default")
    assert r.done and r.done_reason == "load" and r.response == ""
    status, headers, raw = live.request("POST", "/api/chat", {"model": "default", "messages": []})  # one object, as Ollama answers it
    body = json.loads(raw)
    assert status == 200 and headers["content-type"] == "application/json" and body["done_reason"] == "load", body
    assert body["message"]["content"] == "" and body["load_duration"] == 0


@pytest.mark.parametrize("keep_alive", [0, 0.0, "0", "0s", "0m", "-0h"])
def test_keep_alive_0_with_nothing_to_answer_is_ollamas_unload(live, client, keep_alive):
    """Ollama answers done_reason "unload" to an empty prompt or conversation with keep_alive 0 (its unload request);
    the one model served here stays loaded (/api/ps still lists it)."""
    r = client.generate(model="default", keep_alive=keep_alive)
    assert r.done and r.done_reason == "unload" and r.response == ""
    status, headers, raw = live.request("POST", "/api/chat", {"model": "default", "messages": [], "keep_alive": keep_alive})
    body = json.loads(raw)
    assert status == 200 and headers["content-type"] == "application/json" and body["done_reason"] == "unload", body
    assert [m.model for m in client.ps().models] == ["llama:latest"]


@pytest.mark.parametrize("keep_alive", [1, "5m", -1, "-1m", "0.5s", 0.5])
def test_keep_alive_other_than_0_with_nothing_to_answer_loads(client, keep_alive):
    assert client.generate(model="default", keep_alive=keep_alive).done_reason == "load"


def test_a_prompt_with_keep_alive_0_is_answered(client):
    """keep_alive 0 only unloads after the answer in Ollama: a request with a prompt is answered as any other."""
    r = client.generate(model="default", prompt="Een", keep_alive=0, options={"temperature": 0, "num_predict": 2})
    assert r.done_reason in ("stop", "length") and r.eval_count > 0


def test_format_json_and_a_schema_go_through_the_grammar(client, oa):
    """Random weights write byte soup; only the grammar makes these parse (as /v1/chat/completions' response_format)."""
    r = client.chat(model="default", messages=MSGS, format=SCHEMA, options={"temperature": 0, "num_predict": 120})
    data = json.loads(r.message.content)
    assert r.done_reason == "stop" and set(data) == {"name", "legs"} and 0 <= data["legs"] <= 9
    j = client.chat(model="default", messages=MSGS, format="json", options={"temperature": 0, "num_predict": 60})
    ref = oa.chat.completions.create(model="default", messages=MSGS, temperature=0, max_tokens=60, response_format={"type": "json_object"})
    assert j.message.content == ref.choices[0].message.content and j.done_reason == ref.choices[0].finish_reason
    if j.done_reason == "stop":
        assert isinstance(json.loads(j.message.content), dict)
    free = client.chat(model="default", messages=MSGS, options={"temperature": 0, "num_predict": 60})
    assert free.message.content != j.message.content


def test_models_listed_shown_and_running(live, client):
    names = [m.model for m in client.list().models]
    assert names == ["llama:latest"]
    card = client.list().models[0]
    assert card.size > 0 and len(card.digest) == 64 and card.details.format == "onnx" and card.details.family == "llama"
    shown = client.show("llama:latest")
    assert shown.modelinfo["llama.context_length"] == live.runtime.chat.context_length and "completion" in shown.capabilities
    arch = live.runtime.chat.engine.bundle.architecture  # Ollama's (GGUF's) key names: hidden_size was llama.hidden_size
    assert (shown.modelinfo["llama.embedding_length"], shown.modelinfo["llama.block_count"], shown.modelinfo["llama.attention.head_count"],
            shown.modelinfo["llama.attention.head_count_kv"]) == (arch["hidden_size"], arch["num_layers"], arch["num_heads"], arch["num_kv_heads"])
    assert not {"llama.hidden_size", "llama.num_layers"} & set(shown.modelinfo)
    assert client.show("default").modelinfo == shown.modelinfo
    running = client.ps().models
    assert [m.model for m in running] == ["llama:latest"] and running[0].context_length == live.runtime.chat.context_length
    status, _, body = live.request("GET", "/api/version")
    version = json.loads(body)["version"]
    assert status == 200 and version.count(".") == 2
    assert tuple(map(int, version.split("."))) >= (0, 12, 11)  # the release that brought logprobs, which these routes serve


def test_the_parameter_count_is_the_checkpoints_as_ollama_writes_it(client, checkpoints):
    """details.parameter_size was "" (Ollama: "268.10M", "8.0B"), which front ends show beside the name; it and
    model_info's general.parameter_count are now the weights of the checkpoint the bundle was made from."""
    import struct

    from edge_agent.services.model_size import human_number

    weights = 0
    for f in checkpoints["llama"].glob("*.safetensors"):  # each tensor's shape, from the file's own header
        raw = f.read_bytes()
        header = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
        weights += sum(int(np.prod(t["shape"])) for k, t in header.items() if k != "__metadata__")
    shown = client.show("llama")
    assert shown.modelinfo["general.parameter_count"] == weights
    assert shown.details.parameter_size == client.list().models[0].details.parameter_size == human_number(weights)
    assert human_number(268_098_176) == "268.10M" and human_number(8_030_261_248) == "8.0B" and human_number(3 * 10**9) == "3B"


def test_unknown_models_are_404_in_ollamas_shape(live, client):
    for call in (lambda: client.chat(model="llama3.2", messages=MSGS), lambda: client.generate(model="llama:7b", prompt="x"),
                 lambda: client.show("mistral"), lambda: client.embed(model="nomic-embed-text", input="x")):
        with pytest.raises(ollama.ResponseError) as e:
            call()
        assert e.value.status_code == 404 and "not found" in e.value.error, e.value.error
    status, _, body = live.request("POST", "/api/chat", {"model": "llama3.2", "messages": MSGS})
    assert status == 404 and json.loads(body) == {"error": "model 'llama3.2' not found"}


def test_model_names_are_matched_in_any_case_as_ollama_matches_them(live, client):
    """Ollama compares names case-insensitively (model.Name.EqualFold): "Llama:Latest" and "DEFAULT" name the model;
    the reply echoes the name as sent, as Ollama's does."""
    r = client.chat(model="Llama:Latest", messages=MSGS, options={"temperature": 0, "num_predict": 2})
    assert r.done and r.model == "Llama:Latest"
    assert client.generate(model="DEFAULT", prompt="Een", options={"temperature": 0, "num_predict": 2}).done
    assert client.show("LLAMA").modelinfo == client.show("llama").modelinfo
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model="Llama3.2", messages=MSGS)
    assert e.value.status_code == 404


@pytest.mark.parametrize("body, word", [
    ({"options": {"temperature": -1}}, "temperature"),
    ({"options": {"mirostat": 2}}, "mirostat"),
    ({"options": {"temperature": "0.5"}}, "temperature"),
    ({"options": {"top_k": "40"}}, "top_k"),  # Ollama too: "option top_k must be of type integer"
    ({"options": {"stop": "x"}}, "stop"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]}, "parameters"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}], "format": "json"}, "tools"),
    ({"think": True}, "think"),
    ({"format": "yaml"}, "format"),
    ({"format": {"type": "objekt"}}, "format"),
    ({"messages": [{"role": "user", "content": "x", "images": ["aGk="]}]}, "images"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "role"),
])
def test_bad_input_is_a_400_that_says_what(live, body, word):
    status, headers, raw = live.request("POST", "/api/chat", {"model": "default", "messages": MSGS, **body})
    err = json.loads(raw)
    assert status == 400 and headers["content-type"] == "application/json" and isinstance(err["error"], str), (status, err)
    assert word in err["error"] and "Traceback" not in err["error"], err


def test_unknown_fields_and_options_are_ignored_with_a_warning_as_ollama_does(live, client, caplog):
    """Ollama drops fields it does not know (Go's JSON decoder) and logs an unknown option ("invalid option provided"): a
    client built for a newer Ollama, or one that sends every option it has, works. Here they were a 400. A known option
    with a bad value is still the 400 that names it (test_bad_input_is_a_400_that_says_what)."""
    ref = client.chat(model="default", messages=MSGS, options=GREEDY)
    body = {"model": "default", "messages": [{**MSGS[0], "images_meta": {}}, MSGS[1]], "stream": False, "shift": True,
            "options": {**GREEDY, "warp_speed": 9, "num_gqa": 8}, "newer_field": {"x": [1]}}
    with caplog.at_level("WARNING", logger="edge_agent.services.lenient"):
        status, _, raw = live.request("POST", "/api/chat", body)
    out = json.loads(raw)
    assert status == 200 and out["message"]["content"] == ref.message.content and out["eval_count"] == ref.eval_count, raw
    assert not {"warp_speed", "newer_field", "shift"} & set(out)  # nothing made up in the answer
    said = " ".join(r.getMessage() for r in caplog.records)
    assert all(name in said for name in ("'warp_speed'", "'num_gqa'", "'newer_field'", "'shift'", "'images_meta'")), said
    r = client.generate(model="default", prompt="Een", options={"temperature": 0, "num_predict": 2, "warp_speed": 9})
    assert r.done and r.eval_count <= 2
    for path, extra in (("/api/embed", {"input": "", "options": {"warp_speed": 1}}), ("/api/show", {"verbose": False, "x": 1})):
        status, _, raw = live.request("POST", path, {"model": "default", **extra})
        assert status == 200, (path, raw)


def test_null_fields_are_as_left_out_as_ollama_decodes_them(live):
    """Go decodes null as "left out" ("stream": null streams, "raw": null is false, a message's "content": null is ""),
    so Ollama takes clients that write every field; here each was a 400 "Input should be a valid boolean"."""
    status, headers, lines = _lines(live, "/api/chat", {"model": "default", "messages": MSGS, "stream": None, "options": GREEDY})
    assert status == 200 and headers["content-type"].startswith("application/x-ndjson") and lines[-1]["done"] is True, lines
    nulls = {"stream": False, "raw": None, "system": None, "template": None, "context": None, "suffix": None, "images": None,
             "format": None, "think": None, "keep_alive": None, "logprobs": None, "options": {**GREEDY, "stop": None, "seed": None}}
    status, _, raw = live.request("POST", "/api/generate", {"model": "default", "prompt": "Een", **nulls})
    assert status == 200 and json.loads(raw)["context"], raw  # raw false: the prompt framed, context returned
    _, _, plain = live.request("POST", "/api/generate", {"model": "default", "prompt": "Een", "stream": False, "options": GREEDY})
    assert json.loads(raw)["response"] == json.loads(plain)["response"]
    status, _, raw = live.request("POST", "/api/chat", {"model": "default", "stream": False, "options": GREEDY, "tools": None,
                                                        "messages": [{"role": "user", "content": None, "tool_calls": None}, MSGS[1]]})
    assert status == 200 and json.loads(raw)["done"] is True, raw
    status, _, raw = live.request("POST", "/api/chat", {"model": None, "messages": MSGS})
    assert status == 400 and "model" in json.loads(raw)["error"], raw  # still required


def test_generate_refuses_what_it_cannot_honour(live):
    for body, word in (({"suffix": "end"}, "does not support insert"), ({"template": "{{ range .Messages }}{{ end }}"}, "template"),
                       ({"raw": True, "system": "x"}, "system"), ({"raw": True, "context": [1, 2]}, "context"),
                       ({"raw": True, "template": "{{ .Prompt }}"}, "template"), ({"context": [10**6]}, "context"),
                       ({"template": "{% if x %}"}, "Go template"), ({"template": "{{ .Messages }}"}, ".Messages"),
                       ({"template": "{{ if .System }}x"}, "end")):
        status, _, raw = live.request("POST", "/api/generate", {"model": "default", "prompt": "Een", **body})
        assert status == 400 and word in json.loads(raw)["error"], (body, raw)
    accepted = {"model": "default:latest", "prompt": "Een", "stream": False, "keep_alive": "5m", "think": False, "suffix": "",
                "options": {"num_ctx": 256, "num_thread": 4, "num_gpu": 0, "mirostat": 0, "typical_p": 1.0, "num_predict": -1, "seed": 3}}
    status, _, raw = live.request("POST", "/api/generate", accepted)
    body = json.loads(raw)
    assert status == 200 and body["done"] is True, raw
    # num_predict -1: up to max_tokens_limit (256 here), not default_max_tokens (512, past the room left in the context)
    assert (body["done_reason"], body["eval_count"]) == ("length", live.runtime.settings.max_tokens_limit), body


def test_every_option_of_the_ollama_client_is_taken(client):
    """LangChain's ChatOllama and others send the client's Options: each field, null or at its usual value, is accepted."""
    nulls = {name: None for name in ollama.Options.model_fields}
    usual = {"num_ctx": 512, "num_batch": 512, "num_gpu": -1, "main_gpu": 0, "num_thread": 2, "num_keep": 4, "repeat_last_n": 64,
             "tfs_z": 1.0, "typical_p": 1.0, "mirostat": 0, "mirostat_tau": 5.0, "mirostat_eta": 0.1, "penalize_newline": True,
             "f16_kv": True, "use_mmap": True, "numa": False, "low_vram": False, "logits_all": False, "vocab_only": False,
             "use_mlock": False, "embedding_only": False, "rope_frequency_base": 10000.0, "rope_frequency_scale": 1.0,
             "repeat_penalty": 1.1, "presence_penalty": 0.5, "frequency_penalty": 0.5,
             "top_k": 40, "top_p": 0.9, "min_p": 0.05, "temperature": 0.7, "seed": 1, "num_predict": 3, "stop": ["\n\n"]}
    for options in (nulls, usual):
        r = client.chat(model="default", messages=MSGS, options={**options, "num_predict": 3})
        assert r.done and r.eval_count <= 3


def test_the_api_key_guards_these_routes_too(live):
    assert live.request("GET", "/api/tags", key=None)[0] == 401
    assert live.request("POST", "/api/chat", {"model": "default", "messages": MSGS}, key="wrong")[0] == 401


def test_embed_and_the_older_embeddings_route(tiny_bundles, api_tmp):
    from edge_agent.rag.embedder import OnnxEmbedder

    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    server = start_server(api_settings(tiny_bundles["llama"], api_tmp), documents=embedder)
    try:
        c = ollama.Client(host=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
        texts = ["a fox", "a dog", "an invoice"]
        r = c.embed(model=embedder.name + ":latest", input=texts)
        np.testing.assert_allclose(np.array(r.embeddings, dtype=np.float32), embedder.embed(texts), atol=1e-5)
        oa = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
        assert r.prompt_eval_count == oa.embeddings.create(model="default", input=texts, encoding_format="float").usage.prompt_tokens
        one = c.embed(model="default", input="a fox")
        assert len(one.embeddings) == 1 and one.model == "default"
        old = c.embeddings(model=embedder.name, prompt="a fox")
        np.testing.assert_allclose(old.embedding, one.embeddings[0], atol=1e-6)
        assert [m.model for m in c.list().models] == ["llama:latest", embedder.name + ":latest"]
        assert c.show(embedder.name).capabilities == ["embedding"]
        with pytest.raises(ollama.ResponseError) as e:
            c.chat(model=embedder.name, messages=MSGS)
        assert e.value.status_code == 400 and "embedding model" in e.value.error
        with pytest.raises(ollama.ResponseError) as e:
            c.embed(model="llama", input="x")
        assert e.value.status_code == 400 and "does not support embeddings" in e.value.error
        with pytest.raises(ollama.ResponseError) as e:
            c.embed(model="default", input="word " * 600, truncate=False)
        assert e.value.status_code == 400 and "truncate" in e.value.error
    finally:
        server.close()


LONG = {"model": "default", "messages": MSGS, "options": {"temperature": 0, "num_predict": 4000}}  # runs to 4000 tokens (length)


def _send(server, body: dict):
    return send_unread(server, "/api/chat", body)


def test_a_client_that_hangs_up_mid_stream_frees_its_slot(small_live):
    """Left alone, the answer runs to its 4000 tokens; the hang-up cancels it."""
    server = small_live
    cancelled = lambda: server.metric("edge_agent_generations_total", 'reason="cancelled"')  # noqa: E731
    before = cancelled()
    s = _send(server, LONG)
    try:
        got = b""
        while got.count(b'"done":false') < 3:
            got += s.recv(4096)
        assert server.runtime.scheduler.active == 1
    finally:
        s.close()
    assert wait_until(lambda: server.runtime.scheduler.active == 0 and cancelled() > before, 3)


def test_a_full_queue_is_a_429_with_retry_after(small_live):
    server = small_live
    holder, queued = _send(server, LONG), None
    try:
        assert wait_until(lambda: server.runtime.scheduler.active == 1, 5)
        queued = _send(server, {**LONG, "options": {"num_predict": 3}})
        assert wait_until(lambda: server.metric("edge_agent_queue_depth") == 1, 5)
        status, headers, raw = server.request("POST", "/api/generate", {"model": "default", "prompt": "x", "options": {"num_predict": 2}})
        assert status == 429 and int(headers["retry-after"]) >= 1 and "busy" in json.loads(raw)["error"], raw
    finally:
        holder.close()
        if queued is not None:
            queued.close()
    assert wait_until(lambda: server.runtime.scheduler.active == 0 and server.metric("edge_agent_queue_depth") == 0, 5)


def test_a_body_sent_as_curl_sends_it_is_read_as_ollama_reads_it(live):
    """Ollama's own docs post with `curl ... -d '{...}'` (Content-Type application/x-www-form-urlencoded) and Ollama reads
    the body as JSON whatever its type: that was a 415 here. A browser page of another origin is still refused."""
    body = {"model": "default", "prompt": "Een", "stream": False, "options": GREEDY}
    for ctype in ("application/x-www-form-urlencoded", None):
        headers = {"Content-Type": ctype} if ctype else {"Content-Type": ""}
        status, _, raw = live.request("POST", "/api/generate", body, headers=headers)
        assert status == 200 and json.loads(raw)["done"] is True, (ctype, raw)
    status, _, raw = live.request("POST", "/api/chat", {"model": "default", "messages": MSGS, "stream": False, "options": GREEDY},
                                  headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200 and json.loads(raw)["message"]["role"] == "assistant", raw
    status, _, raw = live.request("POST", "/api/generate", "model=default&prompt=Een", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 400 and "JSON" in json.loads(raw)["error"], raw  # a real form is no JSON: Ollama's shape, saying so
    status, _, raw = live.request("POST", "/api/generate", body, headers={"Content-Type": "text/plain", "Origin": "http://evil.example"})
    assert status == 403, raw  # a cross-site form post (no preflight) stays refused before any route reads it


def test_pulling_or_managing_models_is_refused_in_ollamas_shape_with_what_to_do(live, client):
    """Open WebUI's download button and `client.pull` got the OpenAI-shaped 404 "no route matches this URL; see GET
    /openapi.json", which the ollama client shows as a dict; now Ollama's shape, saying how models get here."""
    for call in (lambda: client.pull("llama3.2"), lambda: client.delete("default"), lambda: client.copy("default", "mine"),
                 lambda: client.push("default")):
        with pytest.raises(ollama.ResponseError) as e:
            call()
        assert e.value.status_code == 400 and "edge-agent model import" in e.value.error and "copyed" not in e.value.error, e.value.error
    status, _, raw = live.request("GET", "/api/nothing-here")
    assert status == 404 and isinstance(json.loads(raw)["error"], str), raw
    status, headers, raw = live.request("GET", "/api/chat")
    assert status == 405 and isinstance(json.loads(raw)["error"], str) and "POST" in headers["allow"], raw


def test_show_gives_a_base_models_prompt_frame_as_its_template(client):
    """/api/show said template "" for a base model, which in Ollama means "the prompt goes as it is"; but /api/generate
    (without raw) frames it as "Question: ...\\nAnswer:", so a prompt already in that form came back empty."""
    shown = client.show("default")
    assert shown.template == "{{ if .System }}{{ .System }}\n\n{{ end }}Question: {{ .Prompt }}\nAnswer:", shown.template


def test_the_root_answers_as_ollamas_does_for_clients_that_probe_it(live):
    """Ollama answers GET and HEAD / with 200 "Ollama is running", the probe its own client (heartbeat) and other
    tools send before anything else; it was a 404 here. It is behind the API key like every route but /health."""
    status, headers, body = live.request("GET", "/")
    assert status == 200 and body == b"Ollama is running" and headers["content-type"].startswith("text/plain"), body
    assert live.request("HEAD", "/")[0] == 200
    assert live.request("GET", "/", key=None)[0] == 401
    assert "/" in json.loads(live.request("GET", "/openapi.json")[2])["paths"]
