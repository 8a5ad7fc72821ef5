"""Encoding text as data: special-token look-alikes stay plain text, so user text never becomes a control token.

`tokenizers` matches special (control) tokens in any text it encodes; with
`encode_special_tokens=True` it leaves them as text (llama.cpp's parse_special=False).
Flipping that flag on the shared tokenizer per call would race with other threads, so
plain encoding goes through a twin that shares the model (no copy of the vocabulary).
models/gguf_tokenizer.py keeps its own twin (models may not import engine).
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
