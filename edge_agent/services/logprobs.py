"""Log-probabilities in OpenAI's shapes: chat's `logprobs.content` and legacy completions' `logprobs` object.

The engine gives, per generated token, its id, its log-probability and the N most likely (id, logprob)
pairs (engine.types.TokenLogprob): the log-softmax of the model's raw logits of that step, before any
penalty, logits processor (a response format's grammar), temperature or top-k / top-p / min-p, as vLLM
returns them by default. This module turns ids into the token's text and bytes: `bytes` is the token's
raw UTF-8 bytes (one byte of a character split over several tokens, for byte-fallback and byte-level
vocabularies), `token` its text, with U+FFFD where the bytes are not whole characters (as OpenAI does).
"""
from __future__ import annotations

import functools
import re
import threading

from edge_agent.engine.tokens import byte_level_table

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


def completion_logprobs(entries, texts: TokenTexts, offset: int) -> tuple[dict, int]:
    """Legacy completions' `logprobs` {tokens, token_logprobs, top_logprobs, text_offset} for entries whose text starts
    at character `offset` of the choice's text, and the offset after them. Each top_logprobs dict holds the N most
    likely tokens and the chosen one (N + 1 at most, as OpenAI says); texts that coincide keep the likelier."""
    tokens, lps, tops, offsets = [], [], [], []
    for e in entries:
        text, _ = texts.info(e.token_id)
        tokens.append(text)
        lps.append(e.logprob)
        offsets.append(offset)
        offset += len(text)
        d: dict[str, float] = {}
        for i, lp in e.top:
            d.setdefault(texts.info(i)[0], lp)
        d.setdefault(text, e.logprob)
        tops.append(d)
    return {"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offsets}, offset
