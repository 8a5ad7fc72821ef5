"""Tokenizers built from a GGUF file's metadata that give llama.cpp's token ids.

llama.cpp tokenizes in two steps, and the `tokenizers.Tokenizer` built here mirrors both:

1. Special-token partition: the text is cut at every occurrence of a control,
   unknown or user-defined token (control and unknown ones only when
   `parse_special` is on). Here: control/unknown tokens are *special* added
   tokens, user-defined tokens are *non-special* added tokens, both matched on
   the raw text (`normalized=False`). `encode_special_tokens=True` turns the
   special ones off (llama.cpp's parse_special=False), see `encode_ids`.
2. Each remaining fragment goes through the model:
   - "llama" (SentencePiece BPE): spaces become "▁" (plus a leading "▁" when
     `add_space_prefix`), then adjacent symbols are merged, highest-scoring
     resulting token first, with byte fallback for characters not in the
     vocabulary. Here: a BPE model whose merges are every split of a token into
     two vocabulary pieces, ranked by the merged token's score.
   - "gpt2" (byte-level BPE): the fragment is split with the pre-tokenizer
     regexes llama.cpp uses for `tokenizer.ggml.pre`, byte-level encoded and
     merged by the GGUF's merge ranks.

Decoding follows llama.cpp's `token_to_piece`: see `TokenPieces` and
`IncrementalDecoder` (streaming, whole UTF-8 characters only).

Our `Tokenizer.encode(text)` equals llama.cpp's `tokenize(text, add_special=True,
parse_special=True)` (what llama.cpp's server does with prompts), so chat
markers written in a prompt template become their special tokens. For text a
user typed, use `encode_ids(tok, text, parse_special=False)`: "<start_of_turn>"
typed by a user then stays plain text. Encoding a template piece with
parse_special=True and user text with parse_special=False and concatenating
gives the ids of the combined prompt, because llama.cpp tokenizes the text
between special tokens independently.
"""
from __future__ import annotations

import codecs
import mmap
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from edge_agent.engine.tokens import byte_level_table, plain_twin
from edge_agent.models.gguf_file import _MetadataParser

__all__ = [
    "GgufVocab",
    "IncrementalDecoder",
    "TokenPieces",
    "build_tokenizer",
    "decode_ids",
    "encode_ids",
    "read_gguf_vocab",
    "special_ids",
    "token_pieces",
]

# llama.cpp's token types (llama_token_type)
TYPE_UNDEFINED, TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_USER_DEFINED, TYPE_UNUSED, TYPE_BYTE = range(7)

SPACE = "\u2581"  # "▁", SentencePiece's visible space

# --- pre-tokenizer regexes, copied from llama.cpp (src/llama-vocab.cpp, llm_tokenizer_bpe) ------------------
_RE_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_RE_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_RE_LLAMA3 = _RE_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_RE_QWEN2 = _RE_CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_RE_QWEN35 = (
    _RE_CONTRACTIONS
    + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Llama 3 style: llama.cpp also skips merges for words that are whole tokens, and adds BOS by default
_LLAMA3_PRES = ("llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2")
# pre type -> (regexes applied in sequence, ignore_merges)
_PRE_TYPES: dict[str, tuple[list[str], bool]] = {}
for _names, _spec in (
    (("default",), ([r"[\p{P}\$\+<=>\^~\|]+", _RE_GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"], False)),
    (_LLAMA3_PRES, ([_RE_LLAMA3], True)),
    (("dbrx", "smaug-bpe"), ([_RE_LLAMA3], False)),
    (("qwen2", "deepseek-r1-qwen", "kormo", "stablelm2", "hunyuan"), ([_RE_QWEN2], False)),
    (("qwen35",), ([_RE_QWEN35], False)),
    (("gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "mpt", "olmo", "jais",
      "roberta-bpe", "jina-v1-en", "jina-v2-code", "trillion"), ([_RE_GPT2], False)),
    (("starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"), ([r"\p{N}", _RE_GPT2], False)),
    (("falcon",), ([r"[\p{P}\$\+<=>\^~\|`]+", _RE_GPT2, r"[0-9][0-9][0-9]"], False)),
):
    for _n in _names:
        _PRE_TYPES[_n] = _spec

# Texts llama.cpp forces to CONTROL when a GGUF marks them otherwise (end-of-generation, FIM markers).
_FORCED_CONTROL = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>", "<|eom_id|>", "<|return|>", "<|call|>", "<|flush|>",
    "<|calls|>", "</s>", "[EOS]", "<eos>", "<turn|>", "<|tool_response>", "[e~[",
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
    "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
    "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
    "▁<MID>", "<|code_middle|>", "<|middle|>", "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
})
_FORCED_USER_DEFINED = frozenset({"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})

# End-of-turn markers a chat model emits when its turn is over: stop tokens, in order of preference.
END_OF_TURN_TEXTS = (
    "<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<|end_of_text|>", "<|endoftext|>",
    "<EOT>", "<end_of_utterance>",
)


_VOCAB_KEYS = (
    "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
    "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id", "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token", "tokenizer.ggml.add_space_prefix", "general.name",
)


@dataclass
class GgufVocab:
    """The tokenizer part of a GGUF file, with llama.cpp's defaults and type overrides applied."""

    model: str
    pre: str
    tokens: list[str]
    scores: np.ndarray  # float32, one per token (zeros when the file has none)
    types: np.ndarray  # int32 llama.cpp token types, after llama.cpp's overrides
    merges: list[str] | None
    bos_id: int | None
    eos_id: int | None
    unk_id: int | None
    pad_id: int | None
    eot_id: int | None
    eom_id: int | None
    add_bos: bool
    add_eos: bool
    add_space_prefix: bool
    token_to_id: dict[str, int] = field(repr=False, default_factory=dict)
    rstrip_ids: frozenset[int] = frozenset()  # special tokens that swallow the whitespace after them


def _metadata(source: Any) -> dict[str, Any]:
    """Tokenizer metadata from a path or a gguf.GGUFReader (re-using its memory map)."""
    if isinstance(source, (str, Path)):
        with open(source, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _MetadataParser(mm).items(_VOCAB_KEYS)
    data = getattr(source, "data", None)
    if data is None or not hasattr(source, "fields"):
        raise TypeError(f"expected a GGUF path or gguf.GGUFReader, got {type(source).__name__}")
    return _MetadataParser(memoryview(np.asarray(data)).cast("B")).items(_VOCAB_KEYS)


def read_gguf_vocab(source: str | Path | Any) -> GgufVocab:
    """The tokenizer metadata of a GGUF (path or gguf.GGUFReader).

    Raises ValueError for a file without a tokenizer or with one we do not support.
    """
    if isinstance(source, GgufVocab):
        return source
    md = _metadata(source)
    model = md.get("tokenizer.ggml.model")
    tokens = md.get("tokenizer.ggml.tokens")
    if model is None or tokens is None:
        raise ValueError("this GGUF file has no tokenizer (tokenizer.ggml.model / tokenizer.ggml.tokens missing)")
    if model not in ("llama", "gpt2"):
        raise ValueError(
            f"unsupported GGUF tokenizer model {model!r}: supported are 'llama' (SentencePiece BPE, e.g. Gemma, "
            "Llama 2) and 'gpt2' (byte-level BPE, e.g. Qwen2, Llama 3, SmolLM2)"
        )
    n = len(tokens)
    pre = md.get("tokenizer.ggml.pre") or "default"
    if model == "gpt2" and pre not in _PRE_TYPES:
        raise ValueError(
            f"unsupported GGUF pre-tokenizer {pre!r} for a 'gpt2' tokenizer: supported are {', '.join(sorted(_PRE_TYPES))}"
        )
    scores = md.get("tokenizer.ggml.scores")
    scores = np.zeros(n, np.float32) if scores is None else np.asarray(scores, np.float32)[:n]
    types = md.get("tokenizer.ggml.token_type")
    types = np.full(n, TYPE_NORMAL, np.int32) if types is None else np.asarray(types, np.int32)[:n].copy()
    if model == "gpt2" and md.get("tokenizer.ggml.merges") is None:
        raise ValueError("this 'gpt2' GGUF tokenizer has no tokenizer.ggml.merges")

    token_to_id: dict[str, int] = {}
    for i, t in enumerate(tokens):
        if not t:  # llama.cpp renames empty tokens the same way
            t = tokens[i] = f"[EMPTY_{i}]"
        token_to_id[t] = i
    # llama.cpp marks these by their text whatever the file says (llama_vocab::impl::load)
    for text in _FORCED_CONTROL:
        i = token_to_id.get(text)
        if i is not None and types[i] != TYPE_CONTROL:
            types[i] = TYPE_CONTROL
    for text in _FORCED_USER_DEFINED:
        i = token_to_id.get(text)
        if i is not None:
            types[i] = TYPE_USER_DEFINED
    if "<|tool_response>" in token_to_id and "</s>" in token_to_id:  # llama.cpp: "</s>" is a normal token there
        types[token_to_id["</s>"]] = TYPE_NORMAL

    rstrip: set[int] = set()
    name = str(md.get("general.name") or "").lower()
    if "phi-3" in name or "phi3" in name:  # llama.cpp sets these by model name
        rstrip = {int(i) for i in np.flatnonzero(np.isin(types, (TYPE_CONTROL, TYPE_USER_DEFINED, TYPE_UNKNOWN)))}
        rstrip |= {token_to_id[t] for t in ("</s>",) if t in token_to_id}
        rstrip -= {token_to_id[t] for t in ("<unk>", "<s>", "<|endoftext|>") if t in token_to_id}

    def tid(key: str, default: int | None) -> int | None:
        v = md.get(key)
        if v is not None and 0 <= int(v) < n:
            return int(v)
        return default if default is not None and 0 <= default < n else None

    spm = model == "llama"
    add_bos_default = spm or pre in _LLAMA3_PRES
    add_bos = md.get("tokenizer.ggml.add_bos_token")
    add_eos = md.get("tokenizer.ggml.add_eos_token")
    add_space_prefix = md.get("tokenizer.ggml.add_space_prefix") if spm else False
    return GgufVocab(
        model=model, pre=pre, tokens=tokens, scores=scores, types=types, merges=md.get("tokenizer.ggml.merges"),
        bos_id=tid("tokenizer.ggml.bos_token_id", 1 if spm else 11),
        eos_id=tid("tokenizer.ggml.eos_token_id", 2 if spm else 11),
        unk_id=tid("tokenizer.ggml.unknown_token_id", 0 if spm else None),
        pad_id=tid("tokenizer.ggml.padding_token_id", None),
        eot_id=tid("tokenizer.ggml.eot_token_id", None),
        eom_id=tid("tokenizer.ggml.eom_token_id", None),
        add_bos=bool(add_bos_default if add_bos is None else add_bos),
        add_eos=bool(False if add_eos is None else add_eos),
        add_space_prefix=bool(spm if add_space_prefix is None else add_space_prefix),
        token_to_id=token_to_id,
        rstrip_ids=frozenset(rstrip),
    )


# --- building the tokenizer --------------------------------------------------------------------------------
def _spm_merges(v: GgufVocab) -> list[tuple[str, str]]:
    """Every split of a token into two vocabulary pieces, best merged-token score first.

    llama.cpp's SentencePiece tokenizer merges any two adjacent symbols whose
    concatenation is a token, the highest-scoring one first (leftmost on ties);
    a BPE model with these merges in this order does the same. The one case it
    cannot copy: two overlapping pairs of equal score ([ab][a][ba] -> "aba" either
    way) go by merge rank here, by position in llama.cpp. 60,000 random texts
    never hit it on Gemma 3's vocabulary.
    """
    t2i = v.token_to_id
    has = t2i.__contains__
    pairs: list[tuple[str, str]] = []
    merged: list[int] = []
    for i, t in enumerate(v.tokens):
        if len(t) < 2:
            continue
        for k in range(1, len(t)):
            a = t[:k]
            if has(a):
                b = t[k:]
                if has(b):
                    pairs.append((a, b))
                    merged.append(i)
    ids = np.asarray(merged, np.int64)
    # stable sort: score descending, then token id (then split position, by construction)
    order = np.lexsort((ids, -v.scores[ids].astype(np.float64)))
    return [pairs[j] for j in order.tolist()]


def _bpe_merges(v: GgufVocab) -> list[tuple[str, str]]:
    out = []
    t2i = v.token_to_id
    seen = set()
    for m in v.merges or ():
        pos = m.find(" ", 1)  # as llama.cpp splits them
        if pos < 0:
            continue
        a, b = m[:pos], m[pos + 1 :]
        # the tokenizers library rejects merges of pieces outside the vocabulary; llama.cpp keeps the first rank
        if a in t2i and b in t2i and a + b in t2i and (a, b) not in seen:
            seen.add((a, b))
            out.append((a, b))
    return out


def build_tokenizer(source: str | Path | Any) -> Tokenizer:
    """A `tokenizers.Tokenizer` for a GGUF file (path, gguf.GGUFReader or GgufVocab), llama.cpp's ids.

    `encode(text)` adds BOS/EOS as the file asks and parses special tokens in the
    text (llama.cpp's parse_special=True); see `encode_ids` for the other modes.
    Raises ValueError for an unsupported tokenizer model or pre-tokenizer.
    """
    v = read_gguf_vocab(source)
    vocab = dict(v.token_to_id)
    if v.model == "llama":
        tok = Tokenizer(models.BPE(vocab=vocab, merges=_spm_merges(v), byte_fallback=True,
                                   unk_token=v.tokens[v.unk_id] if v.unk_id is not None else None, fuse_unk=False))
        norm = [normalizers.Replace(" ", SPACE)]
        dec = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
        if v.add_space_prefix:
            norm.insert(0, normalizers.Prepend(SPACE))
            dec.append(decoders.Strip(" ", 1, 0))
        tok.normalizer = normalizers.Sequence(norm)
        tok.decoder = decoders.Sequence(dec)
    else:
        regexes, ignore_merges = _PRE_TYPES[v.pre]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=_bpe_merges(v), ignore_merges=ignore_merges))
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in regexes]
            + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
        tok.decoder = decoders.ByteLevel()

    types, rs = v.types, v.rstrip_ids
    special = [AddedToken(v.tokens[i], special=True, normalized=False, rstrip=i in rs)
               for i in np.flatnonzero((types == TYPE_CONTROL) | (types == TYPE_UNKNOWN)).tolist()]
    user = [AddedToken(v.tokens[i], special=False, normalized=False, rstrip=i in rs)
            for i in np.flatnonzero(types == TYPE_USER_DEFINED).tolist()]
    if special:
        tok.add_special_tokens(special)
    if user:
        tok.add_tokens(user)

    single, pair, specials = "$A", "$A $B", []
    if v.add_bos and v.bos_id is not None:
        bos = v.tokens[v.bos_id]
        single, pair = f"{bos} {single}", f"{bos} $A {bos} $B"
        specials.append((bos, v.bos_id))
    if v.add_eos and v.eos_id is not None:
        eos = v.tokens[v.eos_id]
        single, pair = f"{single} {eos}", f"{pair} {eos}"
        specials.append((eos, v.eos_id))
    if specials:
        tok.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=specials)
    return tok


def special_ids(source: str | Path | Any) -> dict[str, Any]:
    """{"bos", "eos", "pad", "unk": id or None, "end_of_turn": [ids], "stop": [ids]} of a GGUF.

    end_of_turn lists the end-of-turn markers the vocabulary has (e.g. <end_of_turn>,
    <|im_end|>, <|eot_id|>); stop is eos plus those: the ids that end a chat reply.
    """
    v = read_gguf_vocab(source)
    eot: list[int] = []
    for i in (v.eot_id, v.eom_id):
        if i is not None and i not in eot:
            eot.append(i)
    for text in END_OF_TURN_TEXTS:
        i = v.token_to_id.get(text)
        if i is not None and i not in eot:
            eot.append(i)
    stop = sorted({*eot, *([v.eos_id] if v.eos_id is not None else [])})
    return {"bos": v.bos_id, "eos": v.eos_id, "pad": v.pad_id, "unk": v.unk_id, "end_of_turn": eot, "stop": stop}


# --- encoding in llama.cpp's modes -------------------------------------------------------------------------
def encode_ids(tok: Tokenizer, text: str, add_bos: bool = True, parse_special: bool = True) -> list[int]:
    """llama.cpp's `tokenize(text, add_special=add_bos, parse_special=parse_special)` ids.

    parse_special=False keeps control-token look-alikes ("<start_of_turn>", "<bos>") as
    plain text: use it for text a user typed. User-defined tokens (e.g. Gemma's
    whitespace runs and HTML tags) are matched in both modes, as in llama.cpp.
    """
    t = tok if parse_special or tok.encode_special_tokens else plain_twin(tok)
    return t.encode(text, add_special_tokens=add_bos).ids


# --- decoding ------------------------------------------------------------------------------------------------
_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>\Z")


class TokenPieces:
    """The bytes of every token as llama.cpp's token_to_piece gives them, read from a Tokenizer.

    Works on any tokenizer built by `build_tokenizer`, including one saved to and
    loaded from tokenizer.json. Special (control) tokens render as "" unless asked.
    """

    def __init__(self, tok: Tokenizer):
        vocab = tok.get_vocab(with_added_tokens=True)
        size = max(vocab.values()) + 1 if vocab else 0
        added = tok.get_added_tokens_decoder()
        self.special = np.zeros(size, bool)
        self.pieces: list[bytes] = [b""] * size
        self.texts: list[bytes] = [b""] * size  # what a special token reads as when rendered
        byte_level = isinstance(tok.decoder, decoders.ByteLevel)
        byte_fallback = bool(getattr(tok.model, "byte_fallback", False))
        table = byte_level_table() if byte_level else None
        for text, i in vocab.items():
            a = added.get(i)
            if a is not None:
                self.texts[i] = self.pieces[i] = text.encode("utf-8")
                if a.special:
                    self.special[i] = True
                continue
            if table is not None:
                try:
                    self.pieces[i] = bytes(table[c] for c in text)
                except KeyError:
                    self.pieces[i] = text.encode("utf-8")
                continue
            m = _BYTE_TOKEN.match(text) if byte_fallback and text.startswith("<0x") else None
            self.pieces[i] = bytes([int(m.group(1), 16)]) if m else text.replace(SPACE, " ").encode("utf-8")
        for i in np.flatnonzero(self.special).tolist():
            self.pieces[i] = b""
        # SentencePiece models with add_space_prefix put a "▁" at the start of the text and after
        # each special or user-defined token: the decoder drops that one space again.
        self.strip_after_special = bool(not byte_level and _has_space_prefix(tok))

    def piece(self, token_id: int, render_special: bool = False) -> bytes:
        return self.texts[token_id] if render_special and self.special[token_id] else self.pieces[token_id]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Text of ids (invalid UTF-8 becomes U+FFFD), as llama.cpp detokenizes them."""
        d = IncrementalDecoder(self, skip_special_tokens=skip_special_tokens)
        return "".join([d.add(i) for i in ids]) + d.flush()


def _has_space_prefix(tok: Tokenizer) -> bool:
    try:
        return tok.normalizer is not None and tok.normalizer.normalize_str("a").startswith(SPACE)
    except Exception:
        return False


def token_pieces(tok: Tokenizer) -> TokenPieces:
    """TokenPieces of tok, built once (~0.5 s for 262k tokens) and cached on the tokenizer object."""
    tp = getattr(tok, "_edge_token_pieces", None)
    if tp is None:
        tp = TokenPieces(tok)
        tok._edge_token_pieces = tp
    return tp


def decode_ids(tok: Tokenizer | TokenPieces, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
    """Text of ids the way llama.cpp renders them (special tokens dropped unless asked)."""
    tp = tok if isinstance(tok, TokenPieces) else token_pieces(tok)
    return tp.decode(ids, skip_special_tokens=skip_special_tokens)


class IncrementalDecoder:
    """Feed token ids one by one; get back only complete text. O(1) per token.

    Bytes of a character split over byte-fallback tokens are held until the
    character is complete, so no increment ends in a broken character or a
    U+FFFD the full text does not have; the increments joined equal
    `decode_ids` of all ids. `flush()` returns what is still held (an unfinished
    character becomes U+FFFD). Drop-in for edge_agent.engine.detokenize's class.
    """

    def __init__(self, tokenizer: Tokenizer | TokenPieces, skip_special_tokens: bool = True):
        self.pieces = tokenizer if isinstance(tokenizer, TokenPieces) else token_pieces(tokenizer)
        self.skip_special = skip_special_tokens
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._strip_next = self.pieces.strip_after_special  # the text's start counts as "after special"

    def add(self, token_id: int) -> str:
        """Append one token; return the newly completed text (maybe "")."""
        tp = self.pieces
        i = int(token_id)
        if tp.special[i]:
            self._strip_next = tp.strip_after_special
            return "" if self.skip_special else self._utf8.decode(tp.texts[i])
        b = tp.pieces[i]
        if self._strip_next and b:
            self._strip_next = False
            if b[:1] == b" ":
                b = b[1:]
        return self._utf8.decode(b)

    def flush(self) -> str:
        """Whatever is still held back; an incomplete character decodes to U+FFFD."""
        return self._utf8.decode(b"", final=True)
