"""Grounded answers: passages first and the question last in the question's language, one non-empty line,
and a decline (without running the model) when no passage covers the question. Tiny real Llama, real documents."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from edge_agent.services.grounding import SCAFFOLDS, CannedHandle, GroundingPolicy

NL_FACT = "De toegangscode van het Zeeuwse archief is QX-7731-B; de sleutel ligt bij de portier."
EN_FACT = "The canteen serves tomato soup on Mondays and pasta on Thursdays."


def _chunk(text: str):
    return SimpleNamespace(document_id=1, chunk_id=1, title="t", location={}, score=0.1, snippet="", text=text)


def test_policy_language_scaffold_and_coverage():
    policy = GroundingPolicy()
    assert policy.language_of("Wat is de toegangscode van het archief?") == "nl"
    assert policy.language_of("What does the canteen serve on Mondays?") == "en"
    assert policy.scaffold("nl").question == "Vraag: " and policy.scaffold("nl").answer == "Antwoord:"
    assert policy.scaffold("xx") == SCAFFOLDS["en"]
    assert "\nVraag:" in policy.stops(policy.scaffold("nl")) and "\nSource [" in policy.stops(policy.scaffold("nl"))
    # coverage: the question's content words (stemmed, stop and question words left out) found in a passage
    assert policy.covered("Wat is de toegangscode van het archief?", [_chunk(NL_FACT)], "nl")
    assert not policy.covered("Wat is de hoofdstad van Australië?", [_chunk(NL_FACT), _chunk(EN_FACT)], "nl")
    assert not policy.covered("anything at all", [], "en")
    assert GroundingPolicy(min_coverage=0, require_names=False).covered("Wat is de hoofdstad van Australië?", [_chunk(NL_FACT)], "nl")
    custom = GroundingPolicy(absent_texts={"nl": "Staat niet in de stukken.", "*": "Not in the papers."})
    assert custom.scaffold("nl").absent == "Staat niet in de stukken." and custom.scaffold("de").absent == "Not in the papers."
    assert custom.scaffold("nl").passage == "Tekst"


def test_the_coverage_a_question_needs_depends_on_its_language():
    """A Dutch question paraphrases ("videokaart" where the text says "GPU"), so it needs less of its words in a passage
    than an English one; a language without its own value uses min_coverage, and {} makes it apply everywhere."""
    passage = [_chunk("Formaten zoals AWQ en EXL2 zijn specifiek geoptimaliseerd voor de geheugenhiërarchie van GPU's.")]
    q = "Welke bestandsformaten zijn er speciaal gemaakt voor videokaarten met veel geheugen?"  # 0.3 of its words held
    policy = GroundingPolicy()
    assert policy.coverage_for("nl") < policy.coverage_for("en") == policy.min_coverage
    assert policy.covered(q, passage, "nl")
    assert not GroundingPolicy(language_coverage={}).covered(q, passage, "nl")
    assert GroundingPolicy(language_coverage={"nl": 0.5}).coverage_for("nl") == 0.5
    assert not policy.covered("Wat is de hoofdstad van Australië?", passage, "nl")  # none of its words: still declined
    from edge_agent.config import Settings

    assert GroundingPolicy.from_settings(Settings(rag_min_coverage_by_language={"de": 0.2})).language_coverage == {"de": 0.2}


def test_canned_handle_is_a_finished_generation():
    from edge_agent.engine.types import Finished, TextDelta

    h = CannedHandle("De documenten gaan hier niet over.")
    first, last = h.next_event(0), h.next_event(0)
    assert isinstance(first, TextDelta) and first.text == "De documenten gaan hier niet over."
    assert isinstance(last, Finished) and last.finish_reason == "stop" and h.next_event(0) is None


@pytest.fixture(scope="module")
def grounded_chat(tiny_bundles, tmp_path_factory):
    from rag_docs import grounded_chat_over

    with grounded_chat_over(tiny_bundles["llama"], tmp_path_factory.mktemp("grounded"), {"Zeeuws archief": NL_FACT, "Canteen": EN_FACT}) as chat:
        yield chat


def test_a_base_model_gets_passages_first_and_the_question_last_in_its_language(grounded_chat):
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.grounding import GroundedPrompt, RagOptions

    chat = grounded_chat
    assert chat.formatter.kind == "completion"
    q = "Wat is de toegangscode van het Zeeuwse archief?"
    gp = chat._ground_chat([{"role": "user", "content": q}], SamplingOptions(max_tokens=8), "", RagOptions(k=2))
    assert isinstance(gp, GroundedPrompt) and gp.decline is None
    text = chat.engine.decode(gp.ids)
    # the sentences that hold the question's words, numbered by passage; only passages used are sources
    assert text.index("Tekst [1]: De toegangscode van het Zeeuwse archief is QX-7731-B;") < text.index("Vraag: " + q)
    assert text.rstrip().endswith("Vraag: " + q + "\nAntwoord:")
    assert "Canteen" not in text and EN_FACT not in text
    assert "\nVraag:" in gp.stop and [s.title for s in gp.sources] == ["Zeeuws archief"]
    # the answer: greedy, one line that starts with a visible character (the grammar), never empty
    for temperature in (0.0, 1.0):
        gen = chat.chat([{"role": "user", "content": q}], SamplingOptions(max_tokens=6, temperature=temperature, seed=3), n=2,
                        rag=RagOptions(k=2))
        for r in gen.collect():
            assert r.text.strip() and "\n" not in r.text.strip()
        assert gen.sources[0].title == "Zeeuws archief"


def test_a_question_the_documents_do_not_cover_is_declined_without_the_model(grounded_chat):
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.grounding import RagOptions

    chat = grounded_chat
    for q, text in (("Wat is de hoofdstad van Australië?", SCAFFOLDS["nl"].absent),
                    ("Who wrote the novel Moby-Dick?", SCAFFOLDS["en"].absent)):
        gen = chat.chat([{"role": "user", "content": q}], SamplingOptions(max_tokens=16), rag=RagOptions(k=2))
        (r,) = gen.collect()
        assert r.text == text and r.finish_reason == "stop"
        assert gen.usage.completion_tokens == 0  # the model did not run
        assert gen.sources  # what was searched is still reported
    chat.grounding = GroundingPolicy(absent_texts={"nl": "Dat staat niet in de documenten."})
    try:
        gen = chat.chat([{"role": "user", "content": "Wat is de hoofdstad van Australië?"}], SamplingOptions(max_tokens=16),
                        rag=RagOptions(k=2))
        assert gen.collect()[0].text == "Dat staat niet in de documenten."
    finally:
        chat.grounding = GroundingPolicy()


def test_a_completion_gets_the_passages_in_front_labelled_in_its_language(grounded_chat):
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.grounding import RagOptions

    chat = grounded_chat
    opts = SamplingOptions(max_tokens=8)
    (block, prompt), sources = chat._ground_prompt("Vraag: Wat is de toegangscode van het Zeeuwse archief?\nAntwoord:", opts,
                                                   RagOptions(k=1))
    assert block.startswith("Tekst [1] (Zeeuws archief): De toegangscode") and "Use the sources" not in block
    assert prompt.endswith("Antwoord:") and "\nTekst [" in opts.stop and [s.title for s in sources] == ["Zeeuws archief"]
    (block, _), _ = chat._ground_prompt("Question: What does the canteen serve on Mondays?\nAnswer:", SamplingOptions(max_tokens=8),
                                        RagOptions(k=1))
    assert block.startswith("Text [1] (Canteen): The canteen serves tomato soup")


@pytest.mark.parametrize("template", [False, True])
def test_a_question_too_long_for_the_context_is_refused_before_the_search(grounded_chat, monkeypatch, template):
    """A question within the cheap length floor but over the context ran the search and ranked sentences first
    (the question embedded, BM25, the model scoring passages) and was refused only after them."""
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.errors import ContextLengthExceededError
    from edge_agent.services.grounding import RagOptions

    chat = grounded_chat
    searched = []
    real = chat.retriever.retrieve
    monkeypatch.setattr(chat.retriever, "retrieve", lambda *a, **k: searched.append(a) or real(*a, **k))
    q = "Wat is de toegangscode van het Zeeuwse archief, en waar ligt de sleutel? " * 12  # ~900 tokens, context 512
    assert len(chat.engine.encode(q)) > chat.context_length
    for max_tokens in (8, None):
        with pytest.raises(ContextLengthExceededError) as e:
            chat.chat([{"role": "user", "content": q}], SamplingOptions(max_tokens=max_tokens), rag=RagOptions(k=2),
                      json_object=template)  # JSON: an instruction, so the chat path (sources as a message)
        assert e.value.prompt_tokens > chat.context_length and "512" in e.value.message
    for max_tokens in (8, None) if not template else ():  # a completion's prompt goes in whole too
        with pytest.raises(ContextLengthExceededError):
            chat.complete([f"Vraag: {q}\nAntwoord:"], SamplingOptions(max_tokens=max_tokens), rag=RagOptions(k=2))
    assert searched == []
    # a question that fits is still searched
    chat.chat([{"role": "user", "content": "Wat is de toegangscode van het Zeeuwse archief?"}], SamplingOptions(max_tokens=4),
              rag=RagOptions(k=2)).collect()
    assert len(searched) == 1
