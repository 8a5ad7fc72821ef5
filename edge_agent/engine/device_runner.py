"""The fp16 graph on a device (the CUDA provider), with the key/value cache resident on that device.

Same interface as runner.OnnxModel, so the scheduler does not know which one it drives.
The cache is one fp16 buffer per layer and kind, [slots, kv_heads, max_len, head_dim],
allocated once at full length on the device (the CUDA GroupQueryAttention reads only
each sequence's own length, so unlike the CPU kernel a long buffer costs no time; it
costs memory, which hardware.detect counted before choosing the GPU). A step binds
the first B rows of each buffer as both past and present (IO binding with device
pointers), so the new keys/values are written in place and never leave the device.
Only the small inputs travel per step (rebound each step: onnxruntime copies a host
input to the device when it is bound, not when it runs) and the logits come back.
Moving a slot, restoring a cached prefix and reading one use cudaMemcpy2D through
ctypes on the CUDA runtime that onnxruntime's CUDA provider has already loaded.

device_type "cpu" runs the same class on host buffers (the fp16 graph on the CPU
provider): how the tests exercise this path on machines without a GPU.
"""
from __future__ import annotations

import ctypes
import logging
import time

import numpy as np
import onnxruntime as ort

from edge_agent.engine.rescore import HeadRescorer
from edge_agent.engine.runner import CacheShape, Embedding

log = logging.getLogger(__name__)

_H2D, _D2H, _D2D = 1, 2, 3
CUDART_NAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so")


class CudaRuntime:
    """cudaMemcpy2D from the CUDA runtime library (already loaded by onnxruntime's CUDA provider).

    Raises OSError when no CUDA runtime library can be loaded.
    """

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id
        errors = []
        for name in CUDART_NAMES:
            try:
                self.lib = ctypes.CDLL(name)
                break
            except OSError as e:
                errors.append(str(e))
        else:
            raise OSError(f"no CUDA runtime library ({'; '.join(errors)})")
        self.lib.cudaMemcpy2D.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
        self.lib.cudaDeviceSynchronize.argtypes = []
        self.lib.cudaSetDevice.argtypes = [ctypes.c_int]

    def copy2d(self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int) -> None:
        """A strided copy between or within host and device memory, ordered with onnxruntime's own stream.

        onnxruntime runs on a non-blocking stream of its own, and a device-to-device cudaMemcpy
        returns before it is done: synchronizing before and after keeps the copy between steps.
        Raises RuntimeError with the CUDA error code.
        """
        self.lib.cudaSetDevice(self.device_id)  # this thread may not have made the model's GPU current
        self.lib.cudaDeviceSynchronize()
        rc = self.lib.cudaMemcpy2D(dst, dpitch, src, spitch, width, height, kind)
        if rc == 0:
            rc = self.lib.cudaDeviceSynchronize()
        if rc != 0:
            raise RuntimeError(f"cudaMemcpy2D failed with CUDA error {rc}")


class HostCopier:
    """The same copies in host memory (device_type cpu)."""

    def copy2d(self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int) -> None:
        for r in range(height):
            ctypes.memmove(dst + r * dpitch, src + r * spitch, width)


class DeviceOnnxModel:
    """Prefill and batched decode of the fp16 graph with a device-resident cache; the interface of runner.OnnxModel."""

    def __init__(self, session: ort.InferenceSession, cache: CacheShape, vocab_size: int, embedding: Embedding,
                 device_type: str = "cuda", device_id: int = 0):
        self.session = session
        self.embedding = embedding
        self.cache = cache
        self.vocab_size = vocab_size
        self.device_type, self.device_id = device_type, device_id
        meta = session.get_modelmeta().custom_metadata_map
        self.extra_rows = int(meta.get("edge_agent.logit_guard_row", "0"))
        self.logits = np.zeros((cache.slots + self.extra_rows, vocab_size), np.float32)
        self.prefill_logits = np.zeros((1 + self.extra_rows, vocab_size), np.float32)
        # an int4 head tied to the embedding: re-scored on the host as on the CPU path (engine.rescore)
        has_hidden = any(o.name == "hidden" for o in session.get_outputs())
        self.rescorer = HeadRescorer.from_metadata(meta, embedding) if has_hidden else None
        self.hidden = np.zeros((cache.slots, embedding.dim), np.float32)
        self.prefill_hidden = np.zeros((1, embedding.dim), np.float32)
        self.steps = 0
        self.step_seconds = 0.0
        self.capacity = cache.max_len
        shape = [cache.slots, cache.kv_heads, cache.max_len, cache.head_dim]
        self._values = [ort.OrtValue.ortvalue_from_shape_and_type(shape, np.float16, device_type, device_id) for _ in range(2 * cache.layers)]
        self._ptrs = [v.data_ptr() for v in self._values]  # keys of layer i at 2i, values at 2i + 1
        self._copier = CudaRuntime(device_id) if device_type == "cuda" else HostCopier()
        self._decode_bindings: dict[int, ort.IOBinding] = {}

    @property
    def pos_bytes(self) -> int:
        return self.cache.head_dim * 2

    @property
    def slot_bytes(self) -> int:
        c = self.cache
        return c.kv_heads * c.max_len * c.head_dim * 2

    @property
    def cache_bytes(self) -> int:
        return len(self._values) * self.cache.slots * self.slot_bytes

    # -- capacity: allocated once at full length ------------------------------------
    def ensure_capacity(self, needed: int) -> None:
        """Raises ValueError beyond the context length (the cache is already full length)."""
        if needed > self.cache.max_len:
            raise ValueError(f"sequence would exceed the cache ({needed} > {self.cache.max_len})")

    def shrink(self, in_use: int) -> None:
        """Nothing to give back: the device cache keeps its size (it was budgeted at load)."""

    # -- binding -------------------------------------------------------------------
    def _bind_cache(self, io: ort.IOBinding, first: int, count: int) -> None:
        c = self.cache
        shape = [count, c.kv_heads, c.max_len, c.head_dim]
        for i in range(c.layers):
            for j, kind in enumerate(("key", "value")):
                ptr = self._ptrs[2 * i + j] + first * self.slot_bytes
                io.bind_input(f"past_{kind}_{i}", self.device_type, self.device_id, np.float16, shape, ptr)
                io.bind_output(f"present_{kind}_{i}", self.device_type, self.device_id, np.float16, shape, ptr)

    def _run(self, io: ort.IOBinding, inputs: dict[str, np.ndarray]) -> None:
        for name, arr in inputs.items():  # copied to the device now, at binding
            io.bind_cpu_input(name, arr)
        t = time.perf_counter()
        self.session.run_with_iobinding(io)
        self.step_seconds += time.perf_counter() - t
        self.steps += 1

    # -- steps -----------------------------------------------------------------------
    def prefill(self, slot: int, token_ids: np.ndarray, start: int) -> np.ndarray:
        """Run token_ids (positions start..) for the sequence in `slot`; returns its next-token logits [vocab]."""
        n = int(token_ids.shape[0])
        self.ensure_capacity(start + n)
        io = self.session.io_binding()
        embeds = self.embedding.lookup(np.asarray(token_ids, np.int64), np.empty((n, self.embedding.dim), np.float32))
        self._bind_cache(io, slot, 1)
        out = self.prefill_logits
        io.bind_output("logits", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
        if self.rescorer is not None:
            io.bind_output("hidden", "cpu", 0, np.float32, [1, self.embedding.dim], self.prefill_hidden.ctypes.data)
        self._run(io, {
            "inputs_embeds": embeds.reshape(1, n, -1), "position_ids": np.arange(start, start + n, dtype=np.int64).reshape(1, n),
            "seqlens_k": np.array([start + n - 1], np.int32), "total_seq_len": np.array(start + n, np.int32),
        })
        if self.rescorer is not None:
            self.rescorer.apply(out[:1], self.prefill_hidden)
        return out[0]

    def decode(self, token_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """One step for slots 0..B-1: token_ids [B] at positions lengths [B]; returns logits [B, vocab]."""
        b = int(token_ids.shape[0])
        self.ensure_capacity(int(lengths.max()) + 1)
        io = self._decode_bindings.get(b)
        if io is None:
            io = self._decode_bindings[b] = self.session.io_binding()
            self._bind_cache(io, 0, b)
            io.bind_output("logits", "cpu", 0, np.float32, [b + self.extra_rows, self.vocab_size], self.logits.ctypes.data)
            if self.rescorer is not None:
                io.bind_output("hidden", "cpu", 0, np.float32, [b, self.embedding.dim], self.hidden.ctypes.data)
        embeds = self.embedding.lookup(token_ids, np.empty((b, self.embedding.dim), np.float32))
        lengths = np.asarray(lengths)
        self._run(io, {
            "inputs_embeds": embeds.reshape(b, 1, -1), "position_ids": lengths.astype(np.int64).reshape(b, 1),
            "seqlens_k": lengths.astype(np.int32), "total_seq_len": np.array(int(lengths.max()) + 1, np.int32),
        })
        if self.rescorer is not None:
            self.rescorer.apply(self.logits[:b], self.hidden[:b])
        return self.logits[:b]

    # -- moving cache rows -----------------------------------------------------------
    def _copy_rows(self, dst: int, src: int, length: int, kind: int, dst_pitch: int | None = None, src_pitch: int | None = None) -> None:
        """Copy `length` positions of every kv head (one row per head) between two slots or host arrays."""
        pitch = self.cache.max_len * self.pos_bytes
        self._copier.copy2d(dst, dst_pitch or pitch, src, src_pitch or pitch, length * self.pos_bytes, self.cache.kv_heads, kind)

    def move_slot(self, src: int, dst: int, length: int) -> None:
        """Copy the first `length` cached positions of slot src into slot dst (on the device)."""
        if src == dst or length <= 0:
            return
        for ptr in self._ptrs:
            self._copy_rows(ptr + dst * self.slot_bytes, ptr + src * self.slot_bytes, length, _D2D)

    def copy_prefix(self, slot: int, keys: list[np.ndarray], values: list[np.ndarray]) -> None:
        """Write saved key/value arrays [kv_heads, n, head_dim] per layer into positions 0..n-1 of slot."""
        for i in range(self.cache.layers):
            for j, saved in enumerate((keys[i], values[i])):
                host = np.ascontiguousarray(saved, np.float16)
                n = host.shape[1]
                self._copy_rows(self._ptrs[2 * i + j] + slot * self.slot_bytes, host.ctypes.data, n, _H2D, src_pitch=n * self.pos_bytes)

    def read_prefix(self, slot: int, n: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Host copies of positions 0..n-1 of slot, per layer ([kv_heads, n, head_dim] fp16)."""
        c = self.cache
        out: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
        for i in range(c.layers):
            for j in range(2):
                host = np.empty((c.kv_heads, n, c.head_dim), np.float16)
                self._copy_rows(host.ctypes.data, self._ptrs[2 * i + j] + slot * self.slot_bytes, n, _D2H, dst_pitch=n * self.pos_bytes)
                out[j].append(host)
        return out
