"""Encoding text as data: special-token look-alikes stay plain text, so user text never becomes a control token.

`tokenizers` matches special (control) tokens in any text it encodes; with
`encode_special_tokens=True` it leaves them as text (llama.cpp's parse_special=False).
Flipping that flag on the shared tokenizer per call would race with other threads, so
plain encoding goes through a twin that shares the model (no copy of the vocabulary).
models/gguf_tokenizer.py uses the same twin, and the byte-level BPE table below.
"""
from __future__ import annotations

import threading

from tokenizers import Tokenizer

_LOCK = threading.Lock()


def plain_twin(tok: Tokenizer) -> Tokenizer:
    """A twin of tok that encodes special-token look-alikes as plain text (built once, cached on tok)."""
    twin = getattr(tok, "_edge_plain_twin", None)
    if twin is None:
        with _LOCK:
            twin = getattr(tok, "_edge_plain_twin", None)
            if twin is None:
                twin = Tokenizer(tok.model)
                for part in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
                    if getattr(tok, part) is not None:
                        setattr(twin, part, getattr(tok, part))
                added = sorted(tok.get_added_tokens_decoder().items())
                specials = [a for _, a in added if a.special]
                others = [a for _, a in added if not a.special]
                if specials:
                    twin.add_special_tokens(specials)
                if others:
                    twin.add_tokens(others)
                twin.encode_special_tokens = True
                tok._edge_plain_twin = twin
    return twin


def encode_plain(tok: Tokenizer, text: str, add_special_tokens: bool = False) -> list[int]:
    """Ids of text with no special-token parsing ("<bos>" typed by a user stays text)."""
    return plain_twin(tok).encode(text, add_special_tokens=add_special_tokens).ids


def special_token_ids(tok: Tokenizer) -> dict[str, int]:
    """{text: id} of tok's special (control) tokens."""
    return {a.content: i for i, a in tok.get_added_tokens_decoder().items() if a.special}


def byte_level_table() -> dict[str, int]:
    """GPT-2's byte-to-character table, inverted: the character a byte-level BPE piece uses -> that byte."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1), *range(ord("\u00ae"), ord("\u00ff") + 1)]
    chars, n = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars)}
