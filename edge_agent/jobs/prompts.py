"""Prompt texts of the job kinds, in one place; PROMPT_VERSION changes whenever one of them does, or what a summary
is checked against does (a stored summary the new check would refuse is redone only so).

Two styles: a base (pretrained) model continues text, so it gets a completion-style frame that
ends where the answer begins (Gemma 3 270M base wrote a correct one-sentence summary after
"Article: ...\\n\\nOne-sentence summary:" and echoed chat-style instructions instead, see
MODEL-NOTES.md); an instruction-tuned bundle (one with a chat template) gets a user message.
"""
from __future__ import annotations

# 4: a long document is summarized from its beginning first (summarize.LEAD_TOKENS); 5: a summary with a figure the
# document does not have is junk (summarize.invented_reason), so summaries stored under 4 may be such junk: redone
PROMPT_VERSION = "summarize-5"
# earlier versions whose prompts, frames and sampling are PROMPT_VERSION's (only the checks changed): a summary one of
# them stored with the same bundle is what PROMPT_VERSION would write (greedy, and a stricter check only turns more
# answers away), unless the new checks refuse it, or it went through stages whose intermediate answers the new checks
# could have turned away. So such a summary that passes the current checks is kept (summarize.SummaryPending._kept),
# not made again (27 s a document on 2 shared cores); one that fails them, or a "sections" one, is redone.
SAME_PROMPTS = ("summarize-4",)

# completion style (base models): {text} is the document or section; the answer stops at a newline.
# The reduce step (the parts' summaries in order, as one article) uses the same frame.
SUMMARY_COMPLETION = "Article: {text}\n\nOne-sentence summary:"
REDUCE_COMPLETION = SUMMARY_COMPLETION
# The frame is in the document's language (the languages the grounded answers have scaffolds for): under
# the English frame Gemma 3 270M base summarized 2 of the 3 Dutch articles of ../shared/corpus-nl in
# English, under "Samenvatting in één zin:" all 3 in Dutch (/tmp/nlsum.py, 2026-12-01). de/fr/es unmeasured.
COMPLETION_FRAMES = {
    "en": SUMMARY_COMPLETION,
    "nl": "Artikel: {text}\n\nSamenvatting in één zin:",
    "de": "Artikel: {text}\n\nZusammenfassung in einem Satz:",
    "fr": "Article : {text}\n\nRésumé en une phrase :",
    "es": "Artículo: {text}\n\nResumen en una frase:",
}
COMPLETION_STOP = ["\n"]
# Gemma 3 270M base begins many summaries (36 of 64 standard-library docstrings) with a blank line
# (the one token "\n\n", then "* " or "1. " and the sentence), which the newline stop would end empty:
# the stops count only after this many tokens (vLLM's min_tokens), so one generation gives the sentence
MIN_TOKENS = 1
# an answer still empty once cleaned (1 of those 64: a line of dashes, which clean_summary strips) is
# asked once more with this after the frame; the model then begins with "* " or "1. " and a sentence
COMPLETION_RETRY = "\n\n"
# an answer that is junk (summarize.degenerate_reason: a loop such as "1.1.1.1", no letters, a copied heading)
# is asked once more, greedy still, with these (HF's repetition_penalty as in the CTRL paper, 1.2-1.3; OpenAI's
# frequency_penalty): the loop's tokens are pushed down. Not measured on the default model yet.
RETRY_REPETITION_PENALTY = 1.3
RETRY_FREQUENCY_PENALTY = 0.5

# chat style (instruction-tuned bundles)
SUMMARY_CHAT = (
    "Summarize the following document in one or two sentences. Answer with the summary only.\n\n{text}"
)
REDUCE_CHAT = (
    "The following are summaries of consecutive parts of one document. Write one summary of the whole "
    "document in two or three sentences. Answer with the summary only.\n\n{text}"
)
# an instruction-tuned model answers in the instruction's language: for a document in another language,
# ask for the summary in the document's (English instructions otherwise)
CHAT_LANGUAGE = {"nl": "Dutch", "de": "German", "fr": "French", "es": "Spanish"}


def summary_prompt(kind: str, text: str, reduce: bool = False, lang: str = "en") -> str | list[dict[str, str]]:
    """The prompt for a document or section (reduce: for the joined summaries of its parts) in language lang.

    kind is the chat service's prompt_kind: "completion" gives a text prompt, "chat" messages.
    """
    if kind == "chat":
        ask = REDUCE_CHAT if reduce else SUMMARY_CHAT
        if lang in CHAT_LANGUAGE:
            ask = ask.replace("Answer with the summary only.", f"Write it in {CHAT_LANGUAGE[lang]}. Answer with the summary only.")
        return [{"role": "user", "content": ask.format(text=text)}]
    return COMPLETION_FRAMES.get(lang, SUMMARY_COMPLETION).format(text=text)
