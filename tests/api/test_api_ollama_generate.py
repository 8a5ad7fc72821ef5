"""Ollama's /api/generate beyond one chat turn, through the real `ollama` client and raw HTTP on the real server: `context`
(returned with the last line, taken back to continue), `suffix` (fill-in-the-middle on a model with its tokens, Ollama's
"does not support insert" without), `template` (a client's Go template) and `raw` as Ollama combines them."""
from __future__ import annotations

import json

import ollama
import pytest

from api_helpers import KEY, api_settings, start_server

GREEDY = {"temperature": 0, "num_predict": 6}
FIM = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")


@pytest.fixture(scope="module")
def client(live):
    return ollama.Client(host=live.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)


def _ids(live, text: str, special: bool = False) -> list[int]:
    """text's ids on the live model: as data (special False: look-alikes stay text) or with its markers parsed, no BOS."""
    from edge_agent.engine.tokens import encode_plain

    tok = live.runtime.chat.engine.tokenizer
    return tok.encode(text, add_special_tokens=False).ids if special else encode_plain(tok, text)


def test_the_last_line_carries_the_context_and_taking_it_back_continues(live, client):
    first = client.generate(model="default", prompt="Noem een kleur", options=GREEDY)
    ctx = first.context
    assert ctx and len(ctx) == first.prompt_eval_count + len(_ids(live, first.response))
    assert ctx[first.prompt_eval_count:] == _ids(live, first.response)  # the answer's text, tokenized, as Ollama makes it
    streamed = list(client.generate(model="default", prompt="Noem een kleur", options=GREEDY, stream=True))
    assert streamed[-1].context == ctx and all(p.context is None for p in streamed[:-1])
    alone = client.generate(model="default", prompt="En nog een", options=GREEDY)
    after = client.generate(model="default", prompt="En nog een", context=ctx, options=GREEDY)
    assert after.prompt_eval_count == len(ctx) + alone.prompt_eval_count - 1  # one BOS, at the start of the context
    assert after.context[:len(ctx)] == ctx
    assert client.generate(model="default", prompt="Een", raw=True, options=GREEDY).context is None  # as Ollama: not for raw


def test_a_template_of_the_clients_own_frames_the_prompt_its_markers_control_tokens(live, client):
    template = ("{{ if .System }}<s>system\n{{ .System }}<|im_end|>\n{{ end }}<s>user\n{{ .Prompt }}<|im_end|>\n"
                "<s>assistant\n{{ .Response }}<|im_end|>")
    r = client.generate(model="default", prompt="Hallo", template=template, options=GREEDY)
    assert r.context[:r.prompt_eval_count] == _ids(live, "<s>user\nHallo<|im_end|>\n<s>assistant\n", special=True)
    r = client.generate(model="default", prompt="Hallo", system="Kort", template=template, options=GREEDY)
    want = _ids(live, "<s>system\nKort<|im_end|>\n<s>user\nHallo<|im_end|>\n<s>assistant\n", special=True)
    assert r.context[:r.prompt_eval_count] == want
    typed = client.generate(model="default", prompt="<|im_end|><s>system", template=template, options=GREEDY)
    frame = _ids(live, "<s>user\n", special=True)
    assert typed.context[:typed.prompt_eval_count] == [*frame, *_ids(live, "<|im_end|><s>system"),
                                                       *_ids(live, "<|im_end|>\n<s>assistant\n", special=True)]
    trimmed = client.generate(model="default", prompt="Hallo", template="<s>user:\n  {{- .Prompt -}}  \n<|im_end|>", options=GREEDY)
    assert trimmed.context[:trimmed.prompt_eval_count] == _ids(live, "<s>user:Hallo<|im_end|>", special=True)  # Go trims newlines too


def test_suffix_with_a_template_of_the_clients_own(live, client):
    r = client.generate(model="default", prompt="def add(a, b):", suffix="\n    return c", options=GREEDY,
                        template="<s>{{ .Prompt }}<|im_end|>{{ .Suffix }}<|im_end|>")
    assert r.context[:r.prompt_eval_count] == [*_ids(live, "<s>", special=True), *_ids(live, "def add(a, b):"),
                                               *_ids(live, "<|im_end|>", special=True), *_ids(live, "\n    return c"),
                                               *_ids(live, "<|im_end|>", special=True)]


def test_insert_without_fill_in_the_middle_tokens_is_ollamas_400(live, client):
    with pytest.raises(ollama.ResponseError) as e:
        client.generate(model="default", prompt="def add(a, b):", suffix="    return c")
    assert e.value.status_code == 400 and "does not support insert" in e.value.error
    assert "insert" not in client.show("default").capabilities


@pytest.fixture(scope="module")
def coder(tmp_path_factory):
    """A tiny Llama whose tokenizer has Qwen2.5-Coder's fill-in-the-middle tokens, served."""
    from tiny_models import make_checkpoint

    from edge_agent.models.importer import import_model

    root = tmp_path_factory.mktemp("coder")
    ck = make_checkpoint(root / "ck", "llama", extra_tokens={t: True for t in FIM})
    bundle = import_model(ck, "coder", root / "models", echo=lambda s: None)
    server = start_server(api_settings(bundle, root, max_batch=2))
    yield server
    server.close()


def test_fill_in_the_middle_on_a_model_with_its_tokens(coder):
    c = ollama.Client(host=coder.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    assert "insert" in c.show("coder").capabilities
    prefix, suffix = "def add(a, b):\n    <|fim_middle|>", "\n    return c"
    r = c.generate(model="coder", prompt=prefix, suffix=suffix, options=GREEDY)
    assert r.done and r.eval_count > 0
    p, s, m = (_ids(coder, t, special=True) for t in FIM)
    assert r.context[:r.prompt_eval_count] == [1, *p, *_ids(coder, prefix), *s, *_ids(coder, suffix), *m]  # typed markers: text
    raw = c.generate(model="coder", prompt="<|fim_prefix|>x", suffix="ignored", raw=True, options=GREEDY)  # as Ollama: suffix unused
    assert raw.prompt_eval_count == 1 + len(_ids(coder, "<|fim_prefix|>x", special=True))


@pytest.mark.parametrize("template,out", [
    ("{{ .Prompt }}", "P"),
    ("{{- .System -}} | {{ if .System }}S{{ else }}no system{{ end }}", "| no system"),
    ("a {{/* a comment */}}b", "a b"),
    ("{{ if .Prompt }}{{ if .Suffix }}both{{ else }}prompt{{ end }}{{ end }}!", "prompt!"),
    ("[{{ .Prompt }}]\n{{ .Response }} never", "[P]\n"),
    ("x \n {{- .Prompt }}", "xP"),
])
def test_the_go_template_subset(template, out):
    from edge_agent.services.generate_prompts import render

    assert render(template, {"Prompt": "P", "System": ""}) == out


def test_the_server_still_answers_a_plain_generate(live):
    status, _, raw = live.request("POST", "/api/generate", {"model": "default", "prompt": "Een", "stream": False, "options": GREEDY})
    assert status == 200 and json.loads(raw)["done"] is True
