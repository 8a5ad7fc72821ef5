"""A long document's reduce step that drifts away from the document (too short, or not one content word of the
document) gives way to the first section's summary; a reduce answer about the document is kept, and a document that
fits one prompt keeps its one answer. Over the tiny real Llama, each answer steered by a logits processor at the
scheduler (chosen by what the prompt holds: the rest is the real engine and the real job)."""
from __future__ import annotations

import numpy as np
import pytest

from jobs_helpers import doc_text

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


def _steer(rt, reduce_answer: str, first: str = FIRST, other: str = OTHER):
    """Map answers: `first` for the prompt that holds the document's first sentence, `other` for the rest; the reduce
    prompt (it holds `first`) gets `reduce_answer`. Returns the prompts' texts in submission order."""
    scheduler, engine = rt.chat.scheduler, rt.chat.engine
    real_submit = scheduler.submit
    newline = engine.encode("\n", add_special_tokens=False)[0]
    opening = doc_text(99, 15).split(".")[0]
    prompts = []

    def submit(ids, params, **kw):
        text = engine.tokenizer.decode(list(ids))
        prompts.append(text)
        answer = reduce_answer if first in text else first if opening in text else other
        want = engine.encode(answer, add_special_tokens=False)

        def force(tokens, logits):
            out = np.full_like(logits, -np.inf)
            out[want[len(tokens)] if len(tokens) < len(want) else newline] = 0.0
            return out

        params.logits_processor = force
        return real_submit(ids, params, **kw)

    scheduler.submit = submit
    return prompts


def _summarize(rt):
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 64})
    run = rt.jobs.run_foreground("sum")
    (item,), _ = rt.jobs.results(run.id)
    assert item.status == "succeeded", item.error
    return item.result


def test_a_reduce_answer_with_no_word_of_the_document_gives_way_to_the_first_sections(make_runtime):
    rt = make_runtime()
    doc = rt.documents.add_text("long", doc_text(99, 15)).document_id  # longer than the 512-token context (the tiny tokenizer spells it letter by letter)
    prompts = _steer(rt, "Een goed model voor lokale AI")
    result = _summarize(rt)
    assert result["sections"] > 1 and result["stages"] == 2
    assert sum(FIRST in p for p in prompts) == 1  # the reduce step was asked, and its answer dropped
    assert result["summary"] == FIRST and rt.documents.get(doc)["summary"]["summary"] == result["summary"]


def test_a_too_short_reduce_answer_gives_way_too(make_runtime):
    rt = make_runtime()
    rt.documents.add_text("long", doc_text(99, 15))
    _steer(rt, "Harbour ledger")
    assert _summarize(rt)["summary"] == FIRST


def test_a_reduce_answer_about_the_document_is_kept(make_runtime):
    rt = make_runtime()
    rt.documents.add_text("long", doc_text(99, 15))
    kept = "The ledger lists the harbour, the bridge and the meadow across the years."
    _steer(rt, kept)
    assert _summarize(rt)["summary"] == kept


def test_a_document_that_fits_one_prompt_keeps_its_one_answer_even_a_short_one(make_runtime):
    rt = make_runtime()
    rt.documents.add_text("short", doc_text(99, 4))  # its opening sentence: answered with FIRST
    _steer(rt, "unused", first="Copper lantern.")
    result = _summarize(rt)
    assert result["sections"] == 1 and result["stages"] == 1 and result["summary"] == "Copper lantern."
