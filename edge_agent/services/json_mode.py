"""JSON mode: a character-level JSON-object prefix checker, a guard over streamed text, and a logits processor.

`JsonPrefix` accepts exactly the prefixes of one JSON object (RFC 8259) and can name the
shortest suffix that completes the current prefix. `JsonGuard` runs generated text through
it: text is passed on while it stays a valid prefix; at the first character that would break
it, or when the object is complete, generation should stop; `closing()` then completes it.
So the output is always one valid JSON object, with or without help from the engine.

`JsonLogitsProcessor` masks the tokens that would break the prefix, for engines whose
SamplingParams carry a `logits_processor` hook (see ENGINE_HOOK); with it the model itself
writes valid JSON instead of being cut short.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np

from edge_agent.engine.types import SamplingParams

# True when the engine calls SamplingParams.logits_processor(generated_ids, logits) before each choice.
ENGINE_HOOK = "logits_processor" in {f.name for f in dataclasses.fields(SamplingParams)}

WS = " \t\n\r"
DIGITS = "0123456789"
HEX = "0123456789abcdefABCDEF"
MAX_WS_RUN = 24  # consecutive whitespace characters outside strings
MAX_DEPTH = 24

(ROOT, VALUE, ARR_FIRST, OBJ_FIRST, OBJ_KEY, KEY, KEY_ESC, KEY_U, COLON, AFTER, STR, STR_ESC, STR_U,
 NUM_MINUS, NUM_ZERO, NUM_INT, NUM_DOT, NUM_FRAC, NUM_E, NUM_ESIGN, NUM_EXP, LIT, DONE) = range(23)

_NUM_CAN_END = {NUM_ZERO, NUM_INT, NUM_FRAC, NUM_EXP}
_NUM_NEEDS_DIGIT = {NUM_MINUS, NUM_DOT, NUM_E, NUM_ESIGN}
_WS_MODES = {ROOT, VALUE, ARR_FIRST, OBJ_FIRST, OBJ_KEY, COLON, AFTER}
_VALUE_START = set('{["-tfn' + DIGITS)


class JsonPrefix:
    """The state of a JSON-object prefix; feed() one character at a time (False = the character would break it)."""

    __slots__ = ("stack", "mode", "aux", "ws")

    def __init__(self) -> None:
        self.stack: list[str] = []  # "o" object, "a" array
        self.mode = ROOT
        self.aux: object = None  # hex digits left (KEY_U/STR_U) or literal characters left (LIT)
        self.ws = 0

    def copy(self) -> "JsonPrefix":
        c = JsonPrefix.__new__(JsonPrefix)
        c.stack = self.stack.copy()
        c.mode, c.aux, c.ws = self.mode, self.aux, self.ws
        return c

    @property
    def complete(self) -> bool:
        return self.mode == DONE

    def accepts(self, text: str) -> bool:
        """Whether text could follow (checked on a copy; self is unchanged)."""
        c = self.copy()
        return all(c.feed(ch) for ch in text)

    def feed_text(self, text: str) -> int:
        """Feed characters until one is refused; return how many were accepted."""
        for i, ch in enumerate(text):
            if not self.feed(ch):
                return i
        return len(text)

    def _value_done(self) -> None:
        self.mode = AFTER if self.stack else DONE
        self.ws = 0

    def _open(self, kind: str) -> bool:
        if len(self.stack) >= MAX_DEPTH:
            return False
        self.stack.append(kind)
        self.mode = OBJ_FIRST if kind == "o" else ARR_FIRST
        self.ws = 0
        return True

    def feed(self, ch: str) -> bool:
        m = self.mode
        if m in _WS_MODES and ch in WS:
            if self.ws >= MAX_WS_RUN:
                return False
            self.ws += 1
            return True
        if m == ROOT:
            return ch == "{" and self._open("o")
        if m in (VALUE, ARR_FIRST):
            if m == ARR_FIRST and ch == "]":
                self.stack.pop()
                self._value_done()
                return True
            if ch not in _VALUE_START and ch != '"':
                return False
            if ch == "{" or ch == "[":
                return self._open("o" if ch == "{" else "a")
            self.ws = 0
            if ch == '"':
                self.mode = STR
            elif ch == "-":
                self.mode = NUM_MINUS
            elif ch == "0":
                self.mode = NUM_ZERO
            elif ch in DIGITS:
                self.mode = NUM_INT
            else:
                self.mode, self.aux = LIT, {"t": "rue", "f": "alse", "n": "ull"}[ch]
            return True
        if m == OBJ_FIRST and ch == "}":
            self.stack.pop()
            self._value_done()
            return True
        if m in (OBJ_FIRST, OBJ_KEY):
            if ch != '"':
                return False
            self.mode, self.ws = KEY, 0
            return True
        if m in (KEY, STR):
            if ch == '"':
                if m == KEY:
                    self.mode = COLON
                else:
                    self._value_done()
                return True
            if ch == "\\":
                self.mode = KEY_ESC if m == KEY else STR_ESC
                return True
            return ord(ch) >= 0x20
        if m in (KEY_ESC, STR_ESC):
            base = KEY if m == KEY_ESC else STR
            if ch in '"\\/bfnrt':
                self.mode = base
                return True
            if ch == "u":
                self.mode, self.aux = (KEY_U if base == KEY else STR_U), 4
                return True
            return False
        if m in (KEY_U, STR_U):
            if ch not in HEX:
                return False
            self.aux -= 1  # type: ignore[operator]
            if self.aux == 0:
                self.mode = KEY if m == KEY_U else STR
            return True
        if m == COLON:
            if ch != ":":
                return False
            self.mode, self.ws = VALUE, 0
            return True
        if m == AFTER:
            top = self.stack[-1]
            if ch == ",":
                self.mode, self.ws = (OBJ_KEY if top == "o" else VALUE), 0
                return True
            if (ch == "}" and top == "o") or (ch == "]" and top == "a"):
                self.stack.pop()
                self._value_done()
                return True
            return False
        if m == LIT:
            rest: str = self.aux  # type: ignore[assignment]
            if ch != rest[0]:
                return False
            self.aux = rest[1:]
            if not self.aux:
                self._value_done()
            return True
        if m == DONE:
            return False
        return self._feed_number(m, ch)

    def _feed_number(self, m: int, ch: str) -> bool:
        if m == NUM_MINUS:
            if ch not in DIGITS:
                return False
            self.mode = NUM_ZERO if ch == "0" else NUM_INT
            return True
        if ch in DIGITS and m in (NUM_INT, NUM_FRAC, NUM_EXP):
            return True
        if ch in DIGITS and m in (NUM_DOT, NUM_ESIGN, NUM_E):
            self.mode = NUM_FRAC if m == NUM_DOT else NUM_EXP
            return True
        if ch == "." and m in (NUM_ZERO, NUM_INT):
            self.mode = NUM_DOT
            return True
        if ch in "eE" and m in (NUM_ZERO, NUM_INT, NUM_FRAC):
            self.mode = NUM_E
            return True
        if ch in "+-" and m == NUM_E:
            self.mode = NUM_ESIGN
            return True
        if m in _NUM_CAN_END:
            self.mode, self.ws = AFTER, 0  # the number ended; the character must fit after a value
            return self.feed(ch)
        return False

    def closing(self) -> str:
        """The shortest text that completes the current prefix into a JSON object."""
        m = self.mode
        if m == ROOT:
            return "{}"
        if m == DONE:
            return ""
        head = {
            VALUE: "null", OBJ_KEY: '"":null', KEY: '":null', KEY_ESC: '\\":null', COLON: ":null",
            STR: '"', STR_ESC: '\\"',
        }.get(m, "")
        if m == KEY_U:
            head = "0" * self.aux + '":null'  # type: ignore[operator]
        elif m == STR_U:
            head = "0" * self.aux + '"'  # type: ignore[operator]
        elif m in _NUM_NEEDS_DIGIT:
            head = "0"
        elif m == LIT:
            head = self.aux  # type: ignore[assignment]
        return head + "".join("}" if k == "o" else "]" for k in reversed(self.stack))

    def first_chars(self) -> str | None:
        """Characters that may come next, or None when almost any may (inside a string)."""
        m = self.mode
        ws = WS if m in _WS_MODES and self.ws < MAX_WS_RUN else ""
        if m in (KEY, STR):
            return None
        if m == ROOT:
            return ws + "{"
        if m in (VALUE, ARR_FIRST):
            return ws + '{["-tfn' + DIGITS + ("]" if m == ARR_FIRST else "")
        if m == OBJ_FIRST:
            return ws + '"}'
        if m == OBJ_KEY:
            return ws + '"'
        if m in (KEY_ESC, STR_ESC):
            return '"\\/bfnrtu'
        if m in (KEY_U, STR_U):
            return HEX
        if m == COLON:
            return ws + ":"
        if m == AFTER:
            return ws + ",}]"
        if m == LIT:
            return self.aux[0]  # type: ignore[index]
        if m == DONE:
            return ""
        # numbers: digits, '.', 'e', signs, or anything that may follow a value
        return DIGITS + ".eE+-" + WS + ",}]"


class JsonGuard:
    """Passes generated text through while it stays a JSON-object prefix.

    feed(text) returns the accepted part; `stopped` turns True when the object is complete or
    a character would break it; closing() is what to append at the end (empty when complete).
    """

    def __init__(self, prefix: str = "") -> None:
        self.state = JsonPrefix()
        self.stopped = False
        self.broken = False
        if prefix and self.state.feed_text(prefix) != len(prefix):
            raise ValueError("prefix is not a JSON-object prefix")

    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        n = self.state.feed_text(text)
        if n < len(text):
            self.stopped = self.broken = True
        elif self.state.complete:
            self.stopped = True
        return text[:n]

    def closing(self) -> str:
        return self.state.closing()


class TokenTable:
    """Each token's text as it appears after other text, and tokens grouped by first character."""

    def __init__(self, tokenizer, vocab_size: int, stop_token_ids: Iterable[int] = ()):
        anchor_ids = tokenizer.encode("a", add_special_tokens=False).ids
        anchor = anchor_ids[0] if anchor_ids else 0
        head = tokenizer.decode([anchor], skip_special_tokens=True)
        pairs = [[anchor, i] for i in range(vocab_size)]
        texts = tokenizer.decode_batch(pairs, skip_special_tokens=True)
        self.texts: list[str] = []
        by_first: dict[str, list[int]] = {}
        for i, t in enumerate(texts):
            t = t[len(head):] if t.startswith(head) else ""
            if "\ufffd" in t:  # part of a multi-byte character: never chosen in JSON mode
                t = ""
            self.texts.append(t)
            if t:
                by_first.setdefault(t[0], []).append(i)
        self.by_first = {c: np.asarray(ids, np.int64) for c, ids in by_first.items()}
        self.nonempty = np.asarray([i for i, t in enumerate(self.texts) if t], np.int64)
        self.stop_ids = np.asarray(sorted(set(int(t) for t in stop_token_ids)), np.int64)
        self._pools: dict[str, np.ndarray] = {}

    def pool(self, first_chars: str | None) -> np.ndarray:
        if first_chars is None:
            return self.nonempty
        got = self._pools.get(first_chars)
        if got is None:
            parts = [self.by_first[c] for c in dict.fromkeys(first_chars) if c in self.by_first]
            got = np.concatenate(parts) if parts else np.zeros(0, np.int64)
            self._pools[first_chars] = got
        return got


class JsonLogitsProcessor:
    """Masks every token that would break the JSON-object prefix (one instance per sequence).

    Called as proc(generated_token_ids, logits) -> logits; `want` valid candidates are kept,
    best first (1 is enough for greedy decoding). After the object is complete only stop
    tokens stay allowed.
    """

    def __init__(self, table: TokenTable, prefix: str = "", want: int = 32):
        self.table = table
        self.state = JsonPrefix()
        self.state.feed_text(prefix)
        self.want = max(1, want)
        self.seen = 0

    def _advance(self, token_ids: list[int]) -> None:
        for t in token_ids[self.seen:]:
            self.state.feed_text(self.table.texts[t] if 0 <= t < len(self.table.texts) else "")
        self.seen = len(token_ids)

    def __call__(self, token_ids: list[int], logits: np.ndarray) -> np.ndarray:
        self._advance(token_ids)
        out = np.full_like(logits, -np.inf)
        st = self.state
        if st.complete:
            allowed = self.table.stop_ids
        else:
            allowed = self._valid(st, self.table.pool(st.first_chars()), logits)
            if allowed.size == 0:
                allowed = self.table.stop_ids  # nothing fits: end here, the guard completes the object
        if allowed.size == 0:
            return logits
        out[allowed] = logits[allowed]
        return out

    def _valid(self, st: JsonPrefix, pool: np.ndarray, logits: np.ndarray) -> np.ndarray:
        if pool.size == 0:
            return pool
        scores = logits[pool]
        found: list[int] = []
        checked = 0
        k = 64
        texts = self.table.texts
        while checked < pool.size and len(found) < self.want:
            k = min(k, pool.size)
            top = np.argpartition(-scores, k - 1)[:k] if k < pool.size else np.arange(pool.size)
            top = top[np.argsort(-scores[top], kind="stable")][checked:]
            for j in top:
                tok = int(pool[j])
                if math.isfinite(float(scores[j])) and st.accepts(texts[tok]):
                    found.append(tok)
                    if len(found) >= self.want:
                        break
            checked = k
            k *= 8
        return np.asarray(found, np.int64)
