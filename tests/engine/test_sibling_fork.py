"""Choices that share a prompt start from a decoding sibling's cache: only the prompt's last token is prefilled, same output."""
from __future__ import annotations

import numpy as np
import pytest

from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import SamplingParams

PROMPT = list(range(5, 45))  # 40 tokens: below the prefix cache's 64-token block, so only a fork can reuse it


@pytest.fixture()
def scheduler(llama_engine):
    s = BatchScheduler(llama_engine, max_queue=32, prefill_chunk=16).start()
    yield s
    s.stop()


def _params(seed: int | None = None, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=8, ignore_eos=True, temperature=0.0 if seed is None else 1.0, seed=seed, logprobs=2, **kw)


def test_siblings_prefill_one_token_and_match_solo_runs(scheduler):
    solo = [scheduler.submit(PROMPT, _params(seed)).result() for seed in (None, 1, 2, 3)]
    before = scheduler.step_stats["prefill_tokens"]
    with scheduler._cond:  # all queued before the loop admits the first: on a loaded machine it could finish alone
        handles = [scheduler.submit(PROMPT, _params(seed)) for seed in (None, 1, 2, 3)]
    fins = [h.result() for h in handles]
    assert scheduler.step_stats["prefill_tokens"] - before == len(PROMPT) + 3  # the first whole, each sibling its last token
    assert [f.usage.cached_tokens for f in fins] == [0, 39, 39, 39]
    assert [f.token_ids for f in fins] == [f.token_ids for f in solo]
    for f, s in zip(fins, solo):
        assert np.allclose([e.logprob for e in f.logprobs], [e.logprob for e in s.logprobs], atol=1e-4)


def test_a_different_prompt_is_not_forked(scheduler):
    with scheduler._cond:  # all queued before the loop admits a: on a loaded machine a could finish before b arrives (CI saw it)
        a = scheduler.submit(PROMPT, _params())
        b = scheduler.submit(PROMPT[:-1] + [PROMPT[-1] + 1], _params())  # shares 39 tokens: its first 39 positions may come from a
        c = scheduler.submit([7] + PROMPT[1:], _params())  # differs at the first token: nothing to copy
    fa, fb, fc = a.result(), b.result(), c.result()
    assert fb.usage.cached_tokens == 39 and fc.usage.cached_tokens == 0
    assert fb.token_ids == scheduler.submit(PROMPT[:-1] + [PROMPT[-1] + 1], _params()).result().token_ids
