"""Who runs next: admission of waiting sequences, preemption of batch work for users, and reaping.

Priorities (lower first): work at BATCH_PRIORITY or above (jobs, batch files) never holds more
than max_batch - reserved_interactive_slots slots, and is preempted when an interactive request
waits and no slot is free (the newest batch sequence, or a batch prompt being prefilled): it
waits again with its generated tokens, to recompute them in one prefill and continue; the
block-aligned part of its cache goes into the prefix cache first, so that prefill is mostly a
copy. BatchScheduler (engine/scheduler.py) inherits these methods; they run on its loop thread
and take its condition only around the waiting queue.
"""
from __future__ import annotations

import heapq
import logging
import time
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from edge_agent.engine.sequence import Sequence

log = logging.getLogger(__name__)


class Admission:
    """The admission part of BatchScheduler (a mixin: the state lives in the scheduler)."""

    def _user_can_start(self) -> bool:
        """True when a user's prompt is being prefilled beside batch rows only, or the first waiting request is
        interactive and _admit would start it now."""
        p = self._prefilling
        if not self.user_first or p is not None and not p.batch:
            return self.user_first and all(s.batch for s in self._decoding)
        with self._cond:
            if not self._waiting or self._waiting[0][2].batch:
                return False
        return p is not None or self.active < self.max_batch or any(s.batch for s in self._decoding)

    def _admit(self) -> None:
        """Start prefilling the first waiting sequence that may run, preempting batch work for an interactive one."""
        with self._cond:
            if not self._waiting:
                return
            head = self._waiting[0][2]
        p = self._prefilling
        if p is not None:
            if not (p.batch and not head.batch):
                return
            self._keep_prefix(p)
            self._preempt(p)  # an interactive request should not wait behind a batch prompt
        if head.batch:
            if self.active >= self.max_batch or sum(s.batch for s in self._decoding) >= self.batch_slots:
                return
        elif self.active >= self.max_batch:
            victims = [s for s in self._decoding if s.batch]
            if not victims:
                return
            victim = max(victims, key=lambda s: (s.priority, s.id))
            self._keep_prefix(victim)
            self._preempt(victim)
        with self._cond:
            _, _, seq = heapq.heappop(self._waiting)
        seq.slot = len(self._decoding)
        seq.admitted = seq.admitted or time.monotonic()
        seq.feed = seq.prompt if not seq.tokens else seq.history()[:-1]
        self._prefilling = seq
        try:
            hit = self.prefix_cache.lookup(seq.feed)
            if hit is not None:
                n, keys, values = hit
                self.model.ensure_capacity(n + 1)
                self.model.copy_prefix(seq.slot, keys, values)
                seq.prefilled = n
                if not seq.preempted:
                    seq.cached = n
        except Exception:
            log.exception("prefix cache lookup failed; prefilling the whole prompt")
            seq.prefilled = 0
        try:
            self._fork(seq)
        except Exception:
            log.exception("copying a sibling's prompt cache failed; prefilling the whole prompt")
            seq.prefilled = seq.cached = 0

    def _fork(self, seq: Sequence) -> None:
        """Start seq from the cache of a decoding sequence with the same prompt (n > 1 choices, continuations scored after
        one prompt, identical requests): its first len - 1 positions are copied, so only the prompt's last token is
        prefilled (the prefix cache holds whole 64-token blocks only: a 150-token prompt's 2nd..4th choices re-prefilled
        22 tokens each, a prompt under 65 tokens all of it). Not from a sibling whose sliding-window layers have
        given positions back."""
        m = len(seq.feed) - 1
        if seq.tokens or m <= seq.prefilled:
            return
        trimmed = getattr(self.model, "trimmed", None)
        for d in self._decoding:
            if (d.length >= m and len(d.prompt) >= m and (trimmed is None or int(trimmed[d.slot]) == 0)
                    and np.array_equal(d.prompt[:m], seq.feed[:m])):
                self.model.ensure_capacity(m + 1)
                self.model.move_slot(d.slot, seq.slot, m)
                seq.prefilled = m
                if not seq.preempted:
                    seq.cached = m
                return

    def _keep_prefix(self, s: Sequence) -> None:
        """Store the block-aligned part of s's cache (prefilling or decoding) in the prefix cache, so that it resumes by a copy."""
        if not self.user_first:
            return
        t = time.perf_counter()
        try:
            src, cached = (s.feed, s.prefilled) if s is self._prefilling else (s.history()[:-1], s.length)
            self._give_way(leaving=s)  # the memory its cache frees may hold its prefix
            n = self.prefix_cache.wants(src[: cached + 1]) if src is not None and cached > 0 else 0
            if n:
                self.prefix_cache.store(src, n, *self.model.read_prefix(s.slot, n))
        except Exception:
            log.exception("keeping a preempted sequence's cache failed; it will be recomputed")
        self._gate.stats.saved_prefix_s += time.perf_counter() - t

    def _preempt(self, s: Sequence) -> None:
        """Drop s's cache and queue it again; it resumes from its prompt and the tokens it has."""
        self._release(s)
        s.slot, s.prefilled, s.length = -1, 0, 0
        s.preempted += 1
        self.preemptions += 1
        with self._cond:
            heapq.heappush(self._waiting, (s.priority, s.id, s))

    def _reap(self) -> None:
        now = time.monotonic()
        for s in self._active():
            if s.handle.cancelled:
                self._finish(s, "cancelled")
            elif s.deadline is not None and now > s.deadline:
                self._finish(s, "timeout")
        if not self._waiting:
            return
        with self._cond:
            keep, gone = [], []
            for item in self._waiting:
                s = item[2]
                if s.handle.cancelled or (s.deadline is not None and now > s.deadline):
                    gone.append(s)
                else:
                    keep.append(item)
            if gone:
                heapq.heapify(keep)
                self._waiting = keep
        for s in gone:
            self._finish(s, "cancelled" if s.handle.cancelled else "timeout")
