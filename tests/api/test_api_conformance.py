"""Fields of OpenAI's and Ollama's APIs that existing clients send, answered as those servers answer them (real server, real clients)."""
from __future__ import annotations

import json
import re

import openai
import pytest

from api_helpers import KEY

MESSAGES = [{"role": "user", "content": "Hallo, hoe gaat het?"}]


@pytest.fixture(scope="module")
def client(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def _token_id(live, text: str) -> int:
    status, _, body = live.request("POST", "/tokenize", {"prompt": text, "add_special": False})
    assert status == 200, body
    return json.loads(body)["tokens"][-1]


def test_logit_bias_moves_the_choice_as_openai_documents(live, client):
    """logit_bias ({token id: -100..100}, OpenAI's, vLLM's, llama.cpp's) is added to the logits before sampling:
    +100 makes a token the only choice, -100 bans it; greedy and sampled alike, on chat and completions."""
    forced = _token_id(live, " zon")
    for extra in ({"temperature": 0}, {"temperature": 1.0, "seed": 5}):
        r = client.completions.create(model="llama", prompt="Het weer", max_tokens=3, logit_bias={str(forced): 100}, logprobs=0, **extra)
        assert r.choices[0].logprobs.tokens == [r.choices[0].logprobs.tokens[0]] * 3
        status, _, body = live.request("POST", "/detokenize", {"tokens": [forced] * 3})
        assert r.choices[0].text == json.loads(body)["prompt"]
    kw = dict(model="llama", messages=MESSAGES, max_tokens=4, temperature=0)
    plain = client.chat.completions.create(**kw, logprobs=True)
    first = plain.choices[0].logprobs.content[0]
    status, _, body = live.request("POST", "/tokenize", {"prompt": first.token, "add_special": False})
    banned = json.loads(body)["tokens"]
    assert len(banned) == 1
    moved = client.chat.completions.create(**kw, logprobs=True, logit_bias={str(banned[0]): -100})
    assert moved.choices[0].logprobs.content[0].token != first.token
    assert client.chat.completions.create(**kw, logit_bias={}).choices[0].message.content == plain.choices[0].message.content


@pytest.mark.parametrize("bias,says", [
    ({"999999999": 5}, "vocabulary"),
    ({"12": 101}, "less than or equal to 100"),
    ({"12": -100.5}, "greater than or equal to -100"),
    ({"twelve": 1}, "token id"),
    ({str(i): 1 for i in range(301)}, "300"),
])
def test_a_bad_logit_bias_is_a_400_naming_it(client, bias, says):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="llama", messages=MESSAGES, max_tokens=2, logit_bias=bias)
    assert e.value.body["param"].startswith("logit_bias") and says in e.value.body["message"], e.value.body


@pytest.fixture(scope="module")
def ollama_client(live):
    import ollama

    return ollama.Client(host=live.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)


def test_ollama_logprobs_as_ollama_answers_them(live, client, ollama_client):
    """Ollama's logprobs and top_logprobs (0.12.11; the ollama client sends them): every token's {token, logprob, bytes,
    top_logprobs}, on /api/chat and /api/generate, streamed (each line its tokens) and not; the values are the OpenAI
    route's."""
    msgs = [{"role": "user", "content": "Wat is de hoofdstad van Nederland?"}]
    opts = {"temperature": 0, "num_predict": 6}
    ref = client.chat.completions.create(model="llama", messages=msgs, temperature=0, max_tokens=6, logprobs=True, top_logprobs=2)
    want = [(t.token, t.logprob, [a.token for a in t.top_logprobs]) for t in ref.choices[0].logprobs.content]

    def same(got: list) -> bool:  # a prefix-cache hit may move a value in its last digits
        return len(got) == len(want) and all(g[0] == w[0] and abs(g[1] - w[1]) < 1e-3 and g[2:] == w[2:len(g)] for g, w in zip(got, want))

    whole = ollama_client.chat(model="llama", messages=msgs, options=opts, logprobs=True, top_logprobs=2)
    assert same([(t.token, t.logprob, [a.token for a in t.top_logprobs]) for t in whole.logprobs]), (whole.logprobs, want)
    assert "".join(t.token for t in whole.logprobs) == whole.message.content
    parts = list(ollama_client.chat(model="llama", messages=msgs, options=opts, logprobs=True, top_logprobs=2, stream=True))
    assert same([(t.token, t.logprob) for p in parts for t in p.logprobs or ()])
    assert all("".join(t.token for t in p.logprobs or ()) == p.message.content for p in parts)
    gen = ollama_client.generate(model="llama", prompt="Het weer is", raw=True, options=opts, logprobs=True)
    assert len(gen.logprobs) == gen.eval_count and all(t.logprob <= 0 and not t.top_logprobs for t in gen.logprobs)
    status, _, body = live.request("POST", "/api/generate", {"model": "llama", "prompt": "Het", "stream": False,
                                                             "options": opts, "logprobs": True})
    entry = json.loads(body)["logprobs"][0]
    assert set(entry) == {"token", "logprob", "bytes"}, entry  # top_logprobs left out when none asked, as Ollama's omitempty
    plain = ollama_client.chat(model="llama", messages=msgs, options=opts)
    assert plain.logprobs is None
    for bad in ({"top_logprobs": 21, "logprobs": True}, {"top_logprobs": 2}):
        status, _, body = live.request("POST", "/api/chat", {"model": "llama", "messages": msgs, **bad})
        assert status == 400 and "top_logprobs" in json.loads(body)["error"], body


def test_embeddings_take_a_langchain_batch_of_1000_texts_as_openai_does(tiny_bundles, api_tmp):
    """OpenAI takes up to 2048 inputs a request; LangChain's OpenAIEmbeddings sends chunk_size=1000 texts at a time (with
    check_embedding_ctx_length=False, which our token-id refusal asks for), so 1000 texts were a 400 at 256. Ollama's
    /api/embed takes the same number."""
    import numpy as np
    import ollama

    from api_helpers import REPO, api_settings, start_server
    from edge_agent.rag.embedder import OnnxEmbedder

    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    server = start_server(api_settings(tiny_bundles["llama"], api_tmp), documents=embedder)
    try:
        c = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120)
        texts = [f"note {i} about the boiler" for i in range(1000)]
        r = c.embeddings.create(model="default", input=texts)
        assert [d.index for d in r.data] == list(range(1000))
        assert all(len(d.embedding) == len(r.data[0].embedding) for d in r.data)
        assert float(np.dot(r.data[999].embedding, c.embeddings.create(model="default", input=texts[-1]).data[0].embedding)) > 0.98
        o = ollama.Client(host=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120)
        assert len(o.embed(model="default", input=texts).embeddings) == 1000
        with pytest.raises(openai.BadRequestError) as e:
            c.embeddings.create(model="default", input=["x"] * 2049)
        assert e.value.body["param"] == "input" and "2048" in e.value.body["message"], e.value.body
    finally:
        server.close()


def test_ollama_takes_a_code_assistants_list_of_stop_strings(live, ollama_client):
    """Ollama sets no limit on options.stop, and code assistants (Continue's fill-in-the-middle templates) send five or more;
    they were a 400 at OpenAI's 4. Any of them ends the answer, as one of four did."""
    msgs = [{"role": "user", "content": "Wat is de hoofdstad van Nederland?"}]
    plain = ollama_client.chat(model="llama", messages=msgs, options={"temperature": 0, "num_predict": 12}).message.content
    cut = plain[len(plain) // 2:][:2]
    stops = ["<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<file_sep>", "<|endoftext|>", "\n\n\n", "```", cut]
    r = ollama_client.chat(model="llama", messages=msgs, options={"temperature": 0, "num_predict": 12, "stop": stops})
    assert r.done_reason == "stop" and r.message.content == plain[:plain.index(cut)], (plain, cut, r.message.content)
    for bad in (["x"] * 33, ["y" * 200] * 6):
        status, _, body = live.request("POST", "/api/chat", {"model": "llama", "messages": msgs, "options": {"stop": bad}})
        assert status == 400 and "stop" in json.loads(body)["error"], body


def test_vllm_stop_token_ids_end_the_answer_before_that_token(live, client):
    """vLLM's stop_token_ids (its docs' Llama 3 examples send them): the answer ends, finish_reason stop, before the token;
    vLLM's output switches at their neutral values (skip_special_tokens true, include_stop_str_in_output false,
    spaces_between_special_tokens true) are accepted."""
    kw = dict(model="llama", prompt="Het weer is", max_tokens=8, temperature=1.0, seed=3)  # the same draw each time
    full = client.completions.create(**kw, logprobs=0).choices[0]
    tokens = full.logprobs.tokens
    at = next((i for i in range(1, len(tokens)) if tokens[i] not in tokens[:i]), None)
    assert at is not None, tokens
    stop_id = _token_id(live, tokens[at])
    status, _, body = live.request("POST", "/detokenize", {"tokens": [stop_id]})
    assert json.loads(body)["prompt"] == tokens[at]
    r = client.completions.create(**kw, extra_body={"stop_token_ids": [stop_id], "skip_special_tokens": True,
                                                     "include_stop_str_in_output": False, "spaces_between_special_tokens": True})
    assert r.choices[0].finish_reason == "stop" and r.choices[0].text == "".join(tokens[:at]), (tokens, at, r.choices[0].text)
    c = client.chat.completions.create(model="llama", messages=MESSAGES, max_tokens=8, temperature=0, extra_body={"stop_token_ids": []})
    assert c.choices[0].message.content is not None
    for extra, param in (({"stop_token_ids": [10**9]}, "stop_token_ids"), ({"include_stop_str_in_output": True}, "include_stop_str_in_output"),
                         ({"skip_special_tokens": False}, "skip_special_tokens")):
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(**kw, extra_body=extra)
        assert e.value.body["param"] == param, e.value.body


def test_vllm_structured_outputs_hold_the_answer(client):
    """vLLM's structured outputs as its docs send them through the openai client: structured_outputs {choice, json, regex,
    json_object} and the older guided_choice / guided_json / guided_regex, on chat and completions, held by the same
    grammar as response_format; two kinds at once are a 400, as vLLM answers."""
    labels = ["positive", "negative"]
    for extra in ({"structured_outputs": {"choice": labels}}, {"guided_choice": labels}):
        r = client.chat.completions.create(model="llama", messages=MESSAGES, max_tokens=8, extra_body=extra)
        assert r.choices[0].message.content.strip() in labels, r
        c = client.completions.create(model="llama", prompt="Review: great film. Sentiment:", max_tokens=8, temperature=0.9, seed=1,
                                      n=3, extra_body=extra)
        assert all(ch.text.strip() in labels for ch in c.choices), c
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
    for extra in ({"structured_outputs": {"json": schema}}, {"guided_json": schema}, {"guided_json": json.dumps(schema)}):
        r = client.chat.completions.create(model="llama", messages=MESSAGES, max_tokens=40, extra_body=extra)
        assert r.choices[0].finish_reason == "stop" and set(json.loads(r.choices[0].message.content)) == {"ok"}, r
    for extra in ({"structured_outputs": {"regex": "[A-Z]{2}/[0-9]{3}"}}, {"guided_regex": "[A-Z]{2}/[0-9]{3}"}):
        r = client.completions.create(model="llama", prompt="Code:", max_tokens=20, extra_body=extra)
        assert re.fullmatch(r"\s*[A-Z]{2}/[0-9]{3}", r.choices[0].text), r
    kw = dict(model="llama", messages=MESSAGES, max_tokens=24, temperature=0.8, seed=2)
    same = client.chat.completions.create(**kw, response_format={"type": "json_object"}).choices[0].message.content
    assert client.chat.completions.create(**kw, extra_body={"structured_outputs": {"json_object": True}}).choices[0].message.content == same
    assert same.lstrip().startswith("{")
    for extra, param in (({"structured_outputs": {"choice": labels}, "response_format": {"type": "json_object"}}, "structured_outputs"),
                         ({"structured_outputs": {"choice": labels, "regex": "a"}}, "structured_outputs"),
                         ({"guided_choice": labels, "guided_regex": "a"}, "guided_regex"),
                         ({"structured_outputs": {"grammar": "root ::= \"a\""}}, "structured_outputs.grammar"),
                         ({"structured_outputs": {"regex": "(unclosed"}}, "structured_outputs"),
                         ({"guided_choice": []}, "guided_choice")):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="llama", messages=MESSAGES, max_tokens=4, extra_body=extra)
        assert e.value.body["param"] == param, (extra, e.value.body)


def test_a_pattern_that_exhausts_the_grammar_engine_is_this_requests_400(client, live):
    """(a{1000}){1000} used to take the scheduler's thread for 0.9-7 s on its first mask (every sequence stalled), then
    fail its first token as a 500; now it is refused before it reaches the engine, and the server answers on."""
    for extra, param in (({"guided_regex": "(a{1000}){1000}"}, "guided_regex"),
                         ({"structured_outputs": {"regex": "(b{1000}){1000}"}}, "structured_outputs")):
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model="llama", prompt="x", max_tokens=4, extra_body=extra)
        assert e.value.body["param"] == param and "too complex" in e.value.body["message"], e.value.body
        assert "<state>" not in e.value.body["message"] and "/" not in e.value.body["message"]
    r = client.completions.create(model="llama", prompt="x", max_tokens=12, extra_body={"guided_regex": "(a{10}){3}"})
    assert r.choices[0].text.strip() == "a" * 30 or r.choices[0].finish_reason == "length", r


def test_usage_tells_the_prompt_tokens_found_in_the_prefix_cache(client):
    """OpenAI's usage.prompt_tokens_details.cached_tokens (LangChain reports it as cache_read, LiteLLM as cached tokens): a
    repeated long preamble is found in the prefix cache, on chat and completions, streamed or not."""
    preamble = "Het archief in Middelburg bewaart kaarten, brieven en registers uit vier eeuwen. " * 4
    first = client.completions.create(model="llama", prompt=preamble + "Eerste vraag?", max_tokens=2)
    assert first.usage.prompt_tokens_details.cached_tokens < first.usage.prompt_tokens
    again = client.completions.create(model="llama", prompt=preamble + "Tweede vraag?", max_tokens=2)
    assert 64 <= again.usage.prompt_tokens_details.cached_tokens < again.usage.prompt_tokens
    msgs = [{"role": "system", "content": preamble}, {"role": "user", "content": "Wat bewaart het archief?"}]
    client.chat.completions.create(model="llama", messages=msgs, max_tokens=2)
    chat = client.chat.completions.create(model="llama", messages=msgs, max_tokens=2)
    assert chat.usage.prompt_tokens_details.cached_tokens >= 64
    last = list(client.chat.completions.create(model="llama", messages=msgs, max_tokens=2, stream=True,
                                               stream_options={"include_usage": True}))[-1]
    assert last.usage.prompt_tokens_details.cached_tokens >= 64


def test_extra_body_copied_into_a_json_body_says_where_its_fields_go(live):
    """curl users copy vLLM's Python examples' extra_body={...} into the JSON: a 400 that says to lift its fields (vLLM
    ignores the unknown field, so the fields were silently dropped there)."""
    body = {"model": "llama", "messages": MESSAGES, "max_tokens": 2, "extra_body": {"top_k": 5}}
    status, _, raw = live.request("POST", "/v1/chat/completions", body)
    err = json.loads(raw)["error"]
    assert status == 400 and err["param"] == "extra_body" and "top level" in err["message"], err


def test_the_embedding_models_card_has_a_real_created_time(tiny_bundles, api_tmp):
    """GET /v1/models: `created` is the Unix time of the model's files (OpenAI's meaning), as /api/tags' modified_at says,
    not 0 (1970)."""
    import datetime as dt

    import ollama

    from api_helpers import REPO, api_settings, start_server
    from edge_agent.rag.embedder import OnnxEmbedder

    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    server = start_server(api_settings(tiny_bundles["llama"], api_tmp), documents=embedder)
    try:
        c = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
        card = c.models.retrieve(embedder.name)
        tags = ollama.Client(host=server.url, headers={"Authorization": f"Bearer {KEY}"}).list().models
        modified = next(m.modified_at for m in tags if m.model == embedder.name + ":latest")
        assert card.created > 0 and card.created == int(modified.timestamp()), (card, modified)
        assert [m.created for m in c.models.list().data if m.id == embedder.name] == [card.created]
        assert dt.datetime.fromtimestamp(card.created, dt.timezone.utc).year >= 2024
    finally:
        server.close()


def test_ollama_num_ctx_above_the_models_context_is_capped_as_ollama_caps_it(live, ollama_client):
    """Ollama (since 0.9.x, PR #11175) caps a num_ctx above the model's trained context with a warning; Continue, Open WebUI
    and ChatOllama(num_ctx=8192) send one. It was a 400 here; now the answer is the same as without it."""
    msgs = [{"role": "user", "content": "Wat is de hoofdstad van Nederland?"}]
    plain = ollama_client.chat(model="llama", messages=msgs, options={"temperature": 0, "num_predict": 6})
    for num_ctx in (live.runtime.chat.context_length + 1, 131072):
        r = ollama_client.chat(model="llama", messages=msgs, options={"temperature": 0, "num_predict": 6, "num_ctx": num_ctx})
        assert r.message.content == plain.message.content and r.prompt_eval_count == plain.prompt_eval_count


def test_ollama_num_predict_0_means_no_limit_as_in_ollamas_runner(live, ollama_client):
    """Ollama's runner limits a sequence only when num_predict > 0, so 0 generates as -1 does (up to the server's
    max_tokens_limit here); it was a 400 naming max_tokens, a field the Ollama client never sent."""
    msgs = [{"role": "user", "content": "Wat is de hoofdstad van Nederland?"}]
    opts = {"temperature": 0, "seed": 1}
    zero = ollama_client.chat(model="llama", messages=msgs, options={**opts, "num_predict": 0})
    minus = ollama_client.chat(model="llama", messages=msgs, options={**opts, "num_predict": -1})
    assert zero.message.content == minus.message.content and zero.eval_count == minus.eval_count > 16


def test_completions_take_response_format_as_vllm_does(client):
    """vLLM's completions take response_format (json_object, json_schema) beside its structured outputs; the answer is held
    by the same grammar as structured_outputs.json."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
    kw = dict(model="llama", prompt="Answer in JSON:", max_tokens=40, temperature=0.7, seed=4)
    r = client.completions.create(**kw, extra_body={"response_format": {"type": "json_schema", "json_schema": {"name": "ok", "schema": schema}}})
    same = client.completions.create(**kw, extra_body={"structured_outputs": {"json": schema}})
    assert r.choices[0].text == same.choices[0].text and set(json.loads(r.choices[0].text)) == {"ok"}, r
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(**kw, extra_body={"response_format": {"type": "json_object"}, "guided_regex": "a+"})
    assert e.value.body["param"] == "guided_regex"


def test_openai_chat_fields_that_change_no_answer_here_are_taken(client):
    """modalities ["text"] (the default) and prediction (Predicted Outputs: a latency hint, the answer is the model's either
    way) are accepted; asking for audio output is a 400 naming modalities."""
    kw = dict(model="llama", messages=MESSAGES, max_tokens=4, temperature=0)
    plain = client.chat.completions.create(**kw).choices[0].message.content
    r = client.chat.completions.create(**kw, modalities=["text"], prediction={"type": "content", "content": "Goed, dank je."})
    assert r.choices[0].message.content == plain
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(**kw, modalities=["text", "audio"])
    assert e.value.body["param"] == "modalities" and "text" in e.value.body["message"], e.value.body


def test_ollama_num_predict_above_the_limit_runs_to_the_limit_as_ollama_runs_to_the_context(live, ollama_client):
    """Ollama never refuses a num_predict: it generates until the context is full. A num_predict above max_tokens_limit
    (LangChain's ChatOllama(num_predict=8192), Continue's maxTokens) runs to the limit, done_reason length, as -1 does;
    it was a 400."""
    msgs = [{"role": "user", "content": "Wat is de hoofdstad van Nederland?"}]
    opts = {"temperature": 0, "seed": 1}
    big = ollama_client.chat(model="llama", messages=msgs, options={**opts, "num_predict": 100000})
    minus = ollama_client.chat(model="llama", messages=msgs, options={**opts, "num_predict": -1})
    assert big.message.content == minus.message.content and big.eval_count == minus.eval_count
    assert big.eval_count <= live.runtime.settings.max_tokens_limit


def test_ollama_num_predict_past_the_room_in_the_context_stops_where_it_is_full(live, ollama_client):
    """Ollama generates until the context is full, whatever num_predict says; a long prompt with a num_predict past the
    room left was a 400 context_length_exceeded here (a code assistant's maxTokens 4096 beside its file context on the
    default model's 4096-token context). The OpenAI routes keep refusing it, as OpenAI does."""
    context = live.runtime.chat.context_length
    prompt = "de kat zat op de mat " * 20
    status, _, body = live.request("POST", "/tokenize", {"prompt": prompt})
    prompt_tokens = json.loads(body)["count"]
    limit = live.runtime.settings.max_tokens_limit
    assert prompt_tokens + limit > context, (prompt_tokens, limit, context)
    r = ollama_client.generate(model="llama", prompt=prompt, raw=True, options={"temperature": 0, "num_predict": limit})
    assert r.done and 0 < r.eval_count <= context - prompt_tokens, (r.eval_count, context, prompt_tokens)
    with pytest.raises(openai.BadRequestError) as e:
        client = openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0)
        client.completions.create(model="llama", prompt=prompt, max_tokens=limit)
    assert e.value.body["code"] == "context_length_exceeded"


def test_a_model_of_the_other_kind_is_a_404_that_names_the_right_route(tiny_bundles, api_tmp):
    """GET /v1/models lists the chat and the embedding model, and a UI lets a user pick either: chatting with the embedding
    model (or embedding with the chat model) is a 404 model_not_found, as OpenAI answers ("This is not a chat model"),
    saying which route takes it, not that the listed model does not exist."""
    from api_helpers import REPO, api_settings, start_server
    from edge_agent.rag.embedder import OnnxEmbedder

    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    server = start_server(api_settings(tiny_bundles["llama"], api_tmp), documents=embedder)
    try:
        c = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
        assert {m.id for m in c.models.list().data} == {"llama", embedder.name}
        for call in (lambda: c.chat.completions.create(model=embedder.name, messages=MESSAGES, max_tokens=2),
                     lambda: c.completions.create(model=embedder.name, prompt="x", max_tokens=2)):
            with pytest.raises(openai.NotFoundError) as e:
                call()
            err = e.value.body
            assert err["code"] == "model_not_found" and "embedding model" in err["message"] and "/v1/embeddings" in err["message"], err
        with pytest.raises(openai.NotFoundError) as e:
            c.embeddings.create(model="llama", input="x")
        assert "chat model" in e.value.body["message"] and embedder.name in e.value.body["message"], e.value.body
    finally:
        server.close()


def test_model_aliases_let_an_app_keep_its_built_in_model_names(tiny_bundles, api_tmp):
    """An app with gpt-4o-mini / text-embedding-3-small built in works unchanged once the operator names them as aliases
    (vLLM's --served-model-name): chat, completions, embeddings, batch-less routes and Ollama's; /v1/models lists them;
    a name that is no alias is still a 404, and an embedding alias sent to chat says where it belongs."""
    import ollama

    from api_helpers import REPO, api_settings, start_server
    from edge_agent.rag.embedder import OnnxEmbedder

    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    settings = api_settings(tiny_bundles["llama"], api_tmp, model_aliases=["gpt-4o-mini", "llama3.2"],
                            embedding_model_aliases=["text-embedding-3-small"])
    server = start_server(settings, documents=embedder)
    try:
        c = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
        assert {"gpt-4o-mini", "llama3.2", "text-embedding-3-small"} <= {m.id for m in c.models.list().data}
        assert c.models.retrieve("gpt-4o-mini").id == "gpt-4o-mini"
        r = c.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES, max_tokens=4)
        assert r.choices[0].finish_reason in ("stop", "length")
        assert c.completions.create(model="llama3.2", prompt="Hallo", max_tokens=2).choices
        e = c.embeddings.create(model="text-embedding-3-small", input=["hallo wereld"])
        assert len(e.data[0].embedding) == embedder.dim
        with pytest.raises(openai.NotFoundError) as nf:
            c.chat.completions.create(model="gpt-4o", messages=MESSAGES, max_tokens=2)
        assert "gpt-4o-mini" in nf.value.body["message"]  # the names it does answer to
        with pytest.raises(openai.NotFoundError) as nf:
            c.chat.completions.create(model="text-embedding-3-small", messages=MESSAGES, max_tokens=2)
        assert "/v1/embeddings" in nf.value.body["message"]
        o = ollama.Client(host=server.url, headers={"Authorization": f"Bearer {KEY}"})
        assert o.chat(model="llama3.2:latest", messages=MESSAGES, options={"num_predict": 2}).message is not None
        assert len(o.embed(model="text-embedding-3-small", input="hallo").embeddings[0]) == embedder.dim
        listed = {m.model for m in o.list().models}
        assert {"gpt-4o-mini:latest", "llama3.2:latest", "text-embedding-3-small:latest"} <= listed
        assert o.show("llama3.2").capabilities == ["completion", "tools"] and o.show("text-embedding-3-small").capabilities == ["embedding"]
    finally:
        server.close()


def test_system_fingerprint_in_the_answer_and_in_every_streamed_chunk(client):
    """OpenAI sends system_fingerprint in a chat or text completion and in each of its streamed chunks (the usage chunk
    too): one value for the model as served here."""
    kw = dict(model="llama", max_tokens=4, temperature=0)
    whole = client.chat.completions.create(messages=MESSAGES, **kw)
    fp = whole.system_fingerprint
    assert fp and fp.startswith("fp_")
    chunks = list(client.chat.completions.create(messages=MESSAGES, stream=True, stream_options={"include_usage": True}, **kw))
    assert len(chunks) > 2 and all(c.system_fingerprint == fp for c in chunks), [c.system_fingerprint for c in chunks]
    assert client.completions.create(prompt="Het weer", **kw).system_fingerprint == fp
    assert {c.system_fingerprint for c in client.completions.create(prompt="Het weer", stream=True, **kw)} == {fp}
