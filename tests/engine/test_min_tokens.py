"""min_tokens (vLLM's): no EOS, stop token id or stop string ends a generation before it, on a tiny real model."""
from __future__ import annotations

import numpy as np
import pytest

from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import SamplingParams

PROMPTS = ["The quick brown fox", "Paris is the capital", "def add(a, b):", "Numbers: 0 1 2"]


@pytest.fixture(scope="module")
def scheduler(llama_engine):
    s = BatchScheduler(llama_engine, max_queue=32, prefill_chunk=8).start()
    yield s
    s.stop()


def run(scheduler, prompts, **kw):
    """Each prompt's Finished, all submitted at once (so later tokens come from batched decode steps)."""
    handles = [scheduler.submit(scheduler.engine.encode(p), SamplingParams(**kw)) for p in prompts]
    return [h.result(timeout=60) for h in handles]


def test_eos_is_never_chosen_before_min_tokens(scheduler):
    """A processor that makes EOS the certain choice ends at once; with min_tokens 3, only after three other tokens."""
    eos = sorted(scheduler.engine.stop_token_ids)[0]

    def force_eos(_, logits):
        logits[eos] = 1e9
        return logits

    for temperature in (0.0, 0.8):
        kw = dict(max_tokens=10, temperature=temperature, seed=3, logits_processor=force_eos)
        for r in run(scheduler, PROMPTS, **kw):
            assert r.finish_reason == "stop" and r.token_ids == []
        for r in run(scheduler, PROMPTS, min_tokens=3, **kw):
            assert r.finish_reason == "stop" and len(r.token_ids) == 3, r
            assert eos not in r.token_ids


def test_stop_token_ids_wait_for_min_tokens(scheduler):
    """The greedy path (prefill and batched decode rows alike): a stop id is masked, not just ignored, until min_tokens."""
    plain = run(scheduler, PROMPTS, max_tokens=12, ignore_eos=True)
    for m in (1, 2, 4):
        stops = [[r.token_ids[0]] for r in plain]  # the greedy first token: without min_tokens the answer is empty
        handles = [scheduler.submit(scheduler.engine.encode(p), SamplingParams(max_tokens=12, ignore_eos=True, min_tokens=m,
                                                                               stop_token_ids=ids)) for p, ids in zip(PROMPTS, stops)]
        for h, ids in zip(handles, stops):
            r = h.result(timeout=60)
            assert len(r.token_ids) >= m, (m, r)
            assert ids[0] not in r.token_ids, (m, r)  # masked while < m, a stop after: never in the output
            assert r.finish_reason in ("stop", "length")
    without = run(scheduler, PROMPTS[:1], max_tokens=12, ignore_eos=True, stop_token_ids=[plain[0].token_ids[0]])[0]
    assert without.finish_reason == "stop" and without.token_ids == []


def test_stop_strings_count_only_after_min_tokens(scheduler):
    """A stop string in the first min_tokens tokens' text is kept; the next one after them ends the answer."""
    tok = scheduler.engine.tokenizer
    checked = 0
    for prompt, full in zip(PROMPTS, run(scheduler, PROMPTS, max_tokens=24, ignore_eos=True)):
        for m in (1, 3):
            head = tok.decode(full.token_ids[:m])
            if not head or not full.text.startswith(head):
                continue
            stop = head.strip()[-1:] or head[-1]  # a character of the first m tokens' text
            cut = full.text.find(stop, len(head))
            expect = full.text if cut < 0 else full.text[:cut]
            before = run(scheduler, [prompt], max_tokens=24, ignore_eos=True, stop=[stop])[0]
            assert before.finish_reason == "stop" and len(before.text) < len(head)  # min_tokens 0: ends inside the head
            r = run(scheduler, [prompt], max_tokens=24, ignore_eos=True, stop=[stop], min_tokens=m)[0]
            assert r.text == expect, (m, stop, full.text, r.text)
            assert r.finish_reason == ("length" if cut < 0 else "stop")
            checked += 1
    assert checked >= 4


def test_min_tokens_is_validated():
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="min_tokens"):
            SamplingParams(max_tokens=4, min_tokens=bad).validate()
    with pytest.raises(ValueError, match=r"min_tokens \(5\) must be at most max_tokens \(4\)"):
        SamplingParams(max_tokens=4, min_tokens=5).validate()
    assert SamplingParams(max_tokens=4, min_tokens=4).validate().min_tokens == 4


def test_suppress_copies_and_ignores_ids_past_the_vocabulary():
    from edge_agent.engine.sampling import suppress

    logits = np.arange(5, dtype=np.float32)
    out = suppress(logits, [4, 1, 99])
    assert list(logits) == [0, 1, 2, 3, 4] and int(np.argmax(out)) == 3 and np.isneginf(out[[1, 4]]).all()
