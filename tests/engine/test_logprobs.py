"""Per-token logprobs in the engine: the raw distribution's values, only for sequences that ask, none lost to the text's timing."""
from __future__ import annotations

import numpy as np
import pytest

from edge_agent.engine.sampling import token_logprob
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import SamplingParams, TextDelta

PROMPTS = ["The quick brown fox", "Paris is the capital", "def add(a, b):", "Emoji: 🙂 🚀 and"]


def test_token_logprob_is_log_softmax_with_sorted_top():
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal(50_000) * 4).astype(np.float32)
    logits[[7, 9]] = 30.0  # a tie at the top: the lower id first
    ref = logits.astype(np.float64) - np.log(np.exp(logits.astype(np.float64)).sum())
    lp = token_logprob(logits, 123, 5)
    assert abs(lp.logprob - ref[123]) < 1e-5 and lp.token_id == 123
    assert [i for i, _ in lp.top] == [7, 9, *np.argsort(-ref)[2:5].tolist()]
    assert np.allclose([v for _, v in lp.top], np.sort(ref)[::-1][:5], atol=1e-5)
    assert token_logprob(logits, 7, 0).top == []
    with pytest.raises(ValueError):
        token_logprob(np.full(10, np.nan, np.float32), 0, 1)


@pytest.fixture()
def scheduler(llama_engine):
    s = BatchScheduler(llama_engine, max_queue=32, prefill_chunk=8).start()
    yield s
    s.stop()


def test_only_the_asking_sequence_pays_and_the_others_are_unchanged(scheduler):
    enc = scheduler.engine.encode
    plain = [scheduler.submit(enc(p), SamplingParams(max_tokens=16, ignore_eos=True)).result() for p in PROMPTS]
    handles = [scheduler.submit(enc(p), SamplingParams(max_tokens=16, ignore_eos=True, logprobs=3 if i == 1 else None))
               for i, p in enumerate(PROMPTS)]
    mixed = [h.result() for h in handles]
    assert [f.token_ids for f in mixed] == [f.token_ids for f in plain]
    assert [f.logprobs is None for f in mixed] == [True, False, True, True]
    lps = mixed[1].logprobs
    assert [e.token_id for e in lps] == mixed[1].token_ids  # greedy: each token is its row's likeliest
    assert all(e.top[0][0] == e.token_id and len(e.top) == 3 for e in lps)


def test_deltas_carry_every_token_once_even_with_stop_strings_and_penalties(scheduler):
    """The TextDeltas' logprobs and the Finished list agree; a sampled sequence with a repetition penalty gets the raw values."""
    enc = scheduler.engine.encode
    first = scheduler.submit(enc(PROMPTS[3]), SamplingParams(max_tokens=20, ignore_eos=True)).result()
    stop = first.text[8:10]
    h = scheduler.submit(enc(PROMPTS[3]), SamplingParams(max_tokens=20, ignore_eos=True, stop=[stop], logprobs=1))
    events = list(h)
    fin = events[-1]
    sent = [e for ev in events if isinstance(ev, TextDelta) for e in ev.logprobs]
    assert fin.finish_reason == "stop" and len(fin.logprobs) == len(fin.token_ids)
    assert sent == fin.logprobs[: len(sent)]  # the rest (the stop string's tokens) only in Finished
    p = SamplingParams(max_tokens=12, ignore_eos=True, temperature=1.5, repetition_penalty=2.0, seed=5, logprobs=0)
    fin = scheduler.submit(enc(PROMPTS[0]), p).result()
    ids = enc(PROMPTS[0])
    scheduler.stop()  # the model is this thread's from here
    model = scheduler.engine.model
    for k, e in enumerate(fin.logprobs):  # the raw row of each step, recomputed alone in a free slot
        row = model.prefill(7, np.array(ids + fin.token_ids[:k], np.int64), 0).astype(np.float64)
        assert abs(e.logprob - (row[e.token_id] - row.max() - np.log(np.exp(row - row.max()).sum()))) < 2e-3
