"""Encoding text as data: special-token look-alikes stay plain text, so user text never becomes a control token.

`tokenizers` matches special (control) tokens in any text it encodes; with
`encode_special_tokens=True` it leaves them as text (llama.cpp's parse_special=False).
Flipping that flag on the shared tokenizer per call would race with other threads, so
plain encoding goes through a twin that shares the model (no copy of the vocabulary).
models/gguf_tokenizer.py uses the same twin, and the byte-level BPE table below.
"""
from __future__ import annotations

import json
import re
import threading
from typing import Iterable

from tokenizers import AddedToken, Tokenizer

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


# Added tokens a text model has no business writing: a multimodal vocabulary's image/audio markers, unused and
# reserved slots, the mask. A GGUF marks some of them user-defined (type 4) rather than control: Gemma 3's
# <start_of_image>, <end_of_image> and [multimodal] (its tokenizer_config says "special": false), and a user-defined
# token is rendered as its text (by llama.cpp too). Gemma 3 270M writes <start_of_image> after an empty prompt.
_NEVER_WRITTEN = re.compile(
    r"<unused\d+>|<\|reserved_special_token_\d+\|>|<mask>|\[multimodal\]"
    r"|<(?:start|end)_of_(?:image|audio|video)>|<(?:image|audio|video)_soft_token>"
    r"|<\|(?:vision|image|video|audio)_(?:start|end|pad)\|>"
)


def mark_never_written(tok: Tokenizer, also: Iterable[int | None] = (), keep: Iterable[int] = ()) -> list[int]:
    """Mark tok's added tokens a text model should never write (image markers, unused slots), and the ids in `also`
    (a bundle's bos, pad, unk), special; return their ids, less those in `keep` (its stop tokens).

    Call it before the tokenizer is shared: a special token is dropped from decoded text (skip_special_tokens), and
    user text that spells one stays text (encode_plain). Works on existing bundles' tokenizer.json as loaded. Cost:
    one pass over the added tokens (~6,400 on Gemma 3), ~15 ms.
    """
    added = tok.get_added_tokens_decoder()
    ids = {i for i, a in added.items() if _NEVER_WRITTEN.fullmatch(a.content)}
    ids |= {int(i) for i in also if i is not None and int(i) in added}
    ids -= {int(i) for i in keep}
    plain = [added[i] for i in sorted(ids) if not added[i].special]
    if plain:
        tok.add_special_tokens([AddedToken(a.content, special=True, normalized=False, lstrip=a.lstrip, rstrip=a.rstrip,
                                           single_word=a.single_word) for a in plain])
    return sorted(ids)


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


_GROWING_NORMALIZERS = frozenset({"Prepend"})  # and Replace of a string by one no shorter (Gemma's " " -> "\u2581")
_KEEPING_PRE_TOKENIZERS = frozenset({"ByteLevel", "Metaspace", "Digits", "UnicodeScripts", "Split", "Punctuation"})


def _state(part) -> dict:
    return json.loads(part.__getstate__()) if part is not None else {}


def _steps(state: dict, key: str) -> list[dict]:
    return state.get(key, []) if state.get("type") == "Sequence" else [state] if state else []


def _only_grows(normalizer) -> bool:
    """Whether the normalizer never makes text shorter in UTF-8 (so the raw text's bytes are a floor of the normalized)."""
    for step in _steps(_state(normalizer), "normalizers"):
        pattern = step.get("pattern") or {}
        grows = step.get("type") == "Replace" and "String" in pattern \
            and len(step.get("content", "").encode()) >= len(pattern["String"].encode()) > 0
        if not grows and step.get("type") not in _GROWING_NORMALIZERS:
            return False
    return True


def _floor_shape(tok: Tokenizer) -> bool | None:
    """Where a token-count floor holds, whether to normalize the text before counting its bytes; else None (cheap:
    the pipeline's settings, not its vocabulary)."""
    pre = _steps(_state(tok.pre_tokenizer), "pretokenizers")
    if any(p.get("type") not in _KEEPING_PRE_TOKENIZERS or p.get("behavior") == "Removed" for p in pre):
        return None  # Whitespace, BERT's: blanks dropped, so 2 MB of them can be no token at all
    if any(a.lstrip or a.rstrip for a in tok.get_added_tokens_decoder().values()):
        return None  # a token that swallows the blanks beside it, however many
    model = tok.model
    if not (any(p.get("type") == "ByteLevel" for p in pre) or getattr(model, "byte_fallback", False)
            or (type(model).__name__ == "BPE" and model.unk_token and not model.fuse_unk)):
        return None  # WordPiece, Unigram or BPE without byte fallback: one unknown token may stand for any run of text
    return not _only_grows(tok.normalizer)


def _longest_token(tok: Tokenizer) -> int | None:
    """The most bytes of (normalized) text one token stands for, from the vocabulary; None if a byte has no piece."""
    added = tok.get_added_tokens_decoder().values()
    vocab = tok.get_vocab(with_added_tokens=False)
    longest = max([len(a.content.encode()) for a in added] or [1])  # matched in the text as written
    if any(p.get("type") == "ByteLevel" for p in _steps(_state(tok.pre_tokenizer), "pretokenizers")):
        if not set(byte_level_table()) <= vocab.keys():
            return None  # a byte without a piece would be dropped
        return max(longest, max(len(s) for s in vocab))  # each character of a byte-level piece is one byte
    if getattr(tok.model, "byte_fallback", False):
        if not all(f"<0x{b:02X}>" in vocab for b in range(256)):
            return None
        return max(longest, max(len(s.encode()) for s in vocab))  # "\u2581" (3 bytes) stands for a 1-byte blank, <0xNN> (6) for 1
    return max(longest, 4, max(len(s.encode()) for s in vocab))  # BPE with an unfused <unk>: one per unknown character


_UNSET = object()


def _cached(tok: Tokenizer, name: str, build):
    """build(tok), computed once and kept on tok (as plain_twin keeps its twin)."""
    value = getattr(tok, name, _UNSET)
    if value is _UNSET:
        with _LOCK:
            value = getattr(tok, name, _UNSET)
            if value is _UNSET:
                value = build(tok)
                setattr(tok, name, value)
    return value


def fewest_tokens(tok: Tokenizer, text: str, over: int = -1) -> int:
    """A floor of len(tok.encode(text).ids), without tokenizing: ceil(UTF-8 bytes / the longest token's bytes), 0 where
    the tokenizer allows no floor. Exact: no text encodes to fewer. Cost: one pass over text (a normalization too, for
    a normalizer that can shorten text, e.g. NFC), against ~1.3 s per MB for the encoding; the vocabulary is read once,
    on the first text over `over` bytes: with `over`, a text of at most `over` bytes (so a floor of at most `over`)
    gets 0 without reading it, for callers that only ask whether the floor exceeds `over`.
    """
    normalize = _cached(tok, "_edge_token_floor", _floor_shape)
    if normalize is None or not text:
        return 0
    if normalize:
        text = tok.normalizer.normalize_str(text)
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= over:
        return 0
    longest = _cached(tok, "_edge_longest_token", _longest_token)
    return 0 if longest is None else -(-size // longest)
