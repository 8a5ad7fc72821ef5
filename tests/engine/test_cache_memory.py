"""The key/value cache gives a slot's memory back once no sequence holds it."""
from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np

from edge_agent.engine import runner
from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.scheduler import BatchScheduler
from edge_agent.engine.types import SamplingParams


def resident_kb(arrays) -> int:
    """Resident kB of the mappings that hold these arrays (from /proc/self/smaps): unlike the process's
    RssAnon, not moved by what other threads allocate meanwhile (a full test run has many)."""
    spans = [(a.ctypes.data, a.ctypes.data + a.nbytes) for a in arrays]
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = any(lo < e and s < hi for s, e in spans)
        elif inside and head == "Rss:":
            total += int(line.split()[1])
    return total


def test_released_slots_read_zeros_and_leave_resident_memory(tiny_bundles):
    eng = OnnxEngine(load_bundle(tiny_bundles["llama"]), threads=1, max_batch=4, context_length=256)
    m = eng.model
    for slot in range(3):
        m.prefill(slot, np.array(eng.encode(f"sequence number {slot} says hello")), 0)
    kept = [b[0].copy() for b in m.keys + m.values]
    before = resident_kb(m.keys + m.values)
    m.release_slots(1)
    after = resident_kb(m.keys + m.values)
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


def test_sliding_window_layers_give_back_what_no_query_reaches(tiny_bundles, monkeypatch):
    """Gemma 3's local layers (window 8 in the tiny model) drop positions far behind every sequence;
    the logits stay bit-identical to a cache that keeps everything, across a slot move."""
    monkeypatch.setattr(runner, "WINDOW_MARGIN", 0)  # the exact boundary: bit-identical all the same
    monkeypatch.setattr(runner, "TRIM_STEP", 32)
    bundle = load_bundle(tiny_bundles["gemma3"])
    trims, keeps = (OnnxEngine(bundle, threads=1, max_batch=2, context_length=256) for _ in range(2))
    keeps.model._windowed = []  # the reference: nothing given back
    assert trims.model._windowed == [i for i, w in enumerate(trims.model.cache.windows) if w] and trims.model._windowed
    prompts = [np.array(trims.encode(p)) for p in ("The quick brown fox", "Paris is the capital of France and")]
    outs = {}
    for name, eng in (("trim", trims), ("keep", keeps)):
        m, got = eng.model, []
        for slot, ids in enumerate(prompts):
            m.prefill(slot, ids, 0)
        toks = np.array([int(ids[-1]) for ids in prompts])
        lengths = np.array([len(ids) for ids in prompts])
        for step in range(150):
            if step == 100:  # the first sequence ends: the second moves into slot 0 and goes on alone
                m.move_slot(1, 0, int(lengths[1]))
                m.release_slots(1)
                toks, lengths = toks[1:], lengths[1:]
            logits = m.decode(toks, lengths)
            got.append(logits.copy())
            toks = np.argmax(logits, axis=1)
            lengths = lengths + 1
        outs[name] = got
    for a, b in zip(outs["trim"], outs["keep"]):
        np.testing.assert_array_equal(a, b)
    m = trims.model
    local, full = m._windowed[0], [i for i, w in enumerate(m.cache.windows) if not w][0]
    page = mmap.PAGESIZE // m.position_bytes  # positions a page holds (the cache's dtype: 32 fp32, 128 int8)
    assert m.trimmed[0] >= max(64, page)
    assert not m.keys[local][0, :, :page].any() and m.keys[full][0, :, :page].any()


_GROW = """
import json, sys
from pathlib import Path
import numpy as np
from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
def mb(key):
    return int([l for l in open('/proc/self/status') if l.startswith(key)][0].split()[1]) / 1024
bundle = load_bundle(Path(sys.argv[1]))
slots = 256 if bundle.kv_cache == "fp32" else 1024  # an int8 cache takes a quarter of the bytes a position
m = OnnxEngine(bundle, threads=1, max_batch=slots, context_length=512).model
m.ensure_capacity(256)
m.slots_used = m.cache.slots
m.filled[:] = 256  # every slot wrote its 256 positions (as prefill and decode record)
for b in m.keys + m.values:
    b[...] = 1.0
buffer = m.keys[0].nbytes / 2**20
open('/proc/self/clear_refs', 'w').write('5')  # VmHWM starts again from here
before = mb('VmRSS')
m.ensure_capacity(257)
ok = m.capacity == 512 and all(bool((b[:, :, :256] == 1).all()) and not b[:, :, 256:].any() for b in m.keys + m.values)
print(json.dumps({"buffer_mb": buffer, "cache_mb": buffer * len(m.keys + m.values), "extra_mb": mb('VmHWM') - before, "ok": ok}))
"""


def test_growing_a_full_cache_holds_one_buffer_twice_not_the_whole_cache(tiny_bundles):
    """Each layer's buffer is copied and its old mapping freed before the next: the transient peak of a
    doubling is about one buffer, where copying every layer before freeing any held the cache twice."""
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", _GROW, str(tiny_bundles["gemma3"])], capture_output=True, text=True,
                         timeout=300, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ok"]
    assert got["cache_mb"] >= 40  # 6 buffers of 8 MB: a second copy of them all would show
    assert got["extra_mb"] < got["cache_mb"] / 2, got


def test_growing_the_cache_copies_only_what_each_slot_wrote(tiny_bundles):
    """Three short sequences, then one prompt longer than the first capacity: the reallocation copies each short
    slot's few positions, not its whole old capacity (copied zeros would be resident memory), and every slot
    still reads what it wrote."""
    eng = OnnxEngine(load_bundle(tiny_bundles["llama"]), threads=1, max_batch=4, context_length=1024)
    m = eng.model
    assert m.capacity == runner.MIN_CAPACITY
    row = m.capacity * m.position_bytes  # one slot's positions of one kv head
    assert row >= 4 * mmap.PAGESIZE, "positions too small for this test to tell a copied capacity from a few pages"
    for slot in (1, 2, 3):
        m.prefill(slot, np.array(eng.encode(f"short {slot}")), 0)
    short = [[b[slot, :, :8].copy() for b in m.keys + m.values] for slot in (1, 2, 3)]
    long_prompt = np.array((eng.encode("a long prompt " * 200) * 2)[: runner.MIN_CAPACITY + 40])
    m.prefill(0, long_prompt, 0)
    assert m.capacity > runner.MIN_CAPACITY
    assert list(m.filled[:4]) == [len(long_prompt), *(len(eng.encode(f"short {s}")) for s in (1, 2, 3))]
    buffers = m.keys + m.values
    heads = len(buffers) * m.cache.kv_heads
    # slot 0's positions, plus for each short slot and head at most two pages (its few positions and a boundary)
    long_kb = heads * (-(-len(long_prompt) * m.position_bytes // mmap.PAGESIZE) + 1) * mmap.PAGESIZE // 1024
    bound = long_kb + heads * 3 * 2 * mmap.PAGESIZE // 1024
    assert long_kb + heads * 3 * row // 1024 > bound  # copying the short slots' whole old capacity would break it
    assert resident_kb(buffers) <= bound
    for slot, kept in zip((1, 2, 3), short):
        assert all(np.array_equal(b[slot, :, :8], k) for b, k in zip(buffers, kept))
