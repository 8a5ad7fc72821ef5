"""A dual-head graph's output head gives its mapped weight pages back before a step takes the other (prepacked.FilePages,
at most once every runner.HEAD_DROP_EVERY steps), prefills take the head of the last decode step, and a head read again
gives the same logits."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from edge_agent.engine import prepacked
from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.runner import HEAD_DROP_EVERY
from edge_agent.models.importer import import_model


def resident_kb(spans: list[tuple[int, int]]) -> int:
    """Resident kB of this process's mappings that hold any of spans (each weight has a mapping of its own)."""
    total, hit = 0, False
    for line in open("/proc/self/smaps"):
        parts = line.split()
        if not parts[0].endswith(":") and "-" in parts[0]:
            a, b = (int(x, 16) for x in parts[0].split("-"))
            hit = any(a <= addr < b for addr, _ in spans)
        elif hit and parts[0] == "Rss:":
            total += int(parts[1])
    return total


def test_file_pages_gives_back_its_range_only_and_leaves_written_mappings_alone(tmp_path):
    path = tmp_path / "w.data"
    data = np.arange(4 << 20, dtype=np.int32)  # 16 MB
    data.tofile(path)
    real = os.path.realpath(path)
    read = np.memmap(path, np.int32, mode="c")  # private mappings, as onnxruntime makes them
    written = np.memmap(path, np.int32, mode="c")
    assert int(read.sum(dtype=np.int64)) == int(data.sum(dtype=np.int64))
    written[-1] = -1
    assert int(written.sum(dtype=np.int64)) == int(data.sum(dtype=np.int64)) - int(data[-1]) - 1
    pages = prepacked.FilePages([(real, 1 << 20, 8 << 20)])  # MB 1..9 of the file
    assert pages.nbytes == 8 << 20  # the read mapping's share only
    before = resident_kb([(read.ctypes.data, 1)])
    pages.drop()
    after = resident_kb([(read.ctypes.data, 1)])
    # the range went, the rest of the file stayed (a 2 MB page the range only partly covers may go whole)
    assert before - after >= 8000 and after >= 4000
    assert resident_kb([(written.ctypes.data, 1)]) >= 16000
    assert np.array_equal(read, data) and written[-1] == -1  # the file's bytes read again


@pytest.fixture(scope="module")
def dual(checkpoints, tmp_path_factory) -> Path:
    return import_model(checkpoints["gemma3"], "dual", tmp_path_factory.mktemp("dual"), lm_head="dual", echo=lambda s: None)


def test_a_head_gives_its_pages_back_before_the_other_is_taken_and_reads_the_same_after(dual, tmp_path):
    e = OnnxEngine(load_bundle(dual), threads=1, max_batch=8, context_length=64, device="cpu",
                   prepacked_cache=tmp_path / "prepacked", int4_head_max_rows=2)
    m = e.model
    int4, int8 = m.head_pages[True], m.head_pages[False]
    assert int4.nbytes and int8.nbytes, "no whole page of either head's weights was found in the saved file"
    assert not set(int4.spans) & set(int8.spans)
    ids = np.random.default_rng(5).integers(4, e.vocab_size, 12)
    for slot in range(4):
        m.prefill(slot, ids[slot:], 0)  # idle: one row, the int4 head
    lengths = np.array([12 - s for s in range(4)])
    one = m.decode(np.array([7]), lengths[:1]).copy()
    r4 = resident_kb(int4.spans)  # its mappings' pages (some hold a neighbour's bytes too: kept)
    assert r4 >= int4.nbytes // 1024 and resident_kb(int8.spans) == 0 and m.head_drops == 0
    four = m.decode(np.arange(4) + 7, lengths).copy()  # 4 rows: the int8 head, the int4 one given back first
    dropped_at = m.steps - 1  # the step count before that step
    r8 = resident_kb(int8.spans)
    assert m.head_drops == 1 and resident_kb(int4.spans) <= r4 - int4.nbytes // 1024 and r8 >= int8.nbytes // 1024
    steps = m.int4_head_steps
    m.prefill(4, ids, 0)  # beside a large batch a prompt takes the int8 head too
    assert m.int4_head_steps == steps and resident_kb(int4.spans) <= r4 - int4.nbytes // 1024
    np.testing.assert_array_equal(m.decode(np.arange(4) + 7, lengths), four)
    np.testing.assert_array_equal(m.decode(np.array([7]), lengths[:1]), one)  # the int4 head read again, the same
    assert m.head_drops == 2 and resident_kb(int8.spans) <= r8 - int8.nbytes // 1024 and resident_kb(int4.spans) >= r4
    # back to 4 rows within HEAD_DROP_EVERY steps of the int4 head's give-back: it stays, until that many have passed
    while m.steps - dropped_at < HEAD_DROP_EVERY:
        assert m.head_drops == 2
        np.testing.assert_array_equal(m.decode(np.arange(4) + 7, lengths), four)
    assert resident_kb(int4.spans) >= r4
    m.decode(np.arange(4) + 7, lengths)
    assert m.head_drops == 3 and resident_kb(int4.spans) <= r4 - int4.nbytes // 1024
