"""BatchScheduler: continuous batching over the engine's cache slots.

One thread owns the model. Sequences that are decoding occupy slots 0..D-1
and advance together in one batched step; at most one new sequence is
prefilled at a time, in chunks, in slot D, between decode steps, so a long
prompt delays the others by one chunk at most. A finished or cancelled
sequence leaves at once and the last slot moves into its place.

Priorities (lower first): batch work prefills in shorter chunks while users are
being served (batch_prefill_chunk, while a user sequence runs or ended within
interactive_window_s); its slots and preemption are engine/admission.py's. A user never waits for
batch work in flight: an interactive submit() interrupts a batch-only model call
(StepGate: a batch prefill chunk, a decode step of batch rows only; it is redone
later), a user who arrives during a prefill chunk starts before the decode step
that would follow it, and its prompt is prefilled next. While users decode beside batch work, batch work gets a
bounded share of the model's time (interactive_slowdown; engine/pacing.py): their rows move to the lowest slots
and steps over them alone run between the batch steps, so their tokens, not only their first, keep their pace.

Slot invariants (check_invariants() asserts them; they hold between steps):

1. `_decoding[i].slot == i`: decoding slots are 0..D-1, contiguous, in list order.
2. The prefilling sequence, if any, sits in slot D (= len(_decoding)) and has
   0 <= prefilled < len(feed); slots above it hold nothing anyone reads.
3. D + (1 if prefilling) <= max_batch, and batch-priority sequences hold at
   most `batch_slots` (= max_batch - reserved_interactive_slots, at least 1) of them.
4. A decoding sequence has cached length == prompt + generated - 1 positions:
   its last generated token (`next_token`) is fed by the next step.
5. A waiting sequence holds no slot (slot -1, nothing prefilled); one that was
   preempted keeps the text and tokens it has already emitted, so it resumes
   by prefilling prompt + tokens[:-1] and emits nothing twice.
6. A sequence is in exactly one of waiting / prefilling / decoding until its
   handle gets its one Finished; then it is in none.

Failures: an exception in admission falls back to a plain prefill; in a
prefill it is retried once, then ends that sequence; in the batched model step
the culprit is found by re-running prefixes of the batch (each step only
rewrites its own positions, so re-running is harmless) and ends alone; in a
logits processor or sampling it ends that sequence. An unexpected exception
ends the active sequences and the loop goes on; after max_step_failures in a
row (or when the thread itself dies) every handle ends with "error",
`failure` says why and `alive` turns False (so /health and /ready fail and
the service manager restarts the daemon).
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from edge_agent.engine.admission import Admission
from edge_agent.engine.detokenize import IncrementalDecoder
from edge_agent.engine.engine import OnnxEngine
from edge_agent.engine.pacing import Pacing
from edge_agent.engine.prefix_cache import PrefixCache
from edge_agent.engine.sampling import is_greedy, token_logprob
from edge_agent.engine.sequence import Event, GenerationHandle, Sequence
from edge_agent.engine.step_gate import StepGate
from edge_agent.engine.token_choice import TokenChoice
from edge_agent.engine.types import (
    ENGINE_STOPPED,
    ContextLengthError,
    EngineError,
    Finished,
    FinishReason,
    QueueFullError,
    SamplingParams,
    StepInterrupted,
    Usage,
)

__all__ = ["BatchScheduler", "Event", "GenerationHandle"]

log = logging.getLogger(__name__)


class _EngineBroken(Exception):
    """The model fails step after step: the scheduler gives up."""


class BatchScheduler(Admission, Pacing, TokenChoice):
    """Runs every generation through one continuously batched decode loop.

    submit() raises QueueFullError when max_queue requests of its kind (interactive or
    batch) already wait, ContextLengthError when the prompt plus max_tokens exceeds the
    context, EngineError after stop() or once the loop has failed.
    """

    def __init__(
        self,
        engine: OnnxEngine,
        max_queue: int = 64,
        prefill_chunk: int = 256,
        on_step: Callable[[int, float], None] | None = None,
        on_finish: Callable[[Finished], None] | None = None,
        prefix_cache_bytes: int = 128 << 20,
        reserved_interactive_slots: int | None = None,
        max_step_failures: int = 8,
        stall_s: float = 300.0,
        batch_prefill_chunk: int | None = None,
        interactive_window_s: float = 30.0,
        user_first: bool = True,
        prefix_cache_gives_way: bool = False,
        interactive_slowdown: float = 2.0,
    ):
        self.engine = engine
        self.model = engine.model
        self.max_batch = engine.max_batch
        self.max_queue = max_queue
        self.prefill_chunk = prefill_chunk
        # while users are served (a user sequence runs or ended within interactive_window_s), batch prompts
        # prefill in shorter chunks: a user's next token, or a new user's first, waits for one at most
        self.batch_prefill_chunk = batch_prefill_chunk or max(16, prefill_chunk // 4)
        self.interactive_window_s = interactive_window_s
        self._last_interactive = -float("inf")  # when a user (non-batch) sequence last was submitted or ended
        self.on_step = on_step
        self.on_finish = on_finish
        reserved = max(1, self.max_batch // 4) if reserved_interactive_slots is None else reserved_interactive_slots
        self.reserved_interactive_slots = reserved
        self.batch_slots = max(1, self.max_batch - reserved)
        self.max_step_failures = max_step_failures
        self.stall_s = stall_s
        self._waiting: list[tuple[int, int, Sequence]] = []
        self._decoding: list[Sequence] = []
        self._prefilling: Sequence | None = None
        self._ids = itertools.count()
        self._cond = threading.Condition()
        self._accepting = True
        self._running = False
        self._thread: threading.Thread | None = None
        self._beat = time.monotonic()
        self._bad_steps = 0
        self.failure: str | None = None  # why the loop stopped for good (None while it works)
        self.tokens_generated = 0
        self.preemptions = 0
        # gives way: live sequences' host cache takes from the prefix cache's budget first (position_bytes 0: never)
        self.prefix_cache = PrefixCache(prefix_cache_bytes, getattr(self.model, "host_position_bytes", 0) if prefix_cache_gives_way else 0)
        self._gate = StepGate(self.model, self._cond)
        # False: users wait for the batch step in flight, and a preempted batch prompt's cache is dropped
        # (the policy before; scripts/bench_jobs.py compares the two)
        self.user_first = user_first
        # while users decode beside batch work, one of their tokens takes about this many times a step over
        # their rows alone, batch work the rest (0: off, every step carries every row; engine/pacing.py)
        self.interactive_slowdown = interactive_slowdown
        self._credit = 0.0
        self._alone_s: float | None = None

    @property
    def step_stats(self) -> dict:
        """Model seconds, tokens and calls by kind of step (prefill, decode, interrupted) since start."""
        return self._gate.stats.as_dict()

    # -- public API ----------------------------------------------------------
    def start(self) -> "BatchScheduler":
        if self._thread is None and self.failure is None:
            self._running = True
            self._beat = time.monotonic()
            self._thread = threading.Thread(target=self._loop, name="edge-agent-scheduler", daemon=True)
            self._thread.start()
        return self

    def stop(self, grace_s: float = 0.0, wait_s: float = 5.0) -> None:
        """Refuse new work, let running work finish within grace_s, cancel the rest, end the thread.

        Cancelled work gets wait_s to leave; every handle still unfinished after that (a step
        that never returned) gets Finished("cancelled") here.
        """
        with self._cond:
            self._accepting = False
        end = time.monotonic() + grace_s
        while time.monotonic() < end and self.busy and self._thread_alive():
            time.sleep(0.02)
        with self._cond:
            for _, _, s in self._waiting:
                s.handle.cancel()
            for s in self._active():
                s.handle.cancel()
        while time.monotonic() < end + wait_s and self.busy and self._thread_alive():
            time.sleep(0.02)
        with self._cond:
            self._running = False
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=wait_s)
            self._thread = None
        for s in self._take_all():
            self._end(s, "cancelled")

    @property
    def alive(self) -> bool:
        """True while the loop runs and makes progress (False once failed, stopped, or stuck in one step for stall_s)."""
        return (self.failure is None and self._thread_alive() and self._running
                and time.monotonic() - self._beat < self.stall_s)

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
        """Queue a generation; lower priority numbers run first (interactive 0, batch jobs BATCH_PRIORITY or more)."""
        if self.failure is not None:
            raise EngineError("the language model engine has stopped after an internal error; the service needs a restart")
        params.validate()
        if not prompt_ids:
            raise EngineError("the prompt is empty")
        self.check_fits(len(prompt_ids), params.max_tokens)
        now = time.monotonic()
        handle = GenerationHandle()
        seq = Sequence(
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
        if not seq.batch:
            self._last_interactive = now
        with self._cond:
            if self.failure is not None or not self._accepting:
                raise EngineError("the server is shutting down" if self.failure is None else "the language model engine has stopped")
            if sum(1 for _, _, s in self._waiting if s.batch == seq.batch) >= self.max_queue:
                raise QueueFullError(retry_after=1.0)
            heapq.heappush(self._waiting, (priority, seq.id, seq))
            if not seq.batch:
                seq.waited_for = self._gate.arrived(interrupt=self.user_first)
            self._cond.notify_all()
        return handle

    def generate(self, prompt: str, params: SamplingParams, **kw) -> Finished:
        """Convenience: encode, submit and wait."""
        return self.submit(self.engine.encode(prompt), params, **kw).result()

    def check_invariants(self) -> None:
        """Raise AssertionError unless the slot invariants of the module docstring hold (call between steps)."""
        dec, p = self._decoding, self._prefilling
        for i, s in enumerate(dec):
            assert s.slot == i, f"decoding sequence {s.id} in slot {s.slot}, expected {i}"
            assert s.feed is not None and s.prefilled == len(s.feed), f"sequence {s.id} decodes before its prefill ended"
            assert s.tokens and s.next_token == s.tokens[-1], f"sequence {s.id} has no token to feed"
            assert s.length == len(s.prompt) + len(s.tokens) - 1, f"sequence {s.id} caches {s.length} positions"
        if p is not None:
            assert p.slot == len(dec), f"prefilling sequence in slot {p.slot}, expected {len(dec)}"
            assert p.feed is not None and 0 <= p.prefilled < len(p.feed), f"prefill of {p.id} at {p.prefilled}"
        active = self._active()
        assert len(active) <= self.max_batch, f"{len(active)} sequences in {self.max_batch} slots"
        assert sum(s.batch for s in active) <= self.batch_slots, "batch sequences hold reserved slots"
        waiting = [s for _, _, s in self._waiting]
        for s in waiting:
            assert s.slot == -1 and s.prefilled == 0, f"waiting sequence {s.id} holds slot {s.slot}"
        everyone = [s.id for s in active + waiting]
        assert len(everyone) == len(set(everyone)), "a sequence is in two places"
        assert not any(s.handle.ended for s in active + waiting), "a finished sequence still holds a place"

    # -- the loop ----------------------------------------------------------------
    def _thread_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _active(self) -> list[Sequence]:
        return self._decoding + ([self._prefilling] if self._prefilling else [])

    def _loop(self) -> None:
        failures = 0
        shrunk = False
        try:
            while True:
                with self._cond:
                    while self._running and not self.busy:
                        self._beat = time.monotonic()
                        self._gate.in_flight = "idle"
                        if not shrunk:  # idle: give the cache memory back, once
                            shrunk = True
                            try:
                                self.model.shrink(0)
                            except Exception:
                                log.exception("giving back the cache memory failed")
                        self._cond.wait(0.5)
                    if not self._running:
                        return
                shrunk = False
                try:
                    self._step()
                    failures = 0
                except Exception as e:  # never let one bad step kill the server
                    failures += 1
                    log.exception("engine step failed (%d in a row)", failures)
                    if failures >= self.max_step_failures or isinstance(e, _EngineBroken):
                        raise
                    self._recover(e)
                    time.sleep(min(0.5, 0.01 * 2**failures))
        except BaseException as e:
            self._die(e)

    def _step(self) -> None:
        self._beat = time.monotonic()
        self._reap()
        self._admit()
        self._give_way()
        paced = self._paced()
        batch_turn = not paced or self._batch_may_run()  # a step as unpaced (a batch chunk, all rows) or the users alone
        p = self._prefilling
        if p is not None and (batch_turn or not p.batch):
            t = time.perf_counter()
            self._prefill_chunk()
            if paced and p.batch:
                self._charge(time.perf_counter() - t, user_token=False, alone=False)
            if self._user_can_start():  # a user came during the chunk, or a user's prompt is not done:
                return  # their prefill goes before a decode step of batch rows
        if self._decoding:
            paced = self._paced()  # the chunk may have ended a user's prompt
            if paced:
                self._front_users()
            k = len(self._decoding) if batch_turn or not paced else self._user_rows()
            t = time.perf_counter()
            alone = self._decode_step(k)
            if paced:
                self._charge(time.perf_counter() - t, user_token=True, alone=alone)

    def _give_way(self, leaving: Sequence | None = None) -> None:
        """With prefix_cache_gives_way: cached prefixes keep what the live sequences' cache (all but `leaving`,
        whose cache is about to go) leaves of the budget."""
        per = self.prefix_cache.position_bytes
        if per:
            self.prefix_cache.give_way(per * sum(max(s.length, s.prefilled) for s in self._active() if s is not leaving))

    def _recover(self, e: Exception) -> None:
        """After an unexpected exception: end the active sequences (their state is unknown); waiting ones stay."""
        if isinstance(e, MemoryError):
            self.prefix_cache = PrefixCache(self.prefix_cache.max_bytes, self.prefix_cache.position_bytes)
        active = self._active()
        self._decoding, self._prefilling = [], None
        for s in active:
            self._end(s, "error", error=f"generation failed: {type(e).__name__}")

    def _die(self, e: BaseException) -> None:
        """The loop cannot go on: record why, refuse work and end every handle with an error."""
        self.failure = f"{type(e).__name__} in the decode loop; see the daemon's log"  # no message: it may name paths
        log.critical("the scheduler stopped (%s: %s); every generation ends with an error", type(e).__name__, e, exc_info=e)
        for s in self._take_all():
            self._end(s, "error", error=ENGINE_STOPPED)

    def _take_all(self) -> list[Sequence]:
        """Remove and return every waiting and active sequence (refusing new work)."""
        with self._cond:
            self._accepting = False
            seqs = [s for _, _, s in self._waiting] + self._active()
            self._waiting, self._decoding, self._prefilling = [], [], None
        return seqs

    def _prefill_chunk(self) -> None:
        s = self._prefilling
        assert s is not None and s.feed is not None
        feed = s.feed
        t = time.monotonic()
        chunk = self.prefill_chunk
        if s.batch and (t - self._last_interactive < self.interactive_window_s or any(not d.batch for d in self._decoding)):
            chunk = self.batch_prefill_chunk
        n = min(chunk, feed.shape[0] - s.prefilled)
        try:
            with self._gate.step("prefill", n, interruptible=s.batch):
                logits = self.model.prefill(s.slot, feed[s.prefilled : s.prefilled + n], s.prefilled)
        except StepInterrupted:
            return  # an interactive request arrived: it goes first, this chunk is redone after it
        except Exception as e:
            self._model_failed()
            s.prefill_failures += 1
            log.warning("prefill failed (%s: %s), attempt %d", type(e).__name__, e, s.prefill_failures)
            if s.prefill_failures >= 2:
                self._finish(s, "error", error=f"the prompt could not be processed: {type(e).__name__}")
            return
        self._bad_steps = 0
        s.prefilled += n
        s.prefill_s += time.monotonic() - t
        if s.prefilled < feed.shape[0]:
            return
        try:
            n = self.prefix_cache.wants(s.prompt)
            if n:
                self.prefix_cache.store(s.prompt, n, *self.model.read_prefix(s.slot, n))
        except Exception:
            log.exception("storing a prompt prefix failed")
        s.length = s.prefilled
        self._prefilling = None
        self._decoding.append(s)
        if s.tokens:  # resumed after a preemption: its next token is already known
            return
        self._choose_and_accept(s, logits)

    def _feed(self, k: int, interruptible: bool = False) -> np.ndarray:
        """Run one decode step over slots 0..k-1; their logits [k, vocab]."""
        seqs = self._decoding
        with self._gate.step("decode", k, interruptible):
            return self.model.decode(
                np.fromiter((s.next_token for s in seqs[:k]), np.int64, k),
                np.fromiter((s.length for s in seqs[:k]), np.int64, k),
            )

    def _decode_step(self, k: int | None = None) -> bool:
        """One decode step over slots 0..k-1 (all decoding rows when None); True when they were all interactive."""
        seqs = self._decoding[:k]
        alone = all(not s.batch for s in seqs)
        t = time.monotonic()
        try:
            logits = self._feed(len(seqs), interruptible=all(s.batch for s in seqs))
        except StepInterrupted:
            return False  # an interactive request arrived: its prefill goes first, this step is redone after it
        except Exception as e:
            self._isolate_step_failure(e)
            return False
        self._bad_steps = 0
        for s in seqs:
            s.length += 1
        greedy = [i for i, s in enumerate(seqs) if is_greedy(s.params) and not self._below_min(s)]
        # row by row: logits[greedy] would copy 16 x 262k floats (17 MB, 1.4 ms against 0.4 ms) every step;
        # a pick the engine never generates (an image marker) goes the long way, through the ban
        never = self.engine.never_generated_set
        picks = {i: tok for i in greedy if (tok := int(np.argmax(logits[i]))) not in never}
        for i, s in enumerate(seqs):
            if s.slot < 0:  # requeued during this loop (its cache could not move): it recomputes this token
                continue
            tok = picks.get(i)
            if tok is None:
                self._choose_and_accept(s, logits[i])
                continue
            try:
                self._accept(s, tok, None if s.logprobs is None else token_logprob(logits[i], tok, s.params.logprobs))
            except Exception as e:
                log.exception("accepting a token failed")
                self._finish(s, "error", error=f"generation failed: {type(e).__name__}")
        if self.on_step:
            try:
                self.on_step(len(seqs), time.monotonic() - t)
            except Exception:
                log.exception("on_step failed")
        return alone

    def _model_failed(self) -> None:
        """Count a failed model step; raise _EngineBroken when they keep failing."""
        self._bad_steps += 1
        if self._bad_steps >= self.max_step_failures:
            raise _EngineBroken(f"{self._bad_steps} model steps failed in a row")

    def _isolate_step_failure(self, e: Exception) -> None:
        """The batched step raised: find the shortest failing prefix of the batch and end its last sequence.

        A failure that does not come back (transient) ends nobody: the next step runs them all again.
        """
        self._model_failed()
        seqs = self._decoding
        log.warning("decode step over %d sequences failed (%s: %s); looking for the cause", len(seqs), type(e).__name__, e)

        def fails(k: int) -> bool:
            try:
                self._feed(k)
                return False
            except Exception:
                return True

        lo, hi = 1, len(seqs)
        while lo < hi:
            mid = (lo + hi) // 2
            if fails(mid):
                hi = mid
            else:
                lo = mid + 1
        if hi == len(seqs) and not fails(hi):
            return
        self._finish(seqs[hi - 1], "error", error=f"the model step failed: {type(e).__name__}")

    def _finish(self, s: Sequence, reason: FinishReason, error: str | None = None, emit_tail: bool = True) -> None:
        """Free s's place and send its Finished event (always, even if freeing fails)."""
        try:
            if emit_tail:
                s.emit(s.held + s.detok.flush())
            s.held = ""
            self._release(s)
        finally:
            self._end(s, reason, error)

    def _end(self, s: Sequence, reason: FinishReason, error: str | None = None) -> None:
        """Send s's one Finished event (the sequence must hold no place any more)."""
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
            waited_for=s.waited_for,
        )
        fin = Finished(text=s.text, finish_reason=reason, usage=usage, token_ids=list(s.tokens), error=error,
                       logprobs=None if s.logprobs is None else list(s.logprobs))
        if not s.batch:
            self._last_interactive = now
        if s.handle._end(fin) and self.on_finish:
            try:
                self.on_finish(fin)
            except Exception:
                log.exception("on_finish failed")

    def _release(self, s: Sequence) -> None:
        """Free s's slot, keeping decoding slots contiguous from 0 (a sequence whose cache cannot move is requeued)."""
        dec = self._decoding
        if self._prefilling is s:
            self._prefilling = None
        elif 0 <= s.slot < len(dec) and dec[s.slot] is s:
            j = s.slot
            last = dec.pop()
            if last is not s:
                dec[j] = last
                self._move(last, j, last.length)
        p = self._prefilling
        if p is not None and p.slot != len(dec):
            self._move(p, len(dec), p.prefilled)
        release = getattr(self.model, "release_slots", None)  # capability: host caches give pages back
        if release is not None:
            try:
                release(len(dec) + (1 if self._prefilling is not None else 0))
            except Exception:
                log.exception("giving back a free slot's cache memory failed")

    def _move(self, s: Sequence, dst: int, length: int) -> None:
        src, s.slot = s.slot, dst
        try:
            self.model.move_slot(src, dst, length)
        except Exception:
            log.exception("moving a cache slot failed; the sequence will be recomputed")
            self._preempt(s)
