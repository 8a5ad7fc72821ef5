"""OpenAI's Responses API (POST /v1/responses) as a translation onto chat: its request and response models, and the mapping.

A Responses request becomes the chat request it means: `instructions` a system message first, the `input` items the
messages after it, max_output_tokens the max_tokens, text.format the response_format constraint; function tools and
tool_choice become chat's tools and tool_choice (a call is held by a grammar, services/tools.py), function_call
items an assistant message's tool_calls and function_call_output items tool messages. ChatService.chat serves it as it
serves /v1/chat/completions (one generation path); a call comes back as a function_call output item. What would
change the answer and cannot be honoured is refused with a 400 naming the field, never dropped: nothing is stored
(previous_response_id, background, conversation, stored prompts), no hosted tools run (web_search, file_search, ...)
and the model reads text only (image, file and audio parts).
Fields that change nothing here (metadata, user, store, service_tier, ...) are accepted.

edge_agent.api.protocol re-exports the models, as it does those of services.protocol.
"""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator

from edge_agent.engine.types import MAX_LOGPROBS, MAX_REPETITION_PENALTY, MAX_TEMPERATURE, MAX_TOP_K, MIN_REPETITION_PENALTY
from edge_agent.services.protocol import (
    INT64_MIN,
    UINT64_MAX,
    Float,
    GroundingReport,
    Int,
    JsonSchemaFormat,
    RagOptions,
    ResponseFormat,
    Source,
    TokenLogprob,
    Unsupported,
    _Request,
    grounding_of,
    sources_of,
)
from edge_agent.services.errors import InvalidRequestError, ServiceError
from edge_agent.services.logprobs import chat_content
from edge_agent.services.tools_protocol import MAX_TOOLS, TOOL_NAME, auto_refusal, usable_parameters

NOT_STORED = "responses are not stored on this server"
LOGPROBS_INCLUDE = "message.output_text.logprobs"
_INCLUDABLE = Literal["message.output_text.logprobs", "reasoning.encrypted_content", "file_search_call.results", "web_search_call.results",
                      "web_search_call.action.sources", "message.input_image.image_url", "computer_call_output.output.image_url",
                      "code_interpreter_call.outputs"]

# why an input item of another type than "message" is refused
_ITEM_REFUSALS = {
    "item_reference": f"{NOT_STORED}, so an item cannot be referenced by id: send the item itself",
    "reasoning": "this model does not reason in separate items: leave reasoning items out",
}
_TOOL_REFUSALS = {
    "web_search": "web search is not available: the server is offline; leave it out of `tools` (for the private documents use `rag`)",
    "web_search_preview": "web search is not available: the server is offline; leave it out of `tools` (for the private documents use `rag`)",
    "file_search": "file_search is not available: leave it out of `tools` and send `rag` to answer from the documents uploaded here",
}


class FunctionTool(_Request):
    """A function the model may call (the Responses form: name and parameters at the top level)."""

    type: Literal["function"] = Field(description="Only \"function\": hosted tools (web_search, file_search, ...) do not run here.")
    name: str = Field(pattern=TOOL_NAME, description="Letters, digits, _ and -, at most 64 characters; unique among the tools.")
    description: str | None = Field(None, max_length=1024, description="What the function does (shown to the model).")
    parameters: dict[str, Any] | None = Field(None, description="The JSON schema (an object) of its arguments; none: no arguments ({}).")
    strict: bool | None = Field(None, description="Accepted: a call always follows the schema (every token is masked by it), as "
                                                  "OpenAI's strict mode; keywords the grammar cannot enforce are a 400.")

    @model_validator(mode="before")
    @classmethod
    def _functions_only(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else None
        if isinstance(kind, str) and kind != "function":
            raise ValueError("not supported: " + _TOOL_REFUSALS.get(kind, f"tools of type {kind!r} are not available here: only "
                                                                          "tools of type 'function' (function calling)"))
        return data

    _usable_schema = field_validator("parameters")(usable_parameters)


class FunctionChoice(_Request):
    """tool_choice naming the function the model must call."""

    type: Literal["function"]
    name: str = Field(min_length=1, max_length=64)

    @model_validator(mode="before")
    @classmethod
    def _functions_only(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else None
        if isinstance(kind, str) and kind != "function":
            raise ValueError(f"tool_choice of type {kind!r} is not available here: send \"none\", \"auto\", \"required\" or "
                             "{\"type\": \"function\", \"name\": ...}")
        return data


def _not_stored(v: Any) -> Any:
    if v is None:
        return None
    raise ValueError(f"not supported: {NOT_STORED}, so a previous response cannot be continued: send the whole conversation in "
                     "`input` (the earlier output items too) and leave previous_response_id out")


class ContentPart(_Request):
    """A text part of a message: input_text, or output_text (an earlier answer sent back)."""

    type: Literal["input_text", "output_text"]
    text: str
    annotations: list | None = Field(None, description="Accepted and ignored (an output_text sent back).")
    logprobs: list | None = Field(None, description="Accepted and ignored (an output_text sent back).")

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else None
        if isinstance(kind, str) and kind not in ("input_text", "output_text"):
            why = "this model reads text only" if kind.startswith("input_") else "only text parts are taken"
            raise ValueError(f"content parts of type {kind!r} are not supported: {why} (send parts of type 'input_text')")
        return data


class InputMessage(_Request):
    """One message of the conversation (an EasyInputMessage, or a message item such as an earlier response's output)."""

    type: Literal["message"] | None = Field(None, description="\"message\" (or left out); no other item type is taken here.")
    role: Literal["user", "assistant", "system", "developer"]
    content: str | Annotated[list[ContentPart], Field(max_length=256)] = Field(description="Text, or a list of text parts.")
    id: str | None = Field(None, max_length=256, description="Accepted and ignored (an output item sent back).")
    status: Literal["in_progress", "completed", "incomplete"] | None = Field(None, description="Accepted and ignored.")
    phase: Literal["commentary", "final_answer"] | None = Field(None, description="Accepted and ignored.")

    @model_validator(mode="before")
    @classmethod
    def _messages_only(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else None
        if isinstance(kind, str) and kind != "message":
            raise ValueError(_ITEM_REFUSALS.get(kind, f"input items of type {kind!r} are not supported: send messages (role and content)"))
        return data

    def text(self) -> str:
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class FunctionCallItem(_Request):
    """A call the model made (an earlier response's function_call output item, sent back)."""

    type: Literal["function_call"]
    call_id: str = Field(min_length=1, max_length=256, description="The call's id; a function_call_output answers it by this id.")
    name: str = Field(min_length=1, max_length=64)
    arguments: str = Field(description="Its arguments, as JSON text.")
    id: str | None = Field(None, max_length=256, description="Accepted and ignored (an output item sent back).")
    status: Literal["in_progress", "completed", "incomplete"] | None = Field(None, description="Accepted and ignored.")


class FunctionCallOutputItem(_Request):
    """A function's result, answering an earlier function_call item (by call_id)."""

    type: Literal["function_call_output"]
    call_id: str = Field(min_length=1, max_length=256, description="The call_id of the function_call it answers.")
    output: str | Annotated[list[ContentPart], Field(max_length=256)] = Field(description="The result: text, or text parts.")
    id: str | None = Field(None, max_length=256, description="Accepted and ignored.")
    status: Literal["in_progress", "completed", "incomplete"] | None = Field(None, description="Accepted and ignored.")

    def text(self) -> str:
        return self.output if isinstance(self.output, str) else "".join(p.text for p in self.output)


def _item_kind(v: Any) -> str:
    """Which model reads an input item, by its type (any other, or none, goes to InputMessage, which says what is wrong)."""
    kind = v.get("type") if isinstance(v, dict) else getattr(v, "type", None)
    return {"function_call": "FunctionCallItem", "function_call_output": "FunctionCallOutputItem"}.get(
        kind if isinstance(kind, str) else "", "InputMessage")


InputItem = Annotated[Annotated[InputMessage, Tag("InputMessage")] | Annotated[FunctionCallItem, Tag("FunctionCallItem")]
                      | Annotated[FunctionCallOutputItem, Tag("FunctionCallOutputItem")], Discriminator(_item_kind)]


class TextFormat(_Request):
    """text.format: plain text (the default), one JSON object, or JSON that follows a schema."""

    type: Literal["text", "json_object", "json_schema"]
    name: str | None = Field(None, min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$", description="With json_schema: its name.")
    schema_: dict[str, Any] | None = Field(None, alias="schema", description="With json_schema: the JSON Schema the answer must follow.")
    description: str | None = Field(None, max_length=4096, description="Accepted and ignored.")
    strict: bool | None = Field(None, description="Accepted; the schema is always enforced (every token is masked by it).")

    @model_validator(mode="after")
    def _schema_with_its_type(self) -> "TextFormat":
        if self.type == "json_schema" and (self.name is None or self.schema_ is None):
            raise ValueError("type json_schema needs `name` and `schema`")
        if self.type != "json_schema" and (self.name is not None or self.schema_ is not None):
            raise ValueError("`name` and `schema` go only with type json_schema")
        return self

    def response_format(self) -> ResponseFormat:
        """The same format as chat's response_format (whose constraint() the chat path enforces)."""
        schema = None if self.type != "json_schema" else JsonSchemaFormat.model_validate(
            {"name": self.name, "schema": self.schema_, "strict": self.strict})
        return ResponseFormat(type=self.type, json_schema=schema)

    def echo(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.type == "json_schema":
            out.update(name=self.name, schema=self.schema_, description=self.description, strict=self.strict)
        return out


class TextConfig(_Request):
    format: TextFormat | None = None
    verbosity: Unsupported("only 'medium' (the default) is taken: the length of the answer is not steered here", "medium") = Field(
        None, description="Only null or \"medium\".")


class ResponsesStreamOptions(_Request):
    include_obfuscation: bool | None = Field(None, description="Accepted and ignored: stream events carry no obfuscation padding.")


class ResponseCreateRequest(_Request):
    """POST /v1/responses."""

    model: str = Field("default", min_length=1, max_length=256, description="The model id from GET /v1/models (or \"default\"); "
                       "left out: the chat model, as vLLM takes it.")
    input: str | Annotated[list[InputItem], Field(min_length=1)] = Field(
        description="Text (one user message), or the conversation as items, oldest first: messages, and function_call and "
                    "function_call_output items.")
    instructions: str | None = Field(None, description="A system message put before the input.")
    max_output_tokens: Int(ge=1) | None = Field(None, description="Most tokens to generate; a response cut there is `incomplete`.")
    temperature: Float | None = Field(None, ge=0, le=MAX_TEMPERATURE, description="0 = greedy; default: the model's, else 1.")
    top_p: Float | None = Field(None, ge=0, le=1, description="Nucleus sampling mass; 0 = only the most likely token.")
    include: Annotated[list[_INCLUDABLE], Field(max_length=8)] | None = Field(
        None, description=f"\"{LOGPROBS_INCLUDE}\" returns each answer token's log-probability (as chat's logprobs); the others "
                          "name items this server never makes, so they add nothing.")  # before top_logprobs, whose check reads it
    top_logprobs: Int(ge=0, le=MAX_LOGPROBS) | None = Field(
        None, description=f"With include [\"{LOGPROBS_INCLUDE}\"]: this many most likely tokens at each position (0..{MAX_LOGPROBS}).")
    text: TextConfig | None = Field(None, description="The output format (text.format), as chat's response_format.")
    stream: bool | None = Field(None, description="Send typed Server-Sent Events (response.created ... response.completed).")
    stream_options: ResponsesStreamOptions | None = Field(None, description="Only with stream: true.")
    tools: Annotated[list[FunctionTool], Field(max_length=MAX_TOOLS)] | None = Field(
        None, description="Functions the model may call. With tool_choice \"auto\" (the default) the model answers with a "
                          "message or one function_call item, as it chooses; with \"required\" or a named function the answer is a "
                          "function_call item. A call's arguments are constrained by a grammar to the function's parameters. With "
                          "text.format and \"auto\", a message follows the format; not with rag unless tool_choice is \"none\".")
    tool_choice: Literal["none", "auto", "required"] | FunctionChoice | None = Field(
        None, description="none: tools are ignored, the answer is a message; auto (the default): a message or a call of one "
                          "of the tools; required: it calls one of the tools (it chooses which); {\"type\": \"function\", "
                          "\"name\": ...}: it calls that one.")
    parallel_tool_calls: bool | None = Field(None, description="Accepted; an answer makes at most one call.")
    max_tool_calls: Int(ge=0) | None = Field(None, description="Accepted and ignored (an answer makes at most one call).")
    previous_response_id: Annotated[Any, BeforeValidator(_not_stored)] = Field(
        None, description="Not supported (responses are not stored): only null.")
    conversation: Unsupported(f"{NOT_STORED} (nor conversations): send the whole conversation in `input`") = Field(
        None, description="Not supported: only null.")
    background: Unsupported(f"{NOT_STORED}, so a background response could never be fetched: leave `background` out", False) = Field(
        None, description="Not supported: only null or false.")
    prompt: Unsupported("stored prompt templates are not available here: send the text in `instructions` and `input`") = Field(
        None, description="Not supported: only null.")
    reasoning: Unsupported("this model does not reason in separate steps: leave `reasoning` out", {"effort": "none"}) = Field(
        None, description="Not supported: only null, {} or {\"effort\": \"none\"} (as chat's reasoning_effort \"none\").")
    truncation: Unsupported("'auto' (dropping input items to fit) is not done here: an input too long for the model is refused",
                            "disabled") = Field(None, description="Only null or \"disabled\".")
    store: bool | None = Field(None, description="Accepted and ignored: nothing is stored (the response says store: false).")
    metadata: dict[str, Annotated[str, Field(max_length=512)]] | None = Field(
        None, max_length=16, description="Returned in the response; not stored.")
    user: str | None = Field(None, max_length=256, description="Accepted and ignored.")
    safety_identifier: str | None = Field(None, max_length=256, description="Accepted and ignored.")
    prompt_cache_key: str | None = Field(None, max_length=1024, description="Accepted and ignored (the prefix cache is automatic).")
    prompt_cache_retention: Literal["in_memory", "24h"] | None = Field(None, description="Accepted and ignored.")
    prompt_cache_options: dict[str, Any] | None = Field(None, max_length=16, description="Accepted and ignored (the prefix cache "
                                                        "is automatic).")
    service_tier: str | None = Field(None, max_length=32, description="Accepted and ignored.")
    # extensions, as on /v1/chat/completions
    seed: Int(ge=INT64_MIN, le=UINT64_MAX) | None = Field(None, description="Makes sampling repeatable. Extension.")
    top_k: Int(ge=-1, le=MAX_TOP_K) | None = Field(None, description="Sample among the k most likely tokens (0 or -1 = off). Extension.")
    min_p: Float | None = Field(None, ge=0, le=1, description="Drop tokens below min_p x the top probability. Extension.")
    repetition_penalty: Float | None = Field(None, ge=MIN_REPETITION_PENALTY, le=MAX_REPETITION_PENALTY,
                                             description="> 1 discourages repeats (CTRL style). Extension.")
    priority: Int(ge=0, le=9) | None = Field(None, description="Lower runs first (0, the default, is interactive). Extension.")
    rag: RagOptions | None = Field(None, description="Answer from the private documents: the response gets `sources` and "
                                                     "`grounding` (a stream: in response.created and after). Extension.")

    @field_validator("stream_options")
    @classmethod
    def _stream_options_need_stream(cls, v: ResponsesStreamOptions | None, info: ValidationInfo) -> ResponsesStreamOptions | None:
        if v is not None and info.data.get("stream") is not True:  # as /v1/chat/completions (OpenAI: "only when stream: true")
            raise ValueError("stream_options is only allowed with stream: true (as OpenAI's): send stream: true, "
                             "or leave stream_options out")
        return v

    @field_validator("max_output_tokens")
    @classmethod
    def _max_output_tokens_limit(cls, v: int | None, info: ValidationInfo) -> int | None:
        limit = (info.context or {}).get("max_tokens_limit")
        if v is not None and limit is not None and v > limit:
            raise ValueError(f"must be at most {limit} on this server")
        return v

    @field_validator("input")
    @classmethod
    def _max_messages(cls, v: Any, info: ValidationInfo) -> Any:
        limit = (info.context or {}).get("max_messages")
        if isinstance(v, list) and limit is not None and len(v) > limit:
            raise ValueError(f"at most {limit} input items are accepted on this server")
        return v

    @field_validator("top_k")
    @classmethod
    def _top_k_off(cls, v: int | None) -> int | None:
        return 0 if v == -1 else v

    @field_validator("top_logprobs")
    @classmethod
    def _top_needs_include(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v and LOGPROBS_INCLUDE not in (info.data.get("include") or []):
            raise ValueError(f"top_logprobs needs include [\"{LOGPROBS_INCLUDE}\"] (the log-probabilities are sent only then): "
                             "send both, or leave top_logprobs out")
        return v

    @field_validator("tools")
    @classmethod
    def _unique_names(cls, v: list[FunctionTool] | None) -> list[FunctionTool] | None:
        names = [t.name for t in v or ()]
        if len(set(names)) < len(names):
            raise ValueError("two tools have the same name: function names must be unique")
        return v

    @model_validator(mode="after")
    def _tools_fit(self) -> "ResponseCreateRequest":
        """Raise InvalidRequestError (naming the field) where tools, tool_choice, text.format, rag and input do not fit together."""
        names = [t.name for t in self.tools or ()]
        choice = self.tool_choice
        if choice == "required" and not names:
            raise InvalidRequestError("tool_choice \"required\" needs tools: send `tools`, or leave tool_choice out", param="tool_choice")
        if isinstance(choice, FunctionChoice) and choice.name not in names:
            raise InvalidRequestError(f"tool_choice names {choice.name!r}, which is not among the tools"
                                      + (f" ({', '.join(names)})" if names else " (none were sent)"), param="tool_choice.name")
        if self.forced_call() is not None:
            if self.text is not None and self.text.format is not None and self.text.format.type != "text":
                raise InvalidRequestError("text.format cannot be combined with a forced function call (the call's arguments follow "
                                          "the function's parameters): leave one of them out", param="text.format")
            if self.rag is not None:
                raise InvalidRequestError("rag cannot be combined with a forced function call: leave one of them out", param="rag")
        elif self.may_call() and self.rag is not None:
            raise InvalidRequestError(auto_refusal("rag", "tool_choice"), param="rag")
        calls: set[str] = set()
        for i, item in enumerate(self.input if isinstance(self.input, list) else ()):
            if isinstance(item, FunctionCallItem):
                calls.add(item.call_id)
            elif isinstance(item, FunctionCallOutputItem) and item.call_id not in calls:
                raise InvalidRequestError(f"this function_call_output answers call {item.call_id!r}, which no earlier function_call "
                                          "item made: send the function_call item before its output", param=f"input[{i}].call_id")
        return self

    # --- the chat request it means ----------------------------------------------------
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages: the instructions (as a system message) first, then the input; consecutive function_call
        items become one assistant message's tool_calls, a function_call_output a tool message."""
        out: list[dict[str, Any]] = [{"role": "system", "content": self.instructions}] if self.instructions else []
        if isinstance(self.input, str):
            return out + [{"role": "user", "content": self.input}]
        for item in self.input:
            if isinstance(item, FunctionCallItem):
                call = {"id": item.call_id, "name": item.name, "arguments": item.arguments}
                if out and out[-1].get("tool_calls") and not out[-1]["content"]:
                    out[-1]["tool_calls"].append(call)
                else:
                    out.append({"role": "assistant", "content": "", "tool_calls": [call]})
            elif isinstance(item, FunctionCallOutputItem):
                out.append({"role": "tool", "content": item.text(), "tool_call_id": item.call_id})
            else:
                out.append({"role": item.role, "content": item.text()})
        return out

    def tool_list(self):
        """The tools as services.tools.Tool."""
        from edge_agent.services.tools import Tool

        return [Tool(t.name, t.description or "", t.parameters) for t in self.tools or ()]

    def forced_call(self) -> str | None:
        """None (no call is forced), "" (tool_choice required: any tool) or the name of the function it must call."""
        if not self.tools or self.tool_choice in (None, "none", "auto"):
            return None
        return "" if self.tool_choice == "required" else self.tool_choice.name  # type: ignore[union-attr]

    def may_call(self) -> bool:
        """Whether the model chooses between a message and a call: tools with tool_choice "auto" or left out (the default)."""
        return bool(self.tools) and self.tool_choice in (None, "auto")

    def sampling(self):
        """The chat path's SamplingOptions (services.chat) of this request."""
        from edge_agent.services.chat import SamplingOptions

        return SamplingOptions(max_tokens=self.max_output_tokens, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
                               min_p=self.min_p, repetition_penalty=self.repetition_penalty, seed=self.seed,
                               logprobs=self.logprob_count())

    def logprob_count(self) -> int | None:
        """None, or how many alternatives each token's logprobs carry."""
        return (self.top_logprobs or 0) if LOGPROBS_INCLUDE in (self.include or []) else None

    def constraint(self):
        """The OutputConstraint of text.format (None for text); raises InvalidRequestError (param response_format) for a bad schema."""
        fmt = self.text.format if self.text is not None else None
        return fmt.response_format().constraint() if fmt is not None else None

    def echo(self) -> dict[str, Any]:
        """The request's settings as a response object repeats them."""
        fmt = self.text.format if self.text is not None and self.text.format is not None else None
        return {
            "instructions": self.instructions, "max_output_tokens": self.max_output_tokens, "temperature": self.temperature,
            "top_p": self.top_p, "top_logprobs": self.top_logprobs, "metadata": self.metadata or {}, "user": self.user,
            "parallel_tool_calls": self.parallel_tool_calls if self.parallel_tool_calls is not None else True,
            "tool_choice": (self.tool_choice.model_dump() if isinstance(self.tool_choice, FunctionChoice) else self.tool_choice) or "auto",
            "tools": [t.model_dump() for t in self.tools or ()], "max_tool_calls": self.max_tool_calls,
            "text": {"format": fmt.echo() if fmt is not None else {"type": "text"}},
        }


# --- the response ------------------------------------------------------------------
class OutputText(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list = Field(default_factory=list, description="Always empty (rag's passages are in `sources`).")
    logprobs: list[TokenLogprob] = Field(default_factory=list, description=f"With include [\"{LOGPROBS_INCLUDE}\"]: each token's.")


class OutputMessage(BaseModel):
    id: str
    type: Literal["message"] = "message"
    role: Literal["assistant"] = "assistant"
    status: Literal["in_progress", "completed", "incomplete"]
    content: list[OutputText]


class FunctionToolCall(BaseModel):
    """A call: the function_call output item (send it back in `input`, followed by a function_call_output)."""

    id: str = Field(description="fc_ and the response's id.")
    type: Literal["function_call"] = "function_call"
    call_id: str = Field(description="call_ and random characters; a function_call_output answers it by this id.")
    name: str
    arguments: str = Field(description="The arguments as JSON text; they follow the function's parameters unless the call was cut "
                                       "(status incomplete: max_output_tokens), when they may not parse.")
    status: Literal["in_progress", "completed", "incomplete"]


class InputTokensDetails(BaseModel):
    cached_tokens: int = Field(description="Prompt tokens whose keys and values came from the prefix cache.")
    cache_write_tokens: int = Field(0, description="Always 0 (there is no explicit prompt caching).")


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = Field(0, description="Always 0 (the model does not reason in separate steps).")


class ResponseUsage(BaseModel):
    input_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens: int
    output_tokens_details: OutputTokensDetails = Field(default_factory=OutputTokensDetails)
    total_tokens: int


class IncompleteDetails(BaseModel):
    reason: Literal["max_output_tokens"]


class ResponseErrorInfo(BaseModel):
    code: Literal["server_error", "rate_limit_exceeded"]
    message: str


class TextFormatEcho(BaseModel):
    format: dict[str, Any]


class ResponseObject(BaseModel):
    """The response (stream false), and the `response` of the lifecycle events of a stream."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    completed_at: int | None = None
    status: Literal["in_progress", "completed", "incomplete", "failed"]
    error: ResponseErrorInfo | None = None
    incomplete_details: IncompleteDetails | None = None
    model: str
    output: list[OutputMessage | FunctionToolCall] = Field(
        description="One assistant message, or one function_call when the answer is a call (none until a stream's first item is added).")
    usage: ResponseUsage | None = Field(None, description="Set once the response is done.")
    instructions: str | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    parallel_tool_calls: bool = True
    previous_response_id: None = None
    store: bool = Field(False, description="Always false: responses are not stored.")
    temperature: float | None = None
    text: TextFormatEcho
    tool_choice: Literal["none", "auto", "required"] | dict[str, str] = Field("auto", description="As sent (default \"auto\").")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="The function tools, as sent.")
    top_logprobs: int | None = None
    top_p: float | None = None
    truncation: Literal["disabled"] = "disabled"
    user: str | None = None
    sources: list[Source] | None = Field(None, description="With `rag`: the chunks the answer was grounded in, best first. Extension.")
    grounding: GroundingReport | None = Field(None, description="With `rag`: which path made the answer. Extension.")


def status_of(finish_reason: str) -> tuple[str, IncompleteDetails | None]:
    """The response status of a chat finish reason: "length" is incomplete (max_output_tokens), anything else completed."""
    if finish_reason == "length":
        return "incomplete", IncompleteDetails(reason="max_output_tokens")
    return "completed", None


def error_code(status: int) -> Literal["server_error", "rate_limit_exceeded"]:
    """The response.error code (OpenAI's list) of a failure with this HTTP status."""
    return "rate_limit_exceeded" if status == 429 else "server_error"


ResponseCreateRequest.model_rebuild()


# --- building responses (the route, its stream and batch-file lines) ----------------------------
# the chat request's field names in the chat service's errors, as this API names them
_PARAMS = {"messages": "input", "prompt": "input", "max_tokens": "max_output_tokens", "response_format": "text.format",
           "logprobs": "include"}


@contextmanager
def named_for_responses() -> Iterator[None]:
    """Rename the chat fields a service error names to this API's (messages -> input, max_tokens -> max_output_tokens ...)."""
    try:
        yield
    except ServiceError as e:
        e.param = _PARAMS.get(e.param, e.param)
        e.message = re.sub(r"\bmax_tokens\b", "max_output_tokens", e.message)
        raise


def logprobs_of(entries: list | None, texts_of) -> list[dict]:
    """OpenAI's per-token logprobs of entries (engine TokenLogprob), or [] when they were not asked for (texts_of None)."""
    return chat_content(entries or [], texts_of) if texts_of is not None else []


def dump(obj: ResponseObject) -> dict:
    """The object as JSON data; `sources` and `grounding` only when the request asked for rag."""
    return obj.model_dump(mode="json", exclude={f for f in ("sources", "grounding") if getattr(obj, f) is None} or None)


def response_object(req: ResponseCreateRequest, gen: Any, **fields) -> ResponseObject:
    return ResponseObject(id="resp_" + gen.id, created_at=gen.created, model=gen.model, sources=sources_of(gen), grounding=grounding_of(gen),
                          **req.echo(), **fields)


def output_message(gen: Any, status: str, text: str | None = None, logprobs: list | None = None) -> OutputMessage:
    content = [] if text is None else [OutputText(text=text, logprobs=logprobs or [])]
    return OutputMessage(id="msg_" + gen.id, status=status, content=content)


def answer_item(req: ResponseCreateRequest, gen: Any, text: str, finish_reason: str, logprobs: list,
                call_id: str | None = None) -> OutputMessage | FunctionToolCall:
    """The output item of an answer: a call's function_call (call_id, or a new one), else (words, or cut before the
    function's name was written) the message."""
    from edge_agent.services import tools

    status, _ = status_of(finish_reason)
    call = req.forced_call()
    if call is not None or req.may_call():
        name, arguments = tools.read_call(text, finish_reason, req.tool_list(), call or None, req.may_call())
        if name:
            return FunctionToolCall(id="fc_" + gen.id, call_id=call_id or tools.call_id(), name=name, arguments=arguments, status=status)
    return output_message(gen, status, text, logprobs)


def finished(req: ResponseCreateRequest, gen: Any, text: str, finish_reason: str, logprobs: list,
             call_id: str | None = None) -> ResponseObject:
    """The response of a generation that ended (finish_reason "stop" or "length"), with its usage."""
    status, incomplete = status_of(finish_reason)
    u = gen.usage
    usage = ResponseUsage(input_tokens=u.prompt_tokens, input_tokens_details=InputTokensDetails(cached_tokens=u.cached_tokens),
                          output_tokens=u.completion_tokens, total_tokens=u.total_tokens)
    return response_object(req, gen, status=status, incomplete_details=incomplete,
                           output=[answer_item(req, gen, text, finish_reason, logprobs, call_id)], usage=usage, completed_at=int(time.time()))


def start(svc: Any, req: ResponseCreateRequest, options: Any, priority: int, rag: Any) -> Any:
    """Start the chat generation this request means (the route and batch lines both): messages, format, tools, and its
    model's name (a documents alias answers from the documents)."""
    with named_for_responses():
        return svc.chat(req.messages(), options, constraint=req.constraint(), priority=priority, rag=rag, tools=req.tool_list(),
                        call=req.forced_call(), may_call=req.may_call(), model=req.model)
