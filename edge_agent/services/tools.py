"""Function calling for any model, as vLLM does it with guided decoding: a call is a grammar, not a parser.

With tool_choice "required" or a named function, the answer is masked (services/constrained.py) so
that it can only be a call: for a named function, one JSON object that follows its `parameters`
schema; for "required", `{"name": "<one of the tools>", "arguments": <that tool's parameters>}`,
written as a grammar with one alternative per tool (an anyOf with each `name` fixed), so the name
comes first and the arguments always follow the schema of the tool named. With "auto" (auto_constraint)
the grammar also lets the model answer in words instead, whose first non-blank character is not "{":
that character tells a reader which it is, so a call streams as it is written. The model learns of
the tools from a short system text (their names, descriptions and schemas), or through a chat
template that takes `tools`. A call cut by max_tokens ends with "length" (its arguments may then not
parse), forced or chosen; cut before its name was written, it is no call but text.
"""
from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from edge_agent.services.constrained import _LEAD, JSON_WHITESPACE, OutputConstraint, _short, tightened_schema, unproductive
from edge_agent.services.errors import InvalidRequestError

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
MAX_TOOLS_HINT_CHARS = 6000


@dataclass(frozen=True)
class Tool:
    """A function the model may call: its name, what it does, and the JSON schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None

    def schema(self) -> dict[str, Any]:
        return arguments_schema(self.parameters) if self.parameters is not None else EMPTY_PARAMETERS

    def listing(self) -> dict[str, Any]:
        """The OpenAI form chat templates take (`tools=[...]`)."""
        fn: dict[str, Any] = {"name": self.name, "parameters": self.schema()}
        if self.description:
            fn["description"] = self.description
        return {"type": "function", "function": fn}


def arguments_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """A tool's parameters as the schema of a call's arguments: always an object, the function's named arguments (a
    schema without "type" let the grammar write any JSON value: '["a", "b"]' for a schema of properties alone)."""
    return parameters if parameters.get("type") == "object" else {**parameters, "type": "object"}


def check_parameters(schema: Any) -> None:
    """Raise ValueError (for the request model's validation) unless schema is a JSON schema object the grammar engine
    compiles, whose values can be objects (as OpenAI's: clients pass the arguments on as keywords)."""
    import llguidance as llg

    if not isinstance(schema, dict):
        raise ValueError("parameters must be a JSON schema object")
    kind = schema.get("type", "object")
    if kind != "object" and not (isinstance(kind, list) and "object" in kind):
        raise ValueError('parameters must be the JSON schema of an object ("type": "object"): a call\'s arguments are the '
                         f"function's named arguments, not {json.dumps(kind)}")
    schema = arguments_schema(schema)
    empty = unproductive(schema)  # compiles, then fails mid-generation: the same refusal as response_format's
    if empty is not None:
        raise ValueError(f"the JSON schema at {empty} admits no finite JSON value (a $ref that only leads back to itself): "
                         "give each recursive schema a way out, such as an optional property")
    err = llg.LLMatcher.validate_grammar(llg.LLMatcher.grammar_from_lark(f"start: %json {json.dumps(schema)}"))
    if err:
        raise ValueError("not a usable JSON schema: " + re.sub(r"^at \d+\(\d+\): (failed to compile JSON schema: )?", "", _short(err)))


def _json_rule(schema: dict[str, Any]) -> str:
    schema = tightened_schema(schema)
    guidance = dict(schema.get("x-guidance") or {}) if isinstance(schema.get("x-guidance"), dict) else {}
    guidance["whitespace_pattern"] = JSON_WHITESPACE
    return "%json " + json.dumps({**schema, "x-guidance": guidance})


def call_prefix(name: str) -> str:
    """What a "required" call writes before the arguments (the grammar fixes it, so the reader can rely on it)."""
    return '{"name": "' + name + '", "arguments": '


def _prefix_rule(name: str, split: bool = False) -> str:
    """call_prefix(name) as grammar: one literal, or (split) the JSON lexemes it is made of ("{", "\"name\"", ":", " " ...):
    beside a JSON answer's grammar the one literal `{"name": ...` outran the answer's own "{" in the lexer (which takes
    the longest lexeme), so that no answer in the format could be written."""
    if not split:
        return json.dumps(call_prefix(name))
    return " ".join(json.dumps(p) for p in ("{", '"name"', ":", " ", json.dumps(name), ",", " ", '"arguments"', ":", " "))


AUTO_HOW = ('To call one, answer with only {"name": <its name>, "arguments": <its arguments>}; '
            "otherwise answer in words.")


def describe(tools: list[Tool], forced: str | None, auto: bool = False, how: str = AUTO_HOW) -> str:
    """The system text that tells a model without a tools-aware template what it may call, and how to answer (auto: how).

    Each tool is a line of JSON in the shape of the answer ({"name", "description", "parameters"}): with the
    default base model (Gemma 3 270M) and three tools, "required" named the fitting tool in 3 of 5 questions
    this way, and in 1 of 5 with a prose list ("- name: description. Arguments: schema"), where it
    named the last tool every time (commit message: the questions and answers).
    """
    lines = [json.dumps({"name": t.name, "description": t.description.strip(), "parameters": t.schema()}, ensure_ascii=False)
             for t in tools]
    text = "Available functions:\n" + "\n".join(lines)
    if len(text) > MAX_TOOLS_HINT_CHARS:
        text = "Available functions: " + ", ".join(t.name for t in tools) + "."
    if forced is not None:
        return text + f"\nCall {forced} and fill in its arguments from the question."
    if auto:
        return text + "\n" + how
    return text + "\nPick the function that answers the question and fill in its arguments."


def call_constraint(tools: list[Tool], forced: str | None, hint: bool = True) -> OutputConstraint:
    """The grammar of a forced call: forced's arguments, or (forced None) {"name", "arguments"} of any tool.

    hint: put the tool listing in the constraint's instruction (False when the chat template gets `tools`).
    Raises InvalidRequestError for a schema the grammar engine refuses.
    """
    import llguidance as llg

    instruction = describe(tools, forced) if hint else (
        f"Call {forced} and fill in its arguments from the question." if forced else
        "Pick the function that answers the question and fill in its arguments.")
    if forced is not None:
        tool = next(t for t in tools if t.name == forced)
        grammar = f"start: {_LEAD} value\nvalue: {_json_rule(tool.schema())}"
    else:
        rules = [f"start: {_LEAD} ({' | '.join(f'call_{i}' for i in range(len(tools)))})"]
        for i, t in enumerate(tools):
            rules.append(f"call_{i}: {json.dumps(call_prefix(t.name))} args_{i} \"}}\"")
            rules.append(f"args_{i}: {_json_rule(t.schema())}")
        grammar = "\n".join(rules)
    grammar = llg.LLMatcher.grammar_from_lark(grammar)
    err = llg.LLMatcher.validate_grammar(grammar)
    if err:
        raise InvalidRequestError(f"the tools' parameters cannot be used: {_short(err)}", param="tools")
    return OutputConstraint("tool_call", grammar, instruction)


def auto_constraint(tools: list[Tool], hint: bool = True, answer: OutputConstraint | None = None) -> OutputConstraint:
    """The grammar of a free choice between a call and words (Ollama's tools, OpenAI's tool_choice "auto"): either a
    "required" call ({"name": ..., "arguments": ...} of one of the tools) or text whose first non-blank character is
    not "{" (so a reader knows which from that character: answer_call, CallReader). answer: a JSON response format the
    answer follows when it is no call (OpenAI's response_format beside tools; its answer_rules): then an answer is a call
    when it begins with a call's {"name": "<tool>", "arguments": (CallReader). hint: the tool listing in the instruction
    (False when the chat template gets `tools`). Raises InvalidRequestError for a schema the grammar engine refuses, or
    an answer format that is not JSON (param its own).

    The model decides: the default Gemma 3 270M answered 5 of 5 questions in words (weather in Paris and Amsterdam, 2 plus
    3, a greeting, a joke; two tools, greedy) under three wordings of the instruction, so a model that small does not
    choose to call; a forced tool_choice ("required" or a named function) makes it. The grammar's free branch against the same
    prompt without it: 8.0 vs 8.7 tokens/s (medians of 4 paired rounds of 64 tokens, load average 11 on 2 shared cores:
    pairs went both ways; scripts/bench_auto_tools.py, to be rerun on an idle machine)."""
    import llguidance as llg

    if answer is not None and not answer.answer_rules:
        raise InvalidRequestError("only a JSON format (json_object, json_schema) can be combined with tools the model may "
                                  'call: send tool_choice "none" to answer in this format, or leave it out', param=answer.param or None)
    calls = " | ".join(f"call_{i}" for i in range(len(tools)))
    rules = [f"start: {_LEAD} ({calls}) | answer", answer.answer_rules] if answer is not None else \
        [f"start: {_LEAD} ({calls}) | words", r"words: /[ \n]*[^{ \n][\s\S]*/"]
    for i, t in enumerate(tools):
        rules.append(f"call_{i}: {_prefix_rule(t.name, split=answer is not None)} args_{i} \"}}\"")
        rules.append(f"args_{i}: {_json_rule(t.schema())}")
    grammar = llg.LLMatcher.grammar_from_lark("\n".join(rules))
    err = llg.LLMatcher.validate_grammar(grammar)
    if err:
        raise InvalidRequestError(f"the tools' parameters cannot be used: {_short(err)}", param="tools")
    how = AUTO_HOW if answer is None else AUTO_HOW.replace("otherwise answer in words.", "otherwise: " + answer.instruction)
    return OutputConstraint("tool_call", grammar, describe(tools, None, auto=True, how=how) if hint else how)


def answer_call(text: str, finish_reason: str, tools: list[Tool]) -> tuple[str, Any] | None:
    """(name, arguments as a JSON value) when an auto_constraint answer is a whole call; None when it is words, or a
    call cut short (finish_reason "length") whose arguments do not parse."""
    if not text.lstrip(" \n").startswith("{"):
        return None
    name, arguments = read_call(text, finish_reason, tools, None)
    try:
        return (name, json.loads(arguments)) if name else None
    except ValueError:
        return None


def call_text(name: str, arguments: str) -> str:
    """A call in the history as the model writes a "required" one: {"name": ..., "arguments": ...}."""
    return call_prefix(name) + (arguments.strip() or "{}") + "}"


def call_id() -> str:
    return "call_" + secrets.token_hex(12)


class CallReader:
    """Reads one choice's constrained output as a tool call, as it streams: the name first, then argument fragments.

    feed(text) -> (name or None, fragment): the name once it is known (at once for a named call),
    then the arguments' text as it arrives; finish() -> the last fragment (what was held back).
    may_answer (an auto_constraint answer): the text is held while it may still become a call; `words` turns True once
    it cannot (its first non-blank character is not "{", or a JSON answer's keys part from a call's), and every fragment
    is then the answer's text, the blanks before it included; False once it begins with a call's {"name": ..., "arguments": .
    """

    def __init__(self, tools: list[Tool], forced: str | None, may_answer: bool = False):
        self.forced = forced
        self.words: bool | None = None if may_answer else False  # None: not known yet (only blanks so far)
        self.lead = ""  # may_answer: the blanks read while undecided
        self.prefixes = {call_prefix(t.name): t.name for t in tools} if forced is None else {}
        self.name: str | None = None
        self.buf = ""  # "required": the text before the name is known, then the held-back tail
        self.started = False  # leading blanks skipped
        self.arguments: list[str] = []

    def feed(self, text: str) -> tuple[str | None, str]:
        if self.words is None:
            self.lead += text
            lead = self.lead.lstrip(" \n")
            if any(lead.startswith(p) for p in self.prefixes):
                self.words = False
            elif any(p.startswith(lead) for p in self.prefixes):
                return None, ""  # may still become a call
            else:
                self.words = True
            text, self.lead = self.lead, ""
        if self.words:
            return None, text
        named = None
        if self.forced is not None:
            if self.name is None:
                self.name = named = self.forced
            if not self.started:
                text = text.lstrip(" \n")
                self.started = bool(text)
            self.arguments.append(text)
            return named, text
        self.buf += text
        if self.name is None:
            lead = self.buf.lstrip(" \n")
            for prefix, name in self.prefixes.items():
                if lead.startswith(prefix):
                    self.name = named = name
                    self.buf = lead[len(prefix):]
                    break
            else:
                return None, ""
        keep = len(self.buf) - len(self.buf.rstrip(" \n}"))  # maybe the wrapper's closing brace: held until the end
        out, self.buf = self.buf[: len(self.buf) - keep], self.buf[len(self.buf) - keep:]
        self.arguments.append(out)
        return named, out

    def finish(self, finish_reason: str) -> str:
        """The held-back text: with the wrapper's "}" removed when the call is complete (finish_reason "stop"); while
        name is None (cut before the name was written), the whole text, which is no call."""
        tail = self.lead + self.buf
        self.lead = ""
        if self.name is None:
            self.buf = ""
            return tail
        if finish_reason == "stop" and tail:
            tail = tail.rstrip(" \n")
            tail = tail[:-1].rstrip(" \n") if tail.endswith("}") else tail
        self.buf = ""
        self.arguments.append(tail)
        return tail



def read_call(text: str, finish_reason: str, tools: list[Tool], forced: str | None, may_answer: bool = False) -> tuple[str, str]:
    """(name, arguments as JSON text) of a whole constrained answer (arguments may not parse if cut: finish_reason
    "length"); the name is "" when the answer was cut before it was written, or (may_answer) is words."""
    reader = CallReader(tools, forced, may_answer)
    reader.feed(text)
    reader.finish(finish_reason)
    return reader.name or "", "".join(reader.arguments)


def read_answer(text: str, finish_reason: str, tools: list[Tool], forced: str | None,
                may_answer: bool = False) -> tuple[str | None, dict | None, str]:
    """A call's answer as OpenAI gives it: (content None, {"id", "name", "arguments"}, "tool_calls" or "length");
    cut before the name was written, or words (may_answer: an auto_constraint answer): (the text, None, finish_reason)."""
    name, arguments = read_call(text, finish_reason, tools, forced, may_answer)
    if not name:
        return text, None, finish_reason
    return None, {"id": call_id(), "name": name, "arguments": arguments}, "tool_calls" if finish_reason == "stop" else finish_reason
