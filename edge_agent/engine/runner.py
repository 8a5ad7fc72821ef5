"""One onnxruntime session over our graph, with the key/value cache kept in place.

The cache is one buffer per layer and kind, [slots, kv_heads, capacity,
head_dim]. A step over the first B slots binds the first B rows of every
buffer as both past and present, so GroupQueryAttention appends the new
keys/values in place: no step copies the cache. onnxruntime's CPU kernel
touches the whole bound length every step, so the capacity is not the context
length but grows (doubling, with one copy) as sequences get longer, and
shrinks back when the engine is idle: step time and memory follow the
sequences actually held; a slot no sequence holds gives its pages back
(release_slots). Small input tensors live in
preallocated arrays bound once; a decode step only writes into them and runs.

The cache's element type is the graph's: fp32, or int8 / int4 (two a byte) quantized by
onnxruntime 1.32's CPU GroupQueryAttention itself with static per-channel scales the bundle carries
(models.onnx_builder's kv_cache, calibrated by models.kv_cache); the buffers, the prefix cache's
copies and every byte count (capacity, trimming, released slots, host_position_bytes) follow it.
One GQA layer of Gemma 3 270M, decode step, 2 threads: 16 rows x 600 positions 1.54 ms fp32 against
1.01 ms int8, 1 x 600 0.129 against 0.068 ms. (An fp16 cache runs 1.45x slower than fp32 at
16 x 200 and ~4x at 600: x86 has no fp16 GEMM in MLAS.) With local_window_size the kernel still reads
every position from 0 but gives the ones outside the window no weight: the sliding-window layers'
positions far behind a decoding sequence are given back (trim_windows), and reading them maps the
system's zero page, which is not resident memory (so the mappings are private, not shared).
"""
from __future__ import annotations

import logging
import mmap
import os
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from edge_agent.engine.prefix_cache import pack
from edge_agent.engine.rescore import HeadRescorer
from edge_agent.engine.types import StepInterrupted

log = logging.getLogger(__name__)


MIN_CAPACITY = 256
# Sliding-window layers: positions more than window + WINDOW_MARGIN behind a decoding sequence are
# never attended again; their pages are given back once TRIM_STEP such positions have gathered.
WINDOW_MARGIN = 0
TRIM_STEP = 32
# A graph with two output heads (models.onnx_builder's lm_head "dual") takes this boolean input: true runs
# the int4 head, false the int8 head; the top logits of either are then re-scored exactly (engine.rescore).
HEAD_SELECT = "lm_head_int4"
# A graph with an int8 key/value cache may take this boolean input (models.kv_prompt): true attends a prompt step's
# tokens to the dequantized cache in fp32 (one sequence, more than one token), false with the int8 kernel.
PROMPT_STEP = "prompt_step"
# Steps of at most this many rows take the int4 head of such a graph, larger ones the int8 head (the
# setting int4_head_max_rows). Gemma 3 270M, one 16-slot engine, decode step time int8 head / int4 head
# (re-scoring included; scripts/bench_head_rows.py, paired rounds, medians; a shared 2-core machine):
#   rows                            1     2     4     6     8     16
#   2 threads, load 1.0 -> 1.9    1.24  1.27  1.13  1.05  0.99  0.86   (11 rounds, spinning on)
#   2 threads, load 8.5 -> 7.6    1.07  1.20  1.15  1.05  1.00  0.95   (15 rounds, spinning off)
#   1 thread,  load 7.6 -> 9.2    1.10  1.29  1.15  1.00  0.96  0.84   (11 rounds)
# The int4 head wins by 13% or more up to 4 rows, by 0-5% at 6 and loses from 8 (MatMulNBits works
# through its blocks again for more rows where the int8 GEMM does not); where it barely wins, the int8
# head's better perplexity (1.011x fp32 against 1.016x, both re-scored) decides.
INT4_HEAD_MAX_ROWS = 4
# A dual graph's head gives its weight pages back before a step takes the other head (head_pages: the weights
# mapped from the saved prepacked file; they are read from the page cache again when it is next taken), so the
# two are not resident together: Gemma 3 270M's int4 head is 120 MB of prepacked weights, its int8 head 161 MB.
# Prefills take the head the last decode step took. A head is given back at most once every HEAD_DROP_EVERY
# steps (a batch crossing INT4_HEAD_MAX_ROWS back and forth re-reads each head that often at most: 5-25 ms for
# that step at load 9). 16 x (512 + 128) tokens, int8 key/value cache: peak RSS 706 MB when the other head went
# after 16 idle steps, 699 after 4 (both heads were resident as the batch shrank), 654 given back first.
HEAD_DROP_EVERY = 32
# The cache element types a graph may declare (onnxruntime's type strings)
CACHE_TYPES = {"tensor(float)": np.float32, "tensor(int8)": np.int8, "tensor(uint8)": np.uint8}


def _lazy_zeros(shape: tuple[int, ...], huge: bool = False, dtype: np.dtype = np.dtype(np.float32)) -> np.ndarray:
    """A zero array (float32 unless dtype says) in its own private anonymous mapping: a page becomes resident only when
    it is written (reading an unwritten or given-back page maps the shared zero page), and the whole
    mapping goes back to the system when the array is freed. Huge pages are refused, so one write
    makes 4 KB resident, not 2 MB. (np.zeros may reuse heap memory that calloc must clear, which
    makes every slot resident.) huge: huge pages asked for instead, as numpy asks for its own large
    arrays (for buffers written whole, such as the logits rows)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    m = mmap.mmap(-1, max(n, 1), flags=mmap.MAP_PRIVATE)
    advice = "MADV_HUGEPAGE" if huge else "MADV_NOHUGEPAGE"
    if hasattr(mmap, advice):
        m.madvise(getattr(mmap, advice))
    return np.frombuffer(m, dtype, count=n // dtype.itemsize).reshape(shape)


def _drop_pages(arr: np.ndarray, start: int, stop: int) -> None:
    """Give back the whole pages of bytes start..stop of a _lazy_zeros array (they read as zeros again).

    A no-op where the system lacks MADV_DONTNEED or the array is not one of ours.
    """
    base = arr
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    m = base.obj if isinstance(base, memoryview) else None
    if not isinstance(m, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    page = mmap.PAGESIZE
    start, stop = -(-start // page) * page, min(stop, len(m)) // page * page
    if start < stop:
        m.madvise(mmap.MADV_DONTNEED, start, stop - start)


@dataclass
class CacheShape:
    layers: int
    kv_heads: int
    head_dim: int
    slots: int
    max_len: int
    windows: tuple[int, ...] = ()  # per layer: its sliding window (0: attends to every position)


def make_session(model_path: Path, threads: int, providers: list[str] | None = None, optimized_path: Path | None = None,
                 spinning: bool = True) -> ort.InferenceSession:
    """An InferenceSession with all graph optimisations; saves the optimised graph once when asked.

    spinning: worker threads busy-wait between ops (fastest on a machine of its own). On a machine
    whose cores other busy processes share, a spinning thread burns the time slice its partner needs:
    Gemma 3 270M at load average 12 on 2 cores, 9 alternating rounds, spinning off took a 512-token
    prefill 1.92x and a decode step 1.76x (1 row) / 1.70x (16 rows) faster (/tmp probe, wt-prefill).

    Raises onnxruntime's errors for unreadable graphs.
    """
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if threads > 0:
        so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    so.enable_mem_pattern = False  # shapes change every step
    # onnxruntime's own warnings (nodes placed on the CPU beside a GPU, unused initializers) are for -v
    so.log_severity_level = 2 if logging.getLogger("edge_agent").isEnabledFor(logging.DEBUG) else 3
    return ort.InferenceSession(str(model_path), so, providers=providers or ["CPUExecutionProvider"])


class Embedding:
    """The token embedding, read from embed.npy row by row: int8 rows with one scale each (or fp32 rows).

    Kept outside the graph so that the output projection's weights have one user
    (onnxruntime frees them after prepacking). Rows are read with pread rather than
    through a memory map: the page cache holds the table once for every process and is
    not this process's resident memory, while a mapping made each touched row map its
    whole page-cache folio (~0.3 MB: +61 MB resident after one 512-token prefill).
    """

    def __init__(self, folder: Path):
        path = folder / "embed.npy"
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran_order, dtype = read_header(f)
            self._offset = f.tell()
        if fortran_order or len(shape) != 2:
            raise ValueError(f"{path.name}: expected a row-major [vocab, dim] table")
        self.rows, self.dim = int(shape[0]), int(shape[1])
        self.dtype = np.dtype(dtype)
        self._row_bytes = self.dim * self.dtype.itemsize
        self._fd = os.open(path, os.O_RDONLY)
        self._close = weakref.finalize(self, os.close, self._fd)
        scale = folder / "embed_scale.npy"
        self.scale = np.load(scale) if scale.is_file() else None

    def read(self, ids: np.ndarray) -> np.ndarray:
        """The stored rows of ids [n] ([n, dim], the table's dtype)."""
        rows = np.empty((len(ids), self.dim), self.dtype)
        for i, t in enumerate(ids.tolist()):
            if not 0 <= t < self.rows:
                raise IndexError(f"token id {t} is outside the vocabulary of {self.rows}")
            if os.preadv(self._fd, [rows[i]], self._offset + t * self._row_bytes) != self._row_bytes:
                raise OSError("embed.npy is shorter than its header says")
        return rows

    def lookup(self, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Write the float32 rows of ids [n] into out [n, dim]."""
        rows = self.read(ids)
        if self.scale is None:
            out[...] = rows
        else:
            np.multiply(rows, self.scale[ids, None], out=out)
        return out


class OnnxModel:
    """Runs prefill and batched decode steps of one model over a slot-based cache."""

    def __init__(self, session: ort.InferenceSession, cache: CacheShape, vocab_size: int, embedding: Embedding,
                 int4_head_max_rows: int | None = None, head_pages: dict[bool, Any] | None = None):
        """int4_head_max_rows: for a graph with both heads, the most rows a step may have to take the int4 head
        (0: always the int8 head; None: INT4_HEAD_MAX_ROWS). head_pages: for such a graph, per head (True: the int4
        one) an object whose drop() gives its weights' pages back (prepacked.FilePages); None: they stay resident.
        Raises ValueError for a negative number."""
        self.session = session
        self.embedding = embedding
        self.cache = cache
        self.vocab_size = vocab_size
        # int8 graphs of builder 1 (models.onnx_builder.A_SCALE) return one extra (guard) row of logits after the batch's rows
        meta = session.get_modelmeta().custom_metadata_map
        self.extra_rows = int(meta.get("edge_agent.logit_guard_row", "0"))
        self.logits = _lazy_zeros((cache.slots + self.extra_rows, vocab_size), huge=True)  # 17 MB at 16 slots: given back when idle
        self.prefill_logits = np.zeros((1 + self.extra_rows, vocab_size), np.float32)
        # an int4 head tied to the embedding: the graph also returns the hidden state, the logits that can matter are re-scored
        has_hidden = any(o.name == "hidden" for o in session.get_outputs())
        self.rescorer = HeadRescorer.from_metadata(meta, embedding) if has_hidden else None
        # both heads: the int4 one (no guard row, re-scored) for steps of few rows, the int8 one for the rest
        self.dual_head = any(i.name == HEAD_SELECT for i in session.get_inputs())
        self.int4_head_max_rows = INT4_HEAD_MAX_ROWS if int4_head_max_rows is None else int(int4_head_max_rows)
        if self.int4_head_max_rows < 0:
            raise ValueError(f"int4_head_max_rows must be 0 or more, not {self.int4_head_max_rows}")
        self._select = {True: np.array(True), False: np.array(False)}
        self.prompt_branch = any(i.name == PROMPT_STEP for i in session.get_inputs())
        self.int4_head_steps = 0  # steps (prefill and decode) that took the int4 head of a dual graph
        self.head_pages = head_pages if self.dual_head else None
        self._prefill_int4 = self.uses_int4_head(1)  # prefills take the head of the last decode step (one row when idle)
        self._head_dropped = {True: -HEAD_DROP_EVERY, False: -HEAD_DROP_EVERY}  # per head: the step count at its last give-back
        self._head_resident = {True: False, False: False}  # whether its pages may be resident (given back at load)
        self.head_drops = 0  # times a head's pages were given back
        self.hidden = np.zeros((cache.slots, embedding.dim), np.float32)
        self.prefill_hidden = np.zeros((1, embedding.dim), np.float32)
        self._decode_bindings: dict[int, tuple[ort.IOBinding, dict[str, np.ndarray]]] = {}
        self.steps = 0
        self.step_seconds = 0.0
        self.run_options = ort.RunOptions()  # its terminate flag stops a step in flight (interrupt())
        self.run_options.log_severity_level = 4  # a step stopped inside an If branch is no ERROR line: StepInterrupted says it
        self.capacity = 0
        self.slots_used = 0  # slots 0..slots_used-1 may hold cache entries (a high-water mark)
        self.keys: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self._windowed = [i for i, w in enumerate(cache.windows) if w > 0]
        # the cache's element type and values per position as the graph declares them: float32 [.., head_dim],
        # int8 [.., head_dim] or int4 packed two a byte (uint8 [.., head_dim / 2]; models.onnx_builder's kv_cache)
        past = next((i for i in session.get_inputs() if i.name == "past_key_0"), None)
        self.cache_dtype = np.dtype(CACHE_TYPES.get(past.type if past is not None else "", np.float32))
        last = past.shape[-1] if past is not None else None
        self.cache_width = int(last) if isinstance(last, int) else cache.head_dim
        self.position_bytes = self.cache_width * self.cache_dtype.itemsize  # one position of one kv head, one layer and kind
        self.trimmed = np.zeros(cache.slots, np.int64)  # per slot: windowed layers' positions below this are given back
        # per slot: positions written since the slot was last given back (a high-water mark): a reallocation copies
        # only these, since copying a short slot's never-written positions would make their zero pages resident
        # (16 short slots and one 512-token prompt: ~147 MB of copied zeros on the default model)
        self.filled = np.zeros(cache.slots, np.int64)
        self._allocate(min(MIN_CAPACITY, cache.max_len), keep=0)

    # -- capacity ------------------------------------------------------------------
    def _allocate(self, capacity: int, keep: int) -> None:
        """(Re)allocate the buffers with `capacity` positions, keeping the first `keep` of every slot.

        The new mappings are made whole first (address space only: a failure to map leaves the old
        buffers in use); then each buffer is copied and its old mapping freed at once, so growing a
        full cache holds one buffer twice at most, not the whole cache (16 slots x 1024 positions of
        the default model: 36 MB more for a moment instead of 600 MB).
        """
        c = self.cache
        shape = (c.slots, c.kv_heads, capacity, self.cache_width)
        keys = [_lazy_zeros(shape, dtype=self.cache_dtype) for _ in range(c.layers)]
        values = [_lazy_zeros(shape, dtype=self.cache_dtype) for _ in range(c.layers)]
        used = self.slots_used if keep and self.keys else 0
        self._decode_bindings.clear()  # they point at the old buffers
        self.filled[:used] = np.minimum(self.filled[:used], keep)
        spans = [(int(self.trimmed[slot]), int(self.filled[slot])) for slot in range(used)]
        for i in range(c.layers) if used else ():
            windowed = i in self._windowed  # a given-back range copied would be resident again
            for new, olds in ((keys[i], self.keys), (values[i], self.values)):
                old = olds[i]
                for slot, (trim, hi) in enumerate(spans):
                    lo = min(trim, hi) if windowed else 0
                    if hi > lo:
                        new[slot, :, lo:hi] = old[slot, :, lo:hi]
                olds[i] = new  # the last reference: the old mapping goes back to the system here
                del old
        if not used:
            self.trimmed[:] = 0
        self.filled[used:] = 0
        self.keys, self.values = keys, values
        self.capacity = capacity
        self.slots_used = used

    def ensure_capacity(self, needed: int) -> None:
        """Grow (doubling, in steps of MIN_CAPACITY) so that `needed` positions fit.

        Raises ValueError beyond the context length.
        """
        if needed <= self.capacity:
            return
        if needed > self.cache.max_len:
            raise ValueError(f"sequence would exceed the cache ({needed} > {self.cache.max_len})")
        cap = max(needed, 2 * self.capacity)
        cap = min(self.cache.max_len, -(-cap // MIN_CAPACITY) * MIN_CAPACITY)
        self._allocate(cap, keep=self.capacity)

    def shrink(self, in_use: int) -> None:
        """Drop capacity no sequence needs (in_use: the longest cached length still wanted)."""
        if in_use == 0:
            self._prefill_int4 = self.uses_int4_head(1)
        target = min(self.cache.max_len, max(MIN_CAPACITY, -(-in_use // MIN_CAPACITY) * MIN_CAPACITY))
        if target < self.capacity:
            self._allocate(target, keep=min(in_use, target))
        if in_use == 0:  # idle: the batch's logits rows are written again before they are read
            _drop_pages(self.logits, 0, self.logits.nbytes)

    def release_slots(self, keep: int) -> None:
        """Give the memory of slots keep.. back to the system (they hold nothing anyone reads any more).

        A finished sequence's slot stays resident otherwise until the engine is idle: with sixteen
        512-token streams the pages of those that had ended made up a quarter of the peak RSS.
        """
        keep = max(0, keep)
        if keep >= self.slots_used:
            return
        first, stop = keep * self.slot_bytes, self.slots_used * self.slot_bytes
        for buf in self.keys + self.values:
            _drop_pages(buf, first, stop)
        self.trimmed[keep:] = 0
        self.filled[keep:] = 0
        self.slots_used = keep

    def _drop_positions(self, slot: int, lo: int, hi: int, layers: list[int], below_unused: bool = False) -> None:
        """Give back positions lo..hi-1 of slot in the given layers (whole pages only). below_unused: positions
        below lo are given back too, so the page lo starts in goes as well (else a trim every TRIM_STEP positions
        would keep one partly trimmed page a step: half of what an int8 Gemma 3 cache trims)."""
        c = self.cache
        row, pos = self.capacity * self.position_bytes, self.position_bytes
        for i in layers:
            for buf in (self.keys[i], self.values[i]):
                for h in range(c.kv_heads):
                    start = slot * self.slot_bytes + h * row
                    first = start + lo * pos
                    if below_unused:
                        first = max(start, first // mmap.PAGESIZE * mmap.PAGESIZE)
                    _drop_pages(buf, first, start + hi * pos)

    def trim_windows(self, lengths: np.ndarray) -> None:
        """Give back what the sliding-window layers of slots 0..B-1 (at lengths [B]) will never attend to again."""
        if not self._windowed:
            return
        for slot, n in enumerate(lengths.tolist()):
            cut = n - max(self.cache.windows[i] for i in self._windowed) - WINDOW_MARGIN
            if cut - int(self.trimmed[slot]) >= TRIM_STEP:
                self._drop_positions(slot, int(self.trimmed[slot]), cut, self._windowed, below_unused=True)
                self.trimmed[slot] = cut

    @property
    def host_position_bytes(self) -> int:
        """Host memory one cached position of one sequence takes (every layer's key and value)."""
        c = self.cache
        return c.layers * 2 * c.kv_heads * self.position_bytes

    @property
    def slot_bytes(self) -> int:
        return self.cache.kv_heads * self.capacity * self.position_bytes

    # -- output heads --------------------------------------------------------
    def uses_int4_head(self, rows: int) -> bool:
        """Whether a step whose head sees `rows` rows takes the int4 head of a dual graph (False for other graphs)."""
        return self.dual_head and rows <= self.int4_head_max_rows

    def _bind_head(self, io: ort.IOBinding, int4: bool, rows: int, out: np.ndarray, hidden: np.ndarray) -> None:
        """Bind the logits (and hidden state) outputs of a step of `rows` rows, and the head choice of a dual graph."""
        extra = 0 if int4 else self.extra_rows
        if self.dual_head:
            self._bind_array(io, HEAD_SELECT, self._select[int4])
        io.bind_output("logits", "cpu", 0, np.float32, [rows + extra, self.vocab_size], out.ctypes.data)
        if self.rescorer is not None:
            io.bind_output("hidden", "cpu", 0, np.float32, [rows, self.embedding.dim], hidden.ctypes.data)

    # -- binding helpers ---------------------------------------------------
    def _take_head(self, int4: bool) -> None:
        """Before a step that takes this head of a dual graph: give the other head's pages back if they may be resident
        and were not given back in the last HEAD_DROP_EVERY steps."""
        if not self.dual_head:
            return
        other = not int4
        if self.head_pages is not None and self._head_resident[other] and self.steps - self._head_dropped[other] >= HEAD_DROP_EVERY:
            self.head_pages[other].drop()
            self._head_resident[other] = False
            self._head_dropped[other] = self.steps
            self.head_drops += 1
        self._head_resident[int4] = True

    def _bind_cache(self, io: ort.IOBinding, first: int, count: int) -> None:
        c = self.cache
        shape = [count, c.kv_heads, self.capacity, self.cache_width]
        for i in range(c.layers):
            for kind, bufs in (("key", self.keys), ("value", self.values)):
                ptr = bufs[i].ctypes.data + first * self.slot_bytes
                io.bind_input(f"past_{kind}_{i}", "cpu", 0, self.cache_dtype, shape, ptr)
                io.bind_output(f"present_{kind}_{i}", "cpu", 0, self.cache_dtype, shape, ptr)

    def _bind_array(self, io: ort.IOBinding, name: str, arr: np.ndarray) -> None:
        io.bind_input(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)

    def _run(self, io: ort.IOBinding) -> None:
        """Run one step; raises StepInterrupted when interrupt() stopped it, onnxruntime's errors otherwise."""
        t = time.perf_counter()
        try:
            self.session.run_with_iobinding(io, self.run_options)
        except Exception:
            if self.run_options.terminate:
                raise StepInterrupted("the step was interrupted") from None
            raise
        self.step_seconds += time.perf_counter() - t
        self.steps += 1

    def interrupt(self) -> None:
        """Stop the step in flight (from another thread) within a node or so; it raises StepInterrupted."""
        self.run_options.terminate = True

    def clear_interrupt(self) -> None:
        """Let the next step run (call from the stepping thread before it)."""
        self.run_options.terminate = False

    # -- steps ---------------------------------------------------------------
    def prefill(self, slot: int, token_ids: np.ndarray, start: int) -> np.ndarray:
        """Run token_ids (positions start..) for the sequence in `slot`; returns its next-token logits [vocab].

        The slot's cache must already hold positions 0..start-1.
        """
        n = int(token_ids.shape[0])
        self.slots_used = max(self.slots_used, slot + 1)
        self.ensure_capacity(start + n)
        if start == 0:
            self.trimmed[slot] = 0
        self.filled[slot] = max(int(self.filled[slot]), start + n)
        io = self.session.io_binding()
        embeds = self.embedding.lookup(np.asarray(token_ids, np.int64), np.empty((n, self.embedding.dim), np.float32))
        pos = np.arange(start, start + n, dtype=np.int64).reshape(1, n)
        seqlens = np.array([start + n - 1], np.int32)
        total = np.array(start + n, np.int32)
        for name, arr in (("inputs_embeds", embeds.reshape(1, n, -1)), ("position_ids", pos), ("seqlens_k", seqlens), ("total_seq_len", total)):
            self._bind_array(io, name, arr)
        self._bind_cache(io, slot, 1)
        if self.prompt_branch:
            self._bind_array(io, PROMPT_STEP, self._select[n > 1])
        out = self.prefill_logits
        int4 = self._prefill_int4 and self.uses_int4_head(1)
        self._bind_head(io, int4, 1, out, self.prefill_hidden)
        self._take_head(int4)
        self._run(io)
        self.int4_head_steps += int4
        if self.rescorer is not None:
            self.rescorer.apply(out[:1], self.prefill_hidden)
        return out[0]

    def decode(self, token_ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """One step for slots 0..B-1: token_ids [B] at positions lengths [B]; returns logits [B, vocab]."""
        b = int(token_ids.shape[0])
        self.slots_used = max(self.slots_used, b)
        self.ensure_capacity(int(lengths.max()) + 1)
        bound = self._decode_bindings.get(b)  # the head (and so the bindings) depends on b alone
        if bound is None:
            io = self.session.io_binding()
            arrays = {
                "inputs_embeds": np.zeros((b, 1, self.embedding.dim), np.float32),
                "position_ids": np.zeros((b, 1), np.int64),
                "seqlens_k": np.zeros((b,), np.int32),
                "total_seq_len": np.zeros((), np.int32),
            }
            for name, arr in arrays.items():
                self._bind_array(io, name, arr)
            self._bind_cache(io, 0, b)
            if self.prompt_branch:
                self._bind_array(io, PROMPT_STEP, self._select[False])
            self._bind_head(io, self.uses_int4_head(b), b, self.logits, self.hidden)
            bound = self._decode_bindings[b] = (io, arrays)
        io, arrays = bound
        self.embedding.lookup(token_ids, arrays["inputs_embeds"][:, 0])
        arrays["position_ids"][:, 0] = lengths
        arrays["seqlens_k"][:] = lengths
        arrays["total_seq_len"][...] = int(lengths.max()) + 1
        self.filled[:b] = np.maximum(self.filled[:b], lengths + 1)
        self._prefill_int4 = int4 = self.uses_int4_head(b)
        self._take_head(int4)
        self._run(io)
        self.int4_head_steps += int4
        if self.rescorer is not None:
            self.rescorer.apply(self.logits[:b], self.hidden[:b])
        self.trim_windows(lengths)
        return self.logits[:b]

    def move_slot(self, src: int, dst: int, length: int) -> None:
        """Copy the first `length` cached positions of slot src into slot dst."""
        if src == dst or length <= 0:
            return
        self.slots_used = max(self.slots_used, dst + 1)
        lo = min(int(self.trimmed[src]), length)
        for i in range(self.cache.layers):
            first = lo if i in self._windowed else 0  # copying given-back zeros would make them resident
            for buf in (self.keys[i], self.values[i]):
                buf[dst, :, first:length] = buf[src, :, first:length]
        self._drop_positions(dst, length, self.capacity, list(range(self.cache.layers)))  # what dst's earlier sequence left
        self._drop_positions(dst, 0, lo, self._windowed)
        self.trimmed[dst] = lo
        self.filled[dst] = length

    def copy_prefix(self, slot: int, keys: list[np.ndarray], values: list[np.ndarray]) -> None:
        """Write saved key/value arrays [kv_heads, n, cache_width] per layer (the cache's dtype) into positions 0..n-1 of slot."""
        self.slots_used = max(self.slots_used, slot + 1)
        self.trimmed[slot] = 0
        self.filled[slot] = max(int(self.filled[slot]), keys[0].shape[1] if keys else 0)
        for buf, saved in zip(self.keys, keys):
            buf[slot, :, : saved.shape[1]] = saved
        for buf, saved in zip(self.values, values):
            buf[slot, :, : saved.shape[1]] = saved

    def read_prefix(self, slot: int, n: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Copies of positions 0..n-1 of slot, per layer (in one mapping of their own: prefix_cache.pack)."""
        copies = pack([b[slot, :, :n] for b in self.keys + self.values])
        return copies[: len(self.keys)], copies[len(self.keys):]
