"""Log-probabilities in OpenAI's shapes: chat's `logprobs.content` and legacy completions' `logprobs` object.

The engine gives, per generated token, its id, its log-probability and the N most likely (id, logprob)
pairs (engine.types.TokenLogprob): the log-softmax of the model's raw logits of that step, before any
penalty, logits processor (a response format's grammar), temperature or top-k / top-p / min-p, as vLLM
returns them by default. This module turns ids into the token's text and bytes: `bytes` is the token's
raw UTF-8 bytes (one byte of a character split over several tokens, for byte-fallback and byte-level
vocabularies), `token` its text, with U+FFFD where the bytes are not whole characters (as OpenAI does).
It also scores an echoed prompt (PromptScores): forced generations, since the graph gives a prefill's last logits only.

On a bundle whose head is re-scored (engine.rescore: the default model's dual head), the logits within 7 of a row's top
are exact and the rest keep the head's approximation, which depends on how many rows the step had (int4 head up to 4,
int8 above): the default model, one sequence alone against the same one beside 7 others (/tmp probe, 16 greedy tokens,
top 5), gave the same tokens, chosen-token logprobs within 0.005 (median 0.0008: the normaliser's tail) and
alternatives more than 7 below the top off by up to 0.6; the candidates themselves are equal.
"""
from __future__ import annotations

import codecs
import functools
import re
import threading
import time

import numpy as np

from edge_agent.engine.tokens import byte_level_table
from edge_agent.engine.types import SamplingParams, TokenLogprob
from edge_agent.services.errors import GenerationFailedError, UnavailableError

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


class TokenTexts:
    """Each token id's text and bytes for one tokenizer (computed on first use, remembered)."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.byte_level = "ByteLevel" in repr(tokenizer.decoder)
        self.table = byte_level_table() if self.byte_level else {}
        anchor = tokenizer.encode("a", add_special_tokens=False).ids
        self.anchor = anchor[:1]
        self.anchor_text = tokenizer.decode(self.anchor, skip_special_tokens=False) if self.anchor else ""
        self.info = functools.lru_cache(maxsize=65536)(self._info)
        # control tokens (BOS, EOS ...): the answer's and the echoed prompt's text leave them out
        self.special = frozenset(i for i, a in tokenizer.get_added_tokens_decoder().items() if a.special)

    def _info(self, token_id: int) -> tuple[str, list[int]]:
        """(text, bytes) of one token id."""
        piece = self.tok.id_to_token(token_id)
        if piece is None:
            return "", []
        m = _BYTE_PIECE.fullmatch(piece)
        if m:  # SentencePiece's byte fallback: one raw byte
            raw = bytes([int(m.group(1), 16)])
        elif self.byte_level and piece and all(ch in self.table for ch in piece):
            raw = bytes(self.table[ch] for ch in piece)
        else:  # decoded after an anchor token, so a leading space is kept (decoders strip it from a first token)
            full = self.tok.decode([*self.anchor, token_id], skip_special_tokens=False)
            text = full[len(self.anchor_text):] if full.startswith(self.anchor_text) else self.tok.decode([token_id], skip_special_tokens=False)
            raw = text.encode("utf-8", "surrogatepass")
        return raw.decode("utf-8", "replace"), list(raw)


_SHARED: dict[int, TokenTexts] = {}
_LOCK = threading.Lock()


def token_texts(tokenizer) -> TokenTexts:
    """The TokenTexts of a tokenizer (one per tokenizer object)."""
    with _LOCK:
        t = _SHARED.get(id(tokenizer))
        if t is None or t.tok is not tokenizer:
            t = _SHARED[id(tokenizer)] = TokenTexts(tokenizer)
        return t


def chat_content(entries, texts: TokenTexts) -> list[dict]:
    """OpenAI chat's `logprobs.content`: per token {token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}."""
    out = []
    for e in entries:
        text, raw = texts.info(e.token_id)
        top = []
        for i, lp in e.top:
            t, b = texts.info(i)
            top.append({"token": t, "logprob": lp, "bytes": b})
        out.append({"token": text, "logprob": e.logprob, "bytes": raw, "top_logprobs": top})
    return out


class TextOffsets:
    """Where each token's text starts in a choice's text (characters): whole characters of the bytes so far, control tokens
    taking no room (the text leaves them out), so a character split over tokens counts once, at the token that ends it."""

    def __init__(self, texts: TokenTexts):
        self.texts = texts
        self.chars = 0
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")  # holds an incomplete character's bytes

    def add(self, token_id: int) -> int:
        """The offset of token_id's text, then count it."""
        at = self.chars
        if token_id not in self.texts.special:
            self.chars += len(self._utf8.decode(bytes(self.texts.info(token_id)[1])))
        return at


def completion_logprobs(entries, texts: TokenTexts, offsets: TextOffsets) -> dict:
    """Legacy completions' `logprobs` {tokens, token_logprobs, top_logprobs, text_offset} for entries (offsets: the choice's
    counter, carried from chunk to chunk). Each top_logprobs dict holds the N most likely tokens and the chosen one
    (N + 1 at most, as OpenAI says); texts that coincide keep the likelier. An entry without a logprob (the first
    token of an echoed prompt, which nothing precedes) gives null in token_logprobs and top_logprobs."""
    tokens, lps, tops, where = [], [], [], []
    for e in entries:
        text, _ = texts.info(e.token_id)
        tokens.append(text)
        lps.append(e.logprob)
        where.append(offsets.add(e.token_id))
        if e.logprob is None:
            tops.append(None)
            continue
        d: dict[str, float] = {}
        for i, lp in e.top:
            d.setdefault(texts.info(i)[0], lp)
        d.setdefault(text, e.logprob)
        tops.append(d)
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": where}


class ForcedTokens:
    """Logits processor that allows only target[i] at step i (teacher forcing); the engine takes logprobs before it."""

    def __init__(self, target: list[int]):
        self.target = target

    def __call__(self, generated: list[int], logits: np.ndarray) -> np.ndarray:
        out = np.full(logits.shape, -np.inf, np.float32)
        out[self.target[min(len(generated), len(self.target) - 1)]] = 0.0
        return out


# A scored prompt is split into at most this many segments of at least MIN_SEGMENT tokens, each its own forced
# generation after the prompt's tokens before it (a prefill): they decode side by side in the batch, so a
# 128-token prompt takes ~16 steps of 8 rows instead of 127 steps of one (scripts/bench_logprobs.py).
MAX_SEGMENTS = 8
MIN_SEGMENT = 16


def segments(n: int, most: int = MAX_SEGMENTS) -> list[tuple[int, int]]:
    """(start, end) of the forced segments (at most `most`) that score tokens 1..n-1 of an n-token prompt (none for n < 2)."""
    if n < 2:
        return []
    size = max(MIN_SEGMENT, -(-(n - 1) // max(1, most)))
    return [(a, min(a + size, n)) for a in range(1, n, size)]


class PromptScores:
    """An echoed prompt's logprobs: each token's after the ones before it (the first has none).

    The graph gives logits of a prefill's last position only, so each segment (start, end) of the prompt is a forced
    generation of ids[start:end] after ids[:start]: one decode step per token, the segments batched side by side.
    handles: one engine handle per segment of parts (services.logprobs.segments). Shared by the n choices of a prompt.
    """

    def __init__(self, ids: list[int], handles: list, parts: list[tuple[int, int]], hidden: int = 0):
        self.ids = ids
        self.handles = handles
        self.parts = parts
        self.hidden = hidden  # the first tokens the client did not send (a BOS the tokenizer added): scored after, not shown
        self._lock = threading.Lock()
        self._done: list = [None] * len(handles)
        self._entries: list[TokenLogprob] | None = None

    def wait(self, timeout: float) -> list[TokenLogprob] | None:
        """The entries (the first with logprob None unless hidden), or None while they are not done within timeout seconds.

        Raises GenerationFailedError when the scoring failed, UnavailableError when it was cancelled.
        """
        with self._lock:
            if self._entries is None:
                end = time.monotonic() + timeout
                for k, h in enumerate(self.handles):
                    if self._done[k] is None:
                        try:
                            self._done[k] = h.result(max(0.0, end - time.monotonic()))
                        except TimeoutError:
                            return None
                entries = [TokenLogprob(self.ids[0], None, [])]
                for (a, b), fin in zip(self.parts, self._done):
                    if fin.finish_reason == "cancelled":
                        raise UnavailableError("scoring the prompt was cancelled: the server is shutting down")
                    if fin.finish_reason != "length" or fin.logprobs is None or len(fin.logprobs) != b - a:
                        raise GenerationFailedError("scoring the prompt failed; retry, and report it if it persists")
                    entries += fin.logprobs
                self._entries = entries[self.hidden:]
            return self._entries

    def cancel(self) -> None:
        for h in self.handles:
            h.cancel()


def start_prompt_scores(scheduler, ids: list[int], top: int, priority: int = 0, timeout_s: float | None = None,
                        most: int = MAX_SEGMENTS, hidden: int = 0) -> PromptScores:
    """Submit the forced generations (at most `most`) that score ids (top: alternatives per token); returns at once.
    The entries leave out the first `hidden` tokens (a BOS the client did not send): the next is scored after them.

    Raises the scheduler's QueueFullError, ContextLengthError, EngineError (what was submitted is cancelled).
    """
    handles = []
    parts = segments(len(ids), most)
    try:
        for a, b in parts:
            params = SamplingParams(max_tokens=b - a, temperature=0.0, ignore_eos=True, logprobs=top,
                                    logits_processor=ForcedTokens(list(ids[a:b])))
            handles.append(scheduler.submit(list(ids[:a]), params, priority=priority, timeout_s=timeout_s))
    except BaseException:
        for h in handles:
            h.cancel()
        raise
    return PromptScores(list(ids), handles, parts, hidden)
