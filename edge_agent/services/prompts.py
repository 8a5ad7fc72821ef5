"""Prompt formatting from the model bundle: a chat template for instruction-tuned models, a transcript for base models.

User text is data (ARCHITECTURE.md, convention 11): "<start_of_turn>" or "<bos>" typed in a
message or found in a document must never become a control token (role spoofing, prompt
injection through documents). Only the template's own markers are special tokens. How:
`PromptEncoder.defuse` replaces every special-token look-alike in a piece of data (and a
partial one at its edges, which could join template text into a marker) by a sentinel of
private-use characters and a per-request nonce; the template is rendered over the defused
data, so filters such as `trim` work unchanged; the rendered text is then cut at the
template's own markers, the sentinels are put back, and each stretch between two markers
is encoded with special-token parsing off. Text without look-alikes takes the fast path:
one encode of the whole prompt, the same ids as before. Cost: one scan for "<" (or the
first characters of the special tokens) per message.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edge_agent.engine.tokens import encode_plain, special_token_ids
from edge_agent.services.errors import InvalidRequestError
from edge_agent.services.tools import call_text

# A base (pretrained) model continues text: the conversation becomes a transcript that ends
# where the assistant's answer begins, and a new speaker label is a stop string. Gemma 3 270M
# (base) answered "Question: ...\nAnswer:" tersely and stopped; with "User:/Assistant:" it more
# often wrote further turns itself. A bundle may set its own labels in prompt_format.
DEFAULT_TRANSCRIPT = {"user": "Question: ", "assistant": "Answer:", "separator": "\n", "system_separator": "\n\n"}


@dataclass
class FormattedPrompt:
    """What to feed the model for a conversation: token ids, plus stop strings the format needs."""

    ids: list[int]
    text: str
    stop: list[str] = field(default_factory=list)
    prefill: str = ""  # text already written on the assistant's behalf (part of the answer)


class PromptEncoder:
    """Encodes prompts in which data (user messages, documents) was defused: no control tokens from data.

    Use: table = {}; safe = enc.defuse(data, table) for every piece of data; build the prompt
    text from trusted text and the safe pieces; enc.encode(text, table) -> ids, and
    enc.restore(text, table) -> the real text.
    """

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.specials = special_token_ids(tokenizer)
        self.lengths = sorted({len(s) for s in self.specials}, reverse=True)
        self.maxlen = self.lengths[0] if self.lengths else 0
        firsts = sorted({s[0] for s in self.specials})
        self._first = re.compile("[" + "".join(re.escape(c) for c in firsts) + "]") if firsts else None
        self._heads = frozenset(s[:k] for s in self.specials for k in range(1, len(s)))  # proper prefixes
        self._tails = frozenset(s[k:] for s in self.specials for k in range(1, len(s)))  # proper suffixes
        self.bos_text = ""
        with_special, plain = tokenizer.encode("a", add_special_tokens=True).ids, tokenizer.encode("a", add_special_tokens=False).ids
        at = next((i for i in range(len(with_special) - len(plain) + 1) if with_special[i:i + len(plain)] == plain), 0)
        self.added_prefix, self.added_suffix = with_special[:at], with_special[at + len(plain):]

    def find(self, text: str) -> list[tuple[int, int]]:
        """(start, end) of every special-token text in text, leftmost-longest, as the tokenizer matches them."""
        out: list[tuple[int, int]] = []
        if self._first is None:
            return out
        i = 0
        while (m := self._first.search(text, i)) is not None:
            j = m.start()
            for n in self.lengths:
                if text[j:j + n] in self.specials:
                    out.append((j, j + n))
                    i = j + n
                    break
            else:
                i = j + 1
        return out

    def defuse(self, text: str, table: dict[str, str]) -> str:
        """text with every special-token look-alike (and a partial one at either edge) replaced by a sentinel recorded in table."""
        if not self.specials or not text:
            return text
        spans = self.find(text)
        for k in range(min(self.maxlen - 1, len(text)), 0, -1):  # "<start_of" at the end could join the template's "turn>"
            if text[-k:] in self._heads:
                spans.append((len(text) - k, len(text)))
                break
        for k in range(min(self.maxlen - 1, len(text)), 0, -1):
            if text[:k] in self._tails:
                spans.append((0, k))
                break
        if len(text) < self.maxlen and any(text in s for s in self.specials):
            spans.append((0, len(text)))
        if not spans:
            return text
        nonce = table.setdefault("", str(secrets.randbelow(10**12)))
        merged: list[list[int]] = []
        for a, b in sorted(spans):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        parts, pos = [], 0
        for a, b in merged:
            key = f"\ue000{nonce}:{len(table)}\ue001"
            table[key] = text[a:b]
            parts += [text[pos:a], key]
            pos = b
        parts.append(text[pos:])
        return "".join(parts)

    def restore(self, text: str, table: dict[str, str]) -> str:
        """text with the sentinels of table put back."""
        if len(table) <= 1:
            return text
        nonce = re.escape(table[""])
        return re.sub(f"\ue000{nonce}:[0-9]+\ue001", lambda m: table.get(m.group(0), m.group(0)), text)

    def encode(self, text: str, table: dict[str, str], add_special: bool = True) -> list[int]:
        """Ids of a prompt whose data was defused into table: the markers in text are control tokens, the data never.

        add_special: add what the tokenizer adds (BOS) unless the text already starts with BOS.
        """
        add = add_special and not (self.bos_text and text.startswith(self.bos_text))
        if len(table) <= 1:  # no look-alikes in the data: one encode, as the template's author meant it
            return self.tok.encode(text, add_special_tokens=add).ids
        ids: list[int] = list(self.added_prefix) if add else []
        pos = 0
        for a, b in self.find(text):
            if a > pos:
                ids += encode_plain(self.tok, self.restore(text[pos:a], table))
            ids.append(self.specials[text[a:b]])
            pos = b
        if pos < len(text):
            ids += encode_plain(self.tok, self.restore(text[pos:], table))
        return ids + (list(self.added_suffix) if add else [])


class _TemplateError(Exception):
    pass


def _raise_exception(message: str) -> None:
    raise _TemplateError(message)


def _tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return _dt.datetime.now().strftime(fmt)


JSON_HINT = "Respond with one JSON object only."


class PromptFormatter:
    """Turns chat messages into prompt ids following the bundle's `prompt_format`; message text is data.

    format_chat() raises InvalidRequestError when the bundle's chat template refuses the
    conversation (e.g. roles that do not alternate).
    """

    def __init__(self, prompt_format: dict[str, Any], tokenizer, bos_token_id: int | None = None, eos_token_id: int | None = None):
        self.prompt_format = dict(prompt_format or {"type": "completion"})
        self.kind = "chat" if self.prompt_format.get("type") == "chat" and self.prompt_format.get("template") else "completion"
        self.tokenizer = tokenizer
        self.bos_token = tokenizer.id_to_token(bos_token_id) if bos_token_id is not None else ""
        self.eos_token = tokenizer.id_to_token(eos_token_id) if eos_token_id is not None else ""
        self.encoder = PromptEncoder(tokenizer)
        self.encoder.bos_text = self.bos_token
        self._template = self._compile(self.prompt_format["template"]) if self.kind == "chat" else None
        labels = dict(DEFAULT_TRANSCRIPT)
        labels.update({k: v for k, v in self.prompt_format.items() if k in DEFAULT_TRANSCRIPT and isinstance(v, str)})
        self.labels = labels

    @staticmethod
    def _compile(source: str):
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        return env.from_string(source)

    def encode(self, text: str) -> list[int]:
        """Ids of trusted text (control-token markers in it count); BOS added unless the text starts with it."""
        return self.encoder.encode(text, {})

    def encode_data(self, text: str) -> list[int]:
        """Ids of data (no BOS): special-token look-alikes stay text."""
        return encode_plain(self.tokenizer, text)

    def encode_with_documents(self, block: str, prompt: str) -> FormattedPrompt:
        """A text completion grounded in documents: block (data) + blank line + prompt, with BOS.

        The caller's prompt keeps its control tokens (a raw completion, as llama.cpp's server and
        vLLM parse them); the document text never makes any.
        """
        table: dict[str, str] = {}
        text = self.encoder.defuse(block, table) + "\n\n" + prompt
        return FormattedPrompt(self.encoder.encode(text, table), self.encoder.restore(text, table))

    def format_chat(self, messages: list[dict[str, Any]], json_mode: bool = False, instruction: str = "",
                    tools: list[dict[str, Any]] | None = None, check: Callable[[str], None] | None = None,
                    generation_prompt: bool = True, template_kwargs: dict[str, Any] | None = None) -> FormattedPrompt:
        """messages: [{"role": system|developer|user|assistant|tool, "content": str}] in order; an assistant message may
        carry "tool_calls" ([{"id", "name", "arguments"}]), a tool message "tool_call_id".

        instruction (data, e.g. "answer in JSON that follows this schema") is added to the system
        text; json_mode adds the default JSON instruction. tools (OpenAI's form) go to a chat
        template that takes them (see takes_tools). check(prompt text) runs before the text is
        encoded (a cheap length check can refuse a huge prompt without tokenizing it). generation_prompt
        False leaves the assistant's turn unopened (POST /tokenize). template_kwargs (vLLM's chat_template_kwargs, their
        text data) are more variables for a chat template; a transcript has none to set. Raises InvalidRequestError, and
        what check raises.
        """
        if json_mode and not instruction:
            instruction = JSON_HINT
        table: dict[str, str] = {}
        enc = self.encoder
        safe = []
        for m in messages:
            d = {"role": m["role"], "content": enc.defuse(m["content"], table)}
            if m.get("tool_calls"):
                d["tool_calls"] = [{"id": c["id"], "name": enc.defuse(c["name"], table), "arguments": enc.defuse(c["arguments"], table)}
                                   for c in m["tool_calls"]]
            if m.get("tool_call_id") is not None:
                d["tool_call_id"] = m["tool_call_id"]
            if m.get("name"):
                d["name"] = enc.defuse(m["name"], table)
            safe.append(d)
        safe = _name_results(safe)
        hint = enc.defuse(instruction, table)
        stops: list[str] = []
        if self._template is not None:
            shown_tools = json.loads(enc.defuse(json.dumps(tools, ensure_ascii=False), table)) if tools and self.takes_tools else None
            extra = json.loads(enc.defuse(json.dumps(template_kwargs, ensure_ascii=False), table)) if template_kwargs else {}
            text = self._render(safe, hint, shown_tools, generation_prompt, extra)
        else:
            text, stops = self._transcript(safe, hint, generation_prompt)
        shown = enc.restore(text, table)
        if check is not None:
            check(shown)
        return FormattedPrompt(enc.encode(text, table), shown, stops, "")

    @property
    def takes_tools(self) -> bool:
        """Whether the chat template lists `tools` itself (else the tools are described in the system text)."""
        return self._template is not None and "tools" in self.prompt_format["template"]

    def _template_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Messages as the template reads them: tool calls and results in OpenAI's form where it knows them, else as text."""
        native = "tool_calls" in self.prompt_format["template"]
        out: list[dict[str, Any]] = []
        folded = False
        for m in messages:
            role = "system" if m["role"] == "developer" else m["role"]
            if native:
                d: dict[str, Any] = {"role": role, "content": m["content"]}
                if m.get("tool_calls"):
                    d["tool_calls"] = [{"id": c["id"], "type": "function",
                                        "function": {"name": c["name"], "arguments": _parsed(c["arguments"])}} for c in m["tool_calls"]]
                if role == "tool":
                    d["tool_call_id"], d["name"] = m["tool_call_id"], m.get("name", "")
                out.append(d)
                continue
            content = _with_calls(m)
            if role == "tool":
                role, content, folded = "user", _result_text(m), True
            if folded and out and out[-1]["role"] == role:  # a template that wants roles to alternate
                out[-1] = {"role": role, "content": out[-1]["content"] + "\n\n" + content}
            else:
                out.append({"role": role, "content": content})
        return out

    def _render(self, messages: list[dict[str, Any]], hint: str, tools: list[dict[str, Any]] | None = None,
                generation_prompt: bool = True, extra: dict[str, Any] | None = None) -> str:
        msgs = self._template_messages(messages)
        if hint:
            if msgs and msgs[0]["role"] == "system":
                msgs[0] = {"role": "system", "content": f"{msgs[0]['content']}\n\n{hint}"}
            else:
                msgs.insert(0, {"role": "system", "content": hint})
        try:
            return self._template.render({  # a mapping: a variable named "self" is one more key
                **(extra or {}), "messages": msgs, "add_generation_prompt": generation_prompt, "bos_token": self.bos_token,
                "eos_token": self.eos_token, "tools": tools,
            })
        except _TemplateError as e:
            raise InvalidRequestError(f"the model's chat template refused these messages: {e}", param="messages") from None
        except Exception as e:  # a broken template in the bundle, or one the sandbox blocks
            raise InvalidRequestError(
                f"the model's chat template could not format these messages ({type(e).__name__})", param="messages"
            ) from None

    def _transcript(self, messages: list[dict[str, Any]], hint: str, generation_prompt: bool = True) -> tuple[str, list[str]]:
        lab, sep = self.labels, self.labels["separator"]
        system = [m["content"].strip() for m in messages if m["role"] in ("system", "developer")]
        if hint:
            system.append(hint)
        parts = []
        for m in messages:
            if m["role"] == "user":
                parts.append(lab["user"] + m["content"].strip())
            elif m["role"] == "assistant":
                parts.append(lab["assistant"] + " " + _with_calls(m).strip())
            elif m["role"] == "tool":
                parts.append(_result_text(m))
        if generation_prompt:
            parts.append(lab["assistant"])
        text = sep.join(parts)
        if system:
            text = lab["system_separator"].join(s for s in system if s) + lab["system_separator"] + text
        return text, [sep + lab["user"].rstrip(), sep + lab["assistant"].rstrip()]


def _name_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each tool message with the "name" of the function whose call it answers (its own name where no call's id is its
    tool_call_id: Ollama's tool_name)."""
    names: dict[str, str] = {}
    out = []
    for m in messages:
        for c in m.get("tool_calls") or ():
            names[c["id"]] = c["name"]
        if m["role"] == "tool":
            m = {**m, "name": names.get(m.get("tool_call_id", ""), m.get("name", ""))}
        out.append(m)
    return out


def _with_calls(m: dict[str, Any]) -> str:
    """An assistant message's text followed by its calls, one a line, written as a forced "required" call is."""
    calls = [call_text(c["name"], c["arguments"]) for c in m.get("tool_calls") or ()]
    return "\n".join(x for x in [m["content"].strip(), *calls] if x)


def _result_text(m: dict[str, Any]) -> str:
    return f"Result of {m.get('name') or 'the function'}: {m['content'].strip()}"


def _parsed(arguments: str) -> Any:
    """Arguments as chat templates expect them (a mapping), or the text when it is not JSON."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
