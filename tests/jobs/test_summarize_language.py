"""summarize asks in the document's language: a Dutch document gets the Dutch frame (under the English one the
default model summarized Dutch articles in English), an English one the English frame; over the tiny real Llama
and the real scheduler, reading the prompts the engine was given."""
from __future__ import annotations

from jobs_helpers import patch_submit

from edge_agent.jobs.prompts import COMPLETION_FRAMES, summary_prompt
from edge_agent.jobs.summarize import document_language
from edge_agent.services.grounding import GroundingPolicy

DUTCH = ("De centrale processor is in vrijwel elke bestaande server of werkplek al aanwezig, terwijl een grafische "
         "processor vaak aanzienlijke investeringen vraagt in kaarten, koeling en voedingen. Voor kleine modellen "
         "die 's nachts samenvattingen maken, is de processor daarom vaak de goedkoopste keuze.")
ENGLISH = ("The central processor is already present in nearly every server or workstation, while a graphics "
           "processor often needs a large investment in cards, cooling and power supplies. For small models that "
           "write summaries at night, the processor is therefore often the cheapest choice.")


class _Chat:
    grounding = GroundingPolicy()


def test_the_document_language_picks_the_frame():
    assert document_language(_Chat(), [DUTCH[:80], DUTCH[80:]]) == "nl"
    assert document_language(_Chat(), [ENGLISH]) == "en"
    assert document_language(object(), [DUTCH]) == "en"  # a chat service without answer scaffolds: English
    assert summary_prompt("completion", "x", lang="nl") == "Artikel: x\n\nSamenvatting in één zin:"
    assert summary_prompt("completion", "x", lang="xx") == summary_prompt("completion", "x")  # no frame: English
    chat = summary_prompt("chat", "x", lang="nl")[0]["content"]
    assert "Write it in Dutch." in chat and chat.endswith("x")
    assert "Dutch" not in summary_prompt("chat", "x")[0]["content"]


def test_a_dutch_document_is_summarized_under_the_dutch_frame(make_runtime, wordy_model):
    rt = make_runtime()
    nl = rt.documents.add_text("nl", DUTCH).document_id
    en = rt.documents.add_text("en", ENGLISH).document_id
    submitted = patch_submit(rt, lambda i: None)  # records the prompts (a base model's summaries take no processor)
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 8})
    run = rt.jobs.run_foreground("sum")
    assert run.status == "succeeded", (run.counts, run.error)
    items, _ = rt.jobs.results(run.id)
    assert {i.result["document_id"] for i in items} == {nl, en}
    dutch_end, english_end = COMPLETION_FRAMES["nl"].split("{text}")[1], COMPLETION_FRAMES["en"].split("{text}")[1]
    seen = [rt.chat.engine.tokenizer.decode(ids) for ids in submitted]
    by_text = {("nl" if "centrale processor" in p else "en"): p for p in seen}
    assert by_text["nl"].endswith(dutch_end) and "Artikel: " in by_text["nl"][:24]
    assert by_text["en"].endswith(english_end)
