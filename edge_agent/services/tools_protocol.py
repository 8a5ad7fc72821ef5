"""The request and response models of function calling in chat completions (services.protocol re-exports them).

Requests validate as services.protocol's do: strictly, no unknown fields. A tool's parameters must be a
JSON schema the grammar engine compiles (checked when the request is read, so a bad one is a 400 naming
tools[i].function.parameters, not a failure when a call is made).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from edge_agent.services.errors import InvalidRequestError


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


TOOL_NAME = r"^[a-zA-Z0-9_-]{1,64}$"
MAX_TOOLS = 32  # a grammar alternative each; 33 of the largest (1 KiB descriptions) still fit the tests' 64 KiB bodies
_FUNCTION_ONLY = "only tools of type 'function' are supported (function calling)"


def _function_type(v: Any) -> Any:
    if v != "function":
        raise ValueError(f"tools of type {v!r} are not supported: {_FUNCTION_ONLY}" if isinstance(v, str) else _FUNCTION_ONLY)
    return v


FunctionType = Annotated[Literal["function"], BeforeValidator(_function_type)]


class FunctionCall(_Strict):
    name: str = Field(min_length=1, max_length=64, description="The function called.")
    arguments: str = Field(description="Its arguments, as JSON text.")


class ToolCall(_Strict):
    """A call the assistant made (in the history, or in an answer)."""

    id: str = Field(min_length=1, max_length=256)
    type: FunctionType = "function"
    function: FunctionCall


def usable_parameters(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
    """A tool's parameters validator (chat's and the Responses API's tools): a JSON schema object the grammar compiles."""
    if v is not None:
        from edge_agent.services.tools import check_parameters

        check_parameters(v)
    return v


class FunctionDefinition(_Strict):
    name: str = Field(pattern=TOOL_NAME, description="Letters, digits, _ and -, at most 64 characters; unique among the tools.")
    description: str | None = Field(None, max_length=1024, description="What the function does (shown to the model).")
    parameters: dict[str, Any] | None = Field(None, description="The JSON schema (an object) of its arguments; none: no arguments ({}).")
    strict: bool | None = Field(None, description="Accepted: a call always follows the schema (every token is masked by it), as "
                                                  "OpenAI's strict mode: an object that lists properties takes no others unless "
                                                  "additionalProperties says so. Schema keywords the grammar cannot enforce "
                                                  "(not, if/then, uniqueItems, contains, propertyNames, remote $ref) are a 400.")

    _usable_schema = field_validator("parameters")(usable_parameters)


class ChatTool(_Strict):
    type: FunctionType = Field(description="Only \"function\".")
    function: FunctionDefinition


class NamedFunction(_Strict):
    name: str = Field(min_length=1, max_length=64)


class NamedToolChoice(_Strict):
    type: FunctionType
    function: NamedFunction


class ChatToolFields(_Strict):
    """Chat completions' function-calling fields and what reads them (services.protocol.ChatCompletionRequest has them)."""

    tools: Annotated[list[ChatTool], Field(max_length=MAX_TOOLS)] | None = Field(
        None, description="Functions the model may call. With tool_choice \"auto\" (the default when tools are given) the model "
                          "answers in words or with one call, as it chooses; with \"required\" or a named function the answer is a "
                          "call. A call is constrained by a grammar to its function's parameters schema and comes back in "
                          "message.tool_calls (content null, finish_reason \"tool_calls\"). With a JSON response_format and \"auto\", "
                          "an answer that is no call follows the format; not with rag, guided_choice or guided_regex unless "
                          "tool_choice is \"none\".")
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = Field(
        None, description="none: tools are ignored, the answer is words; auto (the default with tools): the model answers in "
                          "words or calls one of the tools; required: it calls one of the tools (it chooses which); "
                          "{\"type\": \"function\", \"function\": {\"name\": ...}}: it calls that one.")
    parallel_tool_calls: bool | None = Field(None, description="Accepted; an answer makes at most one call (per choice).")
    @field_validator("tools")
    @classmethod
    def _unique_names(cls, v: list[ChatTool] | None) -> list[ChatTool] | None:
        seen: set[str] = set()
        for t in v or ():
            if t.function.name in seen:
                raise ValueError(f"two tools are named {t.function.name!r}: function names must be unique")
            seen.add(t.function.name)
        return v

    def forced_call(self) -> str | None:
        """None (no call is forced), "" (tool_choice required: any tool) or the name of the function it must call."""
        if not self.tools or self.tool_choice in (None, "none", "auto"):
            return None
        return "" if self.tool_choice == "required" else self.tool_choice.function.name  # type: ignore[union-attr]

    def may_call(self) -> bool:
        """Whether the model chooses between words and a call: tools with tool_choice "auto" or left out (OpenAI's default)."""
        return bool(self.tools) and self.tool_choice in (None, "auto")

    def tool_list(self):
        """The tools as services.tools.Tool."""
        from edge_agent.services.tools import Tool

        return [Tool(t.function.name, t.function.description or "", t.function.parameters) for t in self.tools or ()]



def check_tools(req) -> None:
    """Raise InvalidRequestError (naming the field) where a protocol.ChatCompletionRequest's tools, tool_choice and
    messages do not fit together: a choice of no given tool, a forced call with response_format or rag, tools the model
    may call (auto) with rag or a format that is not JSON (choice, regex), a tool message that answers no earlier call,
    an assistant message with neither content nor tool_calls."""
    names = [t.function.name for t in req.tools or ()]
    choice = req.tool_choice
    if choice == "required" and not names:
        raise InvalidRequestError("tool_choice \"required\" needs tools: send `tools`, or leave tool_choice out", param="tool_choice")
    if isinstance(choice, NamedToolChoice) and choice.function.name not in names:
        raise InvalidRequestError(f"tool_choice names {choice.function.name!r}, which is not among the tools"
                                  + (f" ({', '.join(names)})" if names else " (none were sent)"), param="tool_choice.function.name")
    if req.forced_call() is not None:
        if req.response_format is not None and req.response_format.type != "text":
            raise InvalidRequestError("response_format cannot be combined with a forced tool call (the call's arguments "
                                      "follow the tool's parameters): leave one of them out", param="response_format")
        if req.rag is not None:
            raise InvalidRequestError("rag cannot be combined with a forced tool call: leave one of them out", param="rag")
    elif req.may_call():
        given = [f for f in ("structured_outputs", "guided_choice", "guided_regex", "rag") if getattr(req, f) is not None
                 and not (f == "structured_outputs" and (req.structured_outputs.json_ is not None or req.structured_outputs.json_object))]
        if given:
            raise InvalidRequestError(auto_refusal(given[0], "tool_choice"), param=given[0])
    check_contents(req.messages)
    calls: set[str] = set()
    for i, m in enumerate(req.messages):
        calls |= {c.id for c in getattr(m, "tool_calls", None) or ()}
        if m.role == "tool" and m.tool_call_id not in calls:
            raise InvalidRequestError(f"this tool message answers call {m.tool_call_id!r}, which no earlier assistant "
                                      "message made (in its tool_calls)", param=f"messages[{i}].tool_call_id")


def check_contents(messages: list) -> None:
    """Raise InvalidRequestError for an assistant message with neither content nor tool_calls (the schema's anyOf), on
    chat and /tokenize alike."""
    for i, m in enumerate(messages):
        if m.content is None and not getattr(m, "tool_calls", None):
            raise InvalidRequestError(f"invalid value for 'messages[{i}].content': an assistant message needs content (null or "
                                      "left out only with tool_calls)", param=f"messages[{i}].content")


def auto_refusal(field: str, choice_field: str) -> str:
    """Why `field` (rag, or a format that is not JSON: a choice or a regex) is refused beside tools the model may call
    (tool_choice "auto" or left out): the answer is a call or words, or a JSON answer whose keys part from a call's
    (services/tools.auto_constraint), and a grounded answer, a choice or a regex match is none of them."""
    what = "answers from the documents" if field == "rag" else "answers in that format"
    return (f"{field} cannot be combined with tools the model may call ({choice_field} \"auto\", the default when tools are "
            f"given): send {choice_field} \"none\" (the model {what} and calls nothing), or leave {field} out")


class CalledFunction(BaseModel):
    name: str
    arguments: str = Field(description="The arguments as JSON text; they follow the tool's parameters unless the call was cut "
                                       "(finish_reason \"length\"), when they may not parse.")


class ResponseToolCall(BaseModel):
    id: str = Field(description="call_ and random characters; a `tool` message answers it by this id.")
    type: Literal["function"] = "function"
    function: CalledFunction


class CalledFunctionDelta(BaseModel):
    name: str | None = Field(None, description="In the call's first delta.")
    arguments: str | None = Field(None, description="The next piece of the arguments' JSON text.")


class ToolCallDelta(BaseModel):
    index: int = Field(description="The call's position in the choice (always 0: one call per choice).")
    id: str | None = Field(None, description="In the call's first delta.")
    type: Literal["function"] | None = None
    function: CalledFunctionDelta
