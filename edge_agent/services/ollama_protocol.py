"""Ollama's REST API (/api/*): its request and reply models, and how a request maps onto the chat and embedding services.

Ollama's fields are read as Ollama documents them and refused (400, {"error": "..."}) where this server cannot honour
them: images, think true, suffix on a model without fill-in-the-middle tokens, a template that is
more than Ollama's legacy fields (services/generate_prompts.py), and sampling options we do not implement
(mirostat, typical_p, tfs_z) unless they are their no-op values. Options that only tune Ollama's runtime (threads, GPU
layers, mmap, batch; num_ctx too: the context is fixed, and Ollama caps a larger one at the model's own) are accepted and
ignored, as are keep_alive and num_keep (keep_alive 0 with nothing to answer is Ollama's unload request: answered
done_reason "unload" as Ollama answers it; the one model served stays loaded). Model names are matched
case-insensitively, as Ollama matches them. Unknown fields and options are ignored with a warning in the log, as Ollama
ignores them (services/lenient.py). Models live here, not in api/, as services.protocol's do (architecture: jobs may not import api).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from edge_agent.services.chat import SamplingOptions
from edge_agent.services.constrained import OutputConstraint
from edge_agent.services.errors import ContextLengthExceededError, InvalidRequestError, ServiceError
from edge_agent.services.generation import Generation
from edge_agent.services.lenient import LenientRequest
from edge_agent.services.model_size import human_number, parameter_count
from edge_agent.services.protocol import (
    INT64_MIN,
    MAX_EMBED_INPUTS,
    MAX_OLLAMA_STOP,
    MAX_TOOLS,
    UINT64_MAX,
    ChatTool,
    Float,
    Int,
    StopString,
    Unsupported,
    at_most_messages,
)
from edge_agent.engine.types import MAX_LOGPROBS, MAX_REPETITION_PENALTY, MAX_TEMPERATURE, MAX_TOP_K, MIN_REPETITION_PENALTY

log = logging.getLogger(__name__)

# The Ollama release whose API these routes follow: clients gate features on /api/version (Raycast's extension wants
# 0.6.4, Continue's setup 0.6.5; logprobs came in 0.12.11, tool call ids in 0.12.10), so it is the release of the newest
# feature served here.
API_VERSION = "0.12.11"
LATEST = ":latest"
_GO_DURATION = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+")  # Go's time.ParseDuration
EPOCH = "1970-01-01T00:00:00Z"  # a model's modified_at when its bundle does not say
TEXT_ONLY = "this model reads text only: leave `images` out"
STOP_CHARS = 1024  # options.stop's total length: the OpenAI routes' 4 strings of 256


class OllamaModelNotFound(ServiceError):
    """A model name this server does not serve (404, Ollama's wording)."""

    status = 404
    code = "model_not_found"

    def __init__(self, name: str):
        super().__init__(f"model {name!r} not found", param="model")


class OllamaOptions(LenientRequest):
    """Ollama's `options`: the sampling ones map to ours; runtime tuning is accepted and ignored; null is as left out."""

    temperature: Float | None = Field(None, ge=0, le=MAX_TEMPERATURE)
    top_k: Int(ge=0, le=MAX_TOP_K) | None = Field(None, description="0 = off.")
    top_p: Float | None = Field(None, ge=0, le=1)
    min_p: Float | None = Field(None, ge=0, le=1)
    seed: Int(ge=INT64_MIN, le=UINT64_MAX) | None = None
    num_predict: Int(ge=-2) | None = Field(None, description="Most tokens to generate; 0, -1 or -2: up to the server's max_tokens_limit "
                                           "(and the room left in the context); left out: the server's default_max_tokens.")
    stop: Annotated[list[StopString], Field(max_length=MAX_OLLAMA_STOP)] | None = Field(
        None, description=f"Up to {MAX_OLLAMA_STOP} strings of {STOP_CHARS} characters in all; the answer ends before any of them.")
    repeat_penalty: Float | None = Field(None, ge=MIN_REPETITION_PENALTY, le=MAX_REPETITION_PENALTY)
    presence_penalty: Float | None = Field(None, ge=-2, le=2)
    frequency_penalty: Float | None = Field(None, ge=-2, le=2)
    num_ctx: Int(ge=1) | None = Field(None, description="Accepted and ignored: the model's context length is fixed (Ollama caps a "
                                      "num_ctx above the model's trained context the same way).")
    # accepted and ignored: they tune Ollama's runtime or are the defaults of what we do
    num_keep: Int(ge=-1) | None = None
    repeat_last_n: Int(ge=-1) | None = None
    num_batch: Int(ge=1) | None = None
    num_gpu: Int(ge=-1) | None = None
    main_gpu: Int(ge=0) | None = None
    num_thread: Int(ge=0) | None = None
    numa: bool | None = None
    low_vram: bool | None = None
    use_mmap: bool | None = None
    use_mlock: bool | None = None
    penalize_newline: bool | None = None
    f16_kv: bool | None = None
    logits_all: bool | None = None
    vocab_only: bool | None = None
    embedding_only: bool | None = None
    rope_frequency_base: Float | None = None  # older Ollama versions' RoPE overrides (Open WebUI still offers them)
    rope_frequency_scale: Float | None = None
    mirostat_tau: Float | None = Field(None, description="Ignored: mirostat is off.")
    mirostat_eta: Float | None = Field(None, description="Ignored: mirostat is off.")
    # sampling methods we do not have: only their no-op values
    mirostat: Unsupported("mirostat sampling is not implemented: send 0 or leave it out", 0, 0.0) = Field(None, description="Only 0 (off).")
    typical_p: Unsupported("typical sampling is not implemented: send 1 or leave it out", 1, 1.0) = Field(None, description="Only 1 (off).")
    tfs_z: Unsupported("tail-free sampling is not implemented: send 1 or leave it out", 1, 1.0) = Field(None, description="Only 1 (off).")

    @field_validator("stop")
    @classmethod
    def _stop_chars(cls, v: list[str] | None) -> list[str] | None:
        """Every generated token is checked against each stop string's prefixes: the total length bounds that work (as
        OpenAI's 4 strings of 256 do on the OpenAI routes)."""
        if v and sum(map(len, v)) > STOP_CHARS:
            raise ValueError(f"the stop strings may hold {STOP_CHARS} characters in all")
        return v


class _OllamaRequest(LenientRequest):
    model: str = Field(min_length=1, max_length=256, description="The model's name (with or without \":latest\"), or \"default\".")
    keep_alive: Annotated[str, Field(max_length=32)] | Float | None = Field(
        None, description="Accepted and ignored: the model stays loaded. 0 with an empty prompt or conversation (Ollama's unload "
                          "request) is answered done_reason \"unload\", as Ollama answers it.")

    def keeps_alive_zero(self) -> bool:
        """Whether keep_alive reads as a zero duration as Ollama reads it: a number of seconds (negative = forever),
        or a Go duration string ("0", "0s", "0m", ...)."""
        v = self.keep_alive
        if isinstance(v, str):
            return v.lstrip("+-") == "0" or (_GO_DURATION.fullmatch(v) is not None and not any(c in "123456789" for c in v))
        return v is not None and 0 <= v * 1e9 < 1  # Go: time.Duration(seconds * 1e9), truncated


class _Generating(_OllamaRequest):
    stream: bool = Field(True, description="NDJSON lines (application/x-ndjson), the last with done true; false: one JSON object.")
    format: Literal["", "json"] | dict[str, Any] | None = Field(
        None, description="\"json\": the answer is one JSON object; a JSON schema: one JSON value that follows it (grammar-constrained).")
    options: OllamaOptions | None = None
    think: Unsupported("this model does not think aloud: send think false or leave it out", False) = Field(
        None, description="Only false: this model does not think aloud.")
    logprobs: bool | None = Field(None, description="Each answer token's log-probability in `logprobs` (a streamed line: its tokens'), "
                                  "the log-softmax of the model's raw logits as on /v1/chat/completions.")
    top_logprobs: Int(ge=0, le=MAX_LOGPROBS) | None = Field(
        None, description=f"With logprobs true: also this many most likely tokens at each position (0..{MAX_LOGPROBS}).")

    @field_validator("top_logprobs")
    @classmethod
    def _top_needs_logprobs(cls, v: int | None, info) -> int | None:
        if v and not info.data.get("logprobs"):
            raise ValueError("top_logprobs needs logprobs: true: send both, or leave top_logprobs out")
        return v

    def sampling(self, chat) -> SamplingOptions:
        """The SamplingOptions of `options` for the ChatService chat."""
        o = self.options or OllamaOptions()
        # Ollama's runner limits only num_predict > 0 and never refuses one: it stops where the context is full
        fill = o.num_predict is not None and (o.num_predict <= 0 or o.num_predict > chat.max_tokens_limit)
        return SamplingOptions(max_tokens=None if fill else o.num_predict, temperature=o.temperature, top_p=o.top_p,
                               top_k=o.top_k, min_p=o.min_p, repetition_penalty=o.repeat_penalty, seed=o.seed, stop=list(o.stop or []),
                               presence_penalty=o.presence_penalty or 0.0, frequency_penalty=o.frequency_penalty or 0.0, fill=fill, to_room=True,
                               logprobs=(self.top_logprobs or 0) if self.logprobs else None)

    def constraint(self) -> OutputConstraint | None:
        """The OutputConstraint of `format`, or None (raises InvalidRequestError for a bad schema)."""
        if not self.format:
            return None
        if self.format == "json":
            return OutputConstraint.json_object()
        try:
            return OutputConstraint.json_schema(self.format)
        except InvalidRequestError as e:
            e.param = "format"
            raise

    def asks_nothing(self) -> bool:
        """An empty conversation or prompt: Ollama's way to load a model (answered with done_reason "load"), or with
        keep_alive 0 to unload it ("unload")."""
        raise NotImplementedError

    def done_reason_of_nothing(self) -> str:
        """The done_reason Ollama answers a request that asks nothing: "unload" with keep_alive 0, else "load"."""
        return "unload" if self.keeps_alive_zero() else "load"

    def start(self, chat) -> Generation:
        """Start the answer on the ChatService chat (raises as ChatService.chat and complete do)."""
        raise NotImplementedError


class OllamaCalledFunction(LenientRequest):
    name: str = Field(min_length=1, max_length=64)
    arguments: dict[str, Any] = Field(default_factory=dict, description="The call's arguments, an object (not JSON text).")
    index: Int(ge=0) | None = Field(None, description="Accepted and ignored.")


class OllamaToolCall(LenientRequest):
    id: str | None = Field(None, min_length=1, max_length=256, description="The call's id (Ollama 0.12.10); its result's tool_call_id.")
    type: Literal["function"] | None = None
    function: OllamaCalledFunction


class OllamaMessage(LenientRequest):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    images: Unsupported(TEXT_ONLY) = Field(None, description="Not supported (this model reads text): only null or [].")
    thinking: Unsupported("this model does not think aloud: leave `thinking` out", "") = Field(None, description="Only null or \"\".")
    tool_calls: Annotated[list[OllamaToolCall], Field(max_length=MAX_TOOLS)] | None = Field(
        None, description="An assistant message's calls (their results follow as `tool` messages).")
    tool_name: str | None = Field(None, max_length=64, description="A tool message's function (the call it answers).")
    tool_call_id: str | None = Field(None, max_length=256, description="A tool message's call id, when the call had one.")


def service_messages(messages: list[OllamaMessage]) -> list[dict[str, Any]]:
    """The conversation as ChatService.chat takes it: an assistant's calls with ids (made up where a client left them
    out) and their arguments as JSON text, a tool result with its call's id or its function's name."""
    out: list[dict[str, Any]] = []
    for k, m in enumerate(messages):
        d: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            d["tool_calls"] = [{"id": c.id or f"call_{k}_{i}", "name": c.function.name,
                                "arguments": json.dumps(c.function.arguments, ensure_ascii=False)} for i, c in enumerate(m.tool_calls)]
        if m.role == "tool":
            d["tool_call_id"], d["name"] = m.tool_call_id or "", m.tool_name or ""
        out.append(d)
    return out


class OllamaChatRequest(_Generating):
    messages: list[OllamaMessage] = Field(default_factory=list, description="The conversation, oldest first; none: load the model "
                                          "(done_reason \"load\").")
    tools: Annotated[list[ChatTool], Field(max_length=MAX_TOOLS)] | None = Field(
        None, description="Functions the model may call: it answers either in words or with one call (message.tool_calls, the "
                          "arguments an object), which a grammar keeps to the function's parameters schema; not with format.")

    @field_validator("messages")
    @classmethod
    def _max_messages(cls, v: list, info) -> list:
        return at_most_messages(v, info)

    def asks_nothing(self) -> bool:
        return not self.messages

    def tool_list(self) -> list:
        from edge_agent.services.tools import Tool

        return [Tool(t.function.name, t.function.description or "", t.function.parameters) for t in self.tools or ()]

    def start(self, chat) -> Generation:
        """Start the answer; tools with format are refused (this route's reader, api/ollama._with_calls, tells a call from
        words by its first character, which a JSON answer shares). A conversation too long for the context loses its oldest
        messages until it fits, as Ollama's chat truncates its history: the system messages and the last message always
        stay (a last message that cannot fit alone is the 400 it was); a tool result whose call was dropped goes too."""
        tools = self.tool_list()
        if tools and self.format:
            raise InvalidRequestError("tools cannot be combined with a response format (format): leave one of them out", param="tools")
        messages = service_messages(self.messages)

        def attempt(dropped: int) -> Generation:
            return chat.chat(without_oldest(messages, dropped), self.sampling(chat), constraint=self.constraint(),
                             tools=tools or None, may_call=bool(tools), model=our_name(self.model, chat.names))

        try:
            return attempt(0)
        except ContextLengthExceededError as too_long:
            most = sum(m["role"] != "system" for m in messages) - 1  # the last message always stays
            lo, hi = 1, most  # the fewest dropped whose bare transcript leaves room (tools and a format add to it: tried on)
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if _fits(chat, without_oldest(messages, mid), self.sampling(chat)) else (mid + 1, hi)
            for dropped in range(lo, most + 1):
                try:
                    gen = attempt(dropped)
                except ContextLengthExceededError:
                    continue
                log.info("ollama chat: the %d oldest messages were dropped to fit the %d-token context", dropped, chat.context_length)
                return gen
            raise too_long


def _fits(chat, messages: list[dict[str, Any]], options: SamplingOptions) -> bool:
    """Whether messages, formatted for chat's model without tools or a format, leave the answer its num_predict (without
    one, or with one that fills the context: a quarter of the context, up to the default answer length). Ollama shifts
    its context to go on past it; here the answer stops where the context is full, so the history gives way first."""
    room = options.max_tokens or max(1, min(chat.default_max_tokens, chat.context_length // 4))
    try:
        return len(chat.formatter.format_chat(messages, check=chat.length_check(options)).ids) + room <= chat.context_length
    except ContextLengthExceededError:
        return False


def without_oldest(messages: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """messages without the n oldest that are not system messages, and without the tool results that would then come
    first (the calls they answer went with them)."""
    kept, seen = [], 0
    for i, m in enumerate(messages):
        if m["role"] != "system" and i < len(messages) - 1:  # the last message always stays
            seen += 1
            if seen <= n or (m["role"] == "tool" and all(k["role"] == "system" for k in kept)):
                continue
        kept.append(m)
    return kept


class OllamaGenerateRequest(_Generating):
    prompt: str = Field("", description="The prompt; empty: load the model (done_reason \"load\").")
    system: str | None = Field(None, description="A system message before the prompt (not with raw).")
    raw: bool = Field(False, description="Send the prompt as it is, with no chat formatting (not with template, system or context).")
    suffix: str | None = Field(None, description="Text after the insertion point: the answer fills the gap between prompt and suffix, "
                               "in the model's fill-in-the-middle format (a model without one: 400 \"does not support insert\", "
                               "as Ollama answers) or in `template`'s.")
    template: str | None = Field(None, description="A Go template in place of the model's chat format, as Ollama's legacy ones: "
                                 "{{ .System }}, {{ .Prompt }}, {{ .Suffix }}, {{ .Response }} (the answer starts there) and "
                                 "{{ if }}/{{ else }}/{{ end }} around them; its markers are control tokens, the values text.")
    context: Annotated[list[Int(ge=0, le=2**31 - 1)], Field(max_length=1 << 20)] | None = Field(
        None, description="The `context` a previous answer returned (deprecated by Ollama): the conversation continues after it.")
    images: Unsupported(TEXT_ONLY) = Field(None, description="Not supported: only null or [].")

    def asks_nothing(self) -> bool:
        return not self.prompt

    def start(self, chat) -> Generation:
        """raw: the prompt as /v1/completions takes it; else the system message (if any) and the prompt as a chat turn, in
        the fill-in-the-middle format (suffix) or the client's template, after the context's ids. The Generation's
        prompt_ids are set unless raw (the final line's `context` starts with them). A documents alias answers from the
        documents as /api/chat does: the prompt (and system) as a chat turn, or raw as /v1/completions grounds it, with no
        `context` (a grounded prompt is the server's, not one to continue). Raises as ChatService.complete does, and
        InvalidRequestError for raw with template, system or context, for suffix on a model that cannot insert, and for
        template, suffix or context with a documents alias."""
        from edge_agent.services import generate_prompts as g

        if self.raw and (self.template or self.system or self.context):
            raise InvalidRequestError("raw mode does not support template, system, or context (as Ollama's): put them in the prompt",
                                      param="template" if self.template else "system" if self.system else "context")
        options, constraint = self.sampling(chat), self.constraint()
        name = our_name(self.model, chat.names)
        if self.suffix and not self.template and g.fill_tokens(chat.formatter) is None:
            raise InvalidRequestError(f"{self.model} does not support insert: it has no fill-in-the-middle tokens; leave `suffix` "
                                      "out, or send a `template` with your own format", param="suffix")
        if self.raw:  # Ollama sends a raw prompt as it is, a suffix unused
            return chat.complete([self.prompt], options, constraint=constraint, model=name)
        if chat.grounded_by(name, None)[0] is not None:
            return self._grounded(chat, options, constraint, name)
        if self.template:
            values = {"Prompt": self.prompt, "Suffix": self.suffix or ""} if self.suffix else \
                {"System": self.system or "", "Prompt": self.prompt}
            prompt = g.template_prompt(chat.formatter, self.template, values)
        elif self.suffix:
            prompt = g.fill_prompt(chat.formatter, self.prompt, self.suffix)
        else:
            messages = [*([{"role": "system", "content": self.system}] if self.system else []), {"role": "user", "content": self.prompt}]
            prompt = chat.formatter.format_chat(messages, instruction=constraint.instruction if constraint is not None else "",
                                                check=chat.length_check(options))
            options.stop = list(dict.fromkeys([*options.stop, *prompt.stop]))
        ids = g.continued(chat.formatter, self.context or [], prompt.ids, chat.vocab_size)
        gen = chat.complete([ids], options, constraint=constraint, model=name)  # not an alias of the documents here
        gen.prompt_ids = ids
        return gen

    def _grounded(self, chat, options: SamplingOptions, constraint: OutputConstraint | None, name: str) -> Generation:
        """A documents alias's answer: system and prompt as one chat turn, grounded (ChatService.chat with model=name);
        the fields that shape a prompt of token ids (template, suffix, context) are refused, as a grounded prompt is built
        by the server."""
        field = "template" if self.template else "suffix" if self.suffix else "context" if self.context else None
        if field is not None:
            raise InvalidRequestError(f"{self.model} answers from the documents, with a prompt the server builds: `{field}` cannot "
                                      f"be combined with it; leave `{field}` out (use /api/chat for a conversation), or name the "
                                      f"model {chat.model_name!r}", param=field)
        messages = [*([{"role": "system", "content": self.system}] if self.system else []), {"role": "user", "content": self.prompt}]
        return chat.chat(messages, options, constraint=constraint, model=name)


class OllamaEmbedRequest(_OllamaRequest):
    input: str | Annotated[list[Annotated[str, Field(min_length=1)]], Field(max_length=MAX_EMBED_INPUTS)] = Field(
        "", description="Text or texts to embed; \"\", [] or left out: Ollama's request to load the model (no embeddings).")
    truncate: bool = Field(True, description="false: an input longer than the model's window is a 400 instead of cut.")
    dimensions: Int(ge=1) | None = Field(None, description="Only the model's own dimension.")
    options: OllamaOptions | None = Field(None, description="Accepted and ignored.")


class OllamaEmbeddingsRequest(_OllamaRequest):
    prompt: str = Field("", description="The text to embed; \"\" or left out: Ollama's request to load the model (no embedding).")
    options: OllamaOptions | None = Field(None, description="Accepted and ignored.")


class OllamaShowRequest(LenientRequest):
    model: str = Field(None, min_length=1, max_length=256)
    name: str = Field(None, min_length=1, max_length=256, description="The same as model (older clients).")
    verbose: bool | None = None

    def named(self) -> str:
        if self.model is None and self.name is None:
            raise InvalidRequestError("send the model's name in `model`", param="model")
        return self.model or self.name


# --- replies -----------------------------------------------------------------------
class OllamaDetails(BaseModel):
    parent_model: str = ""
    format: str
    family: str
    families: list[str]
    parameter_size: str
    quantization_level: str


class OllamaModel(BaseModel):
    name: str
    model: str
    modified_at: str
    size: int
    digest: str
    details: OllamaDetails


class OllamaTags(BaseModel):
    models: list[OllamaModel]


class OllamaRunning(OllamaModel):
    expires_at: str = Field(description="Far in the future: models are never unloaded.")
    size_vram: int = 0
    context_length: int


class OllamaPs(BaseModel):
    models: list[OllamaRunning]


class OllamaShow(BaseModel):
    modelfile: str = ""
    parameters: str
    template: str
    details: OllamaDetails
    model_info: dict[str, Any]
    capabilities: list[str]
    modified_at: str


class OllamaVersion(BaseModel):
    version: str


class OllamaTokenLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class OllamaLogprob(OllamaTokenLogprob):
    top_logprobs: list[OllamaTokenLogprob] | None = Field(None, description="Left out when none were asked for.")


def ollama_logprobs(content: list[dict]) -> list[OllamaLogprob]:
    """Ollama's logprobs of chat's `logprobs.content` entries (services.logprobs.chat_content): the same fields, an empty
    top_logprobs left out (Ollama's omitempty)."""
    return [OllamaLogprob(**{**e, "top_logprobs": e["top_logprobs"] or None}) for e in content]


class OllamaReply(BaseModel):
    """One NDJSON line or the whole answer; the timing fields only with done true (nanoseconds)."""

    model_config = ConfigDict(json_schema_extra={"description": "The timing and count fields come with done true."})

    model: str
    created_at: str
    done: bool
    done_reason: Literal["stop", "length", "load", "unload"] | None = None
    total_duration: int | None = None
    load_duration: int | None = None
    prompt_eval_count: int | None = None
    prompt_eval_duration: int | None = None
    eval_count: int | None = None
    eval_duration: int | None = None
    logprobs: list[OllamaLogprob] | None = Field(None, description="With logprobs true: the tokens of this line's text (all of "
                                                  "them when not streamed).")


class OllamaCalled(BaseModel):
    index: int = 0
    name: str
    arguments: Any


class OllamaResponseToolCall(BaseModel):
    id: str
    function: OllamaCalled


class OllamaChatMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    tool_calls: list[OllamaResponseToolCall] | None = Field(None, description="With tools: the call the model chose to make.")


class OllamaChatResponse(OllamaReply):
    message: OllamaChatMessage


class OllamaGenerateResponse(OllamaReply):
    response: str
    context: list[int] | None = Field(None, description="With done true (not raw): the prompt's and the answer's token ids; send them "
                                      "back as `context` to continue the conversation.")


class OllamaEmbedResponse(BaseModel):
    model: str
    embeddings: list[list[float]]
    total_duration: int = 0
    load_duration: int = 0
    prompt_eval_count: int = 0


class OllamaEmbeddingsResponse(BaseModel):
    embedding: list[float]


class OllamaError(BaseModel):
    error: str


REQUESTS = (OllamaChatRequest, OllamaGenerateRequest, OllamaEmbedRequest, OllamaEmbeddingsRequest, OllamaShowRequest)
REPLIES = (OllamaChatResponse, OllamaGenerateResponse, OllamaEmbedResponse, OllamaEmbeddingsResponse, OllamaTags, OllamaPs,
           OllamaShow, OllamaVersion, OllamaError)


# --- the models served ---------------------------------------------------------------
def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat().replace("+00:00", "Z")


def our_name(name: str, ours: tuple[str, ...]) -> str:
    """The one of our names (ours: a model's id and aliases) a client's name means (served), else name as sent
    ("default", or a name the route refused already): "Documents:latest" is the alias "documents"."""
    bare = name.lower().removesuffix(LATEST)
    return next((n for n in ours if n.lower() == bare), name)


def served(name: str, *ours: str) -> bool:
    """Whether a client's model name means one of ours (a model's names: its id and aliases) or "default", with or
    without ":latest", in any case (Ollama compares names with strings.EqualFold)."""
    bare = name.lower().removesuffix(LATEST)
    return bool(ours) and (bare == "default" or bare in (n.lower() for n in ours))


def chat_model(chat) -> tuple[OllamaModel, dict[str, Any]]:
    """The chat model's listing and its model_info (architecture, context length, vocabulary)."""
    b = chat.engine.bundle
    m = b.manifest
    arch = b.architecture.get("arch", "unknown")
    files = m.get("files", {})
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    count = parameter_count(b.architecture)
    details = OllamaDetails(format="onnx", family=arch, families=[arch], parameter_size=human_number(count) if count else "",
                            quantization_level=str((m.get("quantization") or {}).get("scheme") or ""))
    card = OllamaModel(name=chat.model_name + LATEST, model=chat.model_name + LATEST, modified_at=str(m.get("created") or EPOCH),
                       size=sum(int(f.get("bytes", 0)) for f in files.values()), digest=digest, details=details)
    info = {"general.architecture": arch, **({"general.parameter_count": count} if count else {}),
            f"{arch}.context_length": chat.context_length, f"{arch}.vocab_size": chat.vocab_size}
    for key, name in (("hidden_size", "embedding_length"), ("num_layers", "block_count"), ("num_heads", "attention.head_count"),
                      ("num_kv_heads", "attention.head_count_kv"), ("intermediate_size", "feed_forward_length")):
        if key in b.architecture:  # named as Ollama names them (the GGUF keys), which memory estimators read
            info[f"{arch}.{name}"] = b.architecture[key]
    return card, info


def chat_capabilities(chat) -> list[str]:
    """What /api/show says the chat model can do, in Ollama's words: "completion", "insert" with fill-in-the-middle
    tokens, and "tools" (a grammar keeps any model's calls to their schema)."""
    from edge_agent.services.generate_prompts import fill_tokens

    return ["completion", *(["insert"] if fill_tokens(chat.formatter) else []), "tools"]


def embedding_model(facts: dict[str, Any] | None) -> tuple[OllamaModel, dict[str, Any]] | None:
    """The embedding model's listing and model_info, from EmbeddingService.facts() (None: none loaded)."""
    if facts is None:
        return None
    name, dim, window = facts["name"], facts["dim"], facts["window"]
    details = OllamaDetails(format="onnx", family="bert", families=["bert"], parameter_size="", quantization_level="")
    modified = dt.datetime.fromtimestamp(facts["modified"], dt.timezone.utc).isoformat().replace("+00:00", "Z")
    card = OllamaModel(name=name + LATEST, model=name + LATEST, modified_at=modified, size=0,
                       digest=hashlib.sha256(name.encode()).hexdigest(), details=details)
    return card, {"general.architecture": "bert", "bert.embedding_length": dim, "bert.context_length": window}


def template_of(formatter) -> str:
    """/api/show's template: the bundle's chat template, or a base model's transcript frame in Ollama's Go-template
    words (an empty template would tell a client the prompt goes as it is, which only raw true does)."""
    if formatter.prompt_format.get("template"):
        return str(formatter.prompt_format["template"])
    lab = formatter.labels
    return (f"{{{{ if .System }}}}{{{{ .System }}}}{lab['system_separator']}{{{{ end }}}}"
            f"{lab['user']}{{{{ .Prompt }}}}{lab['separator']}{lab['assistant']}")


def parameters(defaults: dict[str, Any]) -> str:
    """The bundle's sampling defaults as a Modelfile's PARAMETER lines ("temperature 0.8")."""
    return "\n".join(f"{k} {v}" for k, v in sorted(defaults.items()) if isinstance(v, (int, float, str)))
