"""A request's generation as a stream of per-choice events (what ChatService returns).

`Generation.events()` yields ChoiceDelta / ChoiceEnd events, and None as a heartbeat while
nothing arrives (so a caller can notice a client that went away). Closing the iterator,
or cancel(), stops every choice and frees its batch slot at the scheduler's next step.
"""
from __future__ import annotations

import logging
import math
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from edge_agent.engine.types import ENGINE_STOPPED, Finished, TextDelta
from edge_agent.services.answers import cited
from edge_agent.services.errors import GenerationFailedError, GenerationTimeoutError, UnavailableError
from edge_agent.services.grounding import Source

log = logging.getLogger(__name__)

HEARTBEAT_S = 0.25


@dataclass
class ChoiceDelta:
    index: int
    text: str
    logprobs: list | None = None  # when asked for: engine.types.TokenLogprob of the tokens whose text ends in this delta


@dataclass
class ChoiceEnd:
    index: int
    finish_reason: str  # "stop" | "length"
    completion_tokens: int
    logprobs: list | None = None  # when asked for: the TokenLogprob no delta carried (text held back, then cut or never sent)


@dataclass
class ChoiceResult:
    index: int
    text: str
    finish_reason: str


@dataclass
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt's, the most any choice found in the prefix cache

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class _Choice:
    def __init__(self, index: int, handle, prefix: str = "", guard=None):
        self.index = index
        self.handle = handle
        self.prefix = prefix
        self.guard = guard
        self.cut = False  # we stopped it (JSON complete or broken): report "stop"
        self.done = False
        self.logprobs_sent = 0
        self.scores = None  # echo with logprobs: the prompt's services.logprobs.PromptScores, sent with the prefix


SOURCES_LABEL = {"nl": "Bronnen", "de": "Quellen", "fr": "Sources", "es": "Fuentes"}  # else "Sources"


def sources_footer(text: str, sources: list[Source], language: str | None = None) -> str:
    """The lines an answer that cites sources ends with for a reader that sees only the text (a documents alias):
    "Sources:" (in the answer's language) and each cited passage's "[n] title, heading" (page where known); "" when it
    cites none (a decline)."""
    said = cited(text)
    lines = []
    for s in sources:
        if s.number in said:
            # the heading and the page, each once (a location's label is "p. 2, Heading" already: the page was shown twice)
            where = (s.location or {}).get("heading")
            page = (s.location or {}).get("page")
            lines.append(f"[{s.number}] {s.title}" + (f", {where}" if where and where != s.title else "")
                         + (f" (p. {page})" if page else ""))
    return f"\n\n{SOURCES_LABEL.get(language or '', 'Sources')}:\n" + "\n".join(lines) if lines else ""


class Generation:
    """One request's choices in flight; iterate events() once, or call collect()."""

    def __init__(self, model: str, choices: list[_Choice], prompt_tokens: int, deadline_s: float | None):
        """deadline_s: how long events() waits for the choices in all (None: no limit, background work)."""
        self.id = uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self.model = model
        self.choices = choices
        self.usage = TokenUsage(prompt_tokens=prompt_tokens)
        self.sources: list[Source] | None = None  # with rag: the chunks in the prompt, best first
        self.grounding: dict | None = None  # with rag: the answer's language and, per choice, which path made it
        self.prompt_ids: list[int] | None = None  # where a caller needs them (Ollama's `context`): the prompt's token ids
        self.sources_in_text = False  # end each choice's text with the sources it cites (a documents alias: sources_footer)
        self._said: dict[int, list[str]] = {}  # with sources_in_text: each choice's text so far
        self._deadline = math.inf if deadline_s is None else time.monotonic() + deadline_s
        self._queue: queue.Queue = queue.Queue()
        self._started = False
        self._watchdog: threading.Timer | None = None

    @property
    def n(self) -> int:
        return len(self.choices)

    def cancel(self) -> None:
        """Stop every choice still running (their slots free at the scheduler's next step)."""
        for c in self.choices:
            if not c.done:
                c.handle.cancel()
            if c.scores is not None:
                c.scores.cancel()

    def expire_unread(self, after_s: float) -> None:
        """Cancel every choice unless events() has started within after_s seconds (a response body nobody reads)."""
        t = threading.Timer(after_s, self._expire)
        t.daemon = True
        self._watchdog = t
        t.start()

    def _expire(self) -> None:
        if not self._started:
            log.warning("generation %s: nobody read its events within the limit; cancelled", self.id)
            self.cancel()

    def _pump(self, c: _Choice) -> None:
        try:
            for ev in c.handle:
                self._queue.put((c, ev))
        except BaseException:  # pragma: no cover - the handle only raises if the engine is broken
            log.exception("event pump failed")
            self._queue.put((c, None))

    def _next_event(self) -> Callable[[float], tuple[_Choice, object]]:
        """A function that waits up to a timeout for the next (choice, event); raises queue.Empty on timeout.

        One choice is read straight from its handle (no extra thread between the scheduler and
        the HTTP worker); several are merged by one pump thread each.
        """
        if len(self.choices) == 1:
            c = self.choices[0]

            def one(timeout: float):
                ev = c.handle.next_event(timeout)
                if ev is None:
                    raise queue.Empty
                return c, ev

            return one
        for c in self.choices:
            threading.Thread(target=self._pump, args=(c,), name="edge-agent-pump", daemon=True).start()
        return lambda timeout: self._queue.get(timeout=timeout)

    def events(self) -> Iterator[ChoiceDelta | ChoiceEnd | None]:
        """ChoiceDelta/ChoiceEnd events of all choices interleaved, None as a heartbeat.

        Raises GenerationTimeoutError, GenerationFailedError or UnavailableError (shutdown)
        when a choice ends that way; every choice is cancelled when the iterator is closed.
        """
        if self._started:
            raise RuntimeError("events() can be iterated once")
        self._started = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        try:
            next_event = self._next_event()
            for c in self.choices:
                if c.scores is not None:
                    while (entries := c.scores.wait(HEARTBEAT_S)) is None:
                        if time.monotonic() > self._deadline:
                            raise GenerationTimeoutError("scoring the prompt ran past the request time limit")
                        yield None
                    yield ChoiceDelta(c.index, c.prefix, entries)
                elif c.prefix:
                    yield ChoiceDelta(c.index, c.prefix)
            left = len(self.choices)
            while left:
                try:
                    c, ev = next_event(HEARTBEAT_S)
                except queue.Empty:
                    if time.monotonic() > self._deadline:
                        raise GenerationTimeoutError("the generation ran past the request time limit") from None
                    yield None
                    continue
                if isinstance(ev, TextDelta):
                    text = ev.text
                    if c.guard is not None and not c.cut:
                        text = c.guard.feed(text)
                        if c.guard.stopped:
                            c.cut = True
                            c.handle.cancel()
                    elif c.cut:
                        text = ""
                    lps = getattr(ev, "logprobs", None)
                    if text:
                        c.logprobs_sent += len(lps or ())
                        if self.sources_in_text:
                            self._said.setdefault(c.index, []).append(text)
                        yield ChoiceDelta(c.index, text, lps)
                    continue
                c.done = True
                left -= 1
                yield from self._end(c, ev)
        finally:
            self.cancel()

    def _end(self, c: _Choice, fin: Finished | None) -> Iterator[ChoiceDelta | ChoiceEnd]:
        if fin is None:
            raise GenerationFailedError("the generation failed")
        self.usage.completion_tokens += fin.usage.completion_tokens
        self.usage.cached_tokens = max(self.usage.cached_tokens, fin.usage.cached_tokens)
        reason = fin.finish_reason
        if c.cut:
            reason = "stop"
        elif reason == "timeout":
            raise GenerationTimeoutError("the generation ran past the request time limit; ask for fewer tokens or retry later")
        elif reason == "error" and fin.error == ENGINE_STOPPED:
            raise UnavailableError("the language model engine stopped after an internal error; the service needs a restart")
        elif reason == "error":
            raise GenerationFailedError("the generation failed; retry, and report it if it persists")
        elif reason == "cancelled":
            raise UnavailableError("the generation was cancelled: the server is shutting down")
        if c.guard is not None:
            tail = c.guard.closing()
            if tail:
                yield ChoiceDelta(c.index, tail)
        if self.sources_in_text:
            footer = sources_footer("".join(self._said.pop(c.index, ())), self.sources or [], (self.grounding or {}).get("language"))
            if footer:
                yield ChoiceDelta(c.index, footer)
        rest = None if fin.logprobs is None else fin.logprobs[c.logprobs_sent:]
        yield ChoiceEnd(c.index, reason, fin.usage.completion_tokens, rest)

    def note_citations(self, texts) -> None:
        """Where nobody checked the answers yet (a chat model, a raw prompt) and they cite sources ("[n]"): mark the
        cited ones used and the others unused. Answers that cite none leave `used` unknown (None)."""
        if not self.sources or any(s.used is not None for s in self.sources):
            return
        said = set().union(*(cited(t) for t in texts)) & {s.number for s in self.sources}
        if said:
            self.sources = [replace(s, used=s.number in said) for s in self.sources]

    def gather(self, check: Callable[[], None] | None = None) -> tuple[dict[int, str], dict[int, str], dict[int, list | None]]:
        """Wait for every choice: its text, finish reason and logprobs (None unless asked for), by choice index.

        `check` runs at every heartbeat and at least every HEARTBEAT_S while tokens flow; it may cancel the
        generation and raise (a client gone, a batch cancelled). Raises as events() does."""
        texts: dict[int, list[str]] = {c.index: [] for c in self.choices}
        ends: dict[int, str] = {}
        lps: dict[int, list | None] = {c.index: None for c in self.choices}
        events = self.events()
        due = time.monotonic() + HEARTBEAT_S
        try:
            for ev in events:
                if check is not None and (ev is None or time.monotonic() >= due):
                    due = time.monotonic() + HEARTBEAT_S
                    check()
                if isinstance(ev, ChoiceDelta):
                    texts[ev.index].append(ev.text)
                elif isinstance(ev, ChoiceEnd):
                    ends[ev.index] = ev.finish_reason
                if ev is not None and ev.logprobs is not None:
                    lps[ev.index] = (lps[ev.index] or []) + ev.logprobs
        finally:
            events.close()
        return {i: "".join(t) for i, t in texts.items()}, ends, lps

    def collect(self) -> list[ChoiceResult]:
        """Wait for every choice; return their texts in index order (raises as events() does)."""
        texts, ends, _ = self.gather()
        return [ChoiceResult(i, texts[i], ends[i]) for i in sorted(texts)]
