"""ContinuationScorer: the language model's log-probability of given continuations after a prompt, batched.

Each continuation is submitted to the scheduler as its own short sequence (max_tokens = its length)
with a logits processor that reads the log-softmax of the raw logits at the continuation's next
token and then forces that token (teacher forcing). All continuations of a prompt (and of many
prompts) are in the scheduler at once, so they decode together in its continuous batching; the
prefix cache serves the shared prompt after the first one is prefilled. The cost per label is
its token count in decode steps, not a generation.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from edge_agent.engine.types import EngineError, QueueFullError, SamplingParams
from edge_agent.services.errors import ContextLengthExceededError, GenerationFailedError, UnavailableError

BUSY_RETRY_S = 0.1


class _TeacherForcing:
    """Logits processor: record log p(target[i]) at step i, then allow only target[i]."""

    def __init__(self, target: list[int]):
        self.target = target
        self.logprobs: dict[int, float] = {}

    def __call__(self, generated: list[int], logits: np.ndarray) -> np.ndarray:
        i = len(generated)
        tok = self.target[min(i, len(self.target) - 1)]
        x = np.asarray(logits, np.float32)
        top = float(x.max())  # float32 exp, float64 sum: 0.19 ms against 1.9 ms for a float64 copy, same to 1e-8
        self.logprobs[i] = float(x[tok]) - top - float(np.log(np.exp(x - top).sum(dtype=np.float64)))
        out = np.full(logits.shape, -np.inf, np.float32)
        out[tok] = 0.0
        return out


@dataclass
class _Scored:
    handle: object
    forcing: _TeacherForcing


class PendingScores:
    """Continuations in flight for one prompt; result() gives each one's summed log-probability and token count."""

    def __init__(self, parts: list[_Scored]):
        self.parts = parts

    def done(self) -> bool:
        return all(p.handle.ended for p in self.parts)

    def result(self, timeout: float | None = None) -> list[tuple[float, int]]:
        """(sum of log-probs, tokens) per continuation. Raises TimeoutError, GenerationFailedError, UnavailableError."""
        end = None if timeout is None else time.monotonic() + timeout
        out = []
        for p in self.parts:
            fin = p.handle.result(None if end is None else max(0.0, end - time.monotonic()))
            if fin.finish_reason == "cancelled":
                raise UnavailableError("the scoring was cancelled")
            if fin.finish_reason != "length" or len(p.forcing.logprobs) < len(p.forcing.target):
                raise GenerationFailedError("scoring failed in the engine (or the context ended inside a label)")
            lps = [p.forcing.logprobs[i] for i in sorted(p.forcing.logprobs)][: len(p.forcing.target)]
            out.append((float(sum(lps)), len(lps)))
        return out

    def cancel(self) -> None:
        for p in self.parts:
            p.handle.cancel()


class ContinuationScorer:
    """Scores continuations (token ids) after prompts with a ChatService's scheduler."""

    def __init__(self, chat):
        self.chat = chat
        self.scheduler = chat.scheduler
        self.engine = chat.engine

    def encode(self, text: str, bos: bool = True) -> list[int]:
        """Token ids of text (user text: special-token parsing stays off in the tokenizer's encode)."""
        return self.engine.encode(text, add_special_tokens=bos)

    def start(self, prompt_ids: list[int], continuations: list[list[int]], priority: int = 0, timeout_s: float | None = None) -> PendingScores:
        """Submit every continuation after prompt_ids; returns at once.

        Raises ContextLengthExceededError when prompt plus the longest continuation does not fit,
        UnavailableError when the engine stopped; waits (retrying) while the queue is full.
        """
        if not prompt_ids or any(not c for c in continuations):
            raise ValueError("the prompt and every continuation need at least one token")
        longest = max(len(c) for c in continuations)
        limit = self.engine.context_length
        if len(prompt_ids) + longest > limit:
            raise ContextLengthExceededError(
                f"the text is {len(prompt_ids)} tokens and a label {longest} more: more than this model's {limit}; shorten the text",
                len(prompt_ids), longest, limit)
        parts: list[_Scored] = []
        try:
            for c in continuations:
                forcing = _TeacherForcing(list(c))
                params = SamplingParams(max_tokens=len(c), temperature=0.0, ignore_eos=True, logits_processor=forcing)
                parts.append(_Scored(self._submit(prompt_ids, params, priority, timeout_s), forcing))
        except BaseException:
            for p in parts:
                p.handle.cancel()
            raise
        return PendingScores(parts)

    def _submit(self, ids: list[int], params: SamplingParams, priority: int, timeout_s: float | None):
        while True:
            try:
                return self.scheduler.submit(ids, params, priority=priority, timeout_s=timeout_s or self.chat.time_limit(priority))
            except QueueFullError:
                time.sleep(BUSY_RETRY_S)
            except EngineError as e:
                raise UnavailableError(str(e)) from None

    def score(self, prompt_ids: list[int], continuations: list[list[int]], priority: int = 0) -> list[tuple[float, int]]:
        """Blocking form of start(...).result()."""
        return self.start(prompt_ids, continuations, priority).result()


__all__ = ["ContinuationScorer", "PendingScores"]
