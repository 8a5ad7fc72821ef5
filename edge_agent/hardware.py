"""Which device runs the language model, decided once per process, with the reason.

A GPU is used only when all three signals agree: onnxruntime has the CUDA provider
(the onnxruntime-gpu wheel), the NVIDIA driver answers (nvidia-smi, or NVML through
ctypes when nvidia-smi is not on PATH) and the GPU has room for the model. The room
rule (after llama.cpp's and Ollama's offloading rule, for a runtime that cannot split
a graph across devices): the fp16 weights plus the key/value cache of every slot at the
full context, plus a working margin, should fit in free GPU memory. When they do not but
the weights plus at least half of that whole still fit, the GPU serves fewer slots (as
many as fit); when not even half of the model fits, the CPU serves it.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass

log = logging.getLogger(__name__)

CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
# cuBLAS workspace, the CUDA context, onnxruntime's arena slack and activations of one prefill chunk
GPU_MARGIN_BYTES = 768 << 20


class DeviceError(RuntimeError):
    """device = cuda was asked for but no usable GPU is there (the message says what to do)."""


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    total_bytes: int
    free_bytes: int
    driver: str


@dataclass(frozen=True)
class GpuNeed:
    """What the model needs on a GPU: fp16 weights and the key/value cache of one slot at full context."""

    weights_bytes: int
    kv_bytes_per_slot: int
    slots: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes_per_slot * self.slots + GPU_MARGIN_BYTES


@dataclass(frozen=True)
class Hardware:
    providers: tuple[str, ...]
    device: str  # "cuda" | "cpu"
    physical_cores: int
    reason: str
    gpu: GpuInfo | None = None
    slots: int | None = None  # slots that fit on the GPU when fewer than asked for


def physical_cores() -> int:
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
    except Exception:  # psutil missing or unsupported platform
        n = None
    return max(1, n or os.cpu_count() or 1)


def _query_nvidia_smi() -> list[GpuInfo] | str:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "nvidia-smi not found"
    try:
        out = subprocess.run(
            [exe, "--query-gpu=index,name,memory.total,memory.free,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"nvidia-smi did not answer ({type(e).__name__})"
    if out.returncode != 0:
        msg = (out.stdout + out.stderr).strip().splitlines()
        return f"nvidia-smi failed: {msg[0] if msg else 'exit status ' + str(out.returncode)}"
    gpus = []
    for line in out.stdout.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            gpus.append(GpuInfo(int(parts[0]), parts[1], int(float(parts[2])) << 20, int(float(parts[3])) << 20, parts[4]))
        except (IndexError, ValueError):
            return f"nvidia-smi gave an unreadable line: {line!r}"
    return gpus or "nvidia-smi lists no GPU"


class _NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


def _query_nvml() -> list[GpuInfo] | str:
    """The same facts through libnvidia-ml (present wherever the driver is), for hosts without nvidia-smi."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return "no NVIDIA driver (libnvidia-ml.so.1 not found)"
    if nvml.nvmlInit_v2() != 0:
        return "the NVIDIA driver did not initialise (nvmlInit failed)"
    try:
        count = ctypes.c_uint()
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0 or count.value == 0:
            return "the NVIDIA driver lists no GPU"
        drv = ctypes.create_string_buffer(96)
        nvml.nvmlSystemGetDriverVersion(drv, 96)
        gpus = []
        for i in range(count.value):
            handle = ctypes.c_void_p()
            mem = _NvmlMemory()
            name = ctypes.create_string_buffer(96)
            if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0:
                continue
            nvml.nvmlDeviceGetName(handle, name, 96)
            if nvml.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem)) != 0:
                continue
            gpus.append(GpuInfo(i, name.value.decode(errors="replace"), mem.total, mem.free, drv.value.decode(errors="replace")))
        return gpus or "no GPU answered NVML"
    finally:
        nvml.nvmlShutdown()


def query_gpus() -> list[GpuInfo] | str:
    """The NVIDIA GPUs the driver reports, or a sentence saying why there are none."""
    found = _query_nvidia_smi()
    if isinstance(found, str) and found == "nvidia-smi not found":
        found = _query_nvml()
    return found


def available_providers() -> list[str]:
    import onnxruntime as ort

    return list(ort.get_available_providers())


def _mib(n: int) -> str:
    return f"{n >> 20} MiB"


def decide(preference: str, providers: list[str], gpus: list[GpuInfo] | str, need: GpuNeed | None, cores: int) -> Hardware:
    """The pure decision (tested with fake signals); see detect().

    Raises DeviceError when preference is cuda and no GPU can serve; ValueError for an unknown preference.
    """
    if preference not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, not {preference!r}")
    cpu = (CPU,)
    if preference == "cpu":
        return Hardware(cpu, "cpu", cores, "device = cpu in the settings")

    def no_gpu(why: str, fix: str) -> Hardware:
        if preference == "cuda":
            raise DeviceError(f"device = cuda, but {why}: {fix}, or set device = auto (GPU when usable) or cpu")
        return Hardware(cpu, "cpu", cores, why)

    if CUDA not in providers:
        return no_gpu(
            "this onnxruntime has no CUDA provider (the CPU-only wheel is installed)",
            "install the GPU wheel as the README's 'GPU' section says (`make gpu`)",
        )
    if isinstance(gpus, str):
        return no_gpu(f"no usable NVIDIA GPU: {gpus}", "install the NVIDIA driver (nvidia-smi must answer)")
    gpu = max(gpus, key=lambda g: g.free_bytes)
    label = f"{gpu.name} (GPU {gpu.index}, {_mib(gpu.free_bytes)} free of {_mib(gpu.total_bytes)}, driver {gpu.driver})"
    if need is None:
        return Hardware((CUDA, CPU), "cuda", cores, f"CUDA provider and {label}", gpu)
    whole = need.total_bytes
    if gpu.free_bytes >= whole:
        return Hardware((CUDA, CPU), "cuda", cores, f"{label}; the model needs {_mib(whole)}", gpu)
    room_for = (gpu.free_bytes - need.weights_bytes - GPU_MARGIN_BYTES) // max(1, need.kv_bytes_per_slot)
    if gpu.free_bytes * 2 >= whole and room_for >= 1:
        slots = int(min(room_for, need.slots))
        return Hardware(
            (CUDA, CPU), "cuda", cores,
            f"{label}; the model needs {_mib(whole)} for {need.slots} slots, so the GPU serves {slots} slots", gpu, slots,
        )
    return no_gpu(
        f"{label} has room for less than half of the model ({_mib(whole)} with the cache of {need.slots} slots)",
        "free GPU memory, lower max_batch or context_length",
    )


@functools.lru_cache(maxsize=None)
def detect(preference: str = "auto", need: GpuNeed | None = None) -> Hardware:
    """Pick the device for `preference` (auto | cpu | cuda) and a model needing `need`; cached per process.

    Raises DeviceError when `cuda` is demanded but no GPU can serve the model, ValueError for an unknown preference.
    """
    cores = physical_cores()
    if preference == "cpu":
        return decide(preference, [], "not asked", need, cores)
    providers = available_providers()
    gpus: list[GpuInfo] | str = query_gpus() if CUDA in providers else "not queried"
    hw = decide(preference, providers, gpus, need, cores)
    log.info("device: %s (%s)", hw.device, hw.reason)
    return hw
