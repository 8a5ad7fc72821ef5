"""Request and response models of the OpenAI-compatible API (pydantic v2); /openapi.json is generated from them.

They live in services so that jobs (OpenAI batch files) validate each line with the same models as the live routes;
edge_agent.api.protocol re-exports them. The reply models are in protocol_replies.py, re-exported here.

Requests validate strictly: no type coercion (an integral float such as 2.0 counts as an integer,
as in JSON Schema), no unknown fields, finite numbers in range. Limits that come from the
settings (max_tokens, number of messages) are checked against the validation context.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)

from edge_agent.services.tools_protocol import (  # noqa: F401 (re-exported: api.protocol, /openapi.json)
    MAX_TOOLS,
    ChatToolFields,
    CalledFunction,
    CalledFunctionDelta,
    ChatTool,
    FunctionCall,
    FunctionDefinition,
    NamedFunction,
    NamedToolChoice,
    ResponseToolCall,
    ToolCall,
    ToolCallDelta,
    check_tools,
)
from edge_agent.services.protocol_vllm import Unsupported, VllmChatFields, VllmCompletionFields, VllmSamplingFields
from edge_agent.services.protocol_functions import FunctionFields
from edge_agent.engine.types import MAX_LOGPROBS, MAX_REPETITION_PENALTY, MAX_TEMPERATURE, MAX_TOP_K, MIN_REPETITION_PENALTY

INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1
MAX_CHOICES = 8
MAX_STOP = 4  # OpenAI's
MAX_STOP_TOKEN_IDS = 64
MAX_GUIDED_CHOICES = 1000  # constrained.MAX_CHOICES
MAX_OLLAMA_STOP = 32  # Ollama sets no limit; code assistants' fill-in-the-middle templates send 5 to 10
MAX_PROMPTS = 8
MAX_TEMPLATE_KWARGS = 32
TEMPLATE_OWN = ("messages", "tools", "add_generation_prompt", "bos_token", "eos_token")  # what PromptFormatter passes a chat template
MAX_EMBED_INPUTS = 2048  # OpenAI's limit; LangChain's OpenAIEmbeddings sends 1000 a request


def _integral(v: Any) -> Any:
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**64:
        return int(v)
    return v


def Int(**bounds: int) -> Any:
    """An integer with bounds that also accepts integral floats (2.0); the bounds show in the JSON schema."""
    return Annotated[int, Field(strict=True, **bounds), BeforeValidator(_integral)]


# the message for a field the request models do not know (pydantic's extra_forbidden), on the live routes and in batch files
UNKNOWN_FIELD = "unknown field: leave it out (GET /openapi.json lists the fields this server takes)"


def unknown_field(param: str) -> str:
    """What to say about a field the request models do not know: `extra_body` (copied from a Python example into a JSON
    body) is the openai client's argument, whose fields belong at the top level."""
    if param == "extra_body":
        return ("extra_body is the openai Python client's argument, not a field of the request: put the fields it holds at the "
                "top level of the JSON body")
    return UNKNOWN_FIELD


Float = Annotated[float, Field(allow_inf_nan=False)]
MAX_LOGIT_BIAS = 300  # OpenAI's limit on logit_bias entries


def _token_id_key(v: Any) -> Any:
    if isinstance(v, str) and not (v.isascii() and v.isdigit() and len(v) <= 10):
        raise ValueError(f"logit_bias keys are token ids such as \"1234\", not {v[:40]!r}: POST /tokenize gives a text's ids")
    return v


TokenIdKey = Annotated[str, Field(pattern=r"^[0-9]{1,10}$"), BeforeValidator(_token_id_key)]
LogitBias = Annotated[dict[TokenIdKey, Annotated[Float, Field(ge=-100, le=100)]],
                      Field(max_length=MAX_LOGIT_BIAS, json_schema_extra={"additionalProperties": False})]
StopString = Annotated[str, Field(min_length=1, max_length=256)]
GuidedChoices = Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1, max_length=MAX_GUIDED_CHOICES)]
Pattern = Annotated[str, Field(min_length=1, max_length=4096)]
StopList = Annotated[list[StopString], Field(max_length=MAX_STOP)]  # [] = no stop (as null)


def _not_the_templates_own(v: dict[str, Any]) -> dict[str, Any]:
    taken = sorted(set(v) & set(TEMPLATE_OWN))
    if taken:
        raise ValueError(f"{', '.join(taken)} is set by the server (from messages, tools and the model): leave it out")
    return v


TemplateKwargs = Annotated[dict[str, Any], Field(max_length=MAX_TEMPLATE_KWARGS), AfterValidator(_not_the_templates_own)]
TEMPLATE_KWARGS = ("vLLM's: more variables for the model's chat template (e.g. {\"enable_thinking\": false}); those it does not "
                   "use change nothing, and a model without a chat template ignores them. Their text is data (never control "
                   f"tokens); the template's own variables ({', '.join(TEMPLATE_OWN)}) cannot be set. Extension.")


def at_most_messages(v: list | None, info: ValidationInfo) -> list | None:
    """A messages field's validator: at most the server's max_messages (the validation context's), when it says one."""
    limit = (info.context or {}).get("max_messages")
    if v is not None and limit is not None and len(v) > limit:
        raise ValueError(f"at most {limit} messages are accepted on this server")
    return v


class _Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    @field_validator("max_tokens", "max_completion_tokens", "min_tokens", check_fields=False)
    @classmethod
    def _max_tokens_limit(cls, v: int | None, info: ValidationInfo) -> int | None:
        limit = (info.context or {}).get("max_tokens_limit")
        if v is not None and limit is not None and v > limit:
            raise ValueError(f"must be at most {limit} on this server")
        return v


ID_MAX = 2**63 - 1  # SQLite's largest integer
MAX_RAG_K = 20


class RagFilters(_Request):
    """Which documents may be used; every given filter must match."""

    document_ids: Annotated[list[Int(ge=1, le=ID_MAX)], Field(max_length=1000)] | None = Field(
        None, description="Only these documents (ids from GET /v1/documents)."
    )
    path_prefix: str | None = Field(None, min_length=1, max_length=4096, description="Only files under this folder (or this file).")
    types: Annotated[list[Annotated[str, Field(min_length=1, max_length=20)]], Field(max_length=20)] | None = Field(
        None, description="Only these document types (txt, md, html, pdf, docx, xlsx, pptx, odt, ods, odp, rtf, eml, csv)."
    )
    type: str | None = Field(None, min_length=1, max_length=20, description="One document type (added to `types`).")

    def to_dict(self) -> dict[str, Any]:
        types = [*(self.types or []), *([self.type] if self.type else [])] or None
        out = {"document_ids": self.document_ids, "path_prefix": self.path_prefix, "types": types}
        return {k: v for k, v in out.items() if v is not None}


class RagOptions(_Request):
    """Ground the answer in the private documents. Extension."""

    k: Int(ge=1, le=MAX_RAG_K) = Field(4, description="Chunks to retrieve; those that fit the context are used, best first.")
    filters: RagFilters | None = None
    mode: Literal["hybrid", "dense", "bm25"] = Field("hybrid", description="Retriever: dense + BM25 fused (hybrid), or one of them.")


class StructuredOutputs(_Request):
    """vLLM's structured outputs: one of choice, json, regex or json_object. Extension."""

    choice: GuidedChoices | None = Field(None, description="The answer is exactly one of these strings.")
    json_: dict[str, Any] | str | None = Field(None, alias="json", description="The answer is one JSON value that follows this "
                                               "JSON schema (an object, or its JSON text), as response_format json_schema.")
    regex: Pattern | None = Field(None, description="The answer matches this regular expression whole.")
    json_object: bool | None = Field(None, description="true: the answer is one JSON object, as response_format json_object.")
    grammar: Unsupported("grammars are not taken: use json, regex or choice") = Field(None, description="Not supported.")
    structural_tag: Unsupported("structural tags are not taken: use json, regex or choice") = Field(None, description="Not supported.")

    @model_validator(mode="after")
    def _one_kind(self) -> "StructuredOutputs":
        given = [k for k in ("choice", "json", "regex", "json_object") if getattr(self, "json_" if k == "json" else k)]
        if len(given) != 1:
            raise ValueError(f"send exactly one of choice, json, regex and json_object (got {', '.join(given) or 'none'})")
        return self

    def constraint(self):
        """The OutputConstraint (raises InvalidRequestError naming structured_outputs for a bad schema or pattern)."""
        from edge_agent.services.constrained import guided_constraint

        return guided_constraint(self.choice, self.json_, self.regex, bool(self.json_object), "structured_outputs")


class _Sampling(_Request, VllmSamplingFields):
    """Fields shared by chat and text completions."""

    model: str = Field("default", min_length=1, max_length=256, description="The model id from GET /v1/models (or \"default\"); "
                       "left out: the chat model, as vLLM and llama.cpp take it.")
    max_tokens: Int(ge=1) | None = Field(None, description="Most tokens to generate.")
    temperature: Float | None = Field(None, ge=0, le=MAX_TEMPERATURE, description="0 = greedy (so is anything below 0.001); default: the model's, else 1.")
    top_p: Float | None = Field(None, ge=0, le=1, description="Nucleus sampling mass; 0 = only the most likely token.")
    top_k: Int(ge=-1, le=MAX_TOP_K) | None = Field(None, description="Sample among the k most likely tokens (0 or -1 = off, as in "
                                                   "vLLM and llama.cpp). Extension.")
    min_p: Float | None = Field(None, ge=0, le=1, description="Drop tokens below min_p x the top probability. Extension.")
    repetition_penalty: Float | None = Field(None, ge=MIN_REPETITION_PENALTY, le=MAX_REPETITION_PENALTY, description="> 1 discourages repeats (CTRL style). Extension.")
    presence_penalty: Float | None = Field(None, ge=-2, le=2, description="Lowers the logit of every token already generated by this "
                                           "much (OpenAI's and vLLM's; the prompt does not count).")
    frequency_penalty: Float | None = Field(None, ge=-2, le=2, description="Lowers each token's logit by this much per time it was "
                                            "generated (OpenAI's and vLLM's; the prompt does not count).")
    logit_bias: LogitBias | None = Field(
        None, description="{token id (as text): -100..100}: added to that token's logit before sampling (OpenAI's); -100 bans "
                          "the token, 100 makes it the only choice. Ids are this model's tokenizer's (POST /tokenize shows them).")
    metadata: dict[str, str] | None = Field(None, max_length=16, description="Accepted and ignored (nothing is stored).")
    store: bool | None = Field(None, description="Accepted and ignored (nothing is stored).")
    service_tier: str | None = Field(None, max_length=32, description="Accepted and ignored.")
    prompt_cache_key: str | None = Field(None, max_length=1024, description="Accepted and ignored (the prefix cache is automatic).")
    prompt_cache_retention: Literal["in_memory", "24h"] | None = Field(None, description="Accepted and ignored.")
    prompt_cache_options: dict[str, Any] | None = Field(None, max_length=16, description="Accepted and ignored (the prefix cache "
                                                        "is automatic).")
    cache_prompt: bool | None = Field(None, description="llama.cpp's: accepted and ignored (the prefix cache is automatic).")
    safety_identifier: str | None = Field(None, max_length=256, description="Accepted and ignored.")
    seed: Int(ge=INT64_MIN, le=UINT64_MAX) | None = Field(None, description="Makes sampling repeatable; choice i uses seed + i.")
    stop: Annotated[str, Field(min_length=1, max_length=256)] | StopList | None = Field(
        None, description="Up to 4 strings; generation stops before any of them (not included in the output)."
    )
    n: Int(ge=1, le=MAX_CHOICES) | None = Field(None, description="Choices to generate (they run batched).")
    stream: bool | None = Field(None, description="Send Server-Sent Events, ending with `data: [DONE]`.")
    stream_options: StreamOptions | None = Field(None, description="Only with stream: true.")
    user: str | None = Field(None, max_length=256, description="Accepted and ignored.")
    priority: Int(ge=0, le=9) | None = Field(None, description="Lower runs first (0, the default, is interactive). Extension.")
    ignore_eos: bool | None = Field(None, description="Keep generating past end-of-sequence tokens (benchmarks). Extension.")
    min_tokens: Int(ge=0) | None = Field(None, description="Generate at least this many tokens (at most max_tokens): until then "
                                         "end-of-sequence is never chosen and stop strings are not looked for (vLLM's). Extension.")
    stop_token_ids: Annotated[list[Int(ge=0, le=2**31 - 1)], Field(max_length=MAX_STOP_TOKEN_IDS)] | None = Field(
        None, description="Token ids that end the answer, left out of it, finish_reason stop (vLLM's). Extension.")
    skip_special_tokens: Unsupported("control tokens are always left out of the text: send true or leave it out", True) = Field(
        None, description="Only true (vLLM's default).")
    spaces_between_special_tokens: Unsupported("send true or leave it out", True) = Field(None, description="Only true (vLLM's default).")
    include_stop_str_in_output: Unsupported("a stop string is always left out of the text: send false or leave it out", False) = Field(
        None, description="Only false (vLLM's default).")
    response_format: ResponseFormat | None = Field(None, description="The answer's format (on completions as vLLM takes it).")
    structured_outputs: StructuredOutputs | None = Field(
        None, description="vLLM's structured outputs (not with response_format). Extension.")
    guided_choice: GuidedChoices | None = Field(None, description="vLLM's older spelling of structured_outputs.choice. Extension.")
    guided_json: dict[str, Any] | str | None = Field(None, description="vLLM's older spelling of structured_outputs.json. Extension.")
    guided_regex: Pattern | None = Field(None, description="vLLM's older spelling of structured_outputs.regex. Extension.")
    guided_decoding_backend: str | None = Field(None, max_length=64, description="Accepted and ignored (one grammar engine here).")
    rag: RagOptions | None = Field(
        None, description="Answer from the private documents: the response gets `sources` (a stream sends them in its first chunk). Extension."
    )

    @field_validator("top_k")
    @classmethod
    def _top_k_off(cls, v: int | None) -> int | None:
        return 0 if v == -1 else v  # vLLM clients send -1 for "no top_k"

    @field_validator("stream_options")
    @classmethod
    def _stream_options_need_stream(cls, v: StreamOptions | None, info: ValidationInfo) -> StreamOptions | None:
        if v is not None and info.data.get("stream") is not True:
            raise ValueError("stream_options is only allowed with stream: true (as OpenAI's and vLLM's): "
                             "send stream: true, or leave stream_options out")
        return v

    def output_constraint(self):
        """The OutputConstraint the answer follows (response_format, structured_outputs or a guided_* field), or None; raises
        InvalidRequestError when two are given or one cannot be used."""
        from edge_agent.services.constrained import guided_constraint
        from edge_agent.services.errors import InvalidRequestError

        formatted = self.response_format if self.response_format is not None and self.response_format.type != "text" else None
        kinds = [(name, v) for name, v in (("response_format", formatted), ("structured_outputs", self.structured_outputs),
                                           ("guided_choice", self.guided_choice), ("guided_json", self.guided_json),
                                           ("guided_regex", self.guided_regex)) if v]
        if len(kinds) > 1:
            raise InvalidRequestError(f"{kinds[0][0]} and {kinds[1][0]} both constrain the output: send one of them", param=kinds[1][0])
        if not kinds:
            return None
        name, v = kinds[0]
        if name in ("response_format", "structured_outputs"):
            return v.constraint()
        return guided_constraint(self.guided_choice, self.guided_json, self.guided_regex, False, name)

    def bias(self) -> dict[int, float] | None:
        """logit_bias as {token id: bias}, or None."""
        return {int(k): float(v) for k, v in self.logit_bias.items()} if self.logit_bias else None

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


class StreamOptions(_Request):
    include_usage: bool | None = Field(None, description="Send a last chunk with `usage` and no choices.")
    include_obfuscation: bool | None = Field(None, description="Accepted and ignored: chunks carry no obfuscation padding here.")
    continuous_usage_stats: Unsupported("usage is sent once, in the last chunk (include_usage): send false or leave it out", False) = Field(
        None, description="vLLM's: only false (its default).")


class TextPart(_Request):
    type: Literal["text"]
    text: str

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("type"), str) and data["type"] != "text":
            raise ValueError(f"content parts of type {data['type']!r} are not supported: this model reads text only "
                             "(send parts of type 'text')")
        return data


class RefusalPart(_Request):
    """An earlier answer's refusal (OpenAI's assistant content part), read as its text."""

    type: Literal["refusal"]
    refusal: str


_TEXT = str | Annotated[list[TextPart], Field(max_length=256)]
def _part_kind(v: Any) -> str:  # any part but a refusal goes to TextPart, which says why it is not taken
    return "refusal" if (v.get("type") if isinstance(v, dict) else getattr(v, "type", None)) == "refusal" else "text"


_ASSISTANT_PART = Annotated[Annotated[TextPart, Tag("text")] | Annotated[RefusalPart, Tag("refusal")], Discriminator(_part_kind)]
_ASSISTANT_TEXT = str | Annotated[list[_ASSISTANT_PART], Field(max_length=256)]
ROLES = ("system", "developer", "user", "assistant", "tool")


def _text_of(content: str | list) -> str:
    return content if isinstance(content, str) else "".join(getattr(p, "text", None) or getattr(p, "refusal", "") for p in content)


def _known_role(v: Any) -> Any:
    if isinstance(v, str) and v not in ROLES:
        if v == "function":
            raise ValueError("a (deprecated) function message answers an earlier assistant message's function_call of the "
                             "same name, and none came before it: send the result as a `tool` message with the tool_call_id "
                             "of the assistant's call")
        raise ValueError(f"the role must be one of {', '.join(ROLES)} (got {v[:40]!r})")
    return v


class ChatMessage(_Request):
    role: Annotated[Literal["system", "developer", "user"], BeforeValidator(_known_role)]
    content: _TEXT = Field(description="Text, or a list of text parts.")
    name: str | None = Field(None, max_length=64, description="Accepted and ignored.")

    def text(self) -> str:
        return _text_of(self.content)

    def to_dict(self) -> dict[str, Any]:
        """The message as services take it: role and text."""
        return {"role": self.role, "content": self.text()}


class AssistantTurn(ChatMessage):
    """An earlier answer: its text, or the calls it made (or both)."""

    model_config = ConfigDict(json_schema_extra={"anyOf": [
        {"required": ["content"], "properties": {"content": {"type": ["string", "array"]}}},
        {"required": ["tool_calls"], "properties": {"tool_calls": {"type": "array", "minItems": 1}}},
    ]})

    role: Literal["assistant"]
    content: _ASSISTANT_TEXT | None = Field(None, description="Text, or a list of text (or refusal) parts; null or left out only "
                                            "with tool_calls.")
    # what the openai client's ChatCompletionMessage.model_dump() carries when a client replays an answer into the history
    refusal: str | None = Field(None, description="Accepted and ignored.")
    annotations: list | None = Field(None, description="Accepted and ignored.")
    # an earlier answer's reasoning, as reasoning models' servers return it (vLLM's reasoning parsers, DeepSeek's API) and
    # clients replay it: left out of the prompt, as chat templates drop an earlier turn's reasoning
    reasoning_content: str | None = Field(None, max_length=1 << 20, description="Accepted and left out of the prompt.")
    reasoning: str | None = Field(None, max_length=1 << 20, description="Accepted and left out of the prompt.")
    audio: Unsupported("this model reads text only: leave `audio` out") = Field(None, description="Not supported: only null.")
    tool_calls: Annotated[list[ToolCall], Field(max_length=MAX_TOOLS)] | None = Field(
        None, description="The calls it made (their results follow as `tool` messages).")
    function_call: Unsupported("the deprecated function_call is not taken: send the call in `tool_calls`") = Field(
        None, description="Not supported (deprecated by OpenAI): only null; use tool_calls.")

    def text(self) -> str:
        return "" if self.content is None else super().text()

    def to_dict(self) -> dict[str, Any]:
        """The message as services take it: role and text, with the calls ({"id", "name", "arguments"})."""
        out: dict[str, Any] = {"role": self.role, "content": self.text()}
        if self.tool_calls:
            out["tool_calls"] = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in self.tool_calls]
        return out


class ToolMessage(_Request):
    """A tool's result, answering an earlier assistant message's call."""

    role: Literal["tool"]
    content: _TEXT = Field(description="The result, as text or text parts.")
    tool_call_id: str = Field(min_length=1, max_length=256, description="The id of the call it answers (from an earlier tool_calls).")
    name: str | None = Field(None, max_length=64, description="Accepted and ignored.")

    def text(self) -> str:
        return _text_of(self.content)

    def to_dict(self) -> dict[str, Any]:
        return {"role": "tool", "content": self.text(), "tool_call_id": self.tool_call_id}


def _message_kind(v: Any) -> str:
    """Which model reads a message, by its role (any other value, even {}, goes to ChatMessage, which says what is wrong)."""
    role = v.get("role") if isinstance(v, dict) else getattr(v, "role", None)
    return "ToolMessage" if role == "tool" else "AssistantTurn" if role == "assistant" else "ChatMessage"


Message = Annotated[Annotated[ChatMessage, Tag("ChatMessage")] | Annotated[AssistantTurn, Tag("AssistantTurn")]
                    | Annotated[ToolMessage, Tag("ToolMessage")], Discriminator(_message_kind)]


class JsonSchemaFormat(_Request):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$", description="The format's name (letters, digits, _ and -).")
    description: str | None = Field(None, max_length=4096, description="What the format is for (accepted and ignored).")
    schema_: dict[str, Any] = Field(alias="schema", description="The JSON Schema the answer must follow. An object that lists `properties` takes no other keys unless its additionalProperties says so (as llama.cpp, vLLM and OpenAI's strict mode).")
    strict: bool | None = Field(None, description="Accepted; the schema is always enforced (every token is masked by it).")


class ResponseFormat(_Request):
    type: Literal["text", "json_object", "json_schema"] = Field(
        description="json_object: the answer is one valid JSON object; json_schema: one JSON value that follows `json_schema.schema`."
    )
    json_schema: JsonSchemaFormat | None = Field(None, description="With type json_schema: the schema.")

    @model_validator(mode="after")
    def _schema_with_its_type(self) -> "ResponseFormat":
        if (self.type == "json_schema") != (self.json_schema is not None):
            raise ValueError("json_schema is required with type json_schema, and only with it")
        return self

    def constraint(self):
        """The OutputConstraint the answer must follow, or None for text (raises InvalidRequestError for a bad schema)."""
        from edge_agent.services.constrained import OutputConstraint

        if self.type == "json_object":
            return OutputConstraint.json_object()
        if self.type == "json_schema":
            return OutputConstraint.json_schema(self.json_schema.schema_)
        return None


class ChatCompletionRequest(_Sampling, ChatToolFields, VllmChatFields, FunctionFields):
    messages: list[Message] = Field(min_length=1, description="The conversation so far, oldest first.")
    max_completion_tokens: Int(ge=1) | None = Field(None, description="Same as max_tokens (takes precedence).")
    logprobs: bool | None = Field(None, description="Return each answer token's log-probability in `choices[].logprobs.content` "
                                  "(streamed: in each chunk, for its tokens): the log-softmax of the model's raw logits of that step, "
                                  "before penalties, response_format, temperature and top-k/top-p/min-p (as vLLM's default).")
    top_logprobs: Int(ge=0, le=MAX_LOGPROBS) | None = Field(
        None, description=f"With logprobs true: also this many most likely tokens at each position (0..{MAX_LOGPROBS}).")
    modalities: Unsupported("this model answers in text only: send [\"text\"] or leave modalities out", ["text"]) = Field(
        None, description="Only [\"text\"].")
    prediction: dict[str, Any] | None = Field(None, description="Accepted and ignored (Predicted Outputs only shorten OpenAI's "
                                              "latency; the answer is the model's either way).")
    audio: Unsupported("this model answers in text only: leave `audio` out") = Field(None, description="Only null.")
    reasoning_effort: Unsupported("this model does not reason in separate steps: leave `reasoning_effort` out", "none") = Field(
        None, description="Only null or \"none\" (the model does not reason in separate steps).")
    verbosity: Unsupported("only 'medium' (the default) is taken: the length of the answer is not steered here", "medium") = Field(
        None, description="Only null or \"medium\".")
    web_search_options: Unsupported("web search is not available: the server is offline; for the private documents use `rag`") = Field(
        None, description="Not supported: only null or {}.")
    add_generation_prompt: Unsupported("the assistant's turn is always opened: send true or leave it out", True) = Field(
        None, description="vLLM's: only true (its default).")
    continue_final_message: Unsupported("an assistant message is not continued here: send false or leave it out", False) = Field(
        None, description="vLLM's: only false (its default).")
    echo: Unsupported("the conversation is not echoed on chat: send false or leave it out", False) = Field(
        None, description="vLLM's: only false (its default).")
    chat_template_kwargs: TemplateKwargs | None = Field(None, description=TEMPLATE_KWARGS)

    @model_validator(mode="after")
    def _tools_fit(self) -> "ChatCompletionRequest":
        check_tools(self)
        return self

    @field_validator("top_logprobs")
    @classmethod
    def _top_needs_logprobs(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v and not info.data.get("logprobs"):
            raise ValueError("top_logprobs needs logprobs: true (as OpenAI's): send both, or leave top_logprobs out")
        return v

    def logprob_count(self) -> int | None:
        """None, or how many alternatives each token's logprobs carry."""
        return (self.top_logprobs or 0) if self.logprobs else None

    @field_validator("messages")
    @classmethod
    def _max_messages(cls, v: list, info: ValidationInfo) -> list[ChatMessage]:
        return at_most_messages(v, info)


TokenIds = Annotated[list[Int(ge=0, le=2**31 - 1)], Field(min_length=1)]


class CompletionRequest(_Sampling, VllmCompletionFields):
    prompt: str | Annotated[list[str], Field(min_length=1, max_length=MAX_PROMPTS)] | TokenIds | Annotated[
        list[TokenIds], Field(min_length=1, max_length=MAX_PROMPTS)
    ] = Field(description="Text, several texts, token ids, or several lists of token ids; no chat formatting is applied.")
    max_tokens: Int(ge=0) | None = Field(16, description="Most tokens to generate (default 16, as OpenAI's); 0 only with echo "
                                                   "(the prompt is returned, with logprobs scored, and nothing generated).")
    echo: bool | None = Field(None, description="Put the prompt in front of each completion.")
    suffix: Unsupported("text after the insertion point (fill-in-the-middle) is not taken: leave `suffix` out", "") = Field(
        None, description="Not supported.")
    best_of: Unsupported("only 1 is accepted (n gives several choices)", 1) = Field(None, description="Only 1 is supported.")
    logprobs: Int(ge=0, le=MAX_LOGPROBS) | None = Field(
        None, description=f"Return `choices[].logprobs` (tokens, token_logprobs, top_logprobs, text_offset): each token's "
                          f"log-probability and this many most likely tokens' (0..{MAX_LOGPROBS}; the chosen token is added "
                          "to top_logprobs, so it holds up to N + 1), from the log-softmax of the model's raw logits (before "
                          "penalties, temperature and top-k/top-p/min-p, as vLLM's default). With echo, the prompt's tokens come "
                          "first (the first with null): scoring a prompt costs a decode step per token, in up to 8 segments side "
                          "by side (a 128-token prompt took ~11x its prefill).")

    def logprob_count(self) -> int | None:
        """None, or how many alternatives each token's logprobs carry."""
        return self.logprobs

    def prompts(self) -> list[str | list[int]]:
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if p and isinstance(p[0], int):
            return [list(p)]  # type: ignore[arg-type]
        return list(p)  # type: ignore[arg-type]


class EmbeddingRequest(_Request):
    model: str = Field("default", min_length=1, max_length=256, description="The embedding model id from GET /v1/models (or "
                       "\"default\"); left out: the embedding model, as vLLM and llama.cpp take it.")
    input: Annotated[str, Field(min_length=1)] | Annotated[
        list[Annotated[str, Field(min_length=1)]], Field(min_length=1, max_length=MAX_EMBED_INPUTS)
    ] = Field(description="Text or texts to embed; see `truncate` for text beyond the model's window.")
    encoding_format: Literal["float", "base64"] | None = Field(None, description="base64: little-endian float32.")
    user: str | None = Field(None, max_length=256)
    dimensions: Int(ge=1) | None = Field(None, description="Only the model's own dimension is accepted (it has no shortened form).")
    truncate: bool = Field(True, description="Extension (as Ollama and TEI): true embeds the first tokens of an input longer than "
                           "the model's window (usage.truncated_inputs counts them); false answers 400 instead.")

    @field_validator("input", mode="before")
    @classmethod
    def _text_not_token_ids(cls, v: Any) -> Any:
        if isinstance(v, list) and v and (isinstance(v[0], list) or (isinstance(v[0], int) and not isinstance(v[0], bool))):
            raise ValueError("token ids are not accepted, send the text itself: another tokenizer's ids mean nothing to this "
                             "embedding model (with LangChain's OpenAIEmbeddings, set check_embedding_ctx_length=False)")
        return v


from edge_agent.services.protocol_replies import (  # noqa: E402,F401 (re-exported: the routes, jobs and /openapi.json use protocol.X)
    FinishReason,
    ChatFinishReason,
    SourceLocation,
    Source,
    GroundingChoice,
    GroundingReport,
    Usage,
    PromptTokensDetails,
    AssistantMessage,
    TopLogprob,
    TokenLogprob,
    ChatLogprobs,
    ChatChoice,
    ChatCompletion,
    ChatDelta,
    ChatChunkChoice,
    ChatCompletionChunk,
    CompletionLogprobs,
    CompletionChoice,
    Completion,
    EmbeddingData,
    EmbeddingUsage,
    EmbeddingList,
    ModelCard,
    ModelList,
    ErrorDetail,
    ErrorResponse,
    Health,
    PartReadiness,
    Readiness,
    sources_of,
    grounding_of,
    legacy_finish,
)

_Sampling.model_rebuild()  # their annotations name reply models (above)
ChatCompletionRequest.model_rebuild()
CompletionRequest.model_rebuild()
