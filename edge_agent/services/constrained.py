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
from dataclasses import dataclass, replace
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

    kind: str  # "json_object" | "json_schema" | "choice" | "regex" | "tool_call"
    grammar: str
    instruction: str = ""
    param: str = ""  # the request field an unusable grammar is blamed on ("": by kind)
    answer_rules: str = ""  # JSON kinds: the grammar as lark rules whose start is `answer`, to put beside tool calls (tools.auto_constraint)

    @classmethod
    def json_object(cls) -> "OutputConstraint":
        return cls.json_schema({"type": "object"}, instruction="Respond with one JSON object only.", kind="json_object")

    @classmethod
    def json_schema(cls, schema: dict[str, Any], instruction: str | None = None, kind: str = "json_schema") -> "OutputConstraint":
        """One JSON value that follows schema (raises InvalidRequestError for a schema that is not an object)."""
        if not isinstance(schema, dict):
            raise InvalidRequestError("the JSON schema must be an object", param="response_format")
        empty = unproductive(schema)
        if empty is not None:
            raise InvalidRequestError(f"the JSON schema at {empty} admits no finite JSON value (a $ref that only leads back to "
                                      "itself, as {\"$ref\": \"#\"} does): give each recursive schema a way out, such as an "
                                      "optional property or an anyOf branch without the $ref", param="response_format")
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
        return cls(kind, grammar, instruction, answer_rules=f"answer: {_LEAD} answer_value\nanswer_value: %json {json.dumps(schema)}")

    @classmethod
    def regex(cls, pattern: str, param: str = "") -> "OutputConstraint":
        """Text that the regular expression matches whole (Rust regex syntax, as llguidance reads it)."""
        import llguidance as llg

        return cls("regex", llg.LLMatcher.grammar_from_regex(pattern), param=param)

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


def unproductive(schema: dict[str, Any]) -> str | None:
    """The JSON pointer of a subschema no finite JSON value satisfies, or None: a $ref cycle with no way out ({"$ref": "#"},
    an object that requires a property whose schema is the object again, $defs that refer to each other).

    llguidance compiles such a schema and finds out only while generating: the mask empties mid-answer (a 500,
    "the output grammar failed") or the JSON nests until max_tokens. Each subschema a value can reach (properties,
    items, anyOf, $ref targets, ...) is productive when all it requires is: the target of a local $ref, every allOf
    member, one anyOf/oneOf member, the required properties of an object-only type, the first minItems items of an
    array-only type. Anything else counts as satisfiable, so no schema with a finite value is refused. Linear in the
    schema's size (a worklist over the and/or graph), no recursion.
    """
    nodes: dict[int, tuple[int | None, str]] = {}  # id(subschema) -> (id of where it was reached from, the step from there)
    needs: dict[int, list[list[int]]] = {}  # id -> requirements, each a list of alternatives (ids)
    stack: list[tuple[Any, int | None, str]] = [(schema, None, "#")]
    while stack:
        node, parent, step = stack.pop()
        if not isinstance(node, dict) or id(node) in nodes:
            continue
        here = id(node)
        nodes[here] = (parent, step)
        need: list[list[int]] = []
        needs[here] = need

        def reach(sub: Any, step: str, parent: int | None = here) -> int | None:
            if isinstance(sub, dict):
                stack.append((sub, parent, step))
                return id(sub)
            return None

        target = _local_ref(schema, node.get("$ref"))
        if isinstance(target, dict):
            need.append([reach(target, node["$ref"], None)])  # type: ignore[list-item]
        for i, sub in enumerate(node.get("allOf") if isinstance(node.get("allOf"), list) else []):
            if (k := reach(sub, f"allOf/{i}")) is not None:
                need.append([k])
        for key in ("anyOf", "oneOf"):
            subs = node.get(key) if isinstance(node.get(key), list) else []
            alts = [reach(sub, f"{key}/{i}") for i, sub in enumerate(subs)]
            if alts and None not in alts:
                need.append(alts)  # type: ignore[arg-type]
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        ids = {name: reach(sub, f"properties/{name}") for name, sub in props.items()}
        for key in ("additionalProperties", "items", "additionalItems", "unevaluatedProperties", "unevaluatedItems"):
            reach(node.get(key), key)
        for name, sub in (node.get("patternProperties") or {}).items() if isinstance(node.get("patternProperties"), dict) else ():
            reach(sub, f"patternProperties/{name}")
        key = "prefixItems" if isinstance(node.get("prefixItems"), list) else "items"
        prefix = node.get(key) if isinstance(node.get(key), list) else []
        prefix_ids = [reach(sub, f"{key}/{i}") for i, sub in enumerate(prefix)]
        only = node.get("type")
        only = only[0] if isinstance(only, list) and len(only) == 1 else only
        if only == "object" and isinstance(node.get("required"), list):
            need += [[ids[name]] for name in node["required"] if isinstance(name, str) and ids.get(name) is not None]  # type: ignore[list-item]
        least = node.get("minItems")
        if only == "array" and isinstance(least, int) and not isinstance(least, bool) and least > 0:
            need += [[k] for k in prefix_ids[:least] if k is not None]
            if least > len(prefix) and isinstance(node.get("items"), dict):
                need.append([id(node["items"])])
    left = {n: len(r) for n, r in needs.items()}
    waiting: dict[int, list[tuple[int, int]]] = {}
    for n, reqs in needs.items():
        for i, alts in enumerate(reqs):
            for a in alts:
                waiting.setdefault(a, []).append((n, i))
    met: set[tuple[int, int]] = set()
    ready = [n for n, c in left.items() if c == 0]
    done: set[int] = set()
    while ready:
        n = ready.pop()
        if n in done:
            continue
        done.add(n)
        for parent, i in waiting.get(n, ()):
            if (parent, i) not in met:
                met.add((parent, i))
                left[parent] -= 1
                if left[parent] == 0:
                    ready.append(parent)
    bad = [n for n in nodes if n not in done]
    return min((_pointer(nodes, n) for n in bad[:64]), key=len) if bad else None


def _pointer(nodes: dict[int, tuple[int | None, str]], n: int) -> str:
    """The pointer of a node unproductive() reached, from its (parent, step) links (a $ref target's step is the $ref)."""
    steps: list[str] = []
    while True:
        parent, step = nodes[n]
        steps.append(step)
        if parent is None:
            return "/".join(reversed(steps))
        n = parent


def _local_ref(root: dict[str, Any], ref: Any) -> Any:
    """The subschema a local $ref ("#" or "#/a/b", RFC 6901) points to; None for any other (remote, an anchor) or a missing one."""
    if ref == "#":
        return root
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return None
    from urllib.parse import unquote

    node: Any = root
    for part in ref[2:].split("/"):
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


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


def _param(constraint: OutputConstraint) -> str:
    return constraint.param or {"choice": "choices", "tool_call": "tools"}.get(constraint.kind, "response_format")


# llguidance's fuel for building a grammar's lexer (its default 1,000,000): the first mask of a pattern like
# (a{1000}){1000} spent it all on the scheduler's thread, 0.9 s on an idle core (5-7 s at load 6) that stalled every
# sequence, and then failed anyway ("too many expressions constructed"); with 200,000 it fails in 0.1 s, while
# (a{100}){100}, [0-9]{3}-[0-9]{4} and a 60-field schema compile and generate as before (/tmp probe, 2026-12-01)
INITIAL_LEXER_FUEL = 200_000


def compile_matcher(lltok, constraint: OutputConstraint):
    """A fresh matcher for constraint, tried for one step on a copy (here, on the request's thread, so a grammar
    that exhausts llguidance's limits is this request's 400 and not a stall of the scheduler and a 500 later);
    raises InvalidRequestError when the grammar (e.g. the schema or pattern) is invalid or too complex."""
    import llguidance as llg

    err = llg.LLMatcher.validate_grammar(constraint.grammar, lltok)
    if err:
        raise InvalidRequestError(f"the output format cannot be used: {_short(err)}", param=_param(constraint))
    matcher = llg.LLMatcher(lltok, constraint.grammar, log_level=0, limits=llg.LLParserLimits(initial_lexer_fuel=INITIAL_LEXER_FUEL))
    if matcher.is_error():
        raise InvalidRequestError(f"the output format cannot be used: {_short(matcher.get_error())}", param=_param(constraint))
    trial = matcher.deep_copy()
    bitmask = np.zeros((1, (lltok.vocab_size + 31) // 32), np.int32)
    trial.unsafe_compute_mask_ptr(bitmask.ctypes.data, bitmask.nbytes)
    first = np.flatnonzero(np.unpackbits(bitmask.view(np.uint8), bitorder="little", count=lltok.vocab_size))[:1]
    if trial.is_error() or (first.size and not trial.consume_tokens([int(first[0])])):
        raise InvalidRequestError("the output format is too complex to follow (a pattern or schema that exhausts the grammar "
                                  f"engine's limits: {_short(trial.get_error().splitlines()[0] if trial.get_error() else 'no detail')}); "
                                  "simplify it, e.g. smaller repetition counts", param=_param(constraint))
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


_GRAMMAR_LISTING = re.compile(r"\s*\d+ \| ")


def _short(message: str, limit: int = 300) -> str:
    """llguidance's error on one line: a regex error spans several (the pattern, a caret under the spot, the error),
    and the compiled grammar's listing that follows ("1 | start: ...") is left out."""
    lines = []
    for line in message.splitlines():
        if _GRAMMAR_LISTING.match(line):
            break
        if line.strip(" ^~\t"):
            lines.append(line.strip())
    one = " ".join(lines) or "invalid grammar"
    return one if len(one) <= limit else one[:limit] + "…"


def guided_constraint(choice: list[str] | None, schema: dict | str | None, regex: str | None, json_object: bool, param: str):
    """The OutputConstraint of one vLLM guided-decoding kind (raises InvalidRequestError naming param)."""
    try:
        if choice:
            return replace(OutputConstraint.choice(choice), param=param)
        if regex:
            return OutputConstraint.regex(regex, param)
        if json_object:
            return replace(OutputConstraint.json_object(), param=param)
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError:
                raise InvalidRequestError("the JSON schema is not valid JSON text", param=param) from None
        return replace(OutputConstraint.json_schema(schema), param=param)
    except InvalidRequestError as e:
        e.param = param
        raise
