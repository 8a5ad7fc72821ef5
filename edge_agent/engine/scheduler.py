"""BatchScheduler: continuous batching over the engine's cache slots.

One thread owns the model. Sequences that are decoding occupy slots 0..D-1
and advance together in one batched step; at most one new sequence is
prefilled at a time, in chunks, in slot D, between decode steps, so a long
prompt delays the others by one chunk at most. A finished or cancelled
sequence leaves at once and the last slot moves into its place.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from edge_agent.engine.detokenize import IncrementalDecoder
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.prefix_cache import PrefixCache
from edge_agent.engine.sampling import is_greedy, sample
from edge_agent.engine.types import (
    ContextLengthError,
    EngineError,
    Finished,
    FinishReason,
    QueueFullError,
    SamplingParams,
    TextDelta,
    Usage,
)

log = logging.getLogger(__name__)

Event = TextDelta | Finished


class GenerationHandle:
    """What submit() returns: iterate it for TextDelta events and one final Finished."""

    def __init__(self) -> None:
        self._events: queue.Queue[Event] = queue.Queue()
        self._cancelled = threading.Event()
        self.finished: Finished | None = None

    def __iter__(self) -> Iterator[Event]:
        while self.finished is None:
            ev = self._events.get()
            if isinstance(ev, Finished):
                self.finished = ev
            yield ev

    def next_event(self, timeout: float | None = None) -> Event | None:
        """The next event, or None when none arrives within timeout seconds."""
        try:
            ev = self._events.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(ev, Finished):
            self.finished = ev
        return ev

    def cancel(self) -> None:
        """Stop the generation; its slot is freed at the scheduler's next step."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def result(self) -> Finished:
        """Wait for the end and return the Finished event."""
        for _ in self:
            pass
        assert self.finished is not None
        return self.finished


@dataclass
class _Seq:
    id: int
    prompt: np.ndarray
    params: SamplingParams
    priority: int
    handle: GenerationHandle
    rng: np.random.Generator
    detok: IncrementalDecoder
    submitted: float
    deadline: float | None
    slot: int = -1
    prefilled: int = 0
    cached: int = 0
    length: int = 0
    next_token: int = 0
    tokens: list[int] = field(default_factory=list)
    text: str = ""  # emitted so far
    held: str = ""  # decoded but held back: could be the start of a stop string
    admitted: float = 0.0
    first_token: float = 0.0
    prefill_s: float = 0.0

    def history(self) -> np.ndarray:
        return np.concatenate([self.prompt, np.asarray(self.tokens, np.int64)])


class BatchScheduler:
    """Runs every generation through one continuously batched decode loop.

    submit() raises QueueFullError when max_queue requests already wait,
    ContextLengthError when the prompt plus max_tokens exceeds the context,
    EngineError after stop().
    """

    def __init__(
        self,
        engine: OnnxEngine,
        max_queue: int = 64,
        prefill_chunk: int = 256,
        on_step: Callable[[int, float], None] | None = None,
        on_finish: Callable[[Finished], None] | None = None,
        prefix_cache_bytes: int = 128 << 20,
    ):
        self.engine = engine
        self.model = engine.model
        self.max_batch = engine.max_batch
        self.max_queue = max_queue
        self.prefill_chunk = prefill_chunk
        self.on_step = on_step
        self.on_finish = on_finish
        self._waiting: list[tuple[int, int, _Seq]] = []
        self._decoding: list[_Seq] = []
        self._prefilling: _Seq | None = None
        self._ids = itertools.count()
        self._cond = threading.Condition()
        self._accepting = True
        self._running = False
        self._thread: threading.Thread | None = None
        self.tokens_generated = 0
        self.prefix_cache = PrefixCache(prefix_cache_bytes)

    # -- public API ----------------------------------------------------------
    def start(self) -> "BatchScheduler":
        if self._thread is None:
            self._running = True
            self._thread = threading.Thread(target=self._loop, name="edge-agent-scheduler", daemon=True)
            self._thread.start()
        return self

    def stop(self, grace_s: float = 0.0) -> None:
        """Refuse new work, let running work finish within grace_s, cancel the rest, end the thread."""
        with self._cond:
            self._accepting = False
        end = time.monotonic() + grace_s
        while time.monotonic() < end and self.busy:
            time.sleep(0.02)
        with self._cond:
            for _, _, s in self._waiting:
                s.handle.cancel()
            for s in self._active():
                s.handle.cancel()
        while time.monotonic() < end + 5 and self.busy and self._thread is not None and self._thread.is_alive():
            time.sleep(0.02)
        with self._cond:
            self._running = False
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def busy(self) -> bool:
        return bool(self._waiting or self._decoding or self._prefilling)

    @property
    def queue_depth(self) -> int:
        return len(self._waiting)

    @property
    def active(self) -> int:
        return len(self._decoding) + (1 if self._prefilling else 0)

    def check_fits(self, prompt_tokens: int, max_tokens: int) -> None:
        """Raise ContextLengthError unless prompt + max_tokens fits the context."""
        if prompt_tokens + max_tokens > self.engine.context_length:
            raise ContextLengthError(prompt_tokens, max_tokens, self.engine.context_length)

    def submit(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        priority: int = 0,
        timeout_s: float | None = None,
    ) -> GenerationHandle:
        """Queue a generation; lower priority numbers run first (interactive 0, batch jobs higher)."""
        params.validate()
        if not prompt_ids:
            raise EngineError("the prompt is empty")
        self.check_fits(len(prompt_ids), params.max_tokens)
        now = time.monotonic()
        handle = GenerationHandle()
        seq = _Seq(
            id=next(self._ids),
            prompt=np.asarray(prompt_ids, np.int64),
            params=params,
            priority=priority,
            handle=handle,
            rng=np.random.default_rng(params.seed),
            detok=IncrementalDecoder(self.engine.tokenizer),
            submitted=now,
            deadline=now + timeout_s if timeout_s else None,
        )
        with self._cond:
            if not self._accepting:
                raise EngineError("the server is shutting down")
            if len(self._waiting) >= self.max_queue:
                raise QueueFullError(retry_after=1.0)
            heapq.heappush(self._waiting, (priority, seq.id, seq))
            self._cond.notify_all()
        return handle

    def generate(self, prompt: str, params: SamplingParams, **kw) -> Finished:
        """Convenience: encode, submit and wait."""
        return self.submit(self.engine.encode(prompt), params, **kw).result()

    # -- the loop ----------------------------------------------------------------
    def _active(self) -> list[_Seq]:
        return self._decoding + ([self._prefilling] if self._prefilling else [])

    def _loop(self) -> None:
        while True:
            with self._cond:
                if self._running and not self.busy:
                    self.model.shrink(0)  # idle: give the cache memory back
                while self._running and not self.busy:
                    self._cond.wait(0.5)
                if not self._running:
                    return
                self._admit()
            try:
                self._reap()
                if self._prefilling is not None:
                    self._prefill_chunk()
                if self._decoding:
                    self._decode_step()
            except Exception as e:  # never let one bad step kill the server
                log.exception("engine step failed")
                for s in self._active():
                    self._finish(s, "error", error=f"generation failed: {type(e).__name__}")

    def _admit(self) -> None:
        if self._prefilling is None and self._waiting and len(self._decoding) < self.max_batch:
            _, _, seq = heapq.heappop(self._waiting)
            seq.slot = len(self._decoding)
            seq.admitted = time.monotonic()
            hit = self.prefix_cache.lookup(seq.prompt)
            if hit is not None:
                n, keys, values = hit
                self.model.ensure_capacity(n + 1)
                self.model.copy_prefix(seq.slot, keys, values)
                seq.prefilled = seq.cached = n
            self._prefilling = seq

    def _reap(self) -> None:
        now = time.monotonic()
        for s in self._active():
            if s.handle.cancelled:
                self._finish(s, "cancelled")
            elif s.deadline is not None and now > s.deadline:
                self._finish(s, "timeout")
        with self._cond:
            keep = []
            for item in self._waiting:
                s = item[2]
                if s.handle.cancelled or (s.deadline is not None and now > s.deadline):
                    self._finish(s, "cancelled" if s.handle.cancelled else "timeout")
                else:
                    keep.append(item)
            if len(keep) != len(self._waiting):
                heapq.heapify(keep)
                self._waiting = keep

    def _prefill_chunk(self) -> None:
        s = self._prefilling
        assert s is not None
        t = time.monotonic()
        n = min(self.prefill_chunk, s.prompt.shape[0] - s.prefilled)
        logits = self.model.prefill(s.slot, s.prompt[s.prefilled : s.prefilled + n], s.prefilled)
        s.prefilled += n
        s.prefill_s += time.monotonic() - t
        if s.prefilled < s.prompt.shape[0]:
            return
        n = self.prefix_cache.wants(s.prompt)
        if n:
            self.prefix_cache.store(s.prompt, n, *self.model.read_prefix(s.slot, n))
        s.length = s.prefilled
        self._prefilling = None
        self._decoding.append(s)
        assert s.slot == len(self._decoding) - 1
        try:
            tok = self._choose(s, logits)
        except Exception as e:
            log.warning("sampling failed for one sequence: %s", e)
            self._finish(s, "error", error=f"sampling failed: {e}")
            return
        self._accept(s, tok)

    def _decode_step(self) -> None:
        seqs = self._decoding
        t = time.monotonic()
        logits = self.model.decode(
            np.fromiter((s.next_token for s in seqs), np.int64, len(seqs)),
            np.fromiter((s.length for s in seqs), np.int64, len(seqs)),
        )
        for s in seqs:
            s.length += 1
        greedy = [i for i, s in enumerate(seqs) if is_greedy(s.params)]
        picks = dict(zip(greedy, np.argmax(logits[greedy], axis=1).tolist())) if greedy else {}
        for i, s in enumerate(list(seqs)):
            if i in picks:
                self._accept(s, picks[i])
                continue
            try:
                tok = self._choose(s, logits[i])
            except Exception as e:  # a bad processor or distribution ends this sequence, not the batch
                log.warning("sampling failed for one sequence: %s", e)
                self._finish(s, "error", error=f"sampling failed: {e}")
                continue
            self._accept(s, tok)
        if self.on_step:
            self.on_step(len(seqs), time.monotonic() - t)

    def _choose(self, s: _Seq, logits: np.ndarray) -> int:
        if is_greedy(s.params):
            return int(np.argmax(logits))
        if s.params.logits_processor is not None:
            logits = np.asarray(s.params.logits_processor(list(s.tokens), logits.copy()), np.float32)
        return sample(logits, s.params, s.rng, s.history())

    def _accept(self, s: _Seq, tok: int) -> None:
        """Record one new token of s: emit its text, check every way to finish."""
        if s.first_token == 0.0:
            s.first_token = time.monotonic()
        p = s.params
        if tok in self.engine.stop_token_ids and not p.ignore_eos or tok in p.stop_token_ids:
            self._finish(s, "stop")
            return
        s.tokens.append(tok)
        s.next_token = tok
        self.tokens_generated += 1
        piece = s.detok.add(tok)
        if piece:
            if not p.stop:
                self._emit(s, piece)
            elif self._emit_until_stop(s, piece):
                self._finish(s, "stop", emit_tail=False)
                return
        if len(s.tokens) >= p.max_tokens or s.length >= self.engine.context_length:
            self._finish(s, "length")

    def _emit(self, s: _Seq, text: str) -> None:
        if text:
            s.text += text
            s.handle._events.put(TextDelta(text, []))

    def _emit_until_stop(self, s: _Seq, piece: str) -> bool:
        """Emit text up to a stop string; hold back a tail that may begin one. True when a stop string was found."""
        buf = s.held + piece
        cut = min((i for i in (buf.find(x) for x in s.params.stop) if i >= 0), default=-1)
        if cut >= 0:
            s.held = ""
            self._emit(s, buf[:cut])
            return True
        hold = 0
        for x in s.params.stop:
            for k in range(min(len(x) - 1, len(buf)), 0, -1):
                if buf.endswith(x[:k]):
                    hold = max(hold, k)
                    break
        s.held = buf[len(buf) - hold :] if hold else ""
        self._emit(s, buf[: len(buf) - hold])
        return False

    def _finish(self, s: _Seq, reason: FinishReason, error: str | None = None, emit_tail: bool = True) -> None:
        if emit_tail:
            self._emit(s, s.held + s.detok.flush())
        s.held = ""
        now = time.monotonic()
        admitted = s.admitted or now
        usage = Usage(
            prompt_tokens=int(s.prompt.shape[0]),
            completion_tokens=len(s.tokens),
            cached_tokens=s.cached,
            queue_s=admitted - s.submitted,
            prefill_s=s.prefill_s,
            ttft_s=(s.first_token - s.submitted) if s.first_token else 0.0,
            decode_s=(now - s.first_token) if s.first_token else 0.0,
            total_s=now - s.submitted,
        )
        fin = Finished(text=s.text, finish_reason=reason, usage=usage, token_ids=list(s.tokens), error=error)
        self._release(s)
        s.handle._events.put(fin)
        if self.on_finish:
            self.on_finish(fin)

    def _release(self, s: _Seq) -> None:
        """Free s's slot, keeping decoding slots contiguous from 0."""
        if self._prefilling is s:
            self._prefilling = None
        elif s in self._decoding:
            j = s.slot
            last = self._decoding.pop()
            if last is not s:
                self.model.move_slot(last.slot, j, last.length)
                last.slot = j
                self._decoding[j] = last
        p = self._prefilling
        if p is not None and p.slot != len(self._decoding):
            self.model.move_slot(p.slot, len(self._decoding), p.prefilled)
            p.slot = len(self._decoding)
