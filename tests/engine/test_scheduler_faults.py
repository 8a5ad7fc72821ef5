"""Injected faults in every part of the scheduler's loop: each handle ends, the others go on, or the loop says it is dead."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import EngineError, SamplingParams

PROMPTS = ["The quick brown fox", "Paris is the capital", "def add(a, b):", "Numbers: 0 1 2"]
N = 12


@pytest.fixture(scope="module")
def reference(llama_engine):
    """Greedy tokens of each prompt, run alone on a fresh scheduler."""
    s = BatchScheduler(llama_engine, prefill_chunk=8).start()
    try:
        return {p: s.generate(p, SamplingParams(max_tokens=N, ignore_eos=True)).token_ids for p in PROMPTS}
    finally:
        s.stop()


@pytest.fixture()
def sched(llama_engine):
    s = BatchScheduler(llama_engine, prefill_chunk=8, max_step_failures=4).start()
    yield s
    s.stop(wait_s=1.0)


def submit_all(s, **kw):
    return [s.submit(s.engine.encode(p), SamplingParams(max_tokens=N, ignore_eos=True, **kw)) for p in PROMPTS]


def once(exc: BaseException, real):
    """A stand-in for `real` that raises exc on its first call, then behaves."""
    state = {"raised": 0}

    def f(*a, **kw):
        if not state["raised"]:
            state["raised"] = 1
            raise exc
        return real(*a, **kw)

    f.state = state
    return f


def test_failing_prefix_lookup_in_admit_falls_back_to_a_full_prefill(sched, reference, monkeypatch):
    monkeypatch.setattr(sched.prefix_cache, "lookup", once(MemoryError(), sched.prefix_cache.lookup))
    got = [h.result(timeout=30) for h in submit_all(sched)]
    assert sched.prefix_cache.lookup.state["raised"]
    assert [f.token_ids for f in got] == [reference[p] for p in PROMPTS]
    assert sched.alive


@pytest.mark.parametrize("where", ["ensure_capacity", "decode", "prefill"])
def test_a_transient_model_failure_loses_nothing(sched, reference, monkeypatch, where):
    """One MemoryError in a cache allocation, a batched step or a prefill chunk, while a batch runs: retried, same tokens for all."""
    handles = submit_all(sched)
    handles[0].next_event(timeout=10)  # running: the fault hits a live batch
    real = getattr(sched.model, where)
    monkeypatch.setattr(sched.model, where, once(MemoryError("injected"), real))
    handles += submit_all(sched)  # the first batch may be done already; these meet the fault for sure
    got = [h.result(timeout=30) for h in handles]
    assert getattr(sched.model, where).state["raised"]  # the fault did happen
    assert [f.finish_reason for f in got] == ["length"] * len(handles)
    assert [f.token_ids for f in got] == [reference[p] for p in PROMPTS] * (len(handles) // len(PROMPTS))
    assert sched.alive


def test_a_sequence_that_breaks_the_batched_step_ends_alone(sched, reference, monkeypatch):
    """The model step raises whenever one sequence's token is in the batch: only that sequence ends."""
    seen = {t for toks in reference.values() for t in toks}
    poison = next(t for t in range(5, sched.engine.vocab_size) if t not in seen)
    real = sched.model.decode

    def decode(token_ids, lengths):
        if poison in token_ids.tolist():
            raise ValueError("injected: token the step cannot take")
        return real(token_ids, lengths)

    def force(tokens, logits):
        logits[:] = -1e9
        logits[poison] = 0.0
        return logits

    monkeypatch.setattr(sched.model, "decode", decode)
    before = submit_all(sched)
    bad = sched.submit(sched.engine.encode(PROMPTS[0]), SamplingParams(max_tokens=N, ignore_eos=True, logits_processor=force))
    after = submit_all(sched)
    fin = bad.result(timeout=30)
    assert fin.finish_reason == "error" and "model step failed" in fin.error
    assert fin.token_ids == [poison]  # chosen after its prefill, refused by the first step that fed it
    assert [h.result(timeout=30).token_ids for h in before + after] == [reference[p] for p in PROMPTS] * 2
    assert sched.alive


def test_a_raising_logits_processor_ends_only_its_sequence(sched, reference):
    def boom(tokens, logits):
        if len(tokens) == 3:
            raise RuntimeError("injected processor failure")
        return logits

    handles = submit_all(sched)
    bad = sched.submit(sched.engine.encode(PROMPTS[1]), SamplingParams(max_tokens=N, ignore_eos=True, logits_processor=boom))
    fin = bad.result(timeout=30)
    assert fin.finish_reason == "error" and "injected processor failure" in fin.error
    assert fin.token_ids == reference[PROMPTS[1]][:3]
    assert [h.result(timeout=30).token_ids for h in handles] == [reference[p] for p in PROMPTS]


def test_memory_error_when_shrinking_at_idle_is_survived(sched, reference, monkeypatch):
    calls = []

    def shrink(in_use):
        calls.append(in_use)
        raise MemoryError("injected")

    monkeypatch.setattr(sched.model, "shrink", shrink)
    assert [h.result(timeout=30).token_ids for h in submit_all(sched)] == [reference[p] for p in PROMPTS]
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls, "the idle loop never gave memory back"
    assert sched.alive
    assert [h.result(timeout=30).token_ids for h in submit_all(sched)] == [reference[p] for p in PROMPTS]


@pytest.mark.parametrize("exc", [RuntimeError("injected bug"), SystemExit(3)])
def test_a_loop_that_cannot_go_on_ends_every_handle_and_says_so(llama_engine, exc):
    """Every step raises (or the thread is told to exit): waiting, prefilling and decoding handles all end with error."""
    s = BatchScheduler(llama_engine, prefill_chunk=2, max_step_failures=3).start()
    try:
        long = SamplingParams(max_tokens=200, ignore_eos=True)
        handles = [s.submit(llama_engine.encode(p * 4), long) for p in PROMPTS * 3]  # 12 > 8 slots: some wait
        handles[0].next_event(timeout=10)
        assert s.alive and s.queue_depth > 0

        def broken():
            raise exc

        s._step = broken
        fins = [h.result(timeout=10) for h in handles]
        assert {f.finish_reason for f in fins} == {"error"}
        assert not s.alive and s.failure and type(exc).__name__ in s.failure
        with pytest.raises(EngineError, match="restart"):
            s.submit(llama_engine.encode("x"), SamplingParams(max_tokens=2))
    finally:
        s.stop(wait_s=1.0)


def test_stop_ends_every_handle_even_when_a_step_never_returns(llama_engine):
    s = BatchScheduler(llama_engine, prefill_chunk=8).start()
    release = threading.Event()
    long = SamplingParams(max_tokens=200, ignore_eos=True)
    handles = [s.submit(llama_engine.encode(p), long) for p in PROMPTS * 3]
    handles[0].next_event(timeout=10)
    real = s._step

    def hang():
        release.wait(30)
        real()

    s._step = hang
    t0 = time.monotonic()
    s.stop(grace_s=0.0, wait_s=0.3)
    assert time.monotonic() - t0 < 3
    fins = [h.result(timeout=1) for h in handles]
    assert {f.finish_reason for f in fins} == {"cancelled"}
    release.set()


def test_result_and_events_give_up_after_their_timeout(llama_engine):
    s = BatchScheduler(llama_engine)  # never started: nothing will come
    h = s.submit(llama_engine.encode("a"), SamplingParams(max_tokens=2))
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        h.result(timeout=0.1)
    with pytest.raises(TimeoutError):
        list(h.events(timeout=0.1))
    assert time.monotonic() - t0 < 2
    s.stop(wait_s=0.1)
    assert h.result(timeout=1).finish_reason == "cancelled"  # stop() ends even a never-started queue


def test_sampling_with_nan_logits_ends_only_that_sequence(sched, reference):
    def nan(tokens, logits):
        return np.full_like(logits, np.nan)

    handles = submit_all(sched)
    bad = sched.submit(sched.engine.encode(PROMPTS[2]), SamplingParams(max_tokens=N, temperature=0.7, seed=1, logits_processor=nan))
    assert bad.result(timeout=30).finish_reason == "error"
    assert [h.result(timeout=30).token_ids for h in handles] == [reference[p] for p in PROMPTS]
