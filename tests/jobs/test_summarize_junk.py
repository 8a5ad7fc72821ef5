"""summarize refuses junk: a loop ("1.1.1.1..."), no letters, a copy of the title or first line, a made-up web address
is asked once more
with repetition penalties; an item still junk stores the document's lead sentences, marked "extract" with the reason,
or (fallback "none") fails with the reason (the document keeps its old summary).
Over the tiny real Llama, its answers steered by a logits processor at the scheduler (the rest is the real engine)."""
from __future__ import annotations

import pytest

from jobs_helpers import doc_text, writes

from edge_agent.jobs.prompts import RETRY_REPETITION_PENALTY
from edge_agent.jobs.summarize import EXTRACT_WORDS, degenerate_reason, invented_reason, lead_extract


@pytest.mark.parametrize("text, words", [
    ("1.1.1.1.1.1.1.1.1.1", "no letters"),
    ("::::::::::::", "no letters"),
    ("the river the river the river the river", "repeats 'the river'"),
    ("a 1 2 3 4 5 6 7 8 9 0 1 2 3", "mostly not words"),
    (":\ufffd\ufffd of and", "broken characters"),
    ("Annual Report 2023", "title, a heading or its first line"),
    ("Annual report 2023. Annual report 2023.", "title, a heading or its first line"),
    ("Annual Report:", "part of the document's title"),
])
def test_junk_is_named(text, words):
    assert words in (degenerate_reason(text, ["Annual Report 2023"]) or ""), text


@pytest.mark.parametrize("text", [
    "The report covers the sales of 2023 and the plans for 2024.",
    "Revenue rose from 1,234,567 to 2,345,678 in 2023.",
    "Annual Report 2023: sales rose by a tenth and the new plant opened in May.",  # it begins with the title, then says more
])
def test_a_real_summary_is_not_junk(text):
    assert degenerate_reason(text, ["Annual Report 2023"]) is None


def test_a_piece_of_a_short_title_is_junk_but_a_long_first_lines_lead_sentence_is_not():
    title = "De CPU is terug: heroverweging van de CPU-GPU splitsing voor LLM-inferentie"
    assert "part of the document's title" in (degenerate_reason("De CPU is terug:", [title]) or "")
    assert degenerate_reason("De CPU is terug: de verhouding tussen CPU en GPU verschuift.", [title]) is None
    first_line = ("Inferentie bestaat niet uit één model dat één vraag beantwoordt. De groeiende afhankelijkheid van "
                  "tool-calls en orchestratie over kleine modellen verandert waar rekenkracht moet worden geplaatst.")
    assert degenerate_reason("Inferentie bestaat niet uit één model dat één vraag beantwoordt.", [first_line]) is None


POLICY = ("Verlofregeling 2026. Medewerkers hebben recht op 25 vakantiedagen per jaar. Vragen? Mail hr@rijnoord.nl "
          "of kijk op intranet.rijnoord.nl/verlof voor het formulier.")


@pytest.mark.parametrize("summary, invented", [
    ("https://www.rijksoppen.nl/nieuwsblad/artikel...", True),  # Gemma 3 270M base on a Dutch leave policy
    ("Zie www.verlofwijzer.nl voor de regels.", True),
    ("Mail naar info@verlof.nl voor vakantiedagen.", True),
    ("Medewerkers hebben recht op 25 vakantiedagen, vragen via hr@rijnoord.nl.", False),
    ("Het formulier staat op intranet.rijnoord.nl/verlof.", False),
    ("Medewerkers hebben recht op 25 vakantiedagen per jaar.", False),
])
def test_a_summary_with_a_made_up_address_is_junk(summary, invented):
    assert (invented_reason(summary, POLICY) is not None) is invented, invented_reason(summary, POLICY)


INVOICE = ("Factuur 2026-114. Geachte heer Jansen, hierbij ontvangt u de factuur voor de geleverde diensten in november. "
           "Het totaalbedrag van 1.250,00 euro dient binnen dertig dagen te worden betaald.")


@pytest.mark.parametrize("summary, invented", [
    ("1. 1.000,00 euro betaald in november 2023", True),  # Gemma 3 270M base on this invoice: neither figure is in it
    ("De factuur van 1.250,00 euro is betaald in 2023.", True),  # the year is made up
    ("Factuur 2026-114: 1.250,00 euro voor diensten in november, te betalen binnen dertig dagen.", False),
    ("Invoice 2026-114 asks Mr Jansen for EUR 1,250 for November's services.", False),  # the same figure, English style
    ("Factuur over 1250 euro.", False),
    ("1. De factuur moet binnen 30 dagen betaald worden.", True),  # "dertig" written out: 30 is not the document's
    ("1. De heer Jansen moet de factuur betalen.", False),  # a list's "1." is no figure
])
def test_a_summary_with_a_made_up_figure_is_junk(summary, invented):
    assert (invented_reason(summary, INVOICE) is not None) is invented, invented_reason(summary, INVOICE)


def _steer(rt, answers):
    """The i-th generation writes answers[i] (token ids, then a line break: the completion frame's stop), or is left
    to the model (None, with install_wordy_model); returns the list of each submission's SamplingParams."""
    scheduler = rt.chat.scheduler
    real_submit = scheduler.submit
    newline = rt.chat.engine.encode("\n", add_special_tokens=False)[0]
    seen = []

    def submit(ids, params, **kw):
        want = answers[len(seen)] if len(seen) < len(answers) else None
        seen.append(params)
        if want is not None:
            params.logits_processor = writes(want, newline)
        return real_submit(ids, params, **kw)

    scheduler.submit = submit
    return seen


def test_a_loop_is_asked_again_with_penalties_then_the_lead_is_stored_as_an_extract(make_runtime):
    rt = make_runtime()
    doc = rt.documents.add_text("loop", doc_text(2, 3)).document_id
    loop = rt.chat.engine.encode("1.1.1.1.1.1.1.1.1.1", add_special_tokens=False)
    seen = _steer(rt, [loop, loop])
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 24})
    run = rt.jobs.run_foreground("sum")
    (item,), _ = rt.jobs.results(run.id)
    assert run.status == "succeeded" and item.status == "succeeded", item
    first, second = doc_text(2, 3).split(". ")[:2]
    assert item.result["summary"] == f"{first}. {second}." and item.result["method"] == "extract"
    assert "no letters" in item.result["reason"] and "'1.1.1" in item.result["reason"], item.result
    assert len(seen) == 2 and seen[1].repetition_penalty == RETRY_REPETITION_PENALTY
    stored = rt.documents.get(doc)["summary"]
    assert stored["summary"] == item.result["summary"] and stored["method"] == "extract"
    # current for this bundle and prompt version: the next run does not ask the model again (greedy: the same junk)
    again = rt.jobs.run_foreground("sum")
    assert again.status == "succeeded" and sum(again.counts.values()) == 0, again.counts


def test_without_the_fallback_a_loop_fails_with_the_reason(make_runtime):
    rt = make_runtime()
    doc = rt.documents.add_text("loop", doc_text(2, 3)).document_id
    loop = rt.chat.engine.encode("1.1.1.1.1.1.1.1.1.1", add_special_tokens=False)
    seen = _steer(rt, [loop, loop])
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 24, "fallback": "none"})
    run = rt.jobs.run_foreground("sum")
    (item,), _ = rt.jobs.results(run.id)
    assert run.status == "succeeded" and item.status == "failed", item
    assert "no usable summary" in item.error and "no letters" in item.error and "'1.1.1" in item.error, item.error
    assert len(seen) == 2 and seen[0].repetition_penalty == 1.0 and seen[1].repetition_penalty == RETRY_REPETITION_PENALTY
    assert rt.documents.get(doc)["summary"] is None  # nothing junk stored with the document


def test_the_lead_extract_takes_whole_sentences_and_skips_titles_headings_and_headers():
    policy = ("# Verlofregeling 2026\n\n## Vakantiedagen\n\nMedewerkers met een volledig dienstverband krijgen 25 "
              "vakantiedagen per jaar. Niet-opgenomen dagen vervallen na vijf jaar. De leidinggevende beslist binnen tien "
              "werkdagen over een aanvraag.\n")
    assert lead_extract(policy) == ("Medewerkers met een volledig dienstverband krijgen 25 vakantiedagen per jaar. "
                                    "Niet-opgenomen dagen vervallen na vijf jaar. De leidinggevende beslist binnen tien "
                                    "werkdagen over een aanvraag.")
    assert lead_extract(policy, words=20) == ("Medewerkers met een volledig dienstverband krijgen 25 vakantiedagen per "
                                              "jaar.")  # whole sentences only: the second would go past 20 words
    mail = "From: Anna Jansen\nTo: HR\nSubject: Declaratie\n\nHierbij stuur ik de declaratie van maart. Graag betalen voor vrijdag.\n"
    assert lead_extract(mail) == "Hierbij stuur ik de declaratie van maart. Graag betalen voor vrijdag."
    title = "Quarterly report for the harbour board."
    assert lead_extract(f"{title}\n\nThe harbour handled more ships than ever before this year.", [title]) == \
        "The harbour handled more ships than ever before this year."
    long = "This " + "very " * 120 + "long sentence ends here."
    cut = lead_extract(long)
    assert cut.endswith(" …") and len(cut.split()) == EXTRACT_WORDS + 1
    assert lead_extract("1.1.1.1\n\n- item\n- item") == ""  # no sentence: nothing to extract (the item fails)


def test_a_bad_fallback_is_a_clear_error(make_runtime):
    from edge_agent.jobs.kinds import InvalidJobError

    rt = make_runtime()
    with pytest.raises(InvalidJobError, match="fallback must be one of extract, none"):
        rt.jobs.create_job("sum", "summarize", {"fallback": "lead"})


def test_a_copied_title_is_asked_again_and_the_second_answer_kept(make_runtime, wordy_model):
    rt = make_runtime()
    doc = rt.documents.add_text("Harbour ledger", doc_text(5, 3)).document_id
    seen = _steer(rt, [rt.chat.engine.encode("Harbour Ledger", add_special_tokens=False)])  # then the (wordy) model itself
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 24})  # (the tiny tokenizer spells most words letter by letter)
    run = rt.jobs.run_foreground("sum")
    (item,), _ = rt.jobs.results(run.id)
    assert item.status == "succeeded", item.error
    summary = item.result["summary"]
    assert "harbour ledger" not in summary.casefold() and item.result["usage"]["generations"] == 2
    assert seen[1].repetition_penalty == RETRY_REPETITION_PENALTY
    assert rt.documents.get(doc)["summary"]["summary"] == summary


def test_a_made_up_address_is_asked_again_and_never_stored(make_runtime, wordy_model):
    rt = make_runtime()
    doc = rt.documents.add_text("Harbour ledger", doc_text(5, 3)).document_id
    seen = _steer(rt, [rt.chat.engine.encode("www.harbourledger.nl", add_special_tokens=False)])  # then the model itself
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 24})
    run = rt.jobs.run_foreground("sum")
    (item,), _ = rt.jobs.results(run.id)
    assert item.status == "succeeded", item.error
    assert "harbourledger.nl" not in item.result["summary"] and item.result["usage"]["generations"] == 2
    assert seen[1].repetition_penalty == RETRY_REPETITION_PENALTY
    assert rt.documents.get(doc)["summary"]["summary"] == item.result["summary"]


def test_a_fragment_of_a_short_document_gives_way_to_its_lead(make_runtime):
    # a contract that fits one prompt: Gemma 3 270M base summarized one as "1. Opdrachtnemer:", stored as its summary
    rt = make_runtime()
    doc = rt.documents.add_text("contract", doc_text(3, 3)).document_id
    seen = _steer(rt, [rt.chat.engine.encode("1. Opdrachtnemer:", add_special_tokens=False)])
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 24})
    run = rt.jobs.run_foreground("sum")
    (item,), _ = rt.jobs.results(run.id)
    assert item.status == "succeeded" and len(seen) == 1, item
    first, second = doc_text(3, 3).split(". ")[:2]
    assert item.result["summary"] == f"{first}. {second}." and item.result["method"] == "extract", item.result
    assert "fewer than 5 words" in item.result["reason"] and "1. Opdrachtnemer:" in item.result["reason"], item.result
    assert rt.documents.get(doc)["summary"]["method"] == "extract"


def test_a_summary_is_stored_without_html_tags_or_emphasis(make_runtime):
    rt = make_runtime()
    text = doc_text(4, 3)
    words = text.split()[1:9]  # eight of the document's own words, in bold and in tags
    said = f"<strong>{' '.join(words[:4])}</strong> **{' '.join(words[4:])}**"
    _steer(rt, [rt.chat.engine.encode(said, add_special_tokens=False)])
    doc = rt.documents.add_text("tagged", text).document_id
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 48})
    run = rt.jobs.run_foreground("sum")
    (item,), _ = rt.jobs.results(run.id)
    assert item.status == "succeeded" and item.result["method"] == "whole", item
    assert item.result["summary"] == " ".join(words) == rt.documents.get(doc)["summary"]["summary"]
