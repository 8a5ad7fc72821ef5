"""Prompt formatting from the bundle: chat templates (sandboxed), base-model transcripts, JSON-mode instruction."""
from __future__ import annotations

import pytest

from edge_agent.services.errors import InvalidRequestError
from edge_agent.services.prompts import PromptFormatter

CHATML = (
    "{{ bos_token }}{% for m in messages %}"
    "{{ m['role'] }}: {{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
STRICT = "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{{ m['content'] }}{% endfor %}"


@pytest.fixture(scope="module")
def tok(llama_engine):
    return llama_engine.tokenizer


def test_transcript_for_base_models(tok):
    f = PromptFormatter({"type": "completion", "user": "User: ", "assistant": "Assistant:"}, tok, bos_token_id=1)
    assert f.kind == "completion"
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi "}, {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Capital of France?"}]
    out = f.format_chat(msgs)
    assert out.text == "Be brief.\n\nUser: Hi\nAssistant: Hello.\nUser: Capital of France?\nAssistant:"
    assert out.stop == ["\nUser:", "\nAssistant:"] and out.prefill == ""
    assert out.ids[0] == 1 and out.ids.count(1) == 1  # one BOS, from the tokenizer
    js = f.format_chat(msgs[1:2], json_mode=True)
    assert js.text.endswith("Assistant:") and js.prefill == "" and "JSON" in js.text  # the grammar mask makes the JSON


def test_default_transcript_is_question_and_answer(tok):
    f = PromptFormatter({"type": "completion"}, tok)
    out = f.format_chat([{"role": "user", "content": "What is the capital of France?"}])
    assert out.text == "Question: What is the capital of France?\nAnswer:" and out.stop == ["\nQuestion:", "\nAnswer:"]


def test_chat_template_rendered_in_a_sandbox(tok):
    f = PromptFormatter({"type": "chat", "template": CHATML}, tok, bos_token_id=1, eos_token_id=2)
    assert f.kind == "chat"
    out = f.format_chat([{"role": "developer", "content": "Rules."}, {"role": "user", "content": "Hi"}])
    assert out.text == "<s>system: Rules.<|im_end|>\nuser: Hi<|im_end|>\nassistant: "
    assert out.ids[0] == 1 and out.ids.count(1) == 1  # BOS from the template, not added twice
    im_end = tok.token_to_id("<|im_end|>")
    assert im_end in out.ids  # special tokens in the template become their ids
    js = f.format_chat([{"role": "user", "content": "Hi"}], json_mode=True)
    assert js.text.endswith("assistant: ") and js.text.startswith("<s>system: Respond with one JSON object only.")


def test_template_refusals_and_sandbox_are_400s(tok):
    f = PromptFormatter({"type": "chat", "template": STRICT}, tok)
    with pytest.raises(InvalidRequestError, match="System role not supported"):
        f.format_chat([{"role": "system", "content": "x"}, {"role": "user", "content": "y"}])
    evil = PromptFormatter({"type": "chat", "template": "{{ messages.__class__.__mro__[1].__subclasses__() }}"}, tok)
    with pytest.raises(InvalidRequestError, match="could not format"):
        evil.format_chat([{"role": "user", "content": "y"}])
