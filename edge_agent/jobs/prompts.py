"""Prompt texts of the job kinds, in one place; PROMPT_VERSION changes whenever one of them does.

Two styles: a base (pretrained) model continues text, so it gets a completion-style frame that
ends where the answer begins (Gemma 3 270M base wrote a correct one-sentence summary after
"Article: ...\\n\\nOne-sentence summary:" and echoed chat-style instructions instead, see
MODEL-NOTES.md); an instruction-tuned bundle (one with a chat template) gets a user message.
"""
from __future__ import annotations

PROMPT_VERSION = "summarize-2"

# completion style (base models): {text} is the document or section; the answer stops at a newline
SUMMARY_COMPLETION = "Article: {text}\n\nOne-sentence summary:"
# reduce step: the parts' summaries in order, as one article
REDUCE_COMPLETION = "Article: {text}\n\nOne-sentence summary:"
COMPLETION_STOP = ["\n"]
# Gemma 3 270M base begins many summaries (36 of 64 standard-library docstrings) with a blank line
# (the one token "\n\n", then "* " or "1. " and the sentence), which the newline stop would end empty:
# the stops count only after this many tokens (vLLM's min_tokens), so one generation gives the sentence
MIN_TOKENS = 1
# an answer still empty once cleaned (1 of those 64: a line of dashes, which clean_summary strips) is
# asked once more with this after the frame; the model then begins with "* " or "1. " and a sentence
COMPLETION_RETRY = "\n\n"

# chat style (instruction-tuned bundles)
SUMMARY_CHAT = (
    "Summarize the following document in one or two sentences. Answer with the summary only.\n\n{text}"
)
REDUCE_CHAT = (
    "The following are summaries of consecutive parts of one document. Write one summary of the whole "
    "document in two or three sentences. Answer with the summary only.\n\n{text}"
)


def summary_prompt(kind: str, text: str, reduce: bool = False) -> str | list[dict[str, str]]:
    """The prompt for a document or section (reduce: for the joined summaries of its parts).

    kind is the chat service's prompt_kind: "completion" gives a text prompt, "chat" messages.
    """
    if kind == "chat":
        return [{"role": "user", "content": (REDUCE_CHAT if reduce else SUMMARY_CHAT).format(text=text)}]
    return (REDUCE_COMPLETION if reduce else SUMMARY_COMPLETION).format(text=text)
