"""Prompts of Ollama's /api/generate beyond one chat turn: fill-in-the-middle (`suffix`), a template of the client's own
(`template`), and a conversation continued from the token ids a previous answer returned (`context`).

The caller's words (prompt, system, suffix) are data here as everywhere (ARCHITECTURE.md, convention 11): they are defused
(services/prompts.py) before they meet the markers of a fill-in-the-middle format or of the client's template, so a
"<|fim_middle|>" typed in the code being completed stays text. The template is trusted, as a raw prompt is: its markers
count. Ollama's templates are Go templates; the ones clients send for /api/generate use the legacy fields only (.System,
.Prompt, .Suffix, .Response and if/else/end around them), which is the subset rendered here; anything else (range over
.Messages, functions, variables) is refused with what to send instead.
"""
from __future__ import annotations

import re

from edge_agent.services.errors import InvalidRequestError
from edge_agent.services.prompts import FormattedPrompt, PromptFormatter

# Fill-in-the-middle markers, prefix-suffix-middle order: Qwen2.5-Coder and CodeGemma; StarCoder(2) and Granite Code;
# DeepSeek-Coder. A bundle whose tokenizer has all three of one set as special tokens can fill in the middle.
FILL_TOKENS = (
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),
    ("<\uff5cfim\u2581begin\uff5c>", "<\uff5cfim\u2581hole\uff5c>", "<\uff5cfim\u2581end\uff5c>"),
)
FIELDS = ("System", "Prompt", "Suffix", "Response")
_ACTION = re.compile(r"\{\{(-\s)?\s*(.*?)\s*(\s-)?\}\}", re.S)
_GO_SPACE = " \t\r\n"


def fill_tokens(formatter: PromptFormatter) -> tuple[str, str, str] | None:
    """The model's fill-in-the-middle markers (prefix, suffix, middle), or None when it has none (Ollama: no "insert")."""
    specials = formatter.encoder.specials
    return next((s for s in FILL_TOKENS if all(t in specials for t in s)), None)


def fill_prompt(formatter: PromptFormatter, prefix: str, suffix: str) -> FormattedPrompt:
    """The fill-in-the-middle prompt of the text before and after the gap (raises InvalidRequestError, param suffix, when
    the model has no markers: Ollama's "does not support insert")."""
    marks = fill_tokens(formatter)
    if marks is None:
        raise InvalidRequestError("this model does not support insert (fill-in-the-middle): it has no fill-in-the-middle tokens; "
                                  "leave `suffix` out, or send a `template` with your own format", param="suffix")
    table: dict[str, str] = {}
    enc = formatter.encoder
    text = marks[0] + enc.defuse(prefix, table) + marks[1] + enc.defuse(suffix, table) + marks[2]
    return FormattedPrompt(enc.encode(text, table), enc.restore(text, table))


def template_prompt(formatter: PromptFormatter, template: str, values: dict[str, str]) -> FormattedPrompt:
    """A client's Go template rendered over values (System, Prompt, Suffix; data), its own markers control tokens; the
    text stops where .Response would go (the answer is written there). Raises InvalidRequestError (param template)."""
    if "{%" in template:
        raise InvalidRequestError("`template` is a Go template as Ollama takes it ({{ .Prompt }}), not a jinja one: send raw "
                                  "true with your formatted prompt instead", param="template")
    table: dict[str, str] = {}
    enc = formatter.encoder
    text = render(template, {k: enc.defuse(v, table) for k, v in values.items()})
    return FormattedPrompt(enc.encode(text, table), enc.restore(text, table))


def render(template: str, values: dict[str, str]) -> str:
    """Go's text/template over the legacy fields: {{ .Field }}, {{ if .Field }} ... {{ else }} ... {{ end }}, comments and
    the {{- -}} trims; output ends at {{ .Response }}. Raises InvalidRequestError for anything else."""
    pieces: list[tuple[bool, str]] = []  # (is an action, text)
    pos, trim_next = 0, False
    for m in _ACTION.finditer(template):
        text = template[pos:m.start()]
        text = text.lstrip(_GO_SPACE) if trim_next else text
        pieces.append((False, text.rstrip(_GO_SPACE) if m.group(1) else text))
        pieces.append((True, m.group(2)))
        pos, trim_next = m.end(), bool(m.group(3))
    tail = template[pos:]
    pieces.append((False, tail.lstrip(_GO_SPACE) if trim_next else tail))
    out: list[str] = []
    stack: list[tuple[bool, bool, bool]] = []  # (active before the if, its condition, in its else)
    active = True
    for is_action, text in pieces:
        if not is_action:
            if active:
                out.append(text)
            continue
        if text.startswith("/*") and text.endswith("*/"):
            continue
        if m := re.fullmatch(r"if\s+\.(\w+)", text):
            cond = bool(values.get(_field(m.group(1))))
            stack.append((active, cond, False))
            active = active and cond
        elif text == "else" and stack and not stack[-1][2]:
            parent, cond, _ = stack[-1]
            stack[-1] = (parent, cond, True)
            active = parent and not cond
        elif text == "end" and stack:
            active = stack.pop()[0]
        elif m := re.fullmatch(r"\.(\w+)", text):
            name = _field(m.group(1))
            if active and name == "Response":
                return "".join(out)
            if active:
                out.append(values.get(name, ""))
        else:
            raise InvalidRequestError(f"`template` uses {{{{ {text[:60]} }}}}, which is not rendered here: only .System, .Prompt, "
                                      ".Suffix, .Response and if/else/end around them; send raw true with your formatted "
                                      "prompt instead", param="template")
    if stack:
        raise InvalidRequestError("`template` has an {{ if }} without its {{ end }}", param="template")
    return "".join(out)


def _field(name: str) -> str:
    if name not in FIELDS:
        raise InvalidRequestError(f"`template` uses .{name[:40]}, which /api/generate does not set: only .System, .Prompt, .Suffix "
                                  "and .Response", param="template")
    return name


def continued(formatter: PromptFormatter, context: list[int], ids: list[int], vocab_size: int) -> list[int]:
    """ids after the token ids of an earlier answer's `context` (without a second BOS); raises InvalidRequestError for an
    id outside the vocabulary."""
    bad = [t for t in context if t >= vocab_size]
    if bad:
        raise InvalidRequestError(f"context holds token id {bad[0]}, outside this model's vocabulary (0..{vocab_size - 1}): send "
                                  "back the context a previous answer of this model returned", param="context")
    head = formatter.encoder.added_prefix
    if context and head and ids[:len(head)] == head:
        ids = ids[len(head):]
    return [*context, *ids]
