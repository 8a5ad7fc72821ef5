"""Response models of the OpenAI-compatible API (pydantic v2): what the routes and batch-file lines answer with.

edge_agent.services.protocol (the request models) re-exports them, so callers keep using `protocol.X`.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, model_serializer

from edge_agent.services.tools_protocol import CalledFunction, ResponseToolCall, ToolCallDelta

FinishReason = Literal["stop", "length"]
ChatFinishReason = Literal["stop", "length", "tool_calls", "function_call"]  # a whole call (function_call: asked with `functions`)


class SourceLocation(BaseModel):
    page: int | None = Field(None, description="PDF page (1-based).")
    heading: str | None = Field(None, description="The Markdown / HTML / DOCX heading above the chunk.")
    ordinal: int = Field(description="The chunk's position in its document (0-based).")
    char_start: int
    char_end: int
    label: str = Field(description="Page and heading as text, e.g. \"p. 2, Warranty\" (may be empty).")


class Source(BaseModel):
    """A document chunk the answer was grounded in."""

    document_id: int
    chunk_id: int
    title: str
    location: SourceLocation
    score: float = Field(description="Retrieval score (in hybrid mode BM25 and dense scores, each normalised, summed); higher is better.")
    snippet: str = Field(description="Part of the chunk's text around the question's words.")
    number: int | None = Field(None, description="The passage's number in the prompt: the answer cites it as \"[n]\".")
    used: bool | None = Field(None, description="Whether the answer rests on this passage (cites it); null where it was not "
                                                "checked (a streamed answer of a chat model, a raw completion prompt).")


class GroundingChoice(BaseModel):
    index: int
    answer: Literal["model", "extractive", "declined"] = Field(
        description="model: the model's own words (checked against the passages when `check` is ok); extractive: the "
                    "best-matching sentence of the passages, quoted, because the model's answer failed the check; "
                    "declined: no passage covered the question (or none held what it asks for), the answer says so.")
    check: str = Field(description="ok, empty, echo (it only restated the question), off_kind (no figure where one was asked "
                                   "for), off_source, altered_figure (a figure not written as in the passage), wrong_language, "
                                   "no_passage, unknown_name (a name or figure of the question is in no passage) or no_answer "
                                   "(declined), or none (not checked: chat models and raw completion prompts).")


class GroundingReport(BaseModel):
    """With `rag`: how each choice's answer was made."""

    language: str = Field(description="The question's language (ISO 639-1): the prompt's scaffold and the decline text use it.")
    choices: list[GroundingChoice]


_SOURCES = "With `rag`: the chunks the answer was grounded in, best first; empty when none matched (then the answer is ungrounded)."
_CHUNK_SOURCES = "With `rag`: the sources, in the first chunk only (see the non-streamed response's `sources`)."
_FINGERPRINT = ("The model's files and this server's version, hashed (\"fp_...\"): the same fingerprint with the same seed gives "
                "the same answer; streamed: in every chunk, as OpenAI sends it.")
_GROUNDING = "With `rag`: which path made each answer (the model's words, an extractive quote, a decline). Extension."


class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(description="Prompt tokens whose keys and values came from the prefix cache.")


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = Field(
        None, description="The prompt tokens the prefix cache held (batch lines too).")

    @classmethod
    def of(cls, u) -> "Usage":
        """The usage of a Generation's TokenUsage, as the live routes and batch lines give it."""
        return cls(prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens, total_tokens=u.total_tokens,
                   prompt_tokens_details=PromptTokensDetails(cached_tokens=u.cached_tokens))


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None = Field(description="The answer; null when it is a tool call.")
    tool_calls: list[ResponseToolCall] | None = Field(None, description="With tools: the call, when the answer is one (left out otherwise).")
    function_call: CalledFunction | None = Field(None, description="With the deprecated `functions`: the call (left out otherwise).")

    @classmethod
    def of(cls, content: str | None, call: dict | None, legacy: bool = False) -> "AssistantMessage":
        """The message of an answer (services.tools.read_answer's content and call); legacy: a request with `functions`,
        whose call is given as function_call."""
        if call is None:
            return cls(content=content)
        called = CalledFunction(name=call["name"], arguments=call["arguments"])
        if legacy:
            return cls(content=content, function_call=called)
        return cls(content=content, tool_calls=[ResponseToolCall(id=call["id"], function=called)])

    @model_serializer(mode="wrap")
    def _no_empty_calls(self, handler):
        out = handler(self)
        for key in ("tool_calls", "function_call"):
            if out.get(key) is None:
                out.pop(key, None)
        return out


def legacy_finish(finish: str, legacy: bool) -> str:
    """A call's finish_reason as the request asked for it: "function_call" for one with the deprecated `functions`."""
    return "function_call" if legacy and finish == "tool_calls" else finish


class TopLogprob(BaseModel):
    token: str = Field(description="The token's text (U+FFFD where it is part of a character: see bytes).")
    logprob: float
    bytes: list[int] | None = Field(description="The token's UTF-8 bytes.")


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob] = Field(description="The top_logprobs most likely tokens at this position, best first.")


class ChatLogprobs(BaseModel):
    content: list[TokenLogprob] | None
    refusal: list[TokenLogprob] | None = None


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: ChatFinishReason
    logprobs: ChatLogprobs | None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    system_fingerprint: str | None = Field(None, description=_FINGERPRINT)
    choices: list[ChatChoice]
    usage: Usage
    sources: list[Source] | None = Field(None, description=_SOURCES)
    grounding: GroundingReport | None = Field(None, description=_GROUNDING)


class ChatDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = Field(None, description="With tools, when the answer is a call: first its id, type "
                                                                     "and name, then pieces of its arguments.")
    function_call: dict[str, str] | None = Field(None, description="With the deprecated `functions`: the call, first its name, then "
                                                                   "pieces of its arguments.")


class ChatChunkChoice(BaseModel):
    index: int
    delta: ChatDelta
    finish_reason: ChatFinishReason | None = None
    logprobs: ChatLogprobs | None = Field(None, description="With logprobs: this chunk's tokens.")


class ChatCompletionChunk(BaseModel):
    """One Server-Sent Event's data when stream is true."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    system_fingerprint: str | None = Field(None, description=_FINGERPRINT)
    choices: list[ChatChunkChoice]
    usage: Usage | None = None
    sources: list[Source] | None = Field(None, description=_CHUNK_SOURCES)
    grounding: GroundingReport | None = Field(None, description=_GROUNDING + " In the first chunk only.")


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float | None] = Field(
        description="null for the first token of an echoed token-id prompt (nothing precedes it; a text prompt's first "
                    "follows the BOS the server put in front, which is not listed).")
    top_logprobs: list[dict[str, float] | None] | None
    text_offset: list[int] = Field(description="Where each token's text starts in the choice's text (characters).")


class CompletionChoice(BaseModel):
    index: int
    text: str
    finish_reason: FinishReason | None = None
    logprobs: CompletionLogprobs | None = Field(None, description="With logprobs (streamed: this chunk's tokens).")


class Completion(BaseModel):
    """The response, and (with finish_reason null until the end) each streamed chunk."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    system_fingerprint: str | None = Field(None, description=_FINGERPRINT)
    choices: list[CompletionChoice]
    usage: Usage | None = None
    sources: list[Source] | None = Field(None, description=_SOURCES + " When streamed: in the first chunk only.")
    grounding: GroundingReport | None = Field(None, description=_GROUNDING + " When streamed: in the first chunk only.")


class EmbeddingData(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class EmbeddingUsage(BaseModel):
    prompt_tokens: int = Field(description="The inputs' tokens, all of them (also those past the window of a truncated input).")
    total_tokens: int
    truncated_inputs: int = Field(0, description="Extension: inputs cut to the model's window (truncate: true).")


class EmbeddingList(BaseModel):
    object: Literal["list"] = "list"
    data: list[EmbeddingData]
    model: str
    usage: EmbeddingUsage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "edge-agent"
    max_model_len: int | None = Field(None, description="The model's context (the embedding model's window) in tokens, as vLLM "
                                      "lists it: clients (Continue, config generators) size their prompts by it. Extension.")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class Health(BaseModel):
    status: Literal["ok", "failed"] = "ok"
    detail: str | None = None


class PartReadiness(BaseModel):
    state: Literal["ready", "degraded", "loading", "failed", "stopping", "disabled"]
    detail: str | None = None
    device: str | None = None
    fallback: str | None = None
    free_bytes: int | None = None  # the disk part: the least free space of the data and index disks


class Readiness(BaseModel):
    status: Literal["ready", "not_ready"]
    model: str | None = None
    queue_depth: int = 0
    active: int = 0
    parts: dict[str, PartReadiness] = {}
    waiting_for: list[str] = []


def sources_of(gen: Any) -> list[Source] | None:
    """A generation's sources as the API shows them (None when the request did not ask for rag)."""
    return None if gen.sources is None else [Source.model_validate(x.to_dict()) for x in gen.sources]


def grounding_of(gen: Any) -> GroundingReport | None:
    """A generation's grounding report as the API shows it (None when the request did not ask for rag)."""
    return None if gen.grounding is None else GroundingReport.model_validate(gen.grounding)
