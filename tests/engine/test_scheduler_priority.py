"""Batch priority: reserved interactive slots, preemption of batch work that resumes exactly, and the slot invariants."""
from __future__ import annotations

import random
import threading
import time

import pytest

from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import BATCH_PRIORITY, SamplingParams, TextDelta

PROMPTS = [
    "The quick brown fox",
    "Paris is the capital",
    "def add(a, b):",
    "De snelle bruine vos springt over de luie hond. Amsterdam is",
    "Numbers: 0 1 2",
    "Emoji: 🙂 🚀 and",
    "Once upon a time",
    "SELECT * FROM",
]
N = 200  # long enough that batch work is still running when a user request arrives


@pytest.fixture(scope="module")
def reference(llama_engine):
    s = BatchScheduler(llama_engine, prefill_chunk=8).start()
    try:
        return {p: s.generate(p, SamplingParams(max_tokens=N, ignore_eos=True)).token_ids for p in PROMPTS}
    finally:
        s.stop()


class CheckedScheduler(BatchScheduler):
    """Checks the slot invariants after every step; violations are collected, not raised (the loop would absorb them)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.violations: list[str] = []
        self.steps = 0

    def _step(self):
        super()._step()
        self.steps += 1
        time.sleep(0.002)  # a floor under the step time: on an idle machine the tiny model would finish
        # 200 tokens before the test looks (the assertions count sequences still running)
        with self._cond:
            try:
                self.check_invariants()
            except AssertionError as e:
                self.violations.append(str(e))


def collect(h, timeout=60):
    """(streamed text, Finished) of a handle."""
    text = "".join(ev.text for ev in h.events(timeout) if isinstance(ev, TextDelta))
    return text, h.finished


def test_batch_work_never_takes_the_reserved_slots(llama_engine, reference):
    s = CheckedScheduler(llama_engine, prefill_chunk=8, reserved_interactive_slots=2).start()
    try:
        assert s.batch_slots == s.max_batch - 2
        batch = [s.submit(llama_engine.encode(p), SamplingParams(max_tokens=N, ignore_eos=True), priority=BATCH_PRIORITY)
                 for p in PROMPTS + PROMPTS[:2]]
        deadline = time.monotonic() + 10
        while s.active < s.batch_slots and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.05)
        assert s.active == s.batch_slots and s.queue_depth == len(batch) - s.batch_slots
        user = s.submit(llama_engine.encode(PROMPTS[0]), SamplingParams(max_tokens=8, ignore_eos=True))
        fin = user.result(timeout=30)
        assert fin.token_ids == reference[PROMPTS[0]][:8]
        assert s.preemptions == 0  # a reserved slot was free: nobody had to leave
        assert sum(not b.ended for b in batch) > 0, "the interactive request should finish while batch work still runs"
        assert [b.result(timeout=60).token_ids for b in batch] == [reference[p] for p in PROMPTS + PROMPTS[:2]]
        assert not s.violations, s.violations[:3]
    finally:
        s.stop()


def test_an_interactive_request_preempts_batch_work_which_resumes_exactly(llama_engine, reference):
    """Every slot holds batch work: a user request takes one at once; the preempted sequence recomputes and
    continues, emitting nothing twice, with the tokens it would have produced alone."""
    s = CheckedScheduler(llama_engine, prefill_chunk=8, reserved_interactive_slots=0).start()
    try:
        params = SamplingParams(max_tokens=N, ignore_eos=True)
        batch = [s.submit(llama_engine.encode(p), params, priority=BATCH_PRIORITY) for p in PROMPTS]
        streams: dict[int, list] = {}
        threads = [threading.Thread(target=lambda i=i, b=b: streams.__setitem__(i, collect(b))) for i, b in enumerate(batch)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while (len(s._decoding) < s.max_batch or min(len(q.tokens) for q in s._decoding) < 5) and time.monotonic() < deadline:
            time.sleep(0.002)
        users = [s.submit(llama_engine.encode(p), SamplingParams(max_tokens=6, ignore_eos=True)) for p in PROMPTS[:2]]
        ufins = [u.result(timeout=30) for u in users]
        assert [f.token_ids for f in ufins] == [reference[p][:6] for p in PROMPTS[:2]]
        assert all(f.usage.queue_s < 1.0 for f in ufins)
        assert s.preemptions >= 2
        for t in threads:
            t.join(60)
        for i, p in enumerate(PROMPTS):
            text, fin = streams[i]
            assert fin.finish_reason == "length" and fin.usage.completion_tokens == N
            assert fin.token_ids == reference[p], p
            assert text == fin.text == llama_engine.decode(reference[p])  # nothing emitted twice or lost
        assert not s.violations, s.violations[:3]
    finally:
        s.stop()


def test_slot_invariants_hold_through_joins_cancels_failures_and_preemption(llama_engine, reference, monkeypatch):
    """A randomized mix: interactive and batch requests arriving over time, cancels, stop strings, failing
    processors and transient model-step failures. The invariants hold after every step, every handle ends,
    and every sequence that ran to its length has exactly the tokens it would have alone."""
    rnd = random.Random(1234)
    s = CheckedScheduler(llama_engine, prefill_chunk=4, reserved_interactive_slots=1, max_step_failures=1000).start()
    real = s.model.decode
    inject = threading.Event()

    def flaky(token_ids, lengths):
        if inject.is_set() and rnd.random() < 0.03:
            raise MemoryError("injected")
        return real(token_ids, lengths)

    monkeypatch.setattr(s.model, "decode", flaky)

    def boom(tokens, logits):
        if len(tokens) >= 2:
            raise RuntimeError("injected")
        return logits

    def submit(p, n, priority, **kw):
        h = s.submit(llama_engine.encode(p), SamplingParams(max_tokens=n, ignore_eos=True, **kw), priority=priority)
        runs.append((p, n, kw, h))
        return h

    runs = []
    try:
        for i in range(12):  # a burst of long batch work fills every slot it may take
            submit(rnd.choice(PROMPTS), rnd.randint(100, N), BATCH_PRIORITY)
        deadline = time.monotonic() + 10
        while s.active < s.batch_slots and time.monotonic() < deadline:
            time.sleep(0.001)
        submit(PROMPTS[0], 40, 0)  # takes the reserved slot
        submit(PROMPTS[1], 40, 0)  # finds every slot busy: a batch sequence must leave
        while s.preemptions == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert s.preemptions >= 1
        inject.set()
        for i in range(36):  # then a random mix
            priority = BATCH_PRIORITY if rnd.random() < 0.5 else 0
            kw = {"logits_processor": boom} if rnd.random() < 0.1 else {}
            h = submit(rnd.choice(PROMPTS), rnd.randint(20, N) if priority else rnd.randint(1, 40), priority, **kw)
            if rnd.random() < 0.15:
                threading.Timer(rnd.random() * 0.05, h.cancel).start()
            time.sleep(rnd.random() * 0.01)
        for p, n, kw, h in runs:
            fin = h.result(timeout=120)
            if fin.finish_reason == "length" and not kw:
                assert fin.token_ids == reference[p][:n], (p, n)
            elif kw:
                assert fin.finish_reason in ("error", "cancelled", "length")
        reasons = [h.finished.finish_reason for *_, h in runs]
        assert reasons.count("length") > 20, reasons
        assert s.steps > 50 and not s.violations, s.violations[:3]
        assert s.active == 0 and s.queue_depth == 0
    finally:
        s.stop()


def test_preempted_sampling_continues_its_random_stream(llama_engine):
    """A seeded sampled sequence gives the same tokens whether or not it was preempted (its generator state is kept)."""
    params = dict(max_tokens=30, temperature=0.9, seed=5, ignore_eos=True)
    alone = BatchScheduler(llama_engine, prefill_chunk=8).start()
    try:
        want = alone.generate(PROMPTS[3], SamplingParams(**params)).token_ids
    finally:
        alone.stop()
    s = CheckedScheduler(llama_engine, prefill_chunk=8, reserved_interactive_slots=0).start()
    try:
        fill = [s.submit(llama_engine.encode(p), SamplingParams(max_tokens=N, ignore_eos=True), priority=BATCH_PRIORITY)
                for p in PROMPTS[:7]]
        h = s.submit(llama_engine.encode(PROMPTS[3]), SamplingParams(**params), priority=BATCH_PRIORITY + 1)  # the victim
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (len(s._decoding) == s.max_batch and len(s._decoding[-1].tokens) >= 3):
            time.sleep(0.002)
        user = s.submit(llama_engine.encode(PROMPTS[0]), SamplingParams(max_tokens=4, ignore_eos=True))
        user.result(timeout=30)
        got = h.result(timeout=60)
        assert s.preemptions >= 1 and not s.violations, s.violations[:3]
        assert got.token_ids == want and len(want) == 30
        for f in fill:
            f.result(timeout=60)
    finally:
        s.stop()


def test_batch_prompts_prefill_in_short_chunks_only_while_users_are_served(llama_engine, monkeypatch):
    long = " ".join(PROMPTS)
    s = BatchScheduler(llama_engine, prefill_chunk=32, batch_prefill_chunk=8, interactive_window_s=1.0, prefix_cache_bytes=0).start()
    sizes: list[int] = []  # tokens of every prefill call
    real = s.model.prefill

    def prefill(slot, ids, start):
        sizes.append(len(ids))
        return real(slot, ids, start)

    monkeypatch.setattr(s.model, "prefill", prefill)
    params = SamplingParams(max_tokens=4, ignore_eos=True)

    def batch_chunk() -> int:
        sizes.clear()
        fin = s.submit(llama_engine.encode(long), params, priority=BATCH_PRIORITY).result(timeout=30)
        assert fin.token_ids == alone.token_ids
        return max(sizes)

    try:
        alone = s.submit(llama_engine.encode(long), params, priority=BATCH_PRIORITY).result(timeout=30)
        assert max(sizes) == 32 and batch_chunk() == 32  # no user: full chunks
        user = s.submit(llama_engine.encode(PROMPTS[0]), SamplingParams(max_tokens=N, ignore_eos=True))
        user.next_event(timeout=10)
        assert batch_chunk() == 8 and not user.ended  # a user decodes
        user.cancel()
        user.result(timeout=10)
        assert batch_chunk() == 8  # a user was served a moment ago: more may come
        time.sleep(1.1)
        assert batch_chunk() == 32
    finally:
        s.stop()
