"""OpenAI's deprecated function calling (`functions`, `function_call`, role "function"), read as tools.

Clients written before tools (LangChain's OpenAIFunctionsAgent, instructor's FUNCTIONS mode, older SDK examples) send
`functions` and `function_call`, replay the assistant's `function_call` and answer it with a `function` message; OpenAI
still serves them. Before validation the request is rewritten into its tools form (functions -> tools, function_call ->
tool_choice, an assistant's function_call -> one tool call with a made-up id, a function message -> the tool message
answering the latest call of that name), so everything after it is the tools path; the answer is given back in the old
shape (message.function_call, finish_reason "function_call"; streamed: delta.function_call) by the routes, which ask
FunctionFields.legacy_functions(). Sending both functions and tools is a 400.
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field, model_validator

MAX_FUNCTIONS = 128  # OpenAI's limit


class _Refused:
    """What _as_tools puts in a field it refuses: the field's own validator raises its message (so the 400 names it)."""

    def __init__(self, why: str):
        self.why = why


def _raise_refused(v: Any) -> Any:
    if isinstance(v, _Refused):
        raise ValueError(v.why)
    return v


class FunctionFields(BaseModel):
    """Chat's deprecated function-calling fields, mixed into services.protocol.ChatCompletionRequest."""

    functions: Annotated[list[dict[str, Any]] | None, BeforeValidator(_raise_refused)] = Field(
        None, max_length=MAX_FUNCTIONS, description="Deprecated by OpenAI, taken as `tools` ({name, description, parameters} each); "
                                                    "the answer's call comes in message.function_call. Not with tools.")
    function_call: Annotated[Any, BeforeValidator(_raise_refused)] = Field(
        None, description="Deprecated by OpenAI, taken as tool_choice: \"none\", \"auto\" or {\"name\": ...}.")

    def legacy_functions(self) -> bool:
        """Whether the request used `functions` (its answer's call is given as message.function_call)."""
        return bool(self.functions)

    @model_validator(mode="before")
    @classmethod
    def _as_tools(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        functions, choice = data.get("functions"), data.get("function_call")
        if functions:
            if data.get("tools") or data.get("tool_choice") is not None:
                data["functions"] = _Refused("the deprecated functions cannot be combined with tools or tool_choice: send "
                                             "the functions as tools")
                return data
            if isinstance(functions, list):
                data["tools"] = [{"type": "function", "function": f} for f in functions]
            if choice in ("none", "auto"):
                data["tool_choice"] = choice
            elif isinstance(choice, dict) and set(choice) == {"name"}:
                data["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
            elif choice is not None:
                data["function_call"] = _Refused("function_call must be \"none\", \"auto\" or {\"name\": ...}")
        elif choice not in (None, "none", "auto"):
            data["function_call"] = _Refused("function_call names a function, but no functions were sent (with tools, "
                                             "name it in tool_choice)")
        if isinstance(data.get("messages"), list):
            data["messages"] = _as_tool_messages(data["messages"])
        return data


def _as_tool_messages(messages: list) -> list:
    """The history with an assistant's function_call as a tool call and a function message as its tool result."""
    out, latest = [], {}  # function name -> the id given to its latest call
    for k, m in enumerate(messages):
        if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("function_call"), dict) and not m.get("tool_calls"):
            m = {key: v for key, v in m.items() if key != "function_call"}
            call = {"id": f"call_fn_{k}", "type": "function", "function": messages[k]["function_call"]}
            m["tool_calls"] = [call]
            latest[str(call["function"].get("name"))] = call["id"]
        elif isinstance(m, dict) and m.get("role") == "function" and str(m.get("name")) in latest:  # else: the role's 400
            m = {"role": "tool", "content": m.get("content") if m.get("content") is not None else "",
                 "tool_call_id": latest[str(m.get("name"))]}
        out.append(m)
    return out


def function_call_delta(delta: dict) -> dict:
    """A streamed chunk's delta in the old shape: tool_calls[0]'s name and argument piece as function_call."""
    calls = delta.get("tool_calls")
    if not calls:
        return delta
    fn = calls[0].get("function", {})
    out = {k: v for k, v in delta.items() if k != "tool_calls"}
    out["function_call"] = {k: fn[k] for k in ("name", "arguments") if k in fn}
    return out
