"""JSON mode: the prefix checker, the guard's completion of any prefix, and the logits processor under the engine hook."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from edge_agent.services import json_mode
from edge_agent.services.json_mode import JsonGuard, JsonPrefix

DOCS = [
    {}, {"a": 1}, {"a": [1, 2.5, -3e-2, 0, -0.0, 1E+9]}, {"k": {"n": None, "t": True, "f": False}},
    {"s": "quote \" backslash \\ slash / \b\f\n\r\t unicode \u00e9 \u4e2d emoji 🙂 ctl \u0001"},
    {"nested": [[[], {}], [{"x": [{"y": "z"}]}]]}, {"": ""}, {"a": 1, "b": [True, None, "x"]},
]


@pytest.mark.parametrize("doc", DOCS)
@pytest.mark.parametrize("indent", [None, 2])
def test_every_prefix_of_valid_json_is_accepted_and_completes(doc, indent):
    text = json.dumps(doc, indent=indent, ensure_ascii=False)
    st = JsonPrefix()
    for i, ch in enumerate(text):
        assert st.feed(ch), (text, i)
        completed = text[: i + 1] + st.closing()
        assert isinstance(json.loads(completed), dict), completed
    assert st.complete and st.closing() == ""
    assert not st.feed(" ")  # nothing follows the object: generation stops there
    assert not JsonPrefix().accepts("[1]") and not JsonPrefix().accepts('"x"')  # the top level is an object


@pytest.mark.parametrize("bad", ['{a', '{"a" 1}', '{"a":01}', '{"a":1,}', '{"a":tru}', '{"a":-}', '{"a":1.}', '{"a":"\x01"}',
                                 '{"a":"\\x"}', '{"a":"\\u12g4"}', '{"a":[1 2]}', '{"a":1]', '{}}', '{"a":nul '])
def test_invalid_text_is_refused_and_the_guard_still_gives_valid_json(bad):
    g = JsonGuard()
    out = g.feed(bad)
    assert g.stopped and g.broken
    assert isinstance(json.loads(out + g.closing()), dict)


def test_guard_on_random_text_always_ends_in_valid_json():
    rng = random.Random(0)
    alphabet = list('{}[]":,.-+eE0123456789 \n\tabcdefnrtul\\/') + ["true", "false", "null", '"k"', "\\u00e9"]
    for _ in range(3000):
        g = JsonGuard("{")
        text = "{" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        out = "{" + g.feed(text[1:])
        assert isinstance(json.loads(out + g.closing()), dict), (text, out)


def test_whitespace_runs_and_depth_are_bounded():
    assert not JsonPrefix().accepts("{" + " " * 100)
    assert not JsonPrefix().accepts('{"a":' + "[" * 100)


@pytest.fixture(scope="module")
def table(llama_engine):
    return json_mode.TokenTable(llama_engine.tokenizer, llama_engine.vocab_size, llama_engine.stop_token_ids)


def test_token_table_texts_concatenate_like_the_decoder(table, llama_engine):
    ids = llama_engine.encode('{"name": "fox", "legs": 4}', add_special_tokens=False)
    assert "".join(table.texts[i] for i in ids) == llama_engine.decode(ids)


def test_processor_masks_to_valid_tokens(table):
    rng = np.random.default_rng(0)
    proc = json_mode.JsonLogitsProcessor(table, prefix="{", want=1)
    ids: list[int] = []
    for _ in range(200):
        logits = rng.normal(size=len(table.texts)).astype(np.float32)
        masked = proc(ids, logits)
        tok = int(np.argmax(masked))
        if proc.state.complete or tok in set(table.stop_ids.tolist()):
            break
        assert proc.state.accepts(table.texts[tok])
        ids.append(tok)
    text = "{" + "".join(table.texts[i] for i in ids)
    g = JsonGuard()
    assert g.feed(text) == text and not g.broken
    assert isinstance(json.loads(text + g.closing()), dict)


def _hooked(monkeypatch):
    """Simulate the proposed engine hook: SamplingParams.logits_processor is applied before each choice."""
    from edge_agent.engine import sampling, scheduler

    plain_is_greedy = sampling.is_greedy
    plain_choose = scheduler.BatchScheduler._choose

    def is_greedy(p):
        return getattr(p, "logits_processor", None) is None and plain_is_greedy(p)

    def choose(self, s, logits):
        proc = getattr(s.params, "logits_processor", None)
        if proc is not None:
            logits = proc(s.tokens, np.array(logits, copy=True))
        return plain_choose(self, s, logits)

    monkeypatch.setattr(scheduler, "is_greedy", is_greedy)
    monkeypatch.setattr(scheduler.BatchScheduler, "_choose", choose)
    monkeypatch.setattr(json_mode, "ENGINE_HOOK", True)


def test_with_the_engine_hook_the_model_writes_the_json_itself(monkeypatch, tiny_bundles, api_tmp):
    from api_helpers import api_settings

    from edge_agent.runtime import build_runtime
    from edge_agent.services.chat import SamplingOptions

    _hooked(monkeypatch)
    rt = build_runtime(api_settings(tiny_bundles["llama"], api_tmp, max_batch=4), load_documents=False)
    try:
        msgs = [{"role": "user", "content": "Describe a fox as JSON."}]
        for temperature in (0.0, 0.8):
            gen = rt.chat.chat(msgs, SamplingOptions(max_tokens=60, temperature=temperature, seed=1), n=2, json_object=True)
            results = gen.collect()
            for r, c in zip(results, gen.choices):
                assert isinstance(json.loads(r.text), dict), r.text
                assert not c.guard.broken  # never cut short: every token the model chose kept the JSON valid
            assert any(len(r.text) > 2 for r in results)
    finally:
        rt.close()
