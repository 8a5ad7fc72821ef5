"""engine.prepacked: onnxruntime's prepacked weights saved once and mapped; weight pages given back."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from edge_agent.engine import prepacked
from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine


def mapped_rss_kb(path: Path) -> dict[int, int]:
    """Resident kB of each of this process's mappings of path, by start address."""
    real, out, start = os.path.realpath(path), {}, None
    for line in open("/proc/self/smaps"):
        parts = line.split()
        if not parts[0].endswith(":") and "-" in parts[0]:
            start = int(parts[0].split("-")[0], 16) if len(parts) > 5 and " ".join(parts[5:]) == real else None
        elif start is not None and parts[0] == "Rss:":
            out[start] = int(parts[1])
    return out


def test_prepacked_copy_is_made_once_mapped_and_gives_the_same_logits(tiny_bundles, tmp_path):
    bundle = load_bundle(tiny_bundles["gemma3"])
    cache = tmp_path / "prepacked"
    plain = OnnxEngine(bundle, threads=1, max_batch=2, context_length=64, device="cpu")
    packed = OnnxEngine(bundle, threads=1, max_batch=2, context_length=64, device="cpu", prepacked_cache=cache)
    [made] = list(cache.iterdir())
    assert sorted(p.name for p in made.iterdir()) == [prepacked.DATA, prepacked.GRAPH]
    assert mapped_rss_kb(made / prepacked.DATA), "the session does not map the saved weights"
    ids = np.array([2, 15, 27, 9, 40, 3], np.int64)
    a, b = plain.model.prefill(0, ids, 0).copy(), packed.model.prefill(0, ids, 0).copy()
    assert np.array_equal(a, b)
    lengths = np.array([6], np.int64)
    assert np.array_equal(plain.model.decode(np.array([5]), lengths).copy(), packed.model.decode(np.array([5]), lengths))
    stamp = (made / prepacked.DATA).stat().st_mtime_ns
    assert prepacked.ensure(bundle.model_file, cache) == made / prepacked.GRAPH
    assert (made / prepacked.DATA).stat().st_mtime_ns == stamp  # reused, not made again
    assert list(cache.iterdir()) == [made]


def test_a_cache_that_cannot_be_written_falls_back_to_the_bundles_graph(tiny_bundles, tmp_path):
    bundle = load_bundle(tiny_bundles["gemma3"])
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("x")
    assert prepacked.ensure(bundle.model_file, blocked) is None
    engine = OnnxEngine(bundle, threads=1, max_batch=1, context_length=32, device="cpu", prepacked_cache=blocked)
    assert np.isfinite(engine.model.prefill(0, np.array([2, 7, 9], np.int64), 0)).all()


def test_drop_clean_pages_gives_back_read_pages_and_keeps_written_ones(tmp_path):
    path = tmp_path / "w.data"
    data = np.arange(2 << 20, dtype=np.int32)  # 8 MB
    data.tofile(path)
    files = {os.path.realpath(path)}
    read = np.memmap(path, np.int32, mode="c")  # private mappings, as onnxruntime makes them
    written = np.memmap(path, np.int32, mode="c")
    with prepacked.PageOut(files):  # paging out while in use never changes what is read
        assert np.array_equal(read, data)
    assert int(read.sum(dtype=np.int64)) == int(data.sum(dtype=np.int64))
    written[0] = -1
    assert int(written.sum(dtype=np.int64)) == int(data.sum(dtype=np.int64)) - 1
    before = mapped_rss_kb(path)
    assert before[read.ctypes.data] >= 8000 and before[written.ctypes.data] >= 8000
    assert prepacked.drop_clean_pages(files) == 1
    after = mapped_rss_kb(path)
    assert after[read.ctypes.data] < 100  # given back
    assert after[written.ctypes.data] >= 8000  # holds a written page: left alone
    assert written[0] == -1 and np.array_equal(read, data)  # the file's bytes read again


def test_the_daemon_keeps_the_copy_next_to_the_bundle_unless_turned_off(tiny_bundles, tmp_path):
    import shutil

    from edge_agent.config import Settings
    from edge_agent.runtime import build_engine

    folder = tmp_path / "models" / "tiny"
    shutil.copytree(tiny_bundles["qwen2"], folder)
    common = dict(models_dir=folder.parent, model="tiny", device="cpu", max_batch=1, context_length=64, data_dir=tmp_path, index_dir=tmp_path / "i")
    build_engine(Settings(**common, prepacked_weights=False)).stop()
    assert not (folder / ".prepacked").exists()
    scheduler = build_engine(Settings(**common))
    try:
        [made] = list((folder / ".prepacked").iterdir())
        assert mapped_rss_kb(made / prepacked.DATA), "the daemon's session does not map the saved weights"
    finally:
        scheduler.stop()


def test_the_benchs_memory_probe_loads_as_the_daemon_does(tiny_bundles, tmp_path):
    import shutil

    from edge_agent.bench.ours import peak_rss_mb

    folder = tmp_path / "tiny"
    shutil.copytree(tiny_bundles["llama"], folder)
    assert peak_rss_mb(folder, threads=1, max_batch=2, streams=2, prompt_len=8, n_gen=4) > 0
    assert [p.name for p in (folder / ".prepacked").iterdir()], "the probe did not use the saved prepacked weights"


def test_no_copy_is_started_without_the_disk_space_for_it(tiny_bundles, tmp_path, monkeypatch):
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(prepacked.shutil, "disk_usage", lambda p: usage(1 << 30, (1 << 30) - (1 << 20), 1 << 20))
    bundle = load_bundle(tiny_bundles["llama"])
    assert prepacked.ensure(bundle.model_file, tmp_path / "c") is None
    assert list((tmp_path / "c").iterdir()) == []  # nothing half-written left behind


def test_a_damaged_copy_is_removed_and_the_bundles_graph_serves(tiny_bundles, tmp_path):
    bundle = load_bundle(tiny_bundles["gemma3"])
    cache = tmp_path / "prepacked"
    made = prepacked.ensure(bundle.model_file, cache)
    made.write_bytes(b"not a graph")
    engine = OnnxEngine(bundle, threads=1, max_batch=1, context_length=32, device="cpu", prepacked_cache=cache)
    assert np.isfinite(engine.model.prefill(0, np.array([2, 7, 9], np.int64), 0)).all()
    assert not made.parent.exists()


def test_the_benchs_memory_probe_takes_the_daemons_prefix_cache_settings(tiny_bundles, monkeypatch, capsys):
    """The probe's scheduler gets the daemon's prefix cache budget and lets live sequences take from it first when told."""
    from edge_agent.bench import ours

    made = []
    real = ours.BatchScheduler
    monkeypatch.setattr(ours, "BatchScheduler", lambda *a, **kw: made.append(real(*a, **kw)) or made[-1])
    for gives_way in (True, False):
        ours._rss_child(tiny_bundles["llama"], 1, 2, 2, 8, 4, 1, None, gives_way)
        cache = made[-1].prefix_cache
        assert cache.max_bytes == 1 << 20 and bool(cache.position_bytes) is gives_way
    assert '"peak_rss_mb"' in capsys.readouterr().out
