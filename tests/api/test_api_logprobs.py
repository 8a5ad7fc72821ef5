"""logprobs / top_logprobs through the real server and the official openai client, checked against onnxruntime run directly.

The reference runs the bundle's own graph in a fresh InferenceSession over the whole token sequence (no
cache, no scheduler, no batching) and takes log_softmax of its logits: the server's values must equal it
for the tokens it generated, greedy or sampled (raw logits: no temperature), streamed or not.
"""
from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import openai
import pytest

from api_helpers import KEY
from edge_agent.services.logprobs import TokenTexts

MSG = [{"role": "user", "content": "Name three animals."}]
TOL = 2e-3  # the reference's one-pass prefill against the server's chunked prefill + decode steps (float32 sums)


@pytest.fixture(scope="module")
def client(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def ref(tiny_bundles):
    """ids -> log_softmax of the next-token logits after ids, from the bundle's graph run directly."""
    folder = tiny_bundles["llama"]
    sess = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    table = np.load(folder / "embed.npy").astype(np.float32) * np.load(folder / "embed_scale.npy")[:, None]
    past = [i for i in sess.get_inputs() if i.name.startswith("past_")]
    cache: dict[tuple[int, ...], np.ndarray] = {}

    def run(ids: list[int]) -> np.ndarray:
        key = tuple(ids)
        if key not in cache:
            n = len(ids)
            feeds = {"inputs_embeds": table[ids][None], "position_ids": np.arange(n, dtype=np.int64)[None],
                     "seqlens_k": np.array([n - 1], np.int32), "total_seq_len": np.array(n, np.int32)}
            for i in past:
                feeds[i.name] = np.zeros((1, i.shape[1], n, i.shape[3]), np.float32)
            logits = sess.run(["logits"], feeds)[0][0].astype(np.float64)
            cache[key] = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
        return cache[key]

    return run


@pytest.fixture(scope="module")
def texts(live):
    return TokenTexts(live.runtime.chat.engine.tokenizer)


def _ids(entries, texts: TokenTexts) -> list[int]:
    """The token ids of logprobs entries, from their bytes (unique in the tiny byte-level vocabulary)."""
    by_bytes = {}
    for i in range(_vocab(texts)):
        by_bytes.setdefault(bytes(texts.info(i)[1]), i)
    return [by_bytes[bytes(e.bytes if hasattr(e, "bytes") else e["bytes"])] for e in entries]


def _vocab(texts: TokenTexts) -> int:
    return texts.tok.get_vocab_size()


def _check_against_ref(prompt: list[int], entries, texts, ref, top: int, greedy: bool) -> None:
    ids = _ids(entries, texts)
    for k, (e, tok) in enumerate(zip(entries, ids)):
        want = ref(prompt + ids[:k])
        assert abs(e.logprob - want[tok]) < TOL, (k, e.logprob, want[tok])
        if greedy:
            assert tok == int(np.argmax(want))
        assert len(e.top_logprobs) == top
        values = [t.logprob for t in e.top_logprobs]
        assert values == sorted(values, reverse=True)
        best = np.sort(want)[::-1][:top]
        assert np.allclose(values, best, atol=TOL), (values, best)
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token
        if greedy and top:
            assert e.top_logprobs[0].token == e.token and e.top_logprobs[0].logprob == e.logprob


def test_chat_logprobs_equal_onnxruntime_and_stream_agrees(client, live, ref, texts):
    kw = dict(model="llama", messages=MSG, max_tokens=8, temperature=0, logprobs=True, top_logprobs=5, extra_body={"ignore_eos": True})
    r = client.chat.completions.create(**kw)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens == 8
    assert "".join(e.token for e in content) == r.choices[0].message.content
    prompt = live.runtime.chat.formatter.format_chat(MSG).ids
    _check_against_ref(prompt, content, texts, ref, top=5, greedy=True)
    chunks = list(client.chat.completions.create(**kw, stream=True))
    streamed = [e for c in chunks for e in ((c.choices[0].logprobs.content or []) if c.choices[0].logprobs else [])]
    assert [(e.token, e.logprob, [t.token for t in e.top_logprobs]) for e in streamed] == \
        [(e.token, e.logprob, [t.token for t in e.top_logprobs]) for e in content]
    for c in chunks:  # each chunk carries the tokens whose text it carries
        lp = c.choices[0].logprobs
        if c.choices[0].delta.content and lp is not None:
            assert "".join(e.token for e in lp.content) == c.choices[0].delta.content


def test_sampled_logprobs_are_the_raw_distribution(client, live, ref, texts):
    """With temperature and top_p the tokens are drawn, but their logprobs are log_softmax of the raw logits (vLLM's default)."""
    r = client.chat.completions.create(model="llama", messages=MSG, max_tokens=6, temperature=1.7, top_p=0.9, seed=7,
                                       logprobs=True, top_logprobs=0, extra_body={"ignore_eos": True, "repetition_penalty": 1.3})
    content = r.choices[0].logprobs.content
    assert len(content) == 6
    _check_against_ref(live.runtime.chat.formatter.format_chat(MSG).ids, content, texts, ref, top=0, greedy=False)


def test_without_logprobs_none_come_back(client):
    r = client.chat.completions.create(model="llama", messages=MSG, max_tokens=3, temperature=0)
    assert r.choices[0].logprobs is None
    for c in client.chat.completions.create(model="llama", messages=MSG, max_tokens=3, temperature=0, stream=True):
        assert not c.choices or c.choices[0].logprobs is None


def test_completions_logprobs_legacy_shape(client, ref, texts):
    prompt = [1, 17, 42, 99, 250]
    r = client.completions.create(model="llama", prompt=prompt, max_tokens=6, temperature=0, logprobs=3, extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 6
    assert "".join(lp.tokens) == r.choices[0].text
    assert lp.text_offset == [sum(len(t) for t in lp.tokens[:k]) for k in range(6)]
    whole = all("\ufffd" not in t for t in lp.tokens)  # else a token's bytes are not in its text
    ids = _ids([{"bytes": list(t.encode())} for t in lp.tokens], texts) if whole else None
    for k, (tok, value, top) in enumerate(zip(lp.tokens, lp.token_logprobs, lp.top_logprobs)):
        assert tok in top and top[tok] == value and len(top) <= 4  # the 3 likeliest and the chosen one
        assert len(top) >= 3 or "\ufffd" in top  # fewer only where tokens' texts coincide (parts of characters)
        assert max(top.values()) == value  # greedy: the chosen token is the likeliest
        if ids is not None:
            assert abs(value - ref(prompt + ids[:k])[ids[k]]) < TOL
    chunks = list(client.completions.create(model="llama", prompt=prompt, max_tokens=6, temperature=0, logprobs=3, stream=True,
                                            extra_body={"ignore_eos": True}))
    streamed = [(t, v, o) for c in chunks if c.choices and c.choices[0].logprobs
                for t, v, o in zip(c.choices[0].logprobs.tokens, c.choices[0].logprobs.token_logprobs, c.choices[0].logprobs.text_offset)]
    assert streamed == list(zip(lp.tokens, lp.token_logprobs, lp.text_offset))


def test_echo_scores_the_prompt_as_lm_eval_asks(client, ref, texts):
    """lm-eval's local-completions loglikelihood: token-id prompts, echo, logprobs 1, max_tokens 1; the prompt's tokens
    come first (the first with null), each scored after the ones before it, then the generated token."""
    prompts = [[1, 17, 42, 99, 250, 3], [1, 5, 6]]
    r = client.completions.create(model="llama", prompt=prompts, max_tokens=1, temperature=0, echo=True, logprobs=1,
                                  extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1]
    for c, prompt in zip(r.choices, prompts):
        lp = c.logprobs
        assert len(lp.tokens) == len(prompt) + 1 and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
        markers = {texts.info(i)[0] for i in texts.special}  # control tokens (BOS ...): not in the text, they take no room
        shown = [t if t not in markers else "" for t in lp.tokens]
        assert "".join(shown) == c.text and lp.text_offset == [sum(len(t) for t in shown[:k]) for k in range(len(shown))]
        assert [texts.info(i)[0] for i in prompt] == lp.tokens[:len(prompt)]
        for k in range(1, len(prompt)):
            want = ref(prompt[:k])
            assert abs(lp.token_logprobs[k] - want[prompt[k]]) < TOL
            best = texts.info(int(np.argmax(want)))[0]
            assert best in lp.top_logprobs[k] and abs(lp.top_logprobs[k][best] - want.max()) < TOL
        assert abs(lp.token_logprobs[-1] - ref(prompt).max()) < TOL  # greedy
    streamed = list(client.completions.create(model="llama", prompt=prompts[0], max_tokens=1, temperature=0, echo=True, logprobs=1,
                                              stream=True, extra_body={"ignore_eos": True}))
    tokens = [t for ch in streamed if ch.choices and ch.choices[0].logprobs for t in ch.choices[0].logprobs.tokens]
    values = [v for ch in streamed if ch.choices and ch.choices[0].logprobs for v in ch.choices[0].logprobs.token_logprobs]
    assert tokens == r.choices[0].logprobs.tokens and values == r.choices[0].logprobs.token_logprobs


def test_echo_of_a_text_prompt_shows_no_bos_the_client_did_not_send(client, live, ref, texts):
    """A text prompt's tokens as the client sent them: the BOS the tokenizer puts in front was listed as a token (with
    null logprob, taking no room) though the text has none; OpenAI and vLLM show no such token. The first token shown is
    scored after that BOS. (Token-id prompts are shown as sent: test_echo_scores_the_prompt_as_lm_eval_asks.)"""
    tok = live.runtime.chat.engine.tokenizer
    prompt = "The quick brown fox"
    ids, own = tok.encode(prompt).ids, tok.encode(prompt, add_special_tokens=False).ids
    assert len(ids) == len(own) + 1 and ids[0] in texts.special, (ids, own)  # the tokenizer adds a BOS
    for max_tokens in (0, 2):
        r = client.completions.create(model="llama", prompt=prompt, max_tokens=max_tokens, temperature=0, echo=True, logprobs=1,
                                      extra_body={"ignore_eos": True})
        lp = r.choices[0].logprobs
        assert lp.tokens[:len(own)] == [texts.info(i)[0] for i in own] and len(lp.tokens) == len(own) + max_tokens, lp.tokens
        assert "".join(lp.tokens) == r.choices[0].text and r.choices[0].text.startswith(prompt)
        assert lp.text_offset == [sum(len(t) for t in lp.tokens[:k]) for k in range(len(lp.tokens))]
        assert all(v is not None for v in lp.token_logprobs) and all(d is not None for d in lp.top_logprobs)
        for k in range(len(own)):  # each scored after the BOS and the tokens before it
            assert abs(lp.token_logprobs[k] - ref(ids[:k + 1])[own[k]]) < TOL
    streamed = list(client.completions.create(model="llama", prompt=prompt, max_tokens=2, temperature=0, echo=True, logprobs=1,
                                              stream=True, extra_body={"ignore_eos": True}))
    assert [t for ch in streamed if ch.choices and ch.choices[0].logprobs for t in ch.choices[0].logprobs.tokens] == lp.tokens


def test_a_prompt_to_score_with_a_token_the_model_never_writes_is_a_400(client, live, texts):
    """Scoring forces each prompt token in turn; BOS, pad or unk after the first token cannot be forced (the engine never
    writes them), and such a prompt was a 500 "scoring the prompt failed; retry". It is a 400 naming the token; the same
    prompt without echo and logprobs is served."""
    tok = live.runtime.chat.engine.tokenizer
    bos = tok.encode("x").ids[0]
    assert bos in live.runtime.chat.engine.never_generated_set
    for prompt in ([bos, 17, bos, 42], texts.info(bos)[0] + "The fox"):
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model="llama", prompt=prompt, max_tokens=1, echo=True, logprobs=1)
        assert e.value.body["param"] == "prompt" and "cannot be scored" in e.value.body["message"], e.value.body
        assert client.completions.create(model="llama", prompt=prompt, max_tokens=1).choices[0].finish_reason


def test_max_tokens_0_with_echo_scores_the_prompt_alone(client, live, ref):
    """OpenAI's and vLLM's prompt scoring: echo, logprobs, max_tokens 0: the prompt's tokens and nothing generated."""
    prompt = [1] + [5 + (k * 37) % 390 for k in range(39)]  # 40 tokens: scored in three segments (1-16, 17-32, 33-39)
    r = client.completions.create(model="llama", prompt=prompt, max_tokens=0, echo=True, logprobs=0)
    c = r.choices[0]
    assert c.finish_reason == "length" and r.usage.completion_tokens == 0 and len(c.logprobs.tokens) == len(prompt)
    assert all(abs(c.logprobs.token_logprobs[k] - ref(prompt[:k])[prompt[k]]) < TOL for k in range(1, len(prompt)))
    status, _, raw = live.request("POST", "/v1/completions", {"model": "llama", "prompt": "hi", "max_tokens": 0})
    assert status == 400 and json.loads(raw)["error"]["param"] == "max_tokens"
    long = [5 + k % 300 for k in range(600)]  # past the 512-token context: a 400 that says so, not a 503
    status, _, raw = live.request("POST", "/v1/completions", {"model": "llama", "prompt": long, "max_tokens": 0, "echo": True,
                                                              "logprobs": 1})
    assert status == 400 and "context" in json.loads(raw)["error"]["message"], raw


def test_logprobs_with_json_mode_and_stop_strings(client):
    schema = {"type": "object", "properties": {"color": {"enum": ["red", "brown"]}}, "required": ["color"], "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "c", "schema": schema}}
    r = client.chat.completions.create(model="llama", messages=MSG, max_tokens=120, temperature=0, logprobs=True, top_logprobs=2,
                                       response_format=fmt)
    assert json.loads(r.choices[0].message.content)["color"] in ("red", "brown")
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens and all(len(e.top_logprobs) == 2 for e in content)
    base = client.chat.completions.create(model="llama", messages=MSG, max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
    text = base.choices[0].message.content
    stop = text[len(text) // 2: len(text) // 2 + 2]
    assert stop.strip()
    r = client.chat.completions.create(model="llama", messages=MSG, max_tokens=12, temperature=0, logprobs=True, stop=[stop],
                                       extra_body={"ignore_eos": True})
    assert stop not in r.choices[0].message.content and r.choices[0].finish_reason == "stop"
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens  # every generated token, the one that completed the stop string too
    assert "".join(e.token for e in content).startswith(r.choices[0].message.content)


def test_n_choices_each_get_logprobs(client):
    r = client.chat.completions.create(model="llama", messages=MSG, max_tokens=4, temperature=1.0, seed=3, n=3, logprobs=True,
                                       top_logprobs=1, extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1, 2]
    for c in r.choices:
        assert "".join(e.token for e in c.logprobs.content) == c.message.content and len(c.logprobs.content) == 4


@pytest.mark.parametrize("path,body,param", [
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": -1}, "top_logprobs"),
    ("/v1/chat/completions", {"top_logprobs": 2}, "top_logprobs"),  # OpenAI: top_logprobs needs logprobs true
    ("/v1/chat/completions", {"logprobs": False, "top_logprobs": 3}, "top_logprobs"),
    ("/v1/chat/completions", {"logprobs": 1}, "logprobs"),
    ("/v1/chat/completions", {"logprobs": True, "rag": {"k": 2}}, "logprobs"),
    ("/v1/completions", {"logprobs": 21}, "logprobs"),
    ("/v1/completions", {"logprobs": -1}, "logprobs"),
    ("/v1/completions", {"logprobs": True}, "logprobs"),
    ("/v1/completions", {"logprobs": 2, "rag": {"k": 2}}, "logprobs"),
])
def test_bad_logprobs_values_are_clear_400s(live, path, body, param):
    base = {"model": "llama", "max_tokens": 2}
    base.update({"messages": MSG} if "chat" in path else {"prompt": "hi"})
    status, _, raw = live.request("POST", path, {**base, **body})
    assert status == 400, raw
    err = json.loads(raw)["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["type"] == "invalid_request_error"
    assert err["param"] == param and "Traceback" not in err["message"], err


def test_openapi_lists_the_logprobs_fields(live):
    _, _, body = live.request("GET", "/openapi.json")
    schemas = json.loads(body)["components"]["schemas"]
    chat, comp = schemas["ChatCompletionRequest"]["properties"], schemas["CompletionRequest"]["properties"]
    assert "logprobs" in chat and "top_logprobs" in chat and "logprobs" in comp
    assert "20" in json.dumps(chat["top_logprobs"]) and "TopLogprob" in schemas


def test_token_bytes_of_partial_characters(tiny_bundles):
    """A byte-level token that is part of a character: bytes carries the raw byte, token U+FFFD (as OpenAI's)."""
    from tokenizers import Tokenizer

    from edge_agent.engine.bundle import load_bundle

    tok = Tokenizer.from_file(str(load_bundle(tiny_bundles["llama"]).tokenizer_file))
    t = TokenTexts(tok)
    ids = tok.encode("é€", add_special_tokens=False).ids
    joined = b"".join(bytes(t.info(i)[1]) for i in ids)
    assert joined.decode() == "é€"
    partial = [i for i in ids if "\ufffd" in t.info(i)[0]]
    assert partial, [t.info(i) for i in ids]
    for i in partial:
        raw = bytes(t.info(i)[1])
        with pytest.raises(UnicodeDecodeError):
            raw.decode("utf-8")
