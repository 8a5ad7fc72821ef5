"""POST /tokenize and /detokenize: the chat model's tokens of a prompt or a conversation, as vLLM's and llama.cpp's
servers answer them, so a client can count what fits before it asks.

vLLM's shape: {"prompt": ...} or {"messages": [...]} in, {"count", "max_model_len", "tokens"} out; detokenize
{"tokens"} in, {"prompt"} out. llama.cpp's: {"content", "add_special", "with_pieces"} in, {"tokens"} out (with_pieces:
[{"id", "piece"}]), detokenize {"content"} out. Both spellings are taken and both answered. A text prompt is tokenized as
/v1/completions reads it (control-token markers count); messages as /v1/chat/completions formats them.
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from edge_agent.services.errors import InvalidRequestError
from edge_agent.services.protocol import TEMPLATE_KWARGS, Int, Message, TemplateKwargs, _Request, at_most_messages
from edge_agent.services.tools_protocol import check_contents

MAX_DETOKENIZE = 1_000_000


class TokenizeRequest(_Request):
    # exactly one input; the inputs and the two spellings of add_special_tokens are not nullable (left out, not null)
    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["prompt"]}, {"required": ["content"]}, {"required": ["messages"]}]})

    model: str | None = Field(None, min_length=1, max_length=256, description="The chat model's id, or \"default\" (may be left out).")
    prompt: str = Field(None, description="Text, tokenized as /v1/completions reads a prompt (vLLM's field).")
    content: str = Field(None, description="The same as prompt (llama.cpp's field).")
    messages: list[Message] = Field(None, min_length=1, description="A conversation, formatted as /v1/chat/completions "
                                           "formats it (with the assistant's turn opened, unless add_generation_prompt is false).")
    add_special_tokens: bool = Field(None, description="Add the tokenizer's BOS to a text prompt (default true for `prompt`, "
                                            "false for `content`, as vLLM and llama.cpp do).")
    add_special: bool = Field(None, description="The same as add_special_tokens (llama.cpp's field).")
    add_generation_prompt: bool = Field(True, description="With messages: open the assistant's turn at the end.")
    chat_template_kwargs: TemplateKwargs | None = Field(None, description="With messages: " + TEMPLATE_KWARGS)
    return_token_strs: bool = Field(False, description="Also return each token's text in `token_strs` (vLLM).")
    with_pieces: bool = Field(False, description="Return `tokens` as [{\"id\", \"piece\"}] (llama.cpp).")

    @model_validator(mode="after")
    def _one_input(self) -> "TokenizeRequest":
        given = [f for f in ("prompt", "content", "messages") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError("send exactly one of prompt, content or messages" + (f" (got {', '.join(given)})" if given else ""))
        if self.add_special_tokens is not None and self.add_special is not None and self.add_special_tokens != self.add_special:
            raise ValueError("add_special_tokens and add_special disagree: send one of them")
        return self

    @field_validator("messages")
    @classmethod
    def _max_messages(cls, v: list | None, info: ValidationInfo) -> list | None:
        return at_most_messages(v, info)

    def adds_bos(self) -> bool:
        chosen = self.add_special_tokens if self.add_special_tokens is not None else self.add_special
        return chosen if chosen is not None else self.prompt is not None


class DetokenizeRequest(_Request):
    model: str | None = Field(None, min_length=1, max_length=256, description="The chat model's id, or \"default\" (may be left out).")
    tokens: Annotated[list[Int(ge=0, le=2**31 - 1)], Field(max_length=MAX_DETOKENIZE)] = Field(description="Token ids of the chat model.")


class Piece(BaseModel):
    id: int
    piece: str


class TokenizeResponse(BaseModel):
    count: int = Field(description="How many tokens.")
    max_model_len: int = Field(description="The model's context length in tokens.")
    tokens: list[int] | list[Piece]
    token_strs: list[str] | None = None


class DetokenizeResponse(BaseModel):
    prompt: str = Field(description="The text of the tokens (vLLM's field).")
    content: str = Field(description="The same text (llama.cpp's field).")


def tokenize(chat: Any, req: TokenizeRequest, check: Any = None) -> TokenizeResponse:
    """The chat service's tokens of the request's prompt or messages. Raises InvalidRequestError (from the formatter)."""
    if req.messages is not None:
        check_contents(req.messages)
        ids = chat.formatter.format_chat([m.to_dict() for m in req.messages], generation_prompt=req.add_generation_prompt,
                                         template_kwargs=req.chat_template_kwargs).ids
    else:
        text = req.prompt if req.prompt is not None else req.content
        ids = chat.formatter.encoder.encode(text, {}, add_special=req.adds_bos())
    out = TokenizeResponse(count=len(ids), max_model_len=chat.context_length, tokens=ids)
    if req.return_token_strs or req.with_pieces:
        texts = [chat.engine.tokenizer.id_to_token(i) or "" for i in ids]
        pieces = [chat.engine.decode([i], skip_special_tokens=False) for i in ids]
        if req.return_token_strs:
            out.token_strs = texts
        if req.with_pieces:
            out.tokens = [Piece(id=i, piece=p) for i, p in zip(ids, pieces)]
    return out


def detokenize(chat: Any, req: DetokenizeRequest) -> DetokenizeResponse:
    """The text of the chat model's token ids (special tokens written out). Raises InvalidRequestError for an id outside the vocabulary."""
    bad = next((t for t in req.tokens if t >= chat.vocab_size), None)
    if bad is not None:
        raise InvalidRequestError(f"token id {bad} is outside this model's vocabulary (0..{chat.vocab_size - 1})", param="tokens")
    text = chat.engine.decode(req.tokens, skip_special_tokens=False)
    return DetokenizeResponse(prompt=text, content=text)
