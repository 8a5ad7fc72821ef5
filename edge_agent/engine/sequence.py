"""One generation's state: the handle its caller iterates, and what the scheduler keeps per sequence."""
from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from edge_agent.engine.detokenize import IncrementalDecoder
from edge_agent.engine.types import BATCH_PRIORITY, Finished, SamplingParams, TextDelta, TokenLogprob

Event = TextDelta | Finished


class GenerationHandle:
    """What submit() returns: iterate it for TextDelta events and one final Finished."""

    def __init__(self) -> None:
        self._events: queue.Queue[Event] = queue.Queue()
        self._cancelled = threading.Event()
        self._end_lock = threading.Lock()
        self._ended = False
        self.finished: Finished | None = None

    def __iter__(self) -> Iterator[Event]:
        return self.events()

    def events(self, timeout: float | None = None) -> Iterator[Event]:
        """Every event up to the Finished one; raises TimeoutError if the end has not come within timeout seconds."""
        end = None if timeout is None else time.monotonic() + timeout
        while self.finished is None:
            if end is None:
                ev = self._events.get()
            else:
                ev = self.next_event(max(0.0, end - time.monotonic()))
                if ev is None:
                    raise TimeoutError(f"the generation did not end within {timeout:g} s")
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

    @property
    def ended(self) -> bool:
        """True once the Finished event has been sent (it may not have been read yet)."""
        return self._ended

    def result(self, timeout: float | None = None) -> Finished:
        """Wait for the end and return the Finished event; raises TimeoutError after timeout seconds."""
        for _ in self.events(timeout):
            pass
        assert self.finished is not None
        return self.finished

    def _end(self, fin: Finished) -> bool:
        """Send the one Finished event; False if one was already sent."""
        with self._end_lock:
            if self._ended:
                return False
            self._ended = True
        self._events.put(fin)
        return True


@dataclass
class Sequence:
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
    feed: np.ndarray | None = None  # what to prefill: the prompt, or prompt + tokens[:-1] after a preemption
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
    prefill_failures: int = 0
    preempted: int = 0
    waited_for: str = ""  # the model step in flight when it was submitted (interactive requests)
    logprobs: list[TokenLogprob] | None = None  # with params.logprobs: one per token of .tokens
    logprobs_sent: int = 0  # how many of them went out with a TextDelta

    def __post_init__(self) -> None:
        if self.params.logprobs is not None and self.logprobs is None:
            self.logprobs = []

    @property
    def batch(self) -> bool:
        return self.priority >= BATCH_PRIORITY

    def history(self) -> np.ndarray:
        return np.concatenate([self.prompt, np.asarray(self.tokens, np.int64)])

    def emit(self, text: str) -> None:
        """Send text to the handle (and keep it in .text)."""
        if text:
            self.text += text
            lps = None
            if self.logprobs is not None:  # the tokens whose text ends here
                lps, self.logprobs_sent = self.logprobs[self.logprobs_sent:], len(self.logprobs)
            self.handle._events.put(TextDelta(text, lps))

    def emit_until_stop(self, piece: str) -> bool:
        """Emit text up to a stop string; hold back a tail that may begin one. True when a stop string was found."""
        buf = self.held + piece
        cut = min((i for i in (buf.find(x) for x in self.params.stop) if i >= 0), default=-1)
        if cut >= 0:
            self.held = ""
            self.emit(buf[:cut])
            return True
        hold = 0
        for x in self.params.stop:
            for k in range(min(len(x) - 1, len(buf)), 0, -1):
                if buf.endswith(x[:k]):
                    hold = max(hold, k)
                    break
        self.held = buf[len(buf) - hold :] if hold else ""
        self.emit(buf[: len(buf) - hold])
        return False
