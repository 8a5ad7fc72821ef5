"""Constrained output: token masks from llguidance grammars (one JSON object, a JSON schema, a choice of strings).

llguidance (the grammar engine llama.cpp and vLLM use) computes, for each step, the set of
tokens that keep the output inside the grammar, natively and in tens of microseconds for a
262k-token vocabulary. `GrammarLogitsProcessor` is the engine's SamplingParams.logits_processor
hook: before each choice the scheduler hands it the generated ids and the logits, it feeds the
new ids to its matcher and sets every refused token's logit to -inf, for greedy and sampled
requests alike. Once the grammar is complete only the stop tokens stay allowed, so the
sequence ends with finish_reason "stop"; a sequence cut by max_tokens ends with "length" and
its text is left as the model wrote it (never patched into valid JSON).

Costs: the grammar tokenizer is built once per model (on the daemon's first request that needs it,
services/on_demand.py; /ready's part `grammar`) over the tokenizer the engine holds: ~1.6 s and ~117 MB resident for Gemma's 262k
vocabulary (its token trie and four "slices" of it; llguidance's own parse of tokenizer.json
was a second tokenizer, 217 MB). A matcher per choice is built in the
request's thread; the scheduler thread pays the mask (see the report in the commit that
brought this module for batch-1 and batch-16 figures).
"""
from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge_agent.engine.tokens import byte_level_table
from edge_agent.services.errors import InvalidRequestError

# Whitespace between JSON tokens: at most 20 characters in a row (llama.cpp's JSON grammars
# allow a newline and up to 20 spaces), so a weak model cannot fill max_tokens with blanks.
JSON_WHITESPACE = r"(?: |\n[ \t]{0,20})?"
# One optional blank before the value: base-model transcripts end in "Answer:", and the
# model's most natural next token is " {".
_LEAD = r"/[ \n]?/"
MAX_SCHEMA_HINT_CHARS = 2000
MAX_CHOICES = 1000

_LOCK = threading.Lock()
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OutputConstraint:
    """What the output must be: a grammar (llguidance's format) and the instruction that tells the model so."""

    kind: str  # "json_object" | "json_schema" | "choice"
    grammar: str
    instruction: str = ""

    @classmethod
    def json_object(cls) -> "OutputConstraint":
        return cls.json_schema({"type": "object"}, instruction="Respond with one JSON object only.", kind="json_object")

    @classmethod
    def json_schema(cls, schema: dict[str, Any], instruction: str | None = None, kind: str = "json_schema") -> "OutputConstraint":
        """One JSON value that follows schema (raises InvalidRequestError for a schema that is not an object)."""
        if not isinstance(schema, dict):
            raise InvalidRequestError("the JSON schema must be an object", param="response_format")
        schema = tightened_schema(schema)
        guidance = dict(schema.get("x-guidance") or {}) if isinstance(schema.get("x-guidance"), dict) else {}
        guidance["whitespace_pattern"] = JSON_WHITESPACE
        schema["x-guidance"] = guidance
        import llguidance as llg

        grammar = llg.LLMatcher.grammar_from_lark(f"start: {_LEAD} value\nvalue: %json {json.dumps(schema)}")
        if instruction is None:
            shown = {k: v for k, v in schema.items() if k != "x-guidance"}
            text = json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
            instruction = ("Respond with one JSON object that follows this JSON schema: " + text
                           if len(text) <= MAX_SCHEMA_HINT_CHARS else "Respond with one JSON object only.")
        return cls(kind, grammar, instruction)

    @classmethod
    def choice(cls, options: list[str]) -> "OutputConstraint":
        """Exactly one of options (guided choice, e.g. a classifier's labels); raises InvalidRequestError for an empty list."""
        opts = list(dict.fromkeys(options))
        if not opts or not all(isinstance(o, str) and o for o in opts):
            raise InvalidRequestError("a choice needs at least one non-empty string", param="choices")
        if len(opts) > MAX_CHOICES:
            raise InvalidRequestError(f"a choice allows at most {MAX_CHOICES} options", param="choices")
        import llguidance as llg

        return cls("choice", llg.LLMatcher.grammar_from_lark("start: " + " | ".join(json.dumps(o) for o in opts)))


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = ("items", "additionalProperties", "additionalItems", "unevaluatedProperties", "unevaluatedItems", "not", "if", "then",
               "else", "contains", "propertyNames")
_SCHEMA_LISTS = ("anyOf", "oneOf", "prefixItems", "items")
_OPEN_KEYS = ("additionalProperties", "patternProperties", "unevaluatedProperties")


# the bound of a number whose schema sets none: 15 digits (llama.cpp's JSON grammars allow 16; llguidance reads
# bounds as doubles, which hold every integer only up to 2**53, so 10**16 - 1 would read as 10**16)
MAX_JSON_NUMBER = 10**15 - 1


def tightened_schema(schema: Any, in_all_of: bool = False) -> Any:
    """schema with the two limits llama.cpp's JSON-schema grammars have and a small model needs.

    Objects that list `properties` and say nothing of extra keys get additionalProperties: false: JSON
    Schema allows extra keys unless told otherwise, and a small model then fills max_tokens with invented
    ones ({"label": "factuur", "type": "object", "properties": ...}); llama.cpp, vLLM's default (xgrammar's
    strict mode) and OpenAI's strict mode close them. A schema that sets additionalProperties (or
    patternProperties, unevaluatedProperties) keeps its own; members of allOf stay open (each names
    only part of the keys). Integers and numbers without a bound get +-MAX_JSON_NUMBER (15 digits; llama.cpp
    allows 16), so digits cannot run on ("bedrag": 100000000...) until max_tokens cuts the JSON.
    """
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: tightened_schema(sub) for name, sub in out[key].items()}
    for key in _SCHEMA_ONE:
        if isinstance(out.get(key), dict):
            out[key] = tightened_schema(out[key])
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [tightened_schema(sub) for sub in out[key]]
    if isinstance(out.get("allOf"), list):
        out["allOf"] = [tightened_schema(sub, in_all_of=True) for sub in out["allOf"]]
    if not in_all_of and isinstance(out.get("properties"), dict) and not any(k in out for k in _OPEN_KEYS) and "allOf" not in out:
        out["additionalProperties"] = False
    types = out.get("type") if isinstance(out.get("type"), list) else [out.get("type")]
    if {"integer", "number"} & set(t for t in types if isinstance(t, str)) and "enum" not in out and "const" not in out:
        if "maximum" not in out and "exclusiveMaximum" not in out:
            out["maximum"] = MAX_JSON_NUMBER
        if "minimum" not in out and "exclusiveMinimum" not in out:
            out["minimum"] = -MAX_JSON_NUMBER
    return out


def grammar_tokenizer(tokenizer, vocab_size: int, stop_token_ids) -> Any:
    """llguidance's view of tokenizer (built once per tokenizer object, under a lock, and cached on it)."""
    key = (int(vocab_size), tuple(sorted(int(t) for t in stop_token_ids)))
    tokenizer._edge_llg_used = time.monotonic()
    cache = getattr(tokenizer, "_edge_llg", None)
    if cache is not None and cache[0] == key:
        return cache[1]
    with _LOCK:
        cache = getattr(tokenizer, "_edge_llg", None)
        if cache is None or cache[0] != key:
            import llguidance as llg

            started = time.perf_counter()
            tokens = token_bytes(tokenizer)
            if tokens is None:  # a tokenizer of another kind: llguidance parses its JSON (a second copy of it)
                lt = llg.LLTokenizer(tokenizer.to_str(), n_vocab=key[0], eos_token=list(key[1]) or None)
            else:
                wrapper = _Wrapper(tokenizer, tokens, key[1])
                lt = llg.LLTokenizer(wrapper, n_vocab=key[0], eos_token=list(key[1]) or None)
                wrapper.tokens = []  # llguidance copied them at construction (Gemma's: 15 MB it would keep for nothing)
                del tokens
            cache = (key, lt)
            tokenizer._edge_llg = cache
            tokenizer._edge_llg_seconds = time.perf_counter() - started
            log.info("built the grammar tokenizer for structured outputs in %.2f s", tokenizer._edge_llg_seconds)
    return cache[1]


def grammar_loaded(tokenizer) -> bool:
    """True when tokenizer holds a grammar tokenizer (built by grammar_tokenizer)."""
    return getattr(tokenizer, "_edge_llg", None) is not None


def grammar_last_used(tokenizer) -> float:
    """time.monotonic() of the last grammar_tokenizer call on tokenizer (0 if never)."""
    return float(getattr(tokenizer, "_edge_llg_used", 0.0))


def release_grammar(tokenizer) -> bool:
    """Drop tokenizer's grammar tokenizer (the next constrained request builds it again); True when it held one.
    Matchers in flight keep their own reference and finish."""
    with _LOCK:
        held = getattr(tokenizer, "_edge_llg", None)
        tokenizer._edge_llg = None
    return held is not None


_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def token_bytes(tokenizer) -> list[bytes] | None:
    """Each token's bytes as llguidance reads a tokenizer.json (special and <...> added tokens behind 0xFF),
    for SentencePiece-style (the "\u2581" space, <0xNN> byte pieces) and byte-level BPE tokenizers; None for others."""
    from tokenizers import decoders

    dec = tokenizer.decoder
    try:
        state = json.loads(dec.__getstate__()) if dec is not None else {}
    except (AttributeError, ValueError):
        return None
    steps = state.get("decoders", [state]) if state.get("type") == "Sequence" else [state]
    kinds = [d.get("type") for d in steps]
    spm = "ByteFallback" in kinds and {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "} in steps
    if isinstance(dec, decoders.ByteLevel):
        table = byte_level_table()

        def piece(s: str) -> bytes | None:
            out = [table.get(c) for c in s]
            return None if None in out else bytes(out)
    elif spm:
        def piece(s: str) -> bytes | None:
            m = _BYTE_PIECE.match(s)
            return bytes([int(m.group(1), 16)]) if m else s.replace("\u2581", " ").encode("utf-8")
    else:
        return None
    added = tokenizer.get_added_tokens_decoder()
    out: list[bytes] = []
    for i in range(tokenizer.get_vocab_size(with_added_tokens=True)):
        a = added.get(i)
        if a is not None:
            special = a.special or (a.content.startswith("<") and a.content.endswith(">"))
            out.append((b"\xff" if special else b"") + a.content.encode("utf-8"))
            continue
        s = tokenizer.id_to_token(i)
        b = piece(s) if s is not None else b""
        if b is None:
            return None
        out.append(b)
    return out


class _Wrapper:
    """llguidance's TokenizerWrapper protocol over our tokenizer: the token bytes, and encoding through
    the tokenizer we already hold (no second copy of the vocabulary and merges)."""

    is_tokenizer_wrapper = True

    def __init__(self, tokenizer, tokens: list[bytes], eos: tuple[int, ...]):
        self._tok = tokenizer
        self.tokens = tokens
        self.eos_token_id = eos[0] if eos else None
        self.bos_token_id = None
        self.special_token_ids = [i for i, t in enumerate(tokens) if t.startswith(b"\xff")]

    def __call__(self, text: str | bytes) -> list[int]:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        return self._tok.encode(text, add_special_tokens=False).ids


class GrammarLogitsProcessor:
    """Masks every token the grammar refuses next; one per sequence, called as proc(generated_ids, logits) -> logits.

    Raises ValueError when the generated ids left the grammar (only possible if the mask was
    not applied): the scheduler then ends that sequence with an error.
    """

    def __init__(self, matcher, vocab_size: int):
        self.matcher = matcher
        self.vocab_size = int(vocab_size)
        self.bitmask = np.full((1, (self.vocab_size + 31) // 32), -1, np.int32)
        self.seen = 0

    def __call__(self, token_ids: list[int], logits: np.ndarray) -> np.ndarray:
        m = self.matcher
        if len(token_ids) > self.seen:
            if not m.consume_tokens([int(t) for t in token_ids[self.seen:]]):
                raise ValueError("the output left its grammar")
            self.seen = len(token_ids)
        m.unsafe_compute_mask_ptr(self.bitmask.ctypes.data, self.bitmask.nbytes)
        if m.is_error():
            raise ValueError("the output grammar failed")
        n = logits.shape[-1]
        allowed = np.unpackbits(self.bitmask.view(np.uint8), bitorder="little", count=n).view(bool)
        np.copyto(logits, np.float32(-np.inf), where=~allowed)
        return logits


def compile_matcher(lltok, constraint: OutputConstraint):
    """A fresh matcher for constraint; raises InvalidRequestError when the grammar (e.g. the schema) is invalid."""
    import llguidance as llg

    err = llg.LLMatcher.validate_grammar(constraint.grammar, lltok)
    if err:
        param = {"choice": "choices", "tool_call": "tools"}.get(constraint.kind, "response_format")
        raise InvalidRequestError(f"the output format cannot be used: {_short(err)}", param=param)
    matcher = llg.LLMatcher(lltok, constraint.grammar, log_level=0)
    if matcher.is_error():
        raise InvalidRequestError(f"the output format cannot be used: {_short(matcher.get_error())}", param="response_format")
    return matcher


def processors(tokenizer, vocab_size: int, stop_token_ids, constraint: OutputConstraint, n: int = 1) -> list[GrammarLogitsProcessor]:
    """n processors (one per choice) for constraint; raises InvalidRequestError for an unusable grammar."""
    lltok = grammar_tokenizer(tokenizer, vocab_size, stop_token_ids)
    first = compile_matcher(lltok, constraint)
    return [GrammarLogitsProcessor(first if i == 0 else first.deep_copy(), vocab_size) for i in range(n)]


def choice_processor(engine, choices: list[str]) -> GrammarLogitsProcessor:
    """A logits processor that lets the model write exactly one of choices, then a stop token (guided choice).

    engine: the OnnxEngine (or anything with .tokenizer, .vocab_size and .stop_token_ids), e.g.
    ChatService.engine. Put the result in SamplingParams.logits_processor, one per sequence;
    with ChatService, pass constraint=OutputConstraint.choice(choices) instead.
    Raises InvalidRequestError for an empty list.
    """
    return processors(engine.tokenizer, engine.vocab_size, engine.stop_token_ids, OutputConstraint.choice(choices))[0]


def _short(message: str, limit: int = 300) -> str:
    first = message.strip().splitlines()[0] if message.strip() else "invalid grammar"
    return first if len(first) <= limit else first[:limit] + "…"
