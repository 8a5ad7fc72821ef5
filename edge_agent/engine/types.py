"""Plain data types shared by the engine and its callers (no onnxruntime here)."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

FinishReason = Literal["stop", "length", "cancelled", "timeout", "error"]

# Scheduling priorities: lower numbers run first. A priority of BATCH_PRIORITY or more marks
# background work (jobs, batch files): it never takes the slots reserved for interactive
# requests and is preempted (its cache dropped and recomputed later) when one waits.
INTERACTIVE_PRIORITY = 0
BATCH_PRIORITY = 10

# Finished.error of every generation ended because the scheduler's loop stopped for good.
ENGINE_STOPPED = "the engine stopped"


class EngineError(Exception):
    """Base class for errors the engine reports to callers (safe to show a user)."""


class ContextLengthError(EngineError):
    """The prompt plus max_tokens does not fit the model's context window."""

    def __init__(self, prompt_tokens: int, max_tokens: int, context_length: int):
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.context_length = context_length
        super().__init__(
            f"this model's context is {context_length} tokens; the prompt has {prompt_tokens} tokens "
            f"and {max_tokens} more were requested ({prompt_tokens + max_tokens} in all): "
            "shorten the prompt or lower max_tokens"
        )


class QueueFullError(EngineError):
    """The scheduler's queue is full; retry after `retry_after` seconds."""

    def __init__(self, retry_after: float = 1.0):
        self.retry_after = retry_after
        super().__init__("the server is busy: too many requests are waiting; retry shortly")


class StepInterrupted(Exception):
    """A model call was stopped on purpose (an interactive request arrived during batch work); it is redone later."""


# Sampling limits: the one source of truth (SamplingParams.validate, the API's request models, ChatService).
MIN_TEMPERATURE = 1e-3  # below this sampling is greedy (and logits / T could overflow)
MAX_TEMPERATURE = 2.0
MIN_REPETITION_PENALTY, MAX_REPETITION_PENALTY = 0.01, 10.0
MAX_TOP_K = 1_000_000
MAX_LOGPROBS = 20  # most alternatives per token (OpenAI's top_logprobs limit; vLLM's default max)


@dataclass
class SamplingParams:
    """How to pick each next token; temperature 0 means greedy.

    Raises ValueError from validate() for values no sampler accepts.
    """

    max_tokens: int = 256
    temperature: float = 0.0
    top_k: int = 0  # 0 = off
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    # vLLM's: until this many tokens are generated, EOS and stop_token_ids are never chosen (masked) and stop
    # strings are not looked for (a stop string counts only in the text of later tokens)
    min_tokens: int = 0
    # Called as f(generated_ids, logits) -> logits before each choice (e.g. constrained JSON).
    logits_processor: Callable[[list[int], Any], Any] | None = field(default=None, repr=False, compare=False)
    # None: none; N (0..MAX_LOGPROBS): each generated token's log-probability and the N most likely tokens' (TokenLogprob),
    # from the log-softmax of the model's raw logits of that step (before penalties, processors, temperature, top-k/p)
    logprobs: int | None = None

    def validate(self) -> "SamplingParams":
        def finite(name: str, v: float) -> None:
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number")

        for name in ("temperature", "top_p", "min_p", "repetition_penalty"):
            finite(name, getattr(self, name))
        if not isinstance(self.max_tokens, int) or isinstance(self.max_tokens, bool) or self.max_tokens < 1:
            raise ValueError("max_tokens must be an integer of at least 1")
        if not isinstance(self.min_tokens, int) or isinstance(self.min_tokens, bool) or self.min_tokens < 0:
            raise ValueError("min_tokens must be an integer of at least 0")
        if self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) must be at most max_tokens ({self.max_tokens}): "
                             "lower min_tokens or raise max_tokens")
        if not 0 <= self.temperature <= MAX_TEMPERATURE:
            raise ValueError(f"temperature must be between 0 and {MAX_TEMPERATURE:g}")
        if 0 < self.temperature < MIN_TEMPERATURE:
            self.temperature = 0.0  # below this, sampling is greedy but numerically unsafe
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if not 0 <= self.min_p <= 1:
            raise ValueError("min_p must be in [0, 1]")
        if not MIN_REPETITION_PENALTY <= self.repetition_penalty <= MAX_REPETITION_PENALTY:
            raise ValueError(f"repetition_penalty must be between {MIN_REPETITION_PENALTY:g} and {MAX_REPETITION_PENALTY:g}")
        if not isinstance(self.top_k, int) or not 0 <= self.top_k <= MAX_TOP_K:
            raise ValueError(f"top_k must be an integer between 0 and {MAX_TOP_K}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise ValueError("seed must be an integer")
        if self.logprobs is not None and (not isinstance(self.logprobs, int) or isinstance(self.logprobs, bool)
                                          or not 0 <= self.logprobs <= MAX_LOGPROBS):
            raise ValueError(f"logprobs must be an integer between 0 and {MAX_LOGPROBS}")
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise ValueError("stop must be non-empty strings")
        return self


@dataclass
class Usage:
    """Token counts and timings of one generation (seconds)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    queue_s: float = 0.0
    prefill_s: float = 0.0
    ttft_s: float = 0.0
    decode_s: float = 0.0
    total_s: float = 0.0
    waited_for: str = ""  # interactive requests: the model step in flight when it arrived (not in as_dict)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def decode_tok_s(self) -> float:
        return (self.completion_tokens - 1) / self.decode_s if self.decode_s > 0 and self.completion_tokens > 1 else 0.0

    def as_dict(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cached_tokens": self.cached_tokens,
            "queue_ms": round(self.queue_s * 1000, 2),
            "prefill_ms": round(self.prefill_s * 1000, 2),
            "ttft_ms": round(self.ttft_s * 1000, 2),
            "decode_ms": round(self.decode_s * 1000, 2),
            "total_ms": round(self.total_s * 1000, 2),
            "decode_tok_s": round(self.decode_tok_s, 2),
        }


@dataclass
class TokenLogprob:
    """One generated token's log-probability under the model, and the `top` most likely tokens' as (id, logprob), best first."""

    token_id: int
    logprob: float | None  # None: no value (the first token of a prompt scored by services.logprobs.PromptScores)
    top: list[tuple[int, float]] = field(default_factory=list)


@dataclass
class TextDelta:
    """A piece of generated text: always whole UTF-8 characters.

    logprobs (when asked for): the tokens generated since the last TextDelta, whose text ends in this one
    (a token that ends inside a character or a held-back stop-string prefix waits for the next).
    """

    text: str
    logprobs: list[TokenLogprob] | None = None


@dataclass
class Finished:
    """The last event of a generation."""

    text: str
    finish_reason: FinishReason
    usage: Usage
    token_ids: list[int]
    error: str | None = None
    logprobs: list[TokenLogprob] | None = None  # when asked for: one per token of token_ids
