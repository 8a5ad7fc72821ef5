"""The key/value cache gives a slot's memory back once no sequence holds it."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import SamplingParams


def shmem_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssShmem:"):
            return int(line.split()[1])
    return 0


def test_released_slots_read_zeros_and_leave_resident_memory(tiny_bundles):
    eng = OnnxEngine(load_bundle(tiny_bundles["llama"]), threads=1, max_batch=4, context_length=256)
    m = eng.model
    for slot in range(3):
        m.prefill(slot, np.array(eng.encode(f"sequence number {slot} says hello")), 0)
    kept = [b[0].copy() for b in m.keys + m.values]
    before = shmem_kb()
    m.release_slots(1)
    after = shmem_kb()  # before anything reads the released slots (a read makes a page resident again)
    pages = 2 * len(m.keys + m.values) * m.cache.kv_heads  # slots 1 and 2 each touched a page per buffer and head
    assert before - after >= pages * 4
    assert m.slots_used == 1
    assert all(not b[1:3].any() for b in m.keys + m.values)
    assert all(np.array_equal(b[0], k) for b, k in zip(m.keys + m.values, kept))


def test_a_finished_sequence_gives_its_slot_back_while_others_decode(tiny_bundles):
    eng = OnnxEngine(load_bundle(tiny_bundles["llama"]), threads=1, max_batch=4, context_length=256)
    seen: list[tuple[int, int]] = []
    s = BatchScheduler(eng, prefill_chunk=64, on_step=lambda b, _: seen.append((b, eng.model.slots_used))).start()
    try:
        solo = s.generate("The long one", SamplingParams(max_tokens=30, ignore_eos=True)).token_ids
        handles = [s.submit(eng.encode(p), SamplingParams(max_tokens=n, ignore_eos=True))
                   for p, n in (("The long one", 30), ("short", 3), ("also short", 5))]
        got = [h.result().token_ids for h in handles]
    finally:
        s.stop()
    assert got[0] == solo
    # every step held no more slots than it decoded, plus one being prefilled
    assert seen and all(used <= b + 1 for b, used in seen)
    assert (1, 1) in seen  # the long sequence alone at the end, in one slot
