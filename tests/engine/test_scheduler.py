"""Continuous batching, sampling, stop strings and limits on a tiny real model."""
from __future__ import annotations

import time

import numpy as np
import pytest

from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import ContextLengthError, QueueFullError, SamplingParams, TextDelta

PROMPTS = [
    "The quick brown fox",
    "Paris is the capital",
    "def add(a, b):",
    "De snelle bruine vos springt over de luie hond. Amsterdam is",
    "Numbers: 0 1 2",
    "Emoji: 🙂 🚀 and",
]


@pytest.fixture()
def scheduler(llama_engine):
    s = BatchScheduler(llama_engine, max_queue=32, prefill_chunk=8).start()
    yield s
    s.stop()


def alone(scheduler, prompt, **kw):
    return scheduler.generate(prompt, SamplingParams(**kw))


def test_batched_greedy_equals_alone(scheduler):
    solo = [alone(scheduler, p, max_tokens=24, ignore_eos=True).token_ids for p in PROMPTS]
    handles = [scheduler.submit(scheduler.engine.encode(p), SamplingParams(max_tokens=24, ignore_eos=True)) for p in PROMPTS]
    together = [h.result().token_ids for h in handles]
    assert together == solo
    assert all(len(t) == 24 for t in together)


def test_sequences_join_and_leave_between_steps(scheduler):
    """Different lengths finish at different steps; late arrivals join a running batch."""
    solo = {(p, n): alone(scheduler, p, max_tokens=n, ignore_eos=True).token_ids for p, n in zip(PROMPTS, (5, 30, 12, 20, 3, 25))}
    first = [scheduler.submit(scheduler.engine.encode(p), SamplingParams(max_tokens=n, ignore_eos=True)) for (p, n) in list(solo)[:3]]
    time.sleep(0.05)
    late = [scheduler.submit(scheduler.engine.encode(p), SamplingParams(max_tokens=n, ignore_eos=True)) for (p, n) in list(solo)[3:]]
    got = [h.result().token_ids for h in first + late]
    assert got == list(solo.values())


def test_chunked_prefill_equals_whole(llama_engine):
    long = " ".join(PROMPTS) * 2
    a = BatchScheduler(llama_engine, prefill_chunk=4).start()
    b = BatchScheduler(llama_engine, prefill_chunk=512).start()
    try:
        ra = a.generate(long, SamplingParams(max_tokens=10, ignore_eos=True))
        rb = b.generate(long, SamplingParams(max_tokens=10, ignore_eos=True))
    finally:
        a.stop()
        b.stop()
    assert ra.token_ids == rb.token_ids
    assert ra.usage.prompt_tokens == len(llama_engine.encode(long)) > 40


def test_max_tokens_gives_length_and_counts(scheduler):
    r = alone(scheduler, PROMPTS[0], max_tokens=7, ignore_eos=True)
    assert r.finish_reason == "length"
    assert r.usage.completion_tokens == 7 == len(r.token_ids)
    assert r.usage.prompt_tokens == len(scheduler.engine.encode(PROMPTS[0]))
    assert r.usage.ttft_s > 0 and r.usage.total_s >= r.usage.ttft_s


def test_stop_string_truncates_and_never_leaks(scheduler):
    full = alone(scheduler, PROMPTS[2], max_tokens=30, ignore_eos=True).text
    assert len(full) > 12
    stop = full[8:12]
    assert stop.strip(), full
    r = scheduler.submit(scheduler.engine.encode(PROMPTS[2]), SamplingParams(max_tokens=30, stop=[stop], ignore_eos=True))
    streamed = "".join(ev.text for ev in r if isinstance(ev, TextDelta))
    fin = r.finished
    assert fin.finish_reason == "stop"
    assert fin.text == full[: full.find(stop)]
    assert streamed == fin.text and stop not in streamed


def test_stream_deltas_concatenate_to_text(scheduler):
    h = scheduler.submit(scheduler.engine.encode(PROMPTS[5]), SamplingParams(max_tokens=20, ignore_eos=True))
    deltas = [ev.text for ev in h if isinstance(ev, TextDelta)]
    assert "".join(deltas) == h.finished.text == scheduler.engine.decode(h.finished.token_ids)
    assert all("\ufffd" not in d for d in deltas) or "\ufffd" in h.finished.text


def test_context_limit_is_a_clear_error(scheduler):
    ids = scheduler.engine.encode(PROMPTS[0])
    with pytest.raises(ContextLengthError) as e:
        scheduler.submit(ids, SamplingParams(max_tokens=scheduler.engine.context_length))
    msg = str(e.value)
    assert str(len(ids)) in msg and str(scheduler.engine.context_length) in msg


def test_invalid_sampling_params_are_refused(scheduler):
    ids = scheduler.engine.encode("x")
    for bad in (dict(temperature=float("nan")), dict(temperature=-1), dict(top_p=0), dict(max_tokens=0), dict(top_k=-2)):
        with pytest.raises(ValueError):
            scheduler.submit(ids, SamplingParams(**bad))


def test_seed_makes_sampling_reproducible(scheduler):
    kw = dict(max_tokens=16, temperature=1.0, ignore_eos=True)
    a = alone(scheduler, PROMPTS[1], seed=42, **kw).token_ids
    b = alone(scheduler, PROMPTS[1], seed=42, **kw).token_ids
    c = alone(scheduler, PROMPTS[1], seed=7, **kw).token_ids
    assert a == b
    assert a != c


def test_degenerate_sampling_equals_greedy(scheduler):
    greedy = alone(scheduler, PROMPTS[3], max_tokens=12, ignore_eos=True).token_ids
    for kw in (dict(top_k=1), dict(top_p=1e-6), dict(min_p=1.0)):
        got = alone(scheduler, PROMPTS[3], max_tokens=12, temperature=0.8, seed=1, ignore_eos=True, **kw).token_ids
        assert got == greedy, kw


def test_cancel_frees_the_slot(scheduler):
    h = scheduler.submit(scheduler.engine.encode(PROMPTS[0]), SamplingParams(max_tokens=200, ignore_eos=True))
    next(iter(h))
    h.cancel()
    fin = h.result()
    assert fin.finish_reason == "cancelled"
    deadline = time.monotonic() + 1.0
    while scheduler.active and time.monotonic() < deadline:
        time.sleep(0.01)
    assert scheduler.active == 0


def test_queue_full_and_priority(llama_engine):
    s = BatchScheduler(llama_engine, max_queue=2)  # not started: requests stay queued
    params = SamplingParams(max_tokens=2, ignore_eos=True)
    low = s.submit(llama_engine.encode("a"), params, priority=5)
    high = s.submit(llama_engine.encode("b"), params, priority=0)
    with pytest.raises(QueueFullError):
        s.submit(llama_engine.encode("c"), params)
    s.max_batch = 1
    s.start()
    try:
        low.result(), high.result()
        assert high.finished.usage.queue_s < low.finished.usage.queue_s
    finally:
        s.stop()


def test_timeout_ends_a_generation(scheduler):
    r = scheduler.submit(scheduler.engine.encode(PROMPTS[0]), SamplingParams(max_tokens=200, ignore_eos=True), timeout_s=0.001).result()
    assert r.finish_reason == "timeout"


def test_eos_stops_unless_ignored(llama_engine):
    """Force EOS by making it the only stop-free choice: a stop_token_id equal to the greedy first token."""
    s = BatchScheduler(llama_engine).start()
    try:
        first = s.generate(PROMPTS[0], SamplingParams(max_tokens=1, ignore_eos=True)).token_ids[0]
        r = s.generate(PROMPTS[0], SamplingParams(max_tokens=10, stop_token_ids=[first]))
        assert r.finish_reason == "stop" and r.token_ids == [] and r.text == ""
    finally:
        s.stop()


def test_repetition_penalty_changes_seen_tokens_only():
    from edge_agent.engine.sampling import apply_repetition_penalty

    logits = np.array([2.0, -2.0, 1.0, 3.0], np.float32)
    apply_repetition_penalty(logits, np.array([0, 1, 1]), 2.0)
    assert logits.tolist() == [1.0, -4.0, 1.0, 3.0]


def test_top_k_draws_from_exactly_the_k_largest():
    from edge_agent.engine.sampling import sample

    rng = np.random.default_rng(1)
    logits = rng.standard_normal(5000).astype(np.float32) * 0.01  # flat: every one of the top 5 gets drawn
    top = set(np.argsort(-logits)[:5].tolist())
    picks = {sample(logits.copy(), SamplingParams(temperature=1.0, top_k=5), rng, np.array([], np.int64)) for _ in range(300)}
    assert picks == top


def test_top_candidates_are_exactly_the_k_largest():
    """The thresholded selection against a full argpartition: Gaussian, rounded (ties), masked to -inf
    (a logits processor), constant and sorted (the largest all at one end) vocabularies."""
    from edge_agent.engine.sampling import top_candidates

    rng = np.random.default_rng(2)
    for trial in range(300):
        vocab, k = [(262144, 40), (262144, 1), (50000, 100), (400, 5), (262144, 1024)][trial % 5]
        logits = rng.standard_normal(vocab).astype(np.float32) * rng.uniform(0.01, 10)
        kind = trial % 6
        if kind == 1:
            logits = np.round(logits)
        elif kind == 2:
            logits[rng.random(vocab) < 0.999] = -np.inf
        elif kind == 3:
            logits[:] = 1.0
        elif kind == 4:
            logits = np.sort(logits)
        got = top_candidates(logits, k)
        assert len(set(got.tolist())) == k
        np.testing.assert_array_equal(np.sort(logits[got]), np.sort(logits)[-k:])


def test_top_p_keeps_the_smallest_set_reaching_p():
    from edge_agent.engine.sampling import sample

    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], np.float32))
    rng = np.random.default_rng(0)
    picks = {sample(logits.copy(), SamplingParams(temperature=1.0, top_p=0.7), rng, np.array([], np.int64)) for _ in range(300)}
    assert picks == {0, 1}
    picks = {sample(logits.copy(), SamplingParams(temperature=1.0, min_p=0.5), rng, np.array([], np.int64)) for _ in range(300)}
    assert picks == {0, 1}


def test_without_top_k_the_draw_covers_the_whole_vocabulary():
    """No top_k: tokens past the first 2048 candidates keep their probability (top_p 1, top_p < 1, min_p)."""
    from edge_agent.engine.sampling import sample

    vocab, none = 262144, np.array([], np.int64)
    rng = np.random.default_rng(3)
    logits = np.zeros(vocab, np.float32)
    logits[:1000] = np.log((vocab - 1000) / 1000)  # the 1000 best hold half the mass, the long tail the rest
    picks = np.array([sample(logits.copy(), SamplingParams(temperature=1.0), rng, none) for _ in range(400)])
    assert 0.38 < (picks < 1000).mean() < 0.62
    assert len(set(picks[picks >= 1000].tolist())) > 100

    ramp = np.linspace(0.0, -1.0, vocab, dtype=np.float32)  # flat: the top 30% of the mass needs ~70k tokens
    mass = np.exp(ramp.astype(np.float64))
    need = int(np.searchsorted(np.cumsum(mass) / mass.sum(), 0.3)) + 1
    picks = np.array([sample(ramp.copy(), SamplingParams(temperature=1.0, top_p=0.3), rng, none) for _ in range(200)])
    assert picks.max() < need and picks.max() > 10 * 2048
    picks = np.array([sample(ramp.copy(), SamplingParams(temperature=1.0, min_p=0.9), rng, none) for _ in range(200)])
    assert picks.max() < np.searchsorted(-ramp, -np.log(0.9)) + 1 and picks.max() > 10 * 2048


def test_logits_processor_steers_and_a_failing_one_ends_only_its_sequence(scheduler):
    ids = scheduler.engine.encode(PROMPTS[0])
    target = 42

    def force(tokens, logits):
        logits[:] = -1e9
        logits[target] = 0.0
        return logits

    def broken(tokens, logits):
        logits[:] = np.nan
        return logits

    forced = scheduler.submit(ids, SamplingParams(max_tokens=5, ignore_eos=True, logits_processor=force))
    bad = scheduler.submit(ids, SamplingParams(max_tokens=5, ignore_eos=True, logits_processor=broken))
    plain = scheduler.submit(ids, SamplingParams(max_tokens=5, ignore_eos=True))
    assert forced.result().token_ids == [target] * 5
    fin = bad.result()
    assert fin.finish_reason == "error" and "sampling failed" in fin.error
    assert plain.result().finish_reason == "length" and len(plain.finished.token_ids) == 5


def test_next_event_times_out_then_delivers(llama_engine):
    s = BatchScheduler(llama_engine)  # not started yet
    h = s.submit(llama_engine.encode("a"), SamplingParams(max_tokens=2, ignore_eos=True))
    assert h.next_event(timeout=0.05) is None
    s.start()
    try:
        events = []
        while h.finished is None:
            ev = h.next_event(timeout=5)
            assert ev is not None
            events.append(ev)
        assert h.finished.usage.completion_tokens == 2
    finally:
        s.stop()


def test_prefix_cache_reuses_a_repeated_preamble_exactly(llama_engine):
    preamble = " ".join(PROMPTS) * 3  # well over one 64-token block
    s = BatchScheduler(llama_engine, prefill_chunk=32).start()
    off = BatchScheduler(llama_engine, prefill_chunk=32, prefix_cache_bytes=0).start()
    try:
        first = s.generate(preamble + " First question?", SamplingParams(max_tokens=12, ignore_eos=True))
        second = s.generate(preamble + " Second question?", SamplingParams(max_tokens=12, ignore_eos=True))
        fresh = off.generate(preamble + " Second question?", SamplingParams(max_tokens=12, ignore_eos=True))
    finally:
        s.stop()
        off.stop()
    assert first.usage.cached_tokens == 0
    assert second.usage.cached_tokens >= 64 and second.usage.cached_tokens % 64 == 0
    assert second.token_ids == fresh.token_ids  # a hit gives exactly what a fresh prefill gives
    assert fresh.usage.cached_tokens == 0
