"""The prefix cache's budget is what it holds resident (its entries live in mappings of their own)."""
from __future__ import annotations

import gc

import numpy as np

from edge_agent.engine.prefix_cache import BLOCK, PrefixCache, mapped_bytes, pack


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


LAYERS, N = 18, 7 * BLOCK
# a cache of 8 slots in the shapes of Gemma 3 270M: per layer and kind [slots, 1 kv head, positions, 256]
CACHE = np.random.default_rng(0).standard_normal((2 * LAYERS, 8, 1, N, 256), dtype=np.float32)


def _entry(slot: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Slot's positions as OnnxModel.read_prefix copies them (~16.5 MB)."""
    copies = pack([CACHE[i, slot] for i in range(2 * LAYERS)])
    return copies[:LAYERS], copies[LAYERS:]


def test_pack_keeps_values_and_counts_its_mapping():
    arrays = [np.arange(12, dtype=np.float32).reshape(1, 3, 4), np.full((2, 5), 7, np.float32)]
    packed = pack(arrays)
    assert all(np.array_equal(a, b) for a, b in zip(arrays, packed))
    assert mapped_bytes(packed) >= sum(a.nbytes for a in arrays)
    assert mapped_bytes(arrays) == 0  # heap arrays are not one mapping


def test_resident_memory_stays_within_the_budget_and_comes_back():
    budget = 40 << 20
    gc.collect()
    before = _rss_mb()
    cache = PrefixCache(budget)
    for i in range(8):  # 8 distinct prompts x ~16.5 MB: only 2 fit
        prompt = np.arange(i * 1000, i * 1000 + 7 * BLOCK + 5, dtype=np.int64)
        n = cache.wants(prompt)
        assert n == N
        cache.store(prompt, n, *_entry(i))
        gc.collect()
        assert cache.bytes <= budget
        assert _rss_mb() - before <= budget / 2**20 + 4, "the cache holds more than its budget"
    assert len(cache._entries) == 2
    hit = cache.lookup(np.arange(7000, 7000 + 7 * BLOCK + 9, dtype=np.int64))
    assert hit is not None and hit[0] == 7 * BLOCK
    assert np.array_equal(hit[1][3], CACHE[3, 7]) and np.array_equal(hit[2][3], CACHE[LAYERS + 3, 7])  # read back exactly
    del hit, cache
    gc.collect()
    assert _rss_mb() - before <= 4, "evicted entries stayed resident"


def _run(engine, gives_way: bool) -> tuple[list[int], int, int]:
    """A preamble prompt, then a long sequence, then the preamble again: (cached tokens of both repeats, bytes kept)."""
    from edge_agent.engine.scheduler import BatchScheduler
    from edge_agent.engine.types import SamplingParams

    per = engine.model.host_position_bytes
    preamble = "Fact: the cache gives way. " * 3  # one 64-token block and some (the tiny model's tokens are about bytes)
    assert 64 < len(engine.encode(preamble)) < 120
    s = BatchScheduler(engine, prefill_chunk=32, prefix_cache_bytes=160 * per, prefix_cache_gives_way=gives_way).start()
    try:
        greedy = SamplingParams(max_tokens=4, ignore_eos=True)
        s.generate(preamble + " First?", greedy)
        again = s.generate(preamble + " Second?", greedy).usage.cached_tokens  # nothing else runs: a hit
        long = "Unrelated words here. " * 2  # under one block: never stored itself
        s.generate(long, SamplingParams(max_tokens=150, ignore_eos=True))  # its cache alone needs more than the budget
        kept = s.prefix_cache.bytes
        after = s.generate(preamble + " Third?", greedy).usage.cached_tokens
    finally:
        s.stop()
    return [again, after], kept, len(engine.encode(long))


def test_cached_prefixes_give_way_to_a_live_sequence_only_when_asked(llama_engine):
    (again, after), kept, long_tokens = _run(llama_engine, gives_way=True)
    assert 160 < long_tokens + 150 < 256 and long_tokens < 64
    assert again >= 64  # idle: the prefix cache works as before
    assert kept == 0 and after == 0  # the live sequence took the memory: the preamble was evicted
    (again, after), kept, _ = _run(llama_engine, gives_way=False)
    assert again >= 64 and kept > 0 and after >= 64
