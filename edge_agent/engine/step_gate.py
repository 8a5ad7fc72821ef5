"""StepGate: the model step in flight, whether an interactive arrival may interrupt it, and time per kind of step.

The scheduler runs every model call through step(). A call marked interruptible (batch work
only: a batch prompt's prefill chunk, a decode step whose rows are all batch sequences) is
stopped by arrived() when an interactive request is submitted meanwhile (onnxruntime's
RunOptions.terminate, through the model's interrupt()): the call raises StepInterrupted a node
or so later, and the scheduler redoes it after the user's prefill. A redone step only rewrites
the cache positions it had begun to write, so nothing is lost but the partial step's time.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from edge_agent.engine.types import StepInterrupted


@dataclass
class StepStats:
    """Model time by kind of step since start (seconds; interrupted calls count only in interrupted_s)."""

    prefill_s: float = 0.0
    prefill_tokens: int = 0
    prefill_calls: int = 0
    decode_s: float = 0.0
    decode_steps: int = 0
    decode_rows: int = 0
    interrupted_steps: int = 0
    interrupted_s: float = 0.0
    saved_prefix_s: float = 0.0  # copying a preempted sequence's cache into the prefix cache

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class StepGate:
    """Runs model calls, says what is in flight and interrupts batch-only calls for interactive arrivals.

    lock is the scheduler's condition: step() and arrived() take it only for flag changes, never
    around the model call.
    """

    def __init__(self, model: Any, lock: threading.Condition | threading.Lock):
        self.model = model
        self.lock = lock
        self.can_interrupt = callable(getattr(model, "interrupt", None)) and callable(getattr(model, "clear_interrupt", None))
        self.in_flight = "idle"  # what the model is running now, for a request's Usage.waited_for
        self._interruptible = False
        self._interrupted = False
        self.stats = StepStats()

    @contextmanager
    def step(self, kind: str, size: int, interruptible: bool) -> Iterator[None]:
        """Run one model call of `kind` ("prefill": size tokens, "decode": size rows); raises what the call raises."""
        can = interruptible and self.can_interrupt
        with self.lock:
            if self.can_interrupt:
                self.model.clear_interrupt()  # a flag set after the previous call ended must not stop this one
            self._interruptible, self._interrupted = can, False
            self.in_flight = f"{'batch ' if interruptible else ''}{kind} {size}"
        t = time.perf_counter()
        try:
            yield
        except StepInterrupted:
            self.stats.interrupted_steps += 1
            self.stats.interrupted_s += time.perf_counter() - t
            raise
        else:
            dt = time.perf_counter() - t
            if kind == "prefill":
                self.stats.prefill_s += dt
                self.stats.prefill_tokens += size
                self.stats.prefill_calls += 1
            else:
                self.stats.decode_s += dt
                self.stats.decode_steps += 1
                self.stats.decode_rows += size
        finally:
            with self.lock:
                self._interruptible = False
                self.in_flight = "scheduler"

    def arrived(self, interrupt: bool = True) -> str:
        """An interactive request was just queued (call with the lock held): interrupt a batch-only call in flight.

        Returns what was in flight, with " (interrupted)" when it was stopped.
        """
        what = self.in_flight
        if interrupt and self._interruptible and not self._interrupted:
            self._interrupted = True
            self.model.interrupt()
            return what + " (interrupted)"
        return what
