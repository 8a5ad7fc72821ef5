"""The `summarize` kind: a summary of each selected document, stored with the document.

Selection: all ready documents, or those under a path prefix, of some types, and/or only those
added or changed since the job's last successful run; documents whose stored summary is current
(same content, bundle and prompt version) are skipped unless `force`. A document read again with a text other
than its summary was made from (a newer reader, same bytes) has its summary marked stale (store.text_state), so it
is redone; one whose text came out the same keeps it current (and its updated_at: changed_only does not select it).

A document is rebuilt from its stored chunks (their overlaps removed). One that fits the
model's context is summarized in one generation. A longer one, under a base model's completion
frame, is first summarized from its beginning (LEAD_TOKENS) alone; when that gives no usable
summary (junk twice, or uninformative), and always under a chat bundle, in stages: each section
(a run of chunks that fits) is summarized (map), then the section summaries are summarized together
(reduce, again in groups if they do not fit); a reduced summary that is uninformative gives way to
the first section's. The result's `method` says which: whole, lead or sections. Each item keeps at most PARALLEL_PER_ITEM of its
generations in flight, so a long document cannot fill the engine's queue by itself.

Junk is not stored as a summary: an answer with no letters, mostly not words, the repetition of a
short unit ("1.1.1.1..."), or a copy of the document's title, a heading or its first line
(degenerate_reason), or one that gives a web or e-mail address or a figure the document does not have (invented_reason), is asked once more with repetition penalties (as an empty one is asked once
more); an answer still junk is left out, and an item left with no usable answer fails with the
reason, so the document keeps whatever summary it had and a later run tries it again; unless (the default,
`fallback: "extract"`) the document's lead is stored instead, marked as such: its first sentences (lead_extract),
the result's `method` "extract" and its `reason` the model's last junk. Greedy decoding gives the same junk on every
run of the same bundle and prompt version, so without it such a document would fail every night and never get one.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from edge_agent.jobs.kinds import GenerationPoll, InvalidJobError, Item, ItemError, JobContext, document_filters, flag as _flag
from edge_agent.jobs.prompts import (COMPLETION_RETRY, COMPLETION_STOP, MIN_TOKENS, PROMPT_VERSION, RETRY_FREQUENCY_PENALTY,
                                     RETRY_REPETITION_PENALTY, SAME_PROMPTS, summary_prompt)
from edge_agent.services.chat import SamplingOptions
from edge_agent.services.errors import BusyError, ContextLengthExceededError, InvalidRequestError
from edge_agent.services.sentences import CLOSED, HEAD_WORDS, split_units
from edge_agent.store.summaries import SummaryStore
from edge_agent.store.text_state import chunk_pieces, chunks_digest

PARALLEL_PER_ITEM = 4
# A document longer than one prompt is first summarized from its first LEAD_TOKENS tokens alone (completion style):
# Gemma 3 270M base's summary of the beginning says what a long document is about more often than its summary of
# the section summaries (scripts/bench_summaries.py: 9 multi-section Dutch chapters 2 -> 3 of 9 identified, MRR
# 0.355 -> 0.476; 30 English Library Reference pages 21 -> 21 of 30, MRR 0.769 -> 0.757), at one generation
# instead of one per section and a reduce. Map and reduce remain for a beginning that gives no usable summary.
LEAD_TOKENS = 512
PARAMS = {"path_prefix", "types", "changed_only", "force", "max_tokens", "section_tokens", "fallback"}
FALLBACKS = ("extract", "none")  # what an item stores when the model gives no usable summary: its lead, or nothing (fails)
EXTRACT_WORDS = 40  # the lead extract: whole sentences up to about this many words (a first sentence longer is cut)
PROMPT_SLACK = 16  # tokens for the prompt frame's rounding (counted pieces vs the joined text)


class SummarizeKind:
    """Summaries of documents, stored with them (shown by GET /v1/documents/{id})."""

    name = "summarize"
    prompt_version = PROMPT_VERSION

    def validate(self, params: dict, ctx: JobContext) -> dict:
        """Normalised params; raises InvalidJobError."""
        params = dict(params or {})
        unknown = set(params) - PARAMS
        if unknown:
            raise InvalidJobError(
                f"unknown summarize params: {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(PARAMS))}", param="params")
        out: dict[str, Any] = document_filters(params, ctx)
        out["force"] = _flag(params, "force")
        out["max_tokens"] = _int(params, "max_tokens", 96, 8, 1024)
        if params.get("section_tokens") is not None:
            out["section_tokens"] = _int(params, "section_tokens", 1024, 64, 1 << 20)
        fallback = params.get("fallback", "extract")
        if fallback not in FALLBACKS:
            raise InvalidJobError(f"fallback must be one of {', '.join(FALLBACKS)}", param="params.fallback")
        out["fallback"] = fallback
        return out

    def list_items(self, params: dict, ctx: JobContext, since: float | None) -> Iterator[Item]:
        """One item per selected document (key doc:<id>). With changed_only, a document not changed since `since` is
        still selected when its summary is outdated (stale, or made by another bundle or prompt version): a new
        PROMPT_VERSION redoes every summary also under a nightly changed_only job (it kept the old ones for good); and
        when it has none (its item failed, or the run stopped before it): nothing is left out for good. What changed_only
        leaves out is a current summary that `force` would redo."""
        store = SummaryStore(ctx.db)
        docs = store.select_documents(params.get("path_prefix"), params.get("types"))
        stored = store.current_summaries()
        changed_only = params.get("changed_only") and since is not None
        for d in docs:
            summary = stored.get(d["id"])
            current = summary == (d["content_hash"], ctx.bundle_id, PROMPT_VERSION)
            if current and not params.get("force"):
                continue
            if changed_only and d["updated_at"] <= since and current:
                continue  # forced, but unchanged since the last run
            payload = {"document_id": d["id"], "title": d["title"], "content_hash": d["content_hash"]}
            if not params.get("force") and summary is not None and summary[0] == d["content_hash"] \
                    and summary[1] == ctx.bundle_id and summary[2] in SAME_PROMPTS:
                payload["recheck"] = summary[2]  # kept if it passes the current checks (SummaryPending._kept)
            yield Item(f"doc:{d['id']}", payload)

    def remote_item(self, item: Item, params: dict, ctx: JobContext) -> Item:
        """The item with its document's text in the payload, for a worker without the database."""
        found = SummaryStore(ctx.db).document_text(int(item.payload["document_id"]))
        if found is None:
            raise ItemError(f"document {item.payload['document_id']} no longer exists")
        doc, chunks = found
        return Item(item.key, {**item.payload, "document": doc, "chunks": chunks})

    def start_item(self, item: Item, params: dict, ctx: JobContext) -> "SummaryPending":
        return SummaryPending(item, params, ctx)

    def commit_effect(self, item: Item, result: dict, run_id: str, ctx: JobContext):
        kept = result.get("kept")
        if kept:
            return SummaryStore.keep_effect(int(result["document_id"]), result["content_hash"], ctx.bundle_id,
                                            kept["prompt_version"], PROMPT_VERSION)
        return SummaryStore.save_effect(int(result["document_id"]), result["summary"], result["content_hash"], run_id,
                                        ctx.bundle_id, PROMPT_VERSION, result.get("text_digest"), result.get("method"))


def _int(params: dict, name: str, default: int, lo: int, hi: int) -> int:
    value = params.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise InvalidJobError(f"{name} must be an integer from {lo} to {hi}", param=f"params.{name}")
    return value


def data_ids(chat: Any, text: str) -> list[int]:
    """The ids of a prompt whose text is data: BOS (as the tokenizer adds it), then text with special-token parsing off."""
    encode_data = getattr(chat.formatter, "encode_data", None)
    body = encode_data(text) if encode_data else chat.engine.encode(text, add_special_tokens=False)
    return list(chat.engine.encode("")) + list(body)


# markup a summary line is no place for: HTML tags ("<strong>Budget 2026:</strong>", Gemma 3 270M base on a CSV of
# budgets) and Markdown emphasis; documents reach the model as text, their own tags already read away by the loaders
_MARKUP = re.compile(r"</?(?:strong|b|i|em|u|p|br|span|div|h[1-6]|ul|ol|li|a|table|tr|td|th|font|small|big|mark|sup|sub)"
                     r"(?:\s[^<>]*)?/?>", re.IGNORECASE)


def clean_summary(text: str) -> str:
    """The summary line without surrounding space, a leading list marker, HTML tags or Markdown emphasis."""
    return " ".join(_MARKUP.sub(" ", text.replace("**", "")).split()).lstrip("*-•# ").strip()


TITLE_WORDS = 16  # a title, heading or first line this short is a name for the text, not a summary of it, even in part
_REPEATED = re.compile(r"(.{1,24}?)\1{2,}", re.S)  # a unit of up to 24 characters, three times or more in a row
_WORDS = re.compile(r"\w+")


def _words(text: str) -> str:
    return " ".join(_WORDS.findall(text.casefold()))


def degenerate_reason(summary: str, copies: Iterable[str] = ()) -> str | None:
    """Why a (cleaned, non-empty) summary is junk, or None: no letters, mostly not words, a short unit repeated
    over half of it, or a copy (or repetition) of one of `copies` (the document's title, headings, first line)."""
    text = summary.strip()
    if "\ufffd" in text:
        return "it has broken characters (not valid text)"
    chars = [c for c in text if not c.isspace()]
    letters = sum(c.isalpha() for c in chars)
    if not letters:
        return "it has no letters"
    if letters * 3 < len(chars):
        return "it is mostly not words"
    runs = list(_REPEATED.finditer(text))
    if len(text) >= 12 and sum(len(m.group(0)) for m in runs) * 2 >= len(text):
        unit = max(runs, key=lambda m: len(m.group(0))).group(1)
        return f"it repeats {unit.strip() or unit!r} over and over"
    said = _words(text)
    for copy in copies:
        words = _words(copy)
        if words and said and not said.replace(words, "").strip():
            return "it only repeats the document's title, a heading or its first line"
        # a piece of a title-like line ("De CPU is terug:" of "De CPU is terug: heroverweging van ...", Gemma 3 270M
        # on a Dutch article): no summary either; a long first line's lead sentence may be one, so short lines only
        if words and said and len(words.split()) <= TITLE_WORDS and f" {said} " in f" {words} ":
            return "it only repeats part of the document's title, a heading or its first line"
    return None


# a web address, an e-mail address or a domain: a summary that gives one the document does not have made it up
# (Gemma 3 270M base summarized a Dutch leave policy as "https://www.rijksoppen.nl/nieuwsblad/artikel...")
_ADDRESS = re.compile(r"(?:https?://|www\.)[^\s\"'<>)\]]+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\b[\w-]+(?:\.[\w-]+)*\.(?:nl|com|org|net|eu|be|de|io)\b",
                      re.IGNORECASE)


# a figure, with the separators of English and Dutch ("1,234.50", "1.250,00", "4,2"): a summary that gives one of two
# digits or more that the document does not have made it up (Gemma 3 270M base summarized a Dutch invoice of
# "1.250,00 euro" in "november" as "1. 1.000,00 euro betaald in november 2023")
_FIGURE = re.compile(r"\d(?:[\d.,]*\d)?")


def _figure_forms(figure: str) -> set[str]:
    """The digits a figure may stand for: all of them ("125000" of "1.250,00") and those before a decimal part of one or
    two digits ("1250"), so that "1,250" in an English summary of "1.250,00" in a Dutch invoice is the same figure."""
    forms = {re.sub(r"\D", "", figure).lstrip("0") or "0"}
    m = re.match(r"^(.*\d)[.,]\d{1,2}$", figure)
    if m:
        forms.add(re.sub(r"\D", "", m.group(1)).lstrip("0") or "0")
    return forms


def invented_reason(summary: str, text: str) -> str | None:
    """Why a summary cannot be of its document, or None: it gives a web or e-mail address (or a domain), or a figure of
    two digits or more (an amount, a year), that the document does not have. (Sharing no content word with the
    document is not junk here: a faithful summary in another language may share none.)"""
    low = text.casefold()
    for m in _ADDRESS.finditer(summary):
        address = m.group(0).rstrip(".,;:").casefold()
        core = re.sub(r"^(?:https?://)?(?:www\.)?", "", address).split("/")[0].rstrip(".")
        if core and core not in low:
            return f"it gives an address the document does not have ({m.group(0)[:40]})"
    known: set[str] | None = None
    for m in _FIGURE.finditer(summary):
        if sum(c.isdigit() for c in m.group(0)) < 2:
            continue  # "1." of a list, "3 dagen" of "drie dagen"
        if known is None:
            known = set().union(*(_figure_forms(f.group(0)) for f in _FIGURE.finditer(text)))
        if not _figure_forms(m.group(0)) & known:
            return f"it gives a figure the document does not have ({m.group(0)[:20]})"
    return None


MIN_SUMMARY_WORDS = 5
_CONTENT_WORD = re.compile(r"\w{5,}")  # a word of five letters or more: a content word in English, Dutch, German ...


def uninformative(summary: str, text: str) -> bool:
    """Whether a summary cannot be about its document: fewer than MIN_SUMMARY_WORDS words, or not one content word
    (five letters or more) that the document has (Gemma 3 270M base reduced the section summaries of the Debian FAQ's
    Dutch chapter on package tools to "100% geldig", scripts/bench_summaries.py).
    """
    if len(summary.split()) < MIN_SUMMARY_WORDS:
        return True
    return not set(_CONTENT_WORD.findall(summary.casefold())) & set(_CONTENT_WORD.findall(text.casefold()))


def lead_extract(text: str, copies: Iterable[str] = (), words: int = EXTRACT_WORDS) -> str:
    """The document's first sentences, whole, up to about `words` words (at least one; a first sentence longer than
    twice that, or a long line without a closing mark, is cut at a word, with an ellipsis): its lead, which says what
    most documents are about. Section titles, headings, header lines ("From: ..."), short fragments and copies of the
    title are skipped; "" when the text has no sentence."""
    skip = {_words(c) for c in copies if c.strip()}
    out: list[str] = []
    used = 0
    for unit in split_units(text):
        sentence = " ".join((unit.quote or unit.text).split())
        n = len(sentence.split())
        closed = bool(CLOSED.search(sentence))
        if unit.header or n < 4 or (not closed and n <= HEAD_WORDS) or _words(sentence) in skip:
            continue
        if out and (not closed or used + n > words):
            break
        if not out and (not closed or n > 2 * words):
            return sentence if n <= words else " ".join(sentence.split()[:words]).rstrip(",;:") + " …"
        out.append(sentence)
        used += n
        if used >= words // 2:
            break
    return " ".join(out)


def document_pieces(chunks: list[dict]) -> list[str]:
    """The document's text as consecutive pieces (one per chunk, overlaps with the previous removed; those left
    with no text dropped): store.text_state.chunk_pieces, which the text digest is made from too."""
    return [p for p in chunk_pieces((c["text"], c["char_start"], c["char_end"]) for c in chunks) if p.strip()]


LANGUAGE_SAMPLE_CHARS = 2000


def document_language(chat, pieces: list[str]) -> str:
    """The language of a document's first LANGUAGE_SAMPLE_CHARS characters, among those the chat service
    has answer scaffolds for (English when unsure)."""
    grounding = getattr(chat, "grounding", None)
    if grounding is None:
        return "en"
    sample, used = [], 0
    for p in pieces:
        sample.append(p)
        used += len(p)
        if used >= LANGUAGE_SAMPLE_CHARS:
            break
    return grounding.language_of(" ".join(sample)[:LANGUAGE_SAMPLE_CHARS])


class SummaryPending:
    """One document's summary in flight: a small state machine advanced by done() (never blocks)."""

    def __init__(self, item: Item, params: dict, ctx: JobContext):
        self.ctx = ctx
        self.chat = ctx.chat
        if self.chat is None:
            raise ItemError("no language model is loaded in this process")
        self.max_tokens = int(params.get("max_tokens", 96))
        self.fallback = params.get("fallback", "extract")
        self.document_id = int(item.payload["document_id"])
        if "chunks" in item.payload:  # made self-contained by remote_item (a Ray worker has no database)
            found = (item.payload["document"], item.payload["chunks"])
        else:
            found = SummaryStore(ctx.db).document_text(self.document_id)
        if found is None:
            raise ItemError(f"document {self.document_id} no longer exists")
        self.doc, chunks = found
        # the text summarized: a re-read that changes it before the summary is stored makes that summary stale
        self.text_digest = chunks_digest((c["text"], c["char_start"], c["char_end"]) for c in chunks)
        self.kind = getattr(self.chat, "prompt_kind", None) or self.chat.formatter.kind
        pieces = document_pieces(chunks)
        self.lang = document_language(self.chat, pieces)
        frame = self._prompt_tokens("")
        room = self.chat.context_length - self.max_tokens - frame - PROMPT_SLACK
        if room < 32:
            raise ItemError(f"the model's context ({self.chat.context_length} tokens) leaves no room for a document "
                            f"after {self.max_tokens} summary tokens; lower max_tokens")
        self.budget = min(room, int(params.get("section_tokens", room)))
        if not pieces:
            raise ItemError("the document has no text to summarize")
        self.sections = self._group(pieces)
        # what a summary must not merely copy: the title, the headings, and the first line when the text goes on after it
        first = next((line.strip() for line in pieces[0].splitlines() if line.strip()), "")
        rest = "".join(pieces).strip()
        self.copies = [t for t in {self.doc.get("title") or "", *(c.get("heading") or "" for c in chunks),
                                   first if len(rest) > len(first) + 40 else ""} if t.strip()]
        self.text = rest
        # a document longer than one prompt, under a completion (base model) frame: first its beginning alone
        self.lead = self.kind != "chat" and len(self.sections) > 1
        self.first_summary: str | None = None  # the first section's summary (map stage), the fallback of a reduce that drifted
        self.rejected: str | None = None  # why the last answer left out was junk (the item's error if none is usable)
        self.levels = 1
        self.stage_inputs: list[str] = (
            [self.chat.cut_tokens(self.text, min(LEAD_TOKENS, self.budget)).strip()] if self.lead else self.sections)
        self.reduce = False
        self.outputs: list[str | None] = [None] * len(self.stage_inputs)
        self.next_input = 0
        self.polls: dict[int, GenerationPoll] = {}
        self.retried: set[int] = set()  # inputs already tried a second time (after an empty or a junk answer)
        self.again: list[tuple[int, str]] = []  # inputs to try again: (index, "blank" after an empty answer, "penalty" after junk)
        self.completion_tokens = 0
        self.prompt_tokens = 0
        self.generations = 0
        self._result: dict | None = None
        self._error: BaseException | None = None
        if item.payload.get("recheck") and ctx.db is not None:
            self._result = self._kept(item.payload["recheck"])

    def _kept(self, version: str) -> dict | None:
        """The result that keeps the summary stored under `version` (prompts.SAME_PROMPTS) with this bundle, when the
        current checks pass it and the way it was made did not depend on them: "whole" or "lead" (one answer, which the
        current checks see), or an "extract" of a document that fits one prompt (the lead sentences it would store
        again); None (the summary is made again) otherwise, a "sections" one included."""
        stored = SummaryStore(self.ctx.db).get_summary(self.document_id)
        if (stored is None or stored["prompt_version"] != version or stored["bundle_id"] != self.ctx.bundle_id
                or stored["content_hash"] != self.doc["content_hash"]):
            return None
        text, method = stored["summary"] or "", stored["method"]
        one = len(self.sections) == 1
        if method == "extract":
            ok = one and text == lead_extract(self.text, self.copies)
        elif method in ("whole", "lead") and (method == "whole") == one and (method == "whole" or self.kind != "chat"):
            ok = (bool(text) and degenerate_reason(text, self.copies) is None and invented_reason(text, self.text) is None
                  and not uninformative(text, self.text))
        else:
            ok = False
        if not ok:
            return None
        return self._make_result(text, method) | {"kept": {"prompt_version": version, "run_id": stored["run_id"]}}

    # --- sizing -----------------------------------------------------------------
    def _prompt(self, text: str, reduce: bool = False, again: bool = False) -> list[int] | list[dict[str, str]]:
        """Token ids (completion style: the document is data, never control tokens) or chat messages.

        again: the completion frame followed by COMPLETION_RETRY, for a second try after an answer that is
        empty once cleaned (prompts.py says when that happens).
        """
        prompt = summary_prompt(self.kind, text, reduce, self.lang)
        if not isinstance(prompt, str):
            return prompt
        return data_ids(self.chat, prompt + (COMPLETION_RETRY if again else ""))

    def _prompt_tokens(self, text: str) -> int:
        prompt = self._prompt(text)
        if prompt and isinstance(prompt[0], int):
            return len(prompt)
        return len(self.chat.formatter.format_chat(prompt).ids)

    def _group(self, pieces: list[str]) -> list[str]:
        """Consecutive pieces joined into sections of at most `budget` model tokens (a piece too long is cut)."""
        sections, current, used = [], [], 0
        for piece in pieces:
            n = self.chat.count_tokens(piece)
            while n > self.budget:  # one oversized piece: cut it into budget-sized parts
                head = self.chat.cut_tokens(piece, self.budget)
                if current:
                    sections.append("".join(current).strip())
                    current, used = [], 0
                sections.append(head.strip())
                piece = piece[len(head):]
                n = self.chat.count_tokens(piece)
            if current and used + n > self.budget:
                sections.append("".join(current).strip())
                current, used = [], 0
            current.append(piece)
            used += n
        if current:
            sections.append("".join(current).strip())
        return [s for s in sections if s]

    # --- the state machine ------------------------------------------------------------
    def _submit(self, text: str, again: str = ""):
        prompt = self._prompt(text, self.reduce, again == "blank")
        # min_tokens: a first token that is only a blank line (or an immediate end of turn) does not end the answer
        options = SamplingOptions(max_tokens=self.max_tokens, temperature=0.0, min_tokens=MIN_TOKENS)
        if again == "penalty":  # the first answer was junk (a loop, a copy): the same prompt, repeats discouraged
            options.repetition_penalty, options.frequency_penalty = RETRY_REPETITION_PENALTY, RETRY_FREQUENCY_PENALTY
        if prompt and isinstance(prompt[0], int):
            options.stop = list(COMPLETION_STOP)
            return self.chat.complete([prompt], options, priority=self.ctx.priority)
        return self.chat.chat(prompt, options, priority=self.ctx.priority)

    def _advance(self) -> None:
        for i, poll in list(self.polls.items()):
            if poll.poll():
                text = clean_summary(poll.texts[0])
                self.completion_tokens += poll.completion_tokens
                self.prompt_tokens += poll.prompt_tokens
                del self.polls[i]
                junk = (degenerate_reason(text, self.copies) or invented_reason(text, self.text)) if text else None
                if junk is not None:
                    self.rejected = f"{junk}: {text[:60]!r}{'...' if len(text) > 60 else ''}"
                if i not in self.retried and (junk is not None or (not text and self.kind != "chat")):
                    self.retried.add(i)
                    self.again.append((i, "penalty" if junk is not None else "blank"))
                else:
                    self.outputs[i] = "" if junk is not None else text
        while len(self.polls) < PARALLEL_PER_ITEM and (self.again or self.next_input < len(self.stage_inputs)):
            i, again = self.again[0] if self.again else (self.next_input, "")
            try:
                gen = self._submit(self.stage_inputs[i], again=again)
            except BusyError:
                return  # the engine's queue is full: try again at the next poll
            except (ContextLengthExceededError, InvalidRequestError) as e:
                raise ItemError(f"the section could not be summarized: {e.message}") from None
            self.generations += 1
            self.polls[i] = GenerationPoll(gen)
            if self.again:
                self.again.pop(0)
            else:
                self.next_input += 1
        if self.polls or self.again or self.next_input < len(self.stage_inputs):
            return
        outputs = [o for o in self.outputs if o]
        if self.lead:
            self.lead = False
            if outputs and not uninformative(outputs[0], self.text):
                self._result = self._make_result(outputs[0], "lead")
                return
            # the beginning gave no usable summary: every section, then their summaries together (map, reduce); a first
            # section that is the beginning (a context under LEAD_TOKENS) keeps the answer it already had
            same = self.stage_inputs[0] == self.sections[0]
            self.stage_inputs = self.sections
            self.outputs = [None] * len(self.stage_inputs)
            self.next_input = 0
            if same:
                self.outputs[0], self.next_input = (outputs[0] if outputs else ""), 1
            self.retried, self.again = set(), []
            return
        if not outputs:
            if self._extract(f"the model's summary was left out because {self.rejected}" if self.rejected
                             else "the model wrote an empty summary"):
                return
            if self.rejected:
                raise ItemError(f"the model wrote no usable summary, twice (the second time with repetition penalties); "
                                f"the last was left out because {self.rejected}")
            raise ItemError("the model wrote an empty summary")
        if len(outputs) == 1:
            summary = outputs[0]
            if self.levels > 1 and uninformative(summary, self.text) and self.first_summary \
                    and not uninformative(self.first_summary, self.text):
                summary = self.first_summary  # the reduce step drifted away from the document: its beginning says more
            # a final summary that cannot be about the document (a fragment such as "1. Opdrachtnemer:" of a contract, under
            # MIN_SUMMARY_WORDS words, or not one of its words) gives way to the lead, as junk does: a document that fits
            # one prompt had no other stage to try, and its fragment was stored as the summary
            if uninformative(summary, self.text):
                why = (f"fewer than {MIN_SUMMARY_WORDS} words" if len(summary.split()) < MIN_SUMMARY_WORDS
                       else "not one word of the document")
                if self._extract(f"the model's summary was left out because it has {why}: {summary[:60]!r}"):
                    return
            self._result = self._make_result(summary, "sections" if self.levels > 1 else "whole")
            return
        if self.levels == 1:
            self.first_summary = outputs[0] if self.outputs[0] else None
        # reduce: the section summaries, in order, as one text (in groups if they do not fit)
        self.reduce = True
        self.levels += 1
        self.stage_inputs = self._group([o + "\n" for o in outputs])
        self.outputs = [None] * len(self.stage_inputs)
        self.next_input = 0
        self.retried, self.again = set(), []
        if self.levels > 8:
            raise ItemError("the document did not reduce to one summary in 8 stages")

    def _extract(self, reason: str) -> bool:
        """The document's lead as the result in place of the model's summary (fallback "extract"), with the reason;
        False when the fallback is "none" or the text has no sentence to extract."""
        lead = lead_extract(self.text, self.copies) if self.fallback == "extract" else ""
        if lead:
            self._result = self._make_result(lead, "extract") | {"reason": reason}
        return bool(lead)

    def _make_result(self, summary: str, method: str) -> dict:
        return {
            "document_id": self.document_id, "title": self.doc["title"], "summary": summary, "method": method,
            "content_hash": self.doc["content_hash"], "text_digest": self.text_digest, "sections": len(self.sections),
            "stages": self.levels,
            "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                      "generations": self.generations},
        }

    def done(self) -> bool:
        if self._result is None and self._error is None:
            try:
                self._advance()
            except BaseException as e:  # ItemError, or UnavailableError for the runner to retry
                self._error = e
                self.cancel()
        return self._result is not None or self._error is not None

    def result(self, timeout: float | None = None) -> dict:
        if not self.done():
            raise TimeoutError("the summary is not done yet")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def cancel(self) -> None:
        for poll in self.polls.values():
            poll.cancel()
        self.polls.clear()
