"""Choosing and accepting a sequence's next token (a mixin of BatchScheduler): logits processors, min_tokens,
greedy or sampled choice, logprobs, then the token's text and every way it can end the sequence."""
from __future__ import annotations

import logging
import time

import numpy as np

from edge_agent.engine.sampling import is_greedy, sample, suppress, token_logprob
from edge_agent.engine.sequence import Sequence

log = logging.getLogger("edge_agent.engine.scheduler")  # the scheduler's log, as before the split


class TokenChoice:
    """BatchScheduler's per-token work; it uses the scheduler's engine, _finish and tokens_generated."""

    def _ban_never_generated(self, logits: np.ndarray) -> np.ndarray:
        """logits [vocab] (in place) with the engine's never-generated tokens (image markers, unused slots,
        bos/pad/unk) at -inf: neither the sampler nor a logits processor can choose them."""
        never = self.engine.never_generated_ids
        if never.size:
            logits[never] = -np.inf
        return logits

    def _choose_and_accept(self, s: Sequence, logits: np.ndarray) -> None:
        # logprobs come from the raw row (vLLM's default); the ban and a repetition penalty change it in place
        # (processors get a copy)
        changed = s.params.repetition_penalty != 1.0 or self.engine.never_generated_ids.size
        raw = logits.copy() if s.logprobs is not None and changed else logits
        try:
            tok = self._choose(s, logits)
            lp = None if s.logprobs is None else token_logprob(raw, tok, s.params.logprobs)
        except Exception as e:  # a bad processor or distribution ends this sequence, not the batch
            log.warning("sampling failed for one sequence: %s", e)
            self._finish(s, "error", error=f"sampling failed: {e}")
            return
        try:
            self._accept(s, tok, lp)
        except Exception as e:
            log.exception("accepting a token failed")
            self._finish(s, "error", error=f"generation failed: {type(e).__name__}")

    @staticmethod
    def _below_min(s: Sequence) -> bool:
        """True while s has generated fewer than min_tokens: its stop ids are masked and no stop ends it."""
        return len(s.tokens) < s.params.min_tokens

    def _choose(self, s: Sequence, logits: np.ndarray) -> int:
        p = s.params
        if p.logits_processor is not None:  # it sees the raw row (a teacher-forcing scorer reads its log-softmax)
            logits = np.asarray(p.logits_processor(list(s.tokens), logits.copy()), np.float32)
        self._ban_never_generated(logits)
        if self._below_min(s):  # after the processor: min_tokens has the last word
            logits = suppress(logits, [*p.stop_token_ids, *(() if p.ignore_eos else self.engine.stop_token_ids)])
        if is_greedy(p):
            return int(np.argmax(logits))
        return sample(logits, p, s.rng, s.history())

    def _accept(self, s: Sequence, tok: int, lp=None) -> None:
        """Record one new token of s (lp: its TokenLogprob when asked for): emit its text, check every way to finish."""
        if s.first_token == 0.0:
            s.first_token = time.monotonic()
        p = s.params
        early = self._below_min(s)  # this token is one of the first min_tokens: no stop ends the generation
        if not early and (tok in self.engine.stop_token_ids and not p.ignore_eos or tok in p.stop_token_ids):
            self._finish(s, "stop")
            return
        s.tokens.append(tok)
        if lp is not None:
            s.logprobs.append(lp)
        s.next_token = tok
        self.tokens_generated += 1
        piece = s.detok.add(tok)
        if piece:
            if not p.stop or early:
                s.emit(piece)
            elif s.emit_until_stop(piece):
                self._finish(s, "stop", emit_tail=False)
                return
        if len(s.tokens) >= p.max_tokens or s.length >= self.engine.context_length:
            self._finish(s, "length")
