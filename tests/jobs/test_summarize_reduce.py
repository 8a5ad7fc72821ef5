"""A document longer than one prompt is summarized from its beginning alone; when that answer is uninformative (too
short, or not one content word of the document), each section and then their summaries (map, reduce); a reduce answer
that drifts away from the document gives way to the first section's summary, one about the document is kept; a
document that fits one prompt keeps its one answer. Over the tiny real Llama, each answer steered by a logits processor at the
scheduler (chosen by what the prompt holds: the rest is the real engine and the real job)."""
from __future__ import annotations

import pytest

from jobs_helpers import doc_text, writes

from edge_agent.jobs import summarize
from edge_agent.jobs.summarize import uninformative

FIRST = "The river harbour keeps a ledger of every engine and window."
OTHER = "The market bridge and the copper lantern stand in the meadow."


@pytest.mark.parametrize("summary, text, expected", [
    ("Een goed model voor lokale AI", "De CPU is terug: inferentie op de processor, zonder GPU.", True),  # no shared word
    ("100% geldig", "Welke programma's stelt Debian ter beschikking?", True),  # too short
    ("The module reads and writes ZIP archives.", "This module provides tools to create, read, write ZIP files.", False),
    ("Gebruikers toevoegen met GOsa² in de webinterface.", "Gebruikers beheren met GOsa²: toevoegen, wijzigen.", False),
])
def test_uninformative(summary, text, expected):
    assert uninformative(summary, text) is expected


def _steer(rt, lead: str, reduce_answer: str, first: str = FIRST, other: str = OTHER):
    """The first prompt that holds the document's opening (the beginning alone) is answered `lead`, the next one
    (the first section) `first`, other sections `other`, the reduce prompt (it holds `first`) `reduce_answer`.
    Returns the prompts' texts in submission order."""
    scheduler, engine = rt.chat.scheduler, rt.chat.engine
    real_submit = scheduler.submit
    newline = engine.encode("\n", add_special_tokens=False)[0]
    opening = doc_text(99, 15).split(".")[0]
    prompts = []

    def submit(ids, params, **kw):
        text = engine.tokenizer.decode(list(ids))
        openings = sum(opening in p for p in prompts)
        prompts.append(text)
        answer = (reduce_answer if first in text else (lead if openings == 0 else first) if opening in text else other)
        params.logits_processor = writes(engine.encode(answer, add_special_tokens=False), newline)
        return real_submit(ids, params, **kw)

    scheduler.submit = submit
    return prompts


def _summarize(rt):
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 64})
    run = rt.jobs.run_foreground("sum")
    (item,), _ = rt.jobs.results(run.id)
    assert item.status == "succeeded", item.error
    return item.result


LONG = doc_text(99, 15)  # longer than the 512-token context (the tiny tokenizer spells it letter by letter)
DRIFT = "Een goed model voor lokale AI"  # not one word of the document


def test_a_long_documents_beginning_alone_is_summarized_first(make_runtime):
    rt = make_runtime()
    doc = rt.documents.add_text("long", LONG).document_id
    lead = "The ledger of the river harbour lists its engines, windows and orchards."
    prompts = _steer(rt, lead, "unused")
    result = _summarize(rt)
    assert result["sections"] > 1 and result["method"] == "lead" and result["summary"] == lead
    assert len(prompts) == 1 and LONG.split(".")[0] in prompts[0] and LONG.split(".")[-2] not in prompts[0]
    assert rt.documents.get(doc)["summary"]["summary"] == lead


@pytest.mark.parametrize("lead", [DRIFT, "Harbour ledger"])  # no word of the document; too short
def test_an_uninformative_beginning_summary_falls_back_to_sections_and_their_reduce(make_runtime, monkeypatch, lead):
    monkeypatch.setattr(summarize, "LEAD_TOKENS", 64)  # a beginning shorter than the first section (as at 4,096 tokens)
    rt = make_runtime()
    rt.documents.add_text("long", LONG)
    kept = "The ledger lists the harbour, the bridge and the meadow across the years."
    prompts = _steer(rt, lead, kept)
    result = _summarize(rt)
    assert result["method"] == "sections" and result["stages"] == 2 and result["summary"] == kept
    assert len(prompts) == 1 + result["sections"] + 1  # the beginning, each section, the reduce


def test_a_first_section_that_is_the_beginning_is_not_asked_twice(make_runtime):
    rt = make_runtime()  # 512-token context: the first section is cut at fewer tokens than LEAD_TOKENS
    rt.documents.add_text("long", LONG)
    prompts = _steer(rt, DRIFT, "The ledger lists the harbour, the bridge and the meadow across the years.")
    result = _summarize(rt)
    assert result["method"] == "sections"
    assert len(prompts) == result["sections"] + 1 and len(set(prompts)) == len(prompts)  # the sections, the reduce


@pytest.mark.parametrize("reduce_answer", [DRIFT, "Harbour ledger"])
def test_a_reduce_answer_that_drifts_gives_way_to_the_first_sections(make_runtime, monkeypatch, reduce_answer):
    monkeypatch.setattr(summarize, "LEAD_TOKENS", 64)
    rt = make_runtime()
    doc = rt.documents.add_text("long", LONG).document_id
    prompts = _steer(rt, DRIFT, reduce_answer)
    result = _summarize(rt)
    assert result["method"] == "sections" and result["stages"] == 2
    assert sum(FIRST in p for p in prompts) == 1  # the reduce step was asked, and its answer dropped
    assert result["summary"] == FIRST and rt.documents.get(doc)["summary"]["summary"] == FIRST


def test_a_document_that_fits_one_prompt_is_asked_once_and_a_short_answer_gives_way_to_its_lead(make_runtime):
    rt = make_runtime()
    rt.documents.add_text("short", doc_text(99, 4))
    prompts = _steer(rt, "Copper lantern.", "unused")
    result = _summarize(rt)
    first, second = doc_text(99, 4).split(". ")[:2]
    assert result["sections"] == 1 and result["method"] == "extract" and result["summary"] == f"{first}. {second}."
    assert len(prompts) == 1 and doc_text(99, 4) in prompts[0]  # no stage to try after the whole: its lead at once


def test_a_document_that_fits_one_prompt_keeps_an_answer_of_its_words(make_runtime):
    words = " ".join(doc_text(99, 4).split()[1:9])  # five words or more, of the document: kept as the model wrote them
    rt = make_runtime()
    rt.documents.add_text("short", doc_text(99, 4))
    _steer(rt, words, "unused")
    result = _summarize(rt)
    assert result["method"] == "whole" and result["summary"] == words
