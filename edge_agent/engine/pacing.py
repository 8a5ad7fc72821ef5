"""Pacing: while interactive sequences decode beside batch work, batch work gets a bounded share of the model's time.

The scheduler runs one model call after another on one thread, so every batch call made between two
of a user's tokens delays the second: a batch prompt's prefill chunk (64 tokens, ~50 ms on the default
model on 2 cores) and a decode step over all rows (13 rows: ~3.5x the time of a 1-row step). Unpaced, a
100-token answer beside a summarize run took 6-10x as long as alone, though its first token came within
1.3x (scripts/bench_jobs.py). Admission order alone cannot fix that: the user is already running.

As vLLM's chunked-prefill scheduler puts decode rows first under a token budget per step, the scheduler
here keeps interactive rows in the lowest slots (a step over them alone is a step over a prefix of the
slots, which the runner binds without a copy) and keeps a time credit: a step that gives the interactive
rows a token earns interactive_slowdown x the time of a step over them alone (a moving average), and
every model call costs its own time. While the credit is negative the scheduler runs the interactive
rows alone and batch prompts wait; otherwise the step runs as it would unpaced (a batch prefill chunk, then
a step over all rows, which gives the users a token too: prefill and decode keep their unpaced mix). So an interactive token takes about
interactive_slowdown x its time alone, on average, and the batch work gets the rest of the time; with no
interactive row decoding nothing changes (credit 0, every step carries every row). A user who arrives
while every slot is held by a decoding sequence has no free slot to be swapped through: it stays in its
slot and a "users only" step runs the prefix up to it (correct, only less fast).

Measured (scripts/bench_jobs.py --answer-tokens 100 --interleave: 20 requests beside a summarize run on 12
slots, Gemma 3 270M, 2 cores shared with other work at load ~9): a 100-token completion's p95 busy/idle was
4.8x unpaced; paced at interactive_slowdown 2 it was 2.1-2.2x, at 2.5 2.3x, at 3 3.5x, while the run's
generated tok/s beside the user fell by 32-38%, 24% and 8%. Batch work with no user decoding runs the same
steps as unpaced.

BatchScheduler (engine/scheduler.py) inherits these methods; they run on its loop thread.
"""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)

ALONE_EMA = 0.2  # weight of the newest users-only step in the moving average of their time


class Pacing:
    """The pacing part of BatchScheduler (a mixin: the state lives in the scheduler)."""

    interactive_slowdown: float
    _credit: float
    _alone_s: float | None

    def _paced(self) -> bool:
        """True when interactive rows decode while batch work (a batch prompt, batch rows) waits for the model;
        resets the credit otherwise."""
        if self.interactive_slowdown > 0 and any(not s.batch for s in self._decoding):
            p = self._prefilling
            if p is not None and p.batch or any(s.batch for s in self._decoding):
                return True
        self._credit = 0.0
        return False

    def _batch_may_run(self) -> bool:
        """While paced: whether the credit lets batch work (a batch prefill chunk, a step over all rows) run now."""
        return self._credit >= 0.0

    def _user_rows(self) -> int:
        """The rows a users-only step runs: slots 0 up to the last interactive row (all of them when _front_users could not
        move them to the front)."""
        last = max((i for i, s in enumerate(self._decoding) if not s.batch), default=-1)
        return last + 1

    def _charge(self, seconds: float, user_token: bool, alone: bool) -> None:
        """Book one paced model call: it took `seconds`; user_token: the interactive rows got a token from it;
        alone: it ran the interactive rows and nothing else."""
        if alone:
            prev = self._alone_s
            self._alone_s = seconds if prev is None else (1 - ALONE_EMA) * prev + ALONE_EMA * seconds
        earn = self.interactive_slowdown * (self._alone_s or 0.0) if user_token else 0.0
        self._credit = min(self._credit + earn - seconds, earn)  # capped: batch work runs at most one step ahead

    def _front_users(self) -> None:
        """Swap interactive rows that sit behind batch rows into the lowest slots, through the first free slot.

        No free slot (every slot held): nothing moves. A cache copy that fails requeues the sequence it was
        for (scheduler._move), as a failed move in _release does.
        """
        dec = self._decoding
        while True:
            i = next((j for j, s in enumerate(dec) if s.batch), None)
            m = max((j for j, s in enumerate(dec) if not s.batch), default=-1)
            free = self.active
            if i is None or m < i or free >= self.max_batch:
                return
            a, b = dec[i], dec[m]
            try:
                self.model.move_slot(a.slot, free, a.length)
            except Exception:
                log.exception("moving a batch row out of the way failed; the interactive row stays behind it")
                return
            a.slot = free
            dec[i], dec[m] = b, a
            self._move(b, i, b.length)  # on failure b is requeued and _release puts the last row in slot i
            if a.slot == free and m < len(dec) and dec[m] is a:
                self._move(a, m, a.length)
                if b.slot < 0 and a.slot == m:  # b's _release gave back the spare slot's pages: a's cache is gone
                    self._preempt(a)
            self._release_spare()

    def _release_spare(self) -> None:
        """Give back the cache memory of the slots above the active ones (the swap's spare slot)."""
        release = getattr(self.model, "release_slots", None)
        if release is not None:
            try:
                release(self.active)
            except Exception:
                log.exception("giving back a free slot's cache memory failed")
