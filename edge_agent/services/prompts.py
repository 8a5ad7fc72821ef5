"""Prompt formatting from the model bundle: a chat template for instruction-tuned models, a transcript for base models."""
from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any

from edge_agent.services.errors import InvalidRequestError

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


class _TemplateError(Exception):
    pass


def _raise_exception(message: str) -> None:
    raise _TemplateError(message)


def _tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, sort_keys: bool = False) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return _dt.datetime.now().strftime(fmt)


class PromptFormatter:
    """Turns chat messages into prompt ids following the bundle's `prompt_format`.

    format_chat() raises InvalidRequestError when the bundle's chat template refuses the
    conversation (e.g. roles that do not alternate).
    """

    def __init__(self, prompt_format: dict[str, Any], tokenizer, bos_token_id: int | None = None, eos_token_id: int | None = None):
        self.prompt_format = dict(prompt_format or {"type": "completion"})
        self.kind = "chat" if self.prompt_format.get("type") == "chat" and self.prompt_format.get("template") else "completion"
        self.tokenizer = tokenizer
        self.bos_token = tokenizer.id_to_token(bos_token_id) if bos_token_id is not None else ""
        self.eos_token = tokenizer.id_to_token(eos_token_id) if eos_token_id is not None else ""
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
        """Ids of text; BOS is added by the tokenizer unless the text already starts with it."""
        special = not (self.bos_token and text.startswith(self.bos_token))
        return self.tokenizer.encode(text, add_special_tokens=special).ids

    def format_chat(self, messages: list[dict[str, str]], json_mode: bool = False) -> FormattedPrompt:
        """messages: [{"role": system|developer|user|assistant, "content": str}] in order."""
        prefill = "{" if json_mode else ""
        if self._template is not None:
            text = self._render(messages, json_mode) + prefill
            return FormattedPrompt(self.encode(text), text, [], prefill)
        text, stops = self._transcript(messages, json_mode)
        text += " " + prefill if prefill else ""
        return FormattedPrompt(self.encode(text), text, stops, prefill)

    def _render(self, messages: list[dict[str, str]], json_mode: bool) -> str:
        msgs = [{"role": "system" if m["role"] == "developer" else m["role"], "content": m["content"]} for m in messages]
        if json_mode:
            hint = "Respond with one JSON object only."
            if msgs and msgs[0]["role"] == "system":
                msgs[0] = {"role": "system", "content": f"{msgs[0]['content']}\n\n{hint}"}
            else:
                msgs.insert(0, {"role": "system", "content": hint})
        try:
            return self._template.render(
                messages=msgs, add_generation_prompt=True, bos_token=self.bos_token, eos_token=self.eos_token, tools=None,
            )
        except _TemplateError as e:
            raise InvalidRequestError(f"the model's chat template refused these messages: {e}", param="messages") from None
        except Exception as e:  # a broken template in the bundle, or one the sandbox blocks
            raise InvalidRequestError(
                f"the model's chat template could not format these messages ({type(e).__name__})", param="messages"
            ) from None

    def _transcript(self, messages: list[dict[str, str]], json_mode: bool) -> tuple[str, list[str]]:
        lab, sep = self.labels, self.labels["separator"]
        system = [m["content"].strip() for m in messages if m["role"] in ("system", "developer")]
        if json_mode:
            system.append("The assistant answers with one JSON object only.")
        parts = []
        for m in messages:
            if m["role"] == "user":
                parts.append(lab["user"] + m["content"].strip())
            elif m["role"] == "assistant":
                parts.append(lab["assistant"] + " " + m["content"].strip())
        parts.append(lab["assistant"])
        text = sep.join(parts)
        if system:
            text = lab["system_separator"].join(s for s in system if s) + lab["system_separator"] + text
        return text, [sep + lab["user"].rstrip(), sep + lab["assistant"].rstrip()]
