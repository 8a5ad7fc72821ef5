"""Fields of other servers' requests that this server does not implement, and vLLM's that its clients send.

Unsupported(why, *no_ops) makes a field that is taken (and ignored) when it changes nothing: null, empty, or one of its
no-op values; any other value is a 400 that says why. vLLM's OpenAI server takes more fields than OpenAI's (its
SamplingParams, the prompt's handling, its cache), and clients written for it send them at their defaults
(use_beam_search false, length_penalty 1, add_special_tokens, request_id ...): they were a 400 "unknown field" here.
Mixed into the request models of services.protocol; a field that would change the answer is refused, not ignored.
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field


def _no_op_only(why: str, *no_ops: Any) -> Any:
    """A validator for a field this server does not implement: values that change nothing pass as None, others say why."""
    def check(v: Any) -> Any:
        if v is None or v == [] or v == {} or any(v == x and type(v) is type(x) for x in no_ops):
            return None
        raise ValueError(f"not supported: {why}")
    return BeforeValidator(check)


def Unsupported(why: str, *no_ops: Any) -> Any:
    """A field that is refused with `why` unless it is null, empty or one of no_ops (which are ignored)."""
    return Annotated[Any, _no_op_only(why, *no_ops)]


_ONLY_NULL = "Only null (vLLM's default)."


class VllmSamplingFields(BaseModel):
    """vLLM's fields of chat and completions, taken at the values that change nothing."""

    use_beam_search: Unsupported("beam search is not implemented: send false or leave it out", False) = Field(
        None, description="vLLM's: only false (its default).")
    length_penalty: Unsupported("length_penalty applies to beam search, which is not implemented: send 1 or leave it out", 1, 1.0) = Field(
        None, description="vLLM's: only 1 (its default).")
    truncate_prompt_tokens: Unsupported("a prompt is never cut here (one too long is a 400): leave truncate_prompt_tokens out") = Field(
        None, description=_ONLY_NULL)
    prompt_logprobs: Unsupported("the prompt is scored by /v1/completions with echo and logprobs: leave prompt_logprobs out") = Field(
        None, description=_ONLY_NULL)
    allowed_token_ids: Unsupported("the vocabulary is not restricted here: leave allowed_token_ids out (logit_bias moves tokens)") = Field(
        None, description="vLLM's: only null or [].")
    bad_words: Unsupported("words are not banned here: leave bad_words out (logit_bias -100 bans a token)") = Field(
        None, description="vLLM's: only null or [].")
    guided_grammar: Unsupported("grammars are not taken: use guided_json, guided_regex or guided_choice") = Field(
        None, description=_ONLY_NULL)
    logits_processors: Unsupported("custom logits processors are not loaded here: leave logits_processors out") = Field(
        None, description="vLLM's: only null or [].")
    return_tokens_as_token_ids: Unsupported("logprobs name tokens by their text here: send false or leave it out", False) = Field(
        None, description="vLLM's: only false (its default).")
    return_token_ids: Unsupported("token ids are not returned: send false or leave it out (POST /tokenize gives them)", False) = Field(
        None, description="vLLM's: only false (its default).")
    cache_salt: Unsupported("the prefix cache is shared by all requests here and cannot be salted: leave cache_salt out") = Field(
        None, description=_ONLY_NULL)
    kv_transfer_params: Unsupported("disaggregated serving is not available: leave kv_transfer_params out") = Field(
        None, description="vLLM's: only null or {}.")
    vllm_xargs: Unsupported("vLLM's extra arguments are not taken: leave vllm_xargs out") = Field(
        None, description="vLLM's: only null or {}.")
    request_id: str | None = Field(None, max_length=256, description="vLLM's: accepted and ignored (the answer's id is the server's; "
                                   "send X-Request-Id to have a request id echoed).")


class VllmChatFields(BaseModel):
    """vLLM's fields of chat only."""

    add_special_tokens: Unsupported("the chat template places the special tokens: send false or leave it out", False) = Field(
        None, description="vLLM's: only false (its default on chat).")
    chat_template: Unsupported("the model's own chat template is used: leave chat_template out") = Field(None, description=_ONLY_NULL)
    documents: Unsupported("documents are not passed to the template: use `rag` to answer from the private documents") = Field(
        None, description="vLLM's: only null or []; see rag.")
    mm_processor_kwargs: Unsupported("this model reads text only: leave mm_processor_kwargs out") = Field(
        None, description="vLLM's: only null or {}.")


class VllmCompletionFields(BaseModel):
    """vLLM's fields of completions only."""

    add_special_tokens: Unsupported("a text prompt always gets the model's BOS in front: send true or leave it out", True) = Field(
        None, description="vLLM's: only true (its default on completions).")
