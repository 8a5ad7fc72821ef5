"""OnnxEngine: a loaded bundle (graph, tokenizer, cache) ready to run steps."""
from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import io
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from edge_agent.engine import prepacked
from edge_agent.engine.bundle import Bundle
from edge_agent.engine.device_runner import DeviceOnnxModel
from edge_agent.engine.runner import HEAD_SELECT, CacheShape, Embedding, OnnxModel, make_session
from edge_agent.engine.tokens import mark_never_written
from edge_agent.hardware import CUDA, DeviceError, GpuNeed, Hardware, detect

log = logging.getLogger(__name__)


def release_free_heap() -> None:
    """Give freed heap pages back to the OS (glibc only; a no-op elsewhere).

    Parsing a 33 MB tokenizer.json and building the session leave ~200 MB of
    freed-but-mapped heap behind; without this it counts as resident memory.
    """
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def gpu_need(bundle: Bundle, slots: int, context_length: int) -> GpuNeed:
    """GPU memory the bundle needs: its fp16 weights (built, or ~2x the int8 weights) and each slot's fp16 cache."""
    from edge_agent.engine.gpu_graph import cached_record

    rec = cached_record(bundle)
    if rec is not None:
        weights = int(rec["bytes"])
    else:
        weights = 2 * sum(int(m["bytes"]) for rel, m in bundle.manifest.get("files", {}).items() if rel.startswith("model.onnx"))
    arch = bundle.architecture
    per_slot = int(arch["num_layers"]) * 2 * int(arch["num_kv_heads"]) * int(arch["head_dim"]) * context_length * 2
    return GpuNeed(weights_bytes=weights, kv_bytes_per_slot=per_slot, slots=slots)


def _preload_cuda_libraries() -> None:
    """Load CUDA and cuDNN from the `gpu` extra's nvidia wheels (onnxruntime-gpu >= 1.21 looks there only
    when asked); a system-wide CUDA is found by the loader anyway, so a failure here is no error."""
    import onnxruntime as ort

    preload = getattr(ort, "preload_dlls", None)
    if preload is not None:
        said = io.StringIO()
        try:
            with contextlib.redirect_stdout(said):  # it prints each library it misses; the fallback reason says it once
                preload()
        except Exception as e:  # the session creation that follows says what is really missing
            log.info("onnxruntime.preload_dlls: %s", e)
        if said.getvalue().strip():
            log.info("onnxruntime.preload_dlls: %s", " | ".join(said.getvalue().split("\n")).strip(" |"))


def failure_text(e: BaseException) -> str:
    """One line for an operator: the exception's type and the first line of its message (onnxruntime's can run for pages)."""
    first = (str(e).strip().splitlines() or [""])[0][:300]
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


# largest logit difference between a one-pass and a two-chunk prefill of the smoke prompt; fp16 rounding
# stays well under it (see tests/test_hardware.py), a kernel that mishandles a continued prompt does not
SMOKE_TOLERANCE = 1.0


def smoke_test(model: Any, token: int) -> None:
    """One prefill, one full-batch decode and a cache round trip; raises RuntimeError on non-finite logits or a copy that differs."""
    ids = np.full(min(8, model.cache.max_len - 1), token, np.int64)
    ids[1::2] = (token + 1) % max(2, model.vocab_size) if hasattr(model, "vocab_size") else token
    logits = model.prefill(0, ids, 0).copy()
    if not np.isfinite(logits).all():
        raise RuntimeError("the first step gave non-finite logits (fp16 overflow?)")
    # a prompt prefilled in two chunks (the scheduler's chunked prefill, a restored prefix) must give the same answer
    half = len(ids) // 2
    model.prefill(0, ids[:half], 0)
    chunked = model.prefill(0, ids[half:], half)
    diff = float(np.abs(chunked - logits).max()) if np.isfinite(chunked).all() else float("inf")
    if diff > SMOKE_TOLERANCE:
        raise RuntimeError(f"a prompt prefilled in two chunks differs from one pass (max logit difference {diff:.3g})")
    b = model.cache.slots
    if b > 1:
        keys, values = model.read_prefix(0, len(ids))
        model.copy_prefix(b - 1, keys, values)
        model.move_slot(b - 1, 1, len(ids))
        k2, _ = model.read_prefix(1, len(ids))
        if not all(np.array_equal(a, c) for a, c in zip(keys, k2)):
            raise RuntimeError("the device cache did not round-trip (copy between slots failed)")
    lengths = np.full(b, len(ids), np.int64)
    out = model.decode(np.full(b, token, np.int64), lengths)
    if not np.isfinite(out[0]).all():
        raise RuntimeError("the first decode step gave non-finite logits (fp16 overflow?)")


def _head_pages(graph: Path) -> dict[bool, prepacked.FilePages] | None:
    """The mapped weight pages of each output head of a dual-head graph (runner.HEAD_SELECT; True: the int4 head), or None."""
    try:
        ranges = prepacked.branch_ranges(graph, HEAD_SELECT)
    except Exception as e:  # the session loaded it: keeping every page resident is the only cost
        log.info("could not read the output heads' weight ranges of %s: %s", graph, failure_text(e))
        return None
    return None if ranges is None else {int4: prepacked.FilePages(r) for int4, r in ranges.items()}


class OnnxEngine:
    """The language model of one bundle: tokenizer, session and key/value cache slots.

    device (auto | cpu | cuda) goes through hardware.detect. On a GPU the engine runs the
    bundle's fp16 graph (engine.gpu_graph) with a device-resident cache (DeviceOnnxModel)
    and checks it with a first step at load; if the session cannot be created, runs out of
    memory or that step fails, it loads the CPU graph instead and keeps the reason in
    `fallback_reason` (logged, shown by /ready, /metrics and `edge-agent doctor`). With
    device = cuda the same failure is an error, since the operator asked for the GPU.
    spinning: onnxruntime threads busy-wait between ops (off for machines shared with busy work, see
    runner.make_session). session_factory(model_path, threads, providers) replaces runner.make_session (tests);
    gpu_device_type "cpu" runs the GPU path's graph and cache on host memory (tests and
    scripts/gpu-check's parity run on machines without a GPU). int4_head_max_rows: with a bundle that has
    both output heads, the most rows a step may have to take the int4 head (runner.INT4_HEAD_MAX_ROWS when
    None; the GPU graph always runs the int8 one). Raises ValueError for a negative one. prepacked_cache: a folder
    for onnxruntime's prepacked CPU weights saved in a file (engine.prepacked; None: prepacked at each load).
    """

    def __init__(
        self,
        bundle: Bundle,
        threads: int = 0,
        max_batch: int = 16,
        context_length: int | None = None,
        device: str = "auto",
        session_factory: Callable[..., Any] | None = None,
        gpu_device_type: str = "cuda",
        spinning: bool = True,
        int4_head_max_rows: int | None = None,
        prepacked_cache: Path | None = None,
    ):
        self.bundle = bundle
        arch = bundle.architecture
        self.vocab_size = int(arch["vocab_size"])
        self.context_length = min(bundle.context_length, context_length or bundle.context_length)
        self.max_batch = max_batch
        hw = detect(device, gpu_need(bundle, max_batch, self.context_length) if device != "cpu" else None)
        self.hardware = hw
        self.device_reason = hw.reason
        self.fallback_reason: str | None = None
        self.threads = threads or hw.physical_cores
        self.tokenizer = Tokenizer.from_file(str(bundle.tokenizer_file))
        release_free_heap()  # parsing tokenizer.json leaves ~200 MB of freed heap mapped
        self.stop_token_ids = frozenset(bundle.stop_token_ids)
        special = bundle.manifest.get("special_tokens", {})
        never = mark_never_written(self.tokenizer, (special.get(k) for k in ("bos", "pad", "unk")), self.stop_token_ids)
        # tokens the scheduler never samples: image markers, unused slots, bos/pad/unk (not rendered either)
        self.never_generated_ids = np.asarray([i for i in never if i < self.vocab_size], np.int64)
        self.never_generated_set = frozenset(self.never_generated_ids.tolist())
        factory = session_factory or (make_session if spinning else functools.partial(make_session, spinning=False))
        embedding = Embedding(bundle.path)
        self.model: Any = None
        self.device = "cpu"
        if hw.device == "cuda":
            try:
                self.model = self._load_gpu(hw, factory, embedding, gpu_device_type)
                self.device = "cuda"
            except Exception as e:  # any failure of the GPU path: the CPU still serves
                reason = failure_text(e)
                self.model = None
                gc.collect()  # drop a half-built session and its device memory now
                if device == "cuda":
                    raise DeviceError(f"device = cuda, but the GPU could not serve the model: {reason}; set device = auto to fall back to the CPU") from e
                self.fallback_reason = reason
                self.max_batch = max_batch
                log.warning("GPU session failed (%s): falling back to the CPU", reason)
        if self.model is None:
            session, graph = prepacked.load_session(bundle.model_file, prepacked_cache, lambda p: factory(p, self.threads, ["CPUExecutionProvider"]))
            self.model = OnnxModel(session, self._cache_shape(), self.vocab_size, embedding, int4_head_max_rows, _head_pages(graph))
        release_free_heap()
        log.info(
            "loaded %s (%s, %d layers) on %s with %d threads, %d slots x %d tokens",
            bundle.name, arch["arch"], int(arch["num_layers"]), self.device, self.threads, self.max_batch, self.context_length,
        )

    def _cache_shape(self) -> CacheShape:
        arch = self.bundle.architecture
        window, local = int(arch.get("sliding_window") or 0), arch.get("layer_is_local") or []
        return CacheShape(
            layers=int(arch["num_layers"]), kv_heads=int(arch["num_kv_heads"]), head_dim=int(arch["head_dim"]),
            slots=self.max_batch, max_len=self.context_length,
            windows=tuple(window if window and i < len(local) and local[i] else 0 for i in range(int(arch["num_layers"]))),
        )

    def _load_gpu(self, hw: Hardware, factory: Callable[..., Any], embedding: Embedding, device_type: str) -> DeviceOnnxModel:
        """The fp16 graph in a CUDA session with a device cache, after one smoke step.

        Raises whatever fails: building the graph, the session, the provider not loading, the step.
        """
        from edge_agent.engine.gpu_graph import ensure_gpu_graph

        graph = ensure_gpu_graph(self.bundle)
        index = hw.gpu.index if hw.gpu is not None else 0
        if hw.slots is not None:
            self.max_batch = min(self.max_batch, hw.slots)
        if device_type == "cuda":
            _preload_cuda_libraries()
            providers: list[Any] = [(CUDA, {"device_id": index, "arena_extend_strategy": "kSameAsRequested"}), "CPUExecutionProvider"]
            wanted = CUDA
        else:
            providers, wanted = ["CPUExecutionProvider"], "CPUExecutionProvider"
        session = factory(graph, self.threads, providers)
        if wanted not in session.get_providers():
            raise RuntimeError(
                "onnxruntime did not load its CUDA provider (CUDA 13 or cuDNN 9 libraries missing? "
                "install the `gpu` extra, see the README's GPU section)"
            )
        model = DeviceOnnxModel(session, self._cache_shape(), self.vocab_size, embedding, device_type, index)
        smoke_test(model, self.bundle.bos_token_id or 0)
        return model

    def device_status(self) -> dict[str, Any]:
        """device, why it was chosen, and the GPU failure that sent it to the CPU (None when none)."""
        return {"device": self.device, "reason": self.device_reason, "fallback_reason": self.fallback_reason}

    @property
    def name(self) -> str:
        return self.bundle.name

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of text; the bundle's tokenizer adds BOS where the model expects it."""
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int] | np.ndarray, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)
