"""The official openai client, sync and async, streaming and not, against the real server."""
from __future__ import annotations

import asyncio
import json
import re

import numpy as np
import openai
import pytest

from api_helpers import KEY, REPO, api_settings, start_server
from edge_agent.api import protocol as p

MSG = [{"role": "user", "content": "Say something about foxes."}]


@pytest.fixture(scope="module")
def client(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def test_models_list(client, live):
    models = client.models.list()
    assert [m.id for m in models.data] == [live.runtime.chat.model_name]
    assert models.data[0].owned_by == "edge-agent"


def test_chat_non_stream(client):
    r = client.chat.completions.create(model="llama", messages=MSG, max_tokens=12, temperature=0)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    c = r.choices[0]
    assert c.message.role == "assistant" and isinstance(c.message.content, str)
    assert c.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 0 and 1 <= r.usage.completion_tokens <= 12
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    p.ChatCompletion.model_validate(r.model_dump(exclude_none=True))


def test_chat_stream_matches_non_stream(client):
    kw = dict(model="llama", messages=MSG, max_tokens=16, temperature=0)
    whole = client.chat.completions.create(**kw)
    chunks = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1 and chunks[0].id.startswith("chatcmpl-")


def test_stream_without_usage_has_no_usage_chunk(client):
    chunks = list(client.chat.completions.create(model="llama", messages=MSG, max_tokens=4, temperature=0, stream=True))
    assert all(c.choices for c in chunks)


def test_max_completion_tokens_and_ignore_eos(client):
    r = client.chat.completions.create(model="llama", messages=MSG, max_completion_tokens=7, temperature=0, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 7 and r.choices[0].finish_reason == "length"


def test_n_choices_and_seed(client):
    kw = dict(model="llama", messages=MSG, max_tokens=8, temperature=1.0, seed=42, n=3)
    a = client.chat.completions.create(**kw)
    b = client.chat.completions.create(**kw)
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]  # seeded: repeatable
    assert 3 <= a.usage.completion_tokens <= 24  # counted over the choices; the prompt once
    assert a.usage.prompt_tokens == client.chat.completions.create(**{**kw, "n": 1}).usage.prompt_tokens
    stream = list(client.chat.completions.create(**kw, stream=True))
    per = {i: "".join(c.choices[0].delta.content or "" for c in stream if c.choices[0].index == i) for i in range(3)}
    assert [per[i] for i in range(3)] == [c.message.content for c in a.choices]


def test_stop_string(client):
    base = client.completions.create(model="llama", prompt="The quick brown", max_tokens=20, temperature=0, extra_body={"ignore_eos": True}).choices[0].text
    assert len(base) > 4
    stop = base[2:4]
    r = client.completions.create(model="llama", prompt="The quick brown", max_tokens=20, temperature=0, stop=[stop])
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].text == base[: base.index(stop)]


def test_completions_prompts_echo_and_token_ids(client, live):
    r = client.completions.create(model="llama", prompt=["one two", "three"], n=2, max_tokens=5, temperature=0)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert r.choices[0].text == r.choices[1].text  # greedy: same prompt, same text
    e = client.completions.create(model="llama", prompt="one two", max_tokens=5, temperature=0, echo=True)
    assert e.choices[0].text == "one two" + r.choices[0].text
    ids = live.runtime.chat.engine.encode("one two")
    t = client.completions.create(model="llama", prompt=ids, max_tokens=5, temperature=0)
    assert t.choices[0].text == r.choices[0].text
    s = list(client.completions.create(model="llama", prompt="one two", max_tokens=5, temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in s) == r.choices[0].text
    assert s[-1].choices[0].finish_reason in ("stop", "length")


def test_json_object_mode_gives_valid_json(client):
    """A choice that stops is one JSON object; one cut by max_tokens says "length" (and is not patched)."""
    stopped = 0
    for temperature in (0, 1.0):
        for n_stream in (False, True):
            kw = dict(model="llama", messages=[{"role": "user", "content": "Give me a JSON object about a fox."}], max_tokens=200,
                      temperature=temperature, seed=3, response_format={"type": "json_object"})
            if n_stream:
                chunks = [c for c in client.chat.completions.create(**kw, stream=True) if c.choices]
                text = "".join(c.choices[0].delta.content or "" for c in chunks)
                reason = chunks[-1].choices[0].finish_reason
            else:
                r = client.chat.completions.create(**kw)
                text, reason = r.choices[0].message.content, r.choices[0].finish_reason
            assert reason in ("stop", "length")
            if reason == "stop":
                assert isinstance(json.loads(text), dict), text
                stopped += 1
    assert stopped >= 2


def test_async_client_stream_and_not(live):
    async def run():
        c = openai.AsyncOpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)
        try:
            whole = await c.chat.completions.create(model="llama", messages=MSG, max_tokens=10, temperature=0)
            parts = []
            async for chunk in await c.chat.completions.create(model="llama", messages=MSG, max_tokens=10, temperature=0, stream=True):
                if chunk.choices:
                    parts.append(chunk.choices[0].delta.content or "")
            return whole.choices[0].message.content, "".join(parts)
        finally:
            await c.close()

    whole, streamed = asyncio.run(run())
    assert whole == streamed


def test_client_errors_are_typed(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4", messages=MSG, max_tokens=4)
    assert e.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="llama", messages=MSG, max_tokens=4, temperature=-1)
    bad = openai.OpenAI(base_url=client.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_embeddings_unavailable_is_503(client):
    with pytest.raises(openai.InternalServerError) as e:
        client.embeddings.create(model="all-MiniLM-L6-v2", input="hello")
    assert e.value.status_code == 503 and "embedding model not loaded" in e.value.message


def test_embeddings_with_real_embedder(tiny_bundles, api_tmp):
    from edge_agent.rag.embedder import OnnxEmbedder

    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")  # shared with the RAG tests
    server = start_server(api_settings(tiny_bundles["llama"], api_tmp), documents=embedder)
    try:
        c = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
        names = [m.id for m in c.models.list().data]
        assert embedder.name in names
        r = c.embeddings.create(model=embedder.name, input=["a fox", "a dog", "an invoice"])  # client asks for base64
        assert len(r.data) == 3 and r.usage.prompt_tokens > 0
        vecs = np.array([d.embedding for d in r.data], dtype=np.float32)
        np.testing.assert_allclose(vecs, embedder.embed(["a fox", "a dog", "an invoice"]), atol=1e-5)
        f = c.embeddings.create(model="default", input="a fox", encoding_format="float")
        np.testing.assert_allclose(f.data[0].embedding, embedder.embed(["a fox"])[0], atol=1e-5)
    finally:
        server.close()


def test_embeddings_never_truncate_silently(tiny_bundles, api_tmp):
    """Over the window: truncate (default true) embeds the first tokens and says so; truncate false is a 400 with the limit."""
    from edge_agent.rag.embedder import OnnxEmbedder

    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    server = start_server(api_settings(tiny_bundles["llama"], api_tmp), documents=embedder)
    long = " ".join(f"word{i}" for i in range(300))
    real = len(embedder.tokenizer.encode(long).ids)
    assert real > embedder.max_tokens  # the input really is over the window
    try:
        c = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
        r = c.embeddings.create(model="default", input=[long, "a fox"], encoding_format="float")
        assert r.usage.prompt_tokens == real + len(embedder.tokenizer.encode("a fox").ids)  # every token sent, not 256
        assert r.usage.model_extra["truncated_inputs"] == 1
        np.testing.assert_allclose(r.data[0].embedding, embedder.embed([long, "a fox"])[0], atol=1e-5)
        with pytest.raises(openai.BadRequestError) as e:
            c.embeddings.create(model="default", input=["a fox", long], extra_body={"truncate": False})
        err = e.value.body
        assert err["code"] == "context_length_exceeded" and err["param"] == "input"
        assert f"input[1] is {real} tokens" in err["message"] and str(embedder.max_tokens) in err["message"]
        ok = c.embeddings.create(model="default", input="a fox", extra_body={"truncate": False})
        assert ok.usage.model_extra["truncated_inputs"] == 0 and len(ok.data) == 1
        status, _, body = server.request("POST", "/v1/embeddings", {"model": "default", "input": "x", "truncate": "no"})
        assert status == 400 and json.loads(body)["error"]["param"] == "truncate"
    finally:
        server.close()


class _Spy:
    """Wraps a tokenizer or an embedder: records the length of every text its calls were given, delegates the rest."""

    def __init__(self, inner, *methods):
        self._inner, self.seen = inner, []
        for name in methods:
            setattr(self, name, self._recording(getattr(inner, name)))

    def _recording(self, fn):
        def call(arg, *args, **kwargs):
            self.seen.extend(map(len, [arg] if isinstance(arg, str) else arg))
            return fn(arg, *args, **kwargs)
        return call

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_a_huge_embedding_input_is_never_tokenized_whole_to_refuse_it_nor_twice_to_embed_it(tiny_bundles, api_tmp):
    """An input of megabytes: with truncate false the 400 comes from its first words (a 7 MB input took 7.3 s of a
    server thread to tokenize before the refusal); with truncate (the default) it is tokenized once, for the usage
    count, and the model is given only the words its window holds (it took 14.7 s: the model's tokenizer went over the
    whole text again to keep its first 256 tokens). The vectors and the counts stay what they were."""
    from edge_agent.rag.embedder import OnnxEmbedder

    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    huge = " ".join(f"woord{i % 997} opzegtermijn" for i in range(200_000))  # 4.3 MB
    sparse = " " * 300_000 + "a fox " * 300  # over the window, most of it blanks: counted whole
    want = embedder.embed([huge, "a fox", sparse])  # before the spies: the model's own truncation (as one batch: the
    # int8 model's activation scales are the batch's)
    full, fox, n_sparse = (len(embedder.tokenizer.encode(t).ids) for t in (huge, "a fox", sparse))
    tok = _Spy(embedder.tokenizer, "encode", "encode_batch", "encode_batch_fast")
    embedder._tokenizer = tok
    model = _Spy(embedder, "embed")
    server = start_server(api_settings(tiny_bundles["llama"], api_tmp, max_body_bytes=16 << 20), documents=model)
    try:
        c = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120)
        with pytest.raises(openai.BadRequestError) as e:
            c.embeddings.create(model="default", input=["a fox", huge], extra_body={"truncate": False})
        err = e.value.body
        assert err["code"] == "context_length_exceeded" and err["param"] == "input"
        assert re.search(r"input\[1\] is at least \d+ tokens, over this embedding model's limit of 256", err["message"]), err
        assert max(tok.seen) < 100_000 and model.seen == []  # refused from its first words, nothing embedded

        tok.seen.clear()
        r = c.embeddings.create(model="default", input=[huge, "a fox", sparse], encoding_format="float")
        assert tok.seen.count(len(huge)) == 1  # counted once ...
        assert len(model.seen) == 3 and model.seen.count(len(huge)) == 0  # ... and the model was given its head only
        assert r.usage.prompt_tokens == full + fox + n_sparse
        assert r.usage.model_extra["truncated_inputs"] == 2
        np.testing.assert_allclose([d.embedding for d in r.data], want, atol=1e-5)

        with pytest.raises(openai.BadRequestError) as e:  # a sparse input is counted whole: its exact count
            c.embeddings.create(model="default", input=sparse, extra_body={"truncate": False})
        assert f"input is {n_sparse} tokens" in e.value.body["message"]
    finally:
        server.close()
