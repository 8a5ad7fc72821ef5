"""Request models that take fields they do not know and ignore them, with a warning in the log: Ollama's way.

Ollama's server decodes a body with Go's encoding/json, which drops unknown fields, and logs each unknown key of
`options` ("invalid option provided"): a client built for a newer Ollama (or one that sends every option it has)
works. A null field is as left out, as Go decodes it. The OpenAI routes refuse an unknown field instead
(services.protocol._Request), as OpenAI does.
"""
from __future__ import annotations

import logging
from typing import Any

from pydantic import ConfigDict, model_validator

from edge_agent.services.protocol import _Request

log = logging.getLogger(__name__)
SHOWN_NAMES = 10  # the log names at most this many of a body's unknown fields, each cut to NAME_CHARS
NAME_CHARS = 64


_SCHEMA_KEYS = ("title", "description", "default", "examples")  # kept beside anyOf, not inside it


def _nullable(schema: dict[str, Any]) -> None:
    """The published schema says what is taken: each field but the required ones may be null (as left out)."""
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        inner = {k: v for k, v in prop.items() if k not in _SCHEMA_KEYS}
        types = inner.get("type")
        if name in required or not inner or types == "null" or (isinstance(types, list) and "null" in types) \
                or any(alt.get("type") == "null" for alt in inner.get("anyOf", ())):
            continue
        schema["properties"][name] = {**{k: v for k, v in prop.items() if k in _SCHEMA_KEYS}, "anyOf": [inner, {"type": "null"}]}


class LenientRequest(_Request):
    """A request model (strict types, as _Request) that ignores the fields it does not know and logs their names."""

    model_config = ConfigDict(strict=True, extra="ignore", json_schema_extra=_nullable)

    @model_validator(mode="before")
    @classmethod
    def _warn_unknown(cls, data: Any) -> Any:
        """data without its null fields (Go decodes null as "left out": "stream": null streams, "raw": null is false,
        "content": null is ""), the unknown ones named in the log."""
        if isinstance(data, dict):
            unknown = [k for k in data if k not in cls.model_fields]
            if unknown:
                names = ", ".join(repr(str(k)[:NAME_CHARS]) for k in unknown[:SHOWN_NAMES])
                more = f" and {len(unknown) - SHOWN_NAMES} more" if len(unknown) > SHOWN_NAMES else ""
                log.warning("ollama request: ignored unknown %s %s%s (as Ollama ignores them)", _what(cls), names, more)
            data = {k: v for k, v in data.items() if v is not None}
        return data


def _what(cls: type) -> str:
    return {"OllamaOptions": "option(s)", "OllamaMessage": "message field(s)", "OllamaToolCall": "tool call field(s)",
            "OllamaCalledFunction": "function field(s)"}.get(cls.__name__, "field(s)")
