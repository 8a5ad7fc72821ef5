"""Device choice and the GPU path's fallback, on machines without a GPU.

The GPU signals we cannot produce here are faked at their edges (a fake nvidia-smi on
PATH, the provider list onnxruntime reports); everything after them is real: the fp16
graph is built from a real bundle and run by DeviceOnnxModel on host memory, and the
failing sessions are real onnxruntime sessions made to fail where a GPU would.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from edge_agent import hardware
from edge_agent.engine.bundle import load_bundle
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.runner import make_session
from edge_agent.engine.types import SamplingParams
from edge_agent.hardware import DeviceError, GpuNeed, detect

GIB = 1 << 30


@pytest.fixture(autouse=True)
def fresh_detection():
    detect.cache_clear()
    yield
    detect.cache_clear()


def fake_nvidia_smi(folder: Path, total_mib: int = 81559, free_mib: int = 80000, fail: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "nvidia-smi"
    if fail:
        body = 'echo "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."; exit 9'
    else:
        body = f'echo "0, NVIDIA H100 80GB HBM3, {total_mib}, {free_mib}, 580.65.06"'
    exe.write_text(f"#!/bin/sh\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def gpu_box(tmp_path, monkeypatch):
    """This process looks like an NVIDIA machine: nvidia-smi answers and onnxruntime lists the CUDA provider."""
    def make(**kw):
        fake_nvidia_smi(tmp_path / "bin", **kw)
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setattr(hardware, "available_providers", lambda: [hardware.CUDA, hardware.CPU])
    return make


@pytest.fixture
def bundle_copy(tiny_bundles, tmp_path):
    """A private copy of the tiny Llama bundle (the GPU graph is written beside it)."""
    dst = tmp_path / "models" / "llama"
    shutil.copytree(tiny_bundles["llama"], dst)
    return load_bundle(dst)


# -- detection ------------------------------------------------------------------------------


def test_cpu_only_onnxruntime_means_cpu_and_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(hardware, "available_providers", lambda: [hardware.CPU])
    hw = detect("auto")
    assert hw.device == "cpu" and hw.providers == (hardware.CPU,)
    assert "no CUDA provider" in hw.reason
    detect.cache_clear()
    with pytest.raises(DeviceError) as e:
        detect("cuda")
    assert "make gpu" in str(e.value) and "device = auto" in str(e.value)


def test_gpu_signals_choose_cuda(gpu_box):
    gpu_box()
    need = GpuNeed(weights_bytes=600 << 20, kv_bytes_per_slot=64 << 20, slots=16)
    hw = detect("auto", need)
    assert hw.device == "cuda" and hw.providers[0] == hardware.CUDA
    assert hw.gpu.name == "NVIDIA H100 80GB HBM3" and hw.gpu.free_bytes == 80000 << 20
    assert hw.slots is None and "H100" in hw.reason


def test_driver_not_answering_means_cpu(gpu_box):
    gpu_box(fail=True)
    hw = detect("auto")
    assert hw.device == "cpu" and "couldn't communicate with the NVIDIA driver" in hw.reason
    detect.cache_clear()
    with pytest.raises(DeviceError, match="nvidia-smi"):
        detect("cuda")


def test_memory_rule_fewer_slots_then_cpu(gpu_box):
    need = GpuNeed(weights_bytes=1 * GIB, kv_bytes_per_slot=256 << 20, slots=16)  # whole: 1 + 4 GiB + margin
    gpu_box(free_mib=3 * 1024)  # more than half of it: the GPU serves as many slots as fit
    hw = detect("auto", need)
    assert hw.device == "cuda" and hw.slots == (3 * GIB - GIB - hardware.GPU_MARGIN_BYTES) // (256 << 20)
    detect.cache_clear()
    gpu_box(free_mib=2 * 1024)  # not even half fits: the CPU
    hw = detect("auto", need)
    assert hw.device == "cpu" and "less than half" in hw.reason
    detect.cache_clear()
    with pytest.raises(DeviceError, match="less than half"):
        detect("cuda", need)


def test_cpu_preference_asks_nothing(monkeypatch):
    def boom():
        raise AssertionError("device = cpu must not probe the GPU")
    monkeypatch.setattr(hardware, "available_providers", boom)
    monkeypatch.setattr(hardware, "query_gpus", boom)
    assert detect("cpu").device == "cpu"


# -- the GPU path, run on host memory, and its fallback ------------------------------------


def greedy(engine, prompt: str = "The quick brown fox", n: int = 12) -> list[int]:
    from edge_agent.engine.scheduler import BatchScheduler

    s = BatchScheduler(engine).start()
    try:
        return s.generate(prompt, SamplingParams(max_tokens=n, temperature=0)).token_ids
    finally:
        s.stop(0)


def test_gpu_path_builds_records_and_reuses_the_fp16_graph(gpu_box, bundle_copy):
    gpu_box()
    e = OnnxEngine(bundle_copy, threads=1, max_batch=4, context_length=256, gpu_device_type="cpu")
    assert e.device == "cuda" and e.fallback_reason is None and type(e.model).__name__ == "DeviceOnnxModel"
    rec = json.loads((bundle_copy.path / "manifest.json").read_text())["derived"]["gpu_fp16"]
    data = bundle_copy.path / "gpu" / "model.onnx.data"
    assert rec["bytes"] == data.stat().st_size and len(rec["sha256"]) == 64
    assert "gpu/model.onnx.data" not in json.loads((bundle_copy.path / "manifest.json").read_text())["files"]
    load_bundle(bundle_copy.path, verify=True)  # the manifest's own files still verify
    mtime = data.stat().st_mtime_ns
    cpu = OnnxEngine(load_bundle(bundle_copy.path), threads=1, max_batch=4, context_length=256, device="cpu")
    ids_cpu = greedy(cpu)
    again = OnnxEngine(load_bundle(bundle_copy.path), threads=1, max_batch=4, context_length=256, gpu_device_type="cpu")
    assert data.stat().st_mtime_ns == mtime  # reused, not rebuilt
    ids_gpu = greedy(again)
    # fp16 activations against int8 ones: the first tokens of a random tiny model agree
    assert ids_gpu[:4] == ids_cpu[:4]


def test_gpu_path_runs_a_bundle_with_the_int4_head(gpu_box, checkpoints, tmp_path):
    """The fp16 converter de-quantizes the MatMulNBits output projection like the int8 layers."""
    from edge_agent.models.importer import import_model

    path = import_model(checkpoints["llama"], "llama4", tmp_path / "models", lm_head="int4", echo=lambda s: None)
    gpu_box()
    e = OnnxEngine(load_bundle(path), threads=1, max_batch=2, context_length=128, gpu_device_type="cpu")
    assert e.device == "cuda" and e.fallback_reason is None
    import onnx

    ops = {n.op_type for n in onnx.load(str(path / "gpu" / "model.onnx"), load_external_data=False).graph.node}
    assert not ops & {"MatMulNBits", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QuantizeLinear"}
    cpu = OnnxEngine(load_bundle(path), threads=1, max_batch=2, context_length=128, device="cpu")
    assert greedy(e)[:4] == greedy(cpu)[:4]
    # the tied int4 head's top logits are re-scored on the host from the fp16 graph's (fp32) hidden state
    assert e.model.rescorer is not None and e.model.rescorer.rows > 0


def test_gpu_path_runs_a_bundle_with_an_int8_cache(gpu_box, checkpoints, tmp_path):
    """The converter makes a quantized key/value cache an fp16 one (the CUDA kernel's); the CPU keeps int8."""
    import onnx
    from onnx import TensorProto

    from edge_agent.models.importer import import_model

    path = import_model(checkpoints["llama"], "llama-kv8", tmp_path / "models", kv_cache="int8", echo=lambda s: None)
    gpu_box()
    e = OnnxEngine(load_bundle(path), threads=1, max_batch=2, context_length=128, gpu_device_type="cpu")
    assert e.device == "cuda" and e.fallback_reason is None
    g = onnx.load(str(path / "gpu" / "model.onnx"), load_external_data=False).graph
    assert {v.type.tensor_type.elem_type for v in g.input if v.name.startswith("past_")} == {TensorProto.FLOAT16}
    assert not [a for n in g.node if n.op_type == "GroupQueryAttention" for a in n.attribute if "quant" in a.name]
    assert not any("k_scale" in t.name for t in g.initializer)
    cpu = OnnxEngine(load_bundle(path), threads=1, max_batch=2, context_length=128, device="cpu")
    assert cpu.model.keys[0].dtype == np.int8
    assert greedy(e)[:4] == greedy(cpu)[:4]


def test_damaged_gpu_graph_is_rebuilt(gpu_box, bundle_copy):
    gpu_box()
    OnnxEngine(bundle_copy, threads=1, max_batch=2, context_length=128, gpu_device_type="cpu")
    data = bundle_copy.path / "gpu" / "model.onnx.data"
    with open(data, "r+b") as f:
        f.seek(100)
        f.write(b"\xff\xff\xff\xff")
    e = OnnxEngine(load_bundle(bundle_copy.path), threads=1, max_batch=2, context_length=128, gpu_device_type="cpu")
    assert e.device == "cuda" and e.fallback_reason is None
    rec = json.loads((bundle_copy.path / "manifest.json").read_text())["derived"]["gpu_fp16"]
    from edge_agent.engine.bundle import sha256_file

    assert sha256_file(data) == rec["sha256"]


def test_unavailable_cuda_provider_falls_back_to_cpu(gpu_box, bundle_copy, caplog):
    """onnxruntime lists CUDA but cannot use it (here: the CPU wheel; on a box: missing CUDA/cuDNN libraries)."""
    gpu_box()
    e = OnnxEngine(bundle_copy, threads=1, max_batch=2, context_length=128)
    assert e.device == "cpu" and e.fallback_reason
    assert type(e.model).__name__ == "OnnxModel"
    assert any("falling back to the CPU" in r.getMessage() for r in caplog.records)
    assert len(greedy(e)) == 12


def test_session_creation_failure_falls_back_and_answers(gpu_box, bundle_copy):
    gpu_box()

    def factory(path, threads, providers):
        if providers[0] != hardware.CPU or "gpu" in Path(path).parts:
            raise RuntimeError("CUDA failure 2: out of memory ; GPU=0 ; hostname=box")
        return make_session(path, threads, providers)

    e = OnnxEngine(bundle_copy, threads=1, max_batch=2, context_length=128, session_factory=factory, gpu_device_type="cpu")
    assert e.device == "cpu" and "out of memory" in e.fallback_reason
    assert e.device_status() == {"device": "cpu", "reason": e.device_reason, "fallback_reason": e.fallback_reason}
    cpu = OnnxEngine(load_bundle(bundle_copy.path), threads=1, max_batch=2, context_length=128, device="cpu")
    assert greedy(e) == greedy(cpu)


class FailingRun:
    """A real session whose runs fail, as a GPU's first step can (kernel missing, out of memory)."""

    def __init__(self, session):
        self._s = session

    def __getattr__(self, name):
        return getattr(self._s, name)

    def run_with_iobinding(self, io):
        raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : CUDA error cudaErrorNoKernelImageForDevice")


def test_first_step_failure_falls_back_and_answers(gpu_box, bundle_copy):
    gpu_box()

    def factory(path, threads, providers):
        s = make_session(path, threads, providers)
        return FailingRun(s) if "gpu" in Path(path).parts else s

    e = OnnxEngine(bundle_copy, threads=1, max_batch=2, context_length=128, session_factory=factory, gpu_device_type="cpu")
    assert e.device == "cpu" and "cudaErrorNoKernelImageForDevice" in e.fallback_reason
    assert len(greedy(e)) == 12


def test_cuda_demanded_and_gpu_failing_is_an_error(gpu_box, bundle_copy):
    gpu_box()

    def factory(path, threads, providers):
        raise RuntimeError("CUDA failure 2: out of memory")

    with pytest.raises(DeviceError, match="out of memory.*device = auto"):
        OnnxEngine(bundle_copy, threads=1, max_batch=2, context_length=128, device="cuda", session_factory=factory)


def test_device_cuda_without_gpu_stops_serve_with_a_clear_error(tiny_bundles, tmp_path, monkeypatch, capsys):
    from edge_agent.cli import main

    monkeypatch.setattr(hardware, "available_providers", lambda: [hardware.CPU])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("EDGE_AGENT_DEVICE", "cuda")
    bundle = tiny_bundles["llama"]
    rc = main(["--models-dir", str(bundle.parent), "--model", bundle.name, "generate", "--max-tokens", "2", "Hello"])
    err = capsys.readouterr().err
    assert rc == 2 and "device = cuda" in err and "Traceback" not in err


def test_fallback_shows_in_metrics_and_ready(gpu_box, bundle_copy, tmp_path):
    """The runtime publishes the fallback: /metrics' device info and /ready's model part."""
    from edge_agent.config import Settings
    from edge_agent.runtime import build_runtime

    gpu_box()  # CUDA listed, but this onnxruntime cannot create a CUDA session: the engine falls back
    s = Settings(models_dir=bundle_copy.path.parent, model="llama", threads=1, max_batch=2, context_length=128,
                 data_dir=tmp_path / "var", index_dir=tmp_path / "index")
    rt = build_runtime(s, load_documents=False)
    try:
        text = rt.metrics.render().decode()
        line = next(x for x in text.splitlines() if x.startswith("edge_agent_device_info"))
        assert 'device="cpu"' in line and 'fallback_reason=""' not in line
        ok, parts = rt.readiness()
        assert parts["model"]["device"] == "cpu" and parts["model"]["fallback"]
    finally:
        rt.close()


def test_smoke_test_refuses_non_finite_logits():
    """An fp16 overflow shows as inf/nan logits in the first step: the engine must not serve them."""
    from edge_agent.engine.engine import smoke_test
    from edge_agent.engine.runner import CacheShape

    class Overflowing:  # what the device model returns after an overflow; the rest of the path is tested above
        cache = CacheShape(layers=1, kv_heads=1, head_dim=4, slots=1, max_len=16)

        def prefill(self, slot, ids, start):
            return np.array([0.0, np.inf, np.nan], np.float32)

    with pytest.raises(RuntimeError, match="non-finite"):
        smoke_test(Overflowing(), 1)


def _build_gpu_graph(path: str) -> str:
    import logging

    from edge_agent.engine.gpu_graph import ensure_gpu_graph

    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logging.getLogger("edge_agent.engine.gpu_graph").addHandler(Keep())
    logging.getLogger("edge_agent.engine.gpu_graph").setLevel(logging.INFO)
    ensure_gpu_graph(load_bundle(Path(path)))
    return "built" if any("building" in r for r in records) else "reused"


def test_concurrent_first_loads_build_the_gpu_graph_once(bundle_copy):
    """A daemon and scripts/gpu-check starting together: one builds, the others wait and reuse it."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(3) as pool:
        outcomes = pool.map(_build_gpu_graph, [str(bundle_copy.path)] * 3)
    assert sorted(outcomes) == ["built", "reused", "reused"]
    rec = json.loads((bundle_copy.path / "manifest.json").read_text())["derived"]["gpu_fp16"]
    from edge_agent.engine.bundle import sha256_file

    assert sha256_file(bundle_copy.path / "gpu" / "model.onnx.data") == rec["sha256"]
    assert [p.name for p in bundle_copy.path.iterdir() if p.name.startswith((".gpu", ".manifest."))] == [".gpu.lock"]  # no temp left


def test_gpu_check_without_a_gpu_says_so_in_one_json_line(tmp_path):
    """scripts/gpu-check on a machine without the NVIDIA driver: one JSON line, exit 1, nothing installed."""
    import subprocess

    repo = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    env["PATH"] = "/usr/bin:/bin"  # no nvidia-smi here (and none on this machine's default PATH)
    if shutil.which("nvidia-smi", path=env["PATH"]):
        pytest.skip("this machine has nvidia-smi")
    out = subprocess.run([str(repo / "scripts" / "gpu-check")], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 1
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0]) == {"check": "gpu", "gpu": False, "reason": "nvidia-smi not found: no NVIDIA driver on this machine"}
