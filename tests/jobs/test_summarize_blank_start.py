"""summarize when the model begins its answer with a blank line (as Gemma 3 270M base often does): one generation
per document, the sentence after the blank line is the summary. Over the tiny real Llama, whose first choice is
steered to a newline by a logits processor added at the scheduler (the rest is the real engine, stops and job)."""
from __future__ import annotations

import numpy as np

from jobs_helpers import doc_text, patch_submit


def steer_first_token_to_newline(rt) -> list:
    """Make every answer begin with a line break and go on with text (the tiny random model would repeat the line
    break forever); returns the list that records each submission's prompt."""
    newline = rt.chat.engine.encode("\n", add_special_tokens=False)
    assert len(newline) == 1
    nl = int(newline[0])
    tok = rt.chat.engine.tokenizer
    breaks = [i for i in range(rt.chat.vocab_size) if "\n" in tok.decode([i])]

    def blank_line_first(tokens, logits):
        if not tokens:
            logits = np.full_like(logits, -np.inf)
            logits[nl] = 0.0
        elif len(tokens) == 1:
            logits[breaks] = -np.inf
        return logits

    return patch_submit(rt, lambda i: blank_line_first)


def test_a_blank_first_line_costs_no_second_generation(make_runtime, wordy_model):
    rt = make_runtime()
    ids = [rt.documents.add_text(f"doc {i}", doc_text(i, 3)).document_id for i in range(3)]
    long_id = rt.documents.add_text("long", doc_text(99, 60)).document_id  # longer than the context: its beginning first
    submitted = steer_first_token_to_newline(rt)
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 12})
    run = rt.jobs.run_foreground("sum")
    assert run.status == "succeeded", (run.counts, run.error)
    items, _ = rt.jobs.results(run.id)
    assert {i.status for i in items} == {"succeeded"}, [i.error for i in items]
    by_doc = {i.result["document_id"]: i.result for i in items}
    for doc in ids:
        r = by_doc[doc]
        assert r["usage"]["generations"] == 1  # the old code asked again after the empty first answer (2)
        assert r["summary"] and r["summary"] == r["summary"].strip()
        assert rt.documents.get(doc)["summary"]["summary"] == r["summary"]
    long = by_doc[long_id]
    # (extract: the reduce's answer, too, said nothing of the document, so its lead was stored)
    assert long["summary"] and long["method"] in ("lead", "sections", "extract")
    # its beginning, then (its answer uninformative) each section and the reduce; under this 512-token context the
    # beginning is the first section, asked once
    asked = 1 if long["method"] == "lead" else long["sections"] + long["stages"] - 1
    assert long["usage"]["generations"] == asked or long["stages"] > 2
    # every prompt was submitted once: the engine saw one generation per generation counted, and no prompt twice
    assert len(submitted) == sum(r["usage"]["generations"] for r in by_doc.values())
    assert len({tuple(p) for p in submitted}) == len(submitted)
    assert sum(len(p) for p in submitted) == sum(r["usage"]["prompt_tokens"] for r in by_doc.values())


def test_an_answer_empty_once_cleaned_is_asked_once_more(make_runtime, wordy_model):
    """A line of dashes (Gemma's answer for the pipes docstring) cleans to nothing: one second try, after a blank line."""
    rt = make_runtime()
    doc = rt.documents.add_text("pipes", doc_text(4, 3)).document_id
    dash = rt.chat.engine.encode("-", add_special_tokens=False)
    assert len(dash) == 1
    tok = rt.chat.engine.tokenizer
    breaks = [i for i in range(rt.chat.vocab_size) if "\n" in tok.decode([i])]

    def dashes(tokens, logits):
        logits = np.full_like(logits, -np.inf)
        logits[dash[0]] = 0.0
        return logits

    def text_first(tokens, logits):  # the tiny random model would repeat the prompt's line break
        if not tokens:
            logits[breaks] = -np.inf
        return logits

    submitted = patch_submit(rt, lambda i: dashes if i == 0 else text_first)
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 12})
    run = rt.jobs.run_foreground("sum")
    (item,), _ = rt.jobs.results(run.id)
    assert item.status == "succeeded", item.error
    assert item.result["document_id"] == doc and item.result["summary"] and item.result["usage"]["generations"] == 2
    assert len(submitted) == 2 and submitted[1][:len(submitted[0])] == submitted[0]  # the same frame, then a blank line


def test_a_chat_model_that_would_end_its_turn_at_once_still_answers(make_runtime, wordy_model):
    """The chat form (an instruction-tuned bundle) gets min_tokens too: an end of turn as the first token is not chosen."""
    from edge_agent.services.prompts import PromptFormatter

    rt = make_runtime()
    chatml = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    rt.chat.formatter = PromptFormatter({"type": "chat", "template": chatml}, rt.chat.engine.tokenizer, 1, 2)
    doc = rt.documents.add_text("one", doc_text(3, 3)).document_id
    ends = sorted(rt.chat.engine.stop_token_ids)
    the = rt.chat.engine.encode("The", add_special_tokens=False)[0]

    def end_turn_first(tokens, logits):
        if not tokens:  # the likeliest first token ends the turn (empty), the next likeliest is "The"
            logits[ends] = 1e4
            logits[the] = 1e3
        return logits

    submitted = patch_submit(rt, lambda i: end_turn_first)
    rt.jobs.create_job("sum-chat", "summarize", {"max_tokens": 8})
    run = rt.jobs.run_foreground("sum-chat")
    (item,), _ = rt.jobs.results(run.id)
    assert item.status == "succeeded", item.error
    assert item.result["document_id"] == doc and item.result["summary"] and item.result["usage"]["generations"] == 1
    assert len(submitted) == 1


def test_default_model_blank_first_answers_need_one_generation(make_runtime, default_bundle):
    """Gemma 3 270M base begins many summaries of standard-library docstrings with a blank line: the job's one
    generation per document gives the sentence after it (EDGE_AGENT_TEST_BUNDLE reuses a built bundle)."""
    import csv
    import json
    import re
    import sched

    from edge_agent.jobs.prompts import SUMMARY_COMPLETION
    from edge_agent.jobs.summarize import data_ids
    from edge_agent.services.chat import SamplingOptions

    rt = make_runtime(models_dir=default_bundle.parent, model=default_bundle.name, context_length=1024, max_batch=4)
    texts = {m.__name__: " ".join(m.__doc__.split()[:200]) for m in (csv, json, re, sched)}
    # the precondition: asked plainly (no min_tokens), these answers end empty at the blank line
    plain = {name: rt.chat.complete([data_ids(rt.chat, SUMMARY_COMPLETION.format(text=t))],
                                    SamplingOptions(max_tokens=32, temperature=0.0, stop=["\n"])) for name, t in texts.items()}
    blank = [name for name, g in plain.items() if not g.choices[0].handle.result(timeout=300).text.strip()]
    assert len(blank) >= 2, blank
    ids = {rt.documents.add_text(name, texts[name]).document_id: name for name in blank}
    rt.jobs.create_job("sum", "summarize", {"max_tokens": 32})
    run = rt.jobs.run_foreground("sum")
    items, _ = rt.jobs.results(run.id)
    assert run.status == "succeeded" and {i.status for i in items} == {"succeeded"}, [i.error for i in items]
    for i in items:
        r = i.result
        assert r["document_id"] in ids and r["usage"]["generations"] == 1
        assert len(r["summary"].split()) >= 4 and r["summary"][0].isalnum(), r["summary"]  # a sentence, no blank or "* "
