"""User first: an interactive request interrupts the batch step in flight, is prefilled before the next batch
step, and a batch prompt it preempts keeps its cache; all asserted on the order of real model calls."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import BATCH_PRIORITY, SamplingParams, StepInterrupted

PROMPTS = ["The quick brown fox", "Paris is the capital", "def add(a, b):", "Once upon a time"]
USER = "SELECT * FROM"
LONG = " ".join(["De snelle bruine vos springt over de luie hond. Amsterdam is"] * 12)
N = 200


def _params(n: int) -> SamplingParams:
    return SamplingParams(max_tokens=n, ignore_eos=True)


@pytest.fixture(scope="module")
def reference(llama_engine):
    """{prefill chunk: {prompt: tokens alone}} (a prompt's chunking may change the last bits of its logits)."""
    out = {}
    for chunk in (8, 64):
        s = BatchScheduler(llama_engine, prefill_chunk=chunk, batch_prefill_chunk=chunk).start()
        try:
            out[chunk] = {p: s.generate(p, _params(N)).token_ids for p in PROMPTS + [USER]}
            out[chunk][LONG] = s.generate(LONG, _params(8)).token_ids
        finally:
            s.stop()
    return out


class Recorder:
    """Wraps the model's prefill/decode: logs every call (and whether it was interrupted) and can hold one call
    in flight until `release()` says so, to place an arrival exactly inside a step."""

    def __init__(self, s: BatchScheduler, monkeypatch, user_ids: list[int]):
        self.s, self.user_ids, self.calls = s, user_ids, []
        self.hold_when = None  # (kind, predicate) of the call to hold
        self.release = lambda: s.model.run_options.terminate  # what ends the hold (default: an interrupt)
        self.holding = threading.Event()
        self._prefill, self._decode = s.model.prefill, s.model.decode
        monkeypatch.setattr(s.model, "prefill", self.prefill)
        monkeypatch.setattr(s.model, "decode", self.decode)

    def _maybe_hold(self, kind: str, info) -> None:
        if self.hold_when and self.hold_when[0] == kind and self.hold_when[1](info):
            self.hold_when = None
            self.holding.set()
            end = time.monotonic() + 10
            while not self.release() and time.monotonic() < end:
                time.sleep(0.001)

    def _call(self, entry, fn, *args):
        try:
            out = fn(*args)
        except StepInterrupted:
            self.calls.append(entry + ("interrupted",))
            raise
        self.calls.append(entry + ("ok",))
        return out

    def prefill(self, slot, ids, start):
        who = "user" if list(ids[:4]) == self.user_ids[start:start + 4] else "batch"
        self._maybe_hold("prefill", (who, start))
        return self._call(("prefill", who, start), self._prefill, slot, ids, start)

    def decode(self, tokens, lengths):
        rows = len(tokens)
        batch_only = all(q.batch for q in self.s._decoding[:rows])
        self._maybe_hold("decode", (rows, batch_only))
        return self._call(("decode", rows, batch_only), self._decode, tokens, lengths)

    def since_interrupt(self) -> list[tuple]:
        """The calls from the first interrupted one on."""
        first = next((i for i, c in enumerate(self.calls) if c[-1] == "interrupted"), len(self.calls))
        return self.calls[first:]


def test_runner_interrupt_stops_a_step_that_is_redone_exactly(llama_engine):
    m = llama_engine.model
    ids = np.asarray(llama_engine.encode(LONG)[:40], np.int64)
    want = m.prefill(0, ids, 0).copy()
    step = m.decode(np.asarray([5], np.int64), np.asarray([40], np.int64)).copy()
    m.interrupt()
    try:
        with pytest.raises(StepInterrupted):
            m.prefill(0, ids, 0)
        with pytest.raises(StepInterrupted):
            m.decode(np.asarray([5], np.int64), np.asarray([40], np.int64))
    finally:
        m.clear_interrupt()
    assert np.array_equal(m.prefill(0, ids, 0), want)
    assert np.array_equal(m.decode(np.asarray([5], np.int64), np.asarray([40], np.int64)), step)


def test_a_user_interrupts_a_batch_decode_step_and_is_prefilled_before_the_next_one(llama_engine, reference, monkeypatch):
    s = BatchScheduler(llama_engine, prefill_chunk=8, reserved_interactive_slots=2).start()
    rec = Recorder(s, monkeypatch, llama_engine.encode(USER))
    try:
        rec.hold_when = ("decode", lambda info: info == (len(PROMPTS), True) and s._prefilling is None)
        batch = [s.submit(llama_engine.encode(p), _params(N), priority=BATCH_PRIORITY) for p in PROMPTS]
        assert rec.holding.wait(10), "the batch never decoded all its rows together"
        user = s.submit(llama_engine.encode(USER), _params(4))
        fin = user.result(timeout=30)
        calls = rec.since_interrupt()
        # the held batch-only step was stopped; the user's prefill came next (both chunks: no batch step between),
        # then a step with the user's row
        assert len(llama_engine.encode(USER)) in range(9, 17)
        assert calls[0] == ("decode", len(PROMPTS), True, "interrupted"), rec.calls[-8:]
        assert calls[1:3] == [("prefill", "user", 0, "ok"), ("prefill", "user", 8, "ok")], calls[:5]
        assert calls[3] == ("decode", len(PROMPTS) + 1, False, "ok"), calls[:5]
        assert fin.usage.waited_for == f"batch decode {len(PROMPTS)} (interrupted)"
        assert fin.token_ids == reference[8][USER][:4]
        assert [b.result(timeout=60).token_ids for b in batch] == [reference[8][p] for p in PROMPTS]  # the redo lost nothing
        assert s.step_stats["interrupted_steps"] == 1
    finally:
        s.stop()


@pytest.mark.parametrize("gives_way", [False, True])
def test_a_user_interrupts_a_batch_prompt_which_resumes_from_its_kept_cache(llama_engine, reference, monkeypatch, gives_way):
    long_ids = llama_engine.encode(LONG)
    assert 140 < len(long_ids) < 240
    # gives_way: a budget of 160 positions holds the kept 128 only if the preempted prompt's own cache is not counted as live
    budget = {"prefix_cache_bytes": 160 * llama_engine.model.host_position_bytes, "prefix_cache_gives_way": True} if gives_way else {}
    s = BatchScheduler(llama_engine, prefill_chunk=64, batch_prefill_chunk=64, reserved_interactive_slots=2, **budget).start()
    rec = Recorder(s, monkeypatch, llama_engine.encode(USER))
    try:
        rec.hold_when = ("prefill", lambda info: info == ("batch", 128))
        batch = s.submit(long_ids, _params(8), priority=BATCH_PRIORITY)
        assert rec.holding.wait(10)
        user = s.submit(llama_engine.encode(USER), _params(4))
        fin = user.result(timeout=30)
        assert batch.result(timeout=30).token_ids == reference[64][LONG]
        calls = rec.since_interrupt()
        assert calls[0] == ("prefill", "batch", 128, "interrupted") and calls[1] == ("prefill", "user", 0, "ok"), calls[:4]
        # preempted, the batch prompt came back from the prefix cache: its 128 tokens were copied, not prefilled again
        later = [c for c in calls[2:] if c[:2] == ("prefill", "batch")]
        assert later and later[0][2] == 128 and all(c[2] >= 128 for c in later), calls
        assert "interrupted" in fin.usage.waited_for and fin.token_ids == reference[64][USER][:4]
        assert s.preemptions == 1 and s.prefix_cache.hits >= 1
    finally:
        s.stop()


def test_without_interrupts_a_user_still_goes_before_the_decode_step_after_a_chunk(llama_engine, reference, monkeypatch):
    """A model that cannot be interrupted (the GPU path): a user who arrives during a batch prefill chunk is
    prefilled right after it, before the decode step of the batch rows that would follow."""
    s = BatchScheduler(llama_engine, prefill_chunk=64, batch_prefill_chunk=64, reserved_interactive_slots=2).start()
    s._gate.can_interrupt = False
    rec = Recorder(s, monkeypatch, llama_engine.encode(USER))
    rec.release = lambda: s.queue_depth > 0  # hold the chunk until the user is queued, then let it finish
    try:
        batch = [s.submit(llama_engine.encode(p), _params(N), priority=BATCH_PRIORITY) for p in PROMPTS[:2]]
        deadline = time.monotonic() + 10
        while len(s._decoding) < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        rec.hold_when = ("prefill", lambda info: info == ("batch", 64))
        long = s.submit(llama_engine.encode(LONG), _params(8), priority=BATCH_PRIORITY)
        assert rec.holding.wait(10)
        user = s.submit(llama_engine.encode(USER), _params(4))
        fin = user.result(timeout=30)
        i = rec.calls.index(("prefill", "batch", 64, "ok"))
        assert rec.calls[i + 1] == ("prefill", "user", 0, "ok"), rec.calls[i:i + 4]
        assert fin.usage.waited_for == "batch prefill 64" and fin.token_ids == reference[64][USER][:4]
        assert long.result(timeout=30).token_ids == reference[64][LONG]
        assert [b.result(timeout=60).token_ids for b in batch] == [reference[64][p] for p in PROMPTS[:2]]
        assert s.step_stats["interrupted_steps"] == 0
    finally:
        s.stop()
