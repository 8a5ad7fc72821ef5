"""Which execution providers to use, decided once per process."""
from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hardware:
    providers: tuple[str, ...]
    device: str  # "cuda" | "cpu"
    physical_cores: int
    reason: str


def physical_cores() -> int:
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
    except Exception:  # psutil missing or unsupported platform
        n = None
    return max(1, n or os.cpu_count() or 1)


@functools.lru_cache(maxsize=None)
def detect(preference: str = "auto") -> Hardware:
    """Pick CUDA when asked for or available (auto), else the CPU.

    Raises RuntimeError when `cuda` is demanded but onnxruntime has no CUDA provider.
    """
    import onnxruntime as ort

    available = ort.get_available_providers()
    cores = physical_cores()
    if preference not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, not {preference!r}")
    if preference in ("auto", "cuda") and "CUDAExecutionProvider" in available:
        return Hardware(("CUDAExecutionProvider", "CPUExecutionProvider"), "cuda", cores, "onnxruntime has CUDA")
    if preference == "cuda":
        raise RuntimeError("device=cuda, but this onnxruntime has no CUDA provider: install the `gpu` extra (onnxruntime-gpu)")
    why = "asked for the CPU" if preference == "cpu" else "no CUDA provider in onnxruntime"
    return Hardware(("CPUExecutionProvider",), "cpu", cores, why)
