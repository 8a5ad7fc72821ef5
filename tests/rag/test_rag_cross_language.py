"""Grounded answers across languages: an English question about a Dutch passage (and the reverse) is matched on the words
both languages share (names, figures, identifiers, cognates), answered from that passage with its citation, and still
declined where the passages do not hold what it asks. Tiny real Llama, the real default embedder, real documents."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from edge_agent.services import sentences as S
from edge_agent.services.grounding import SCAFFOLDS, GroundingPolicy

NL_BACKUP = ("De archiefserver draait Debian 12. Elke nacht om 02:30 maakt hij een back-up van het archief naar de "
             "tweede schijf. Het wachtwoord staat in de kluis bij de beheerder.")
EN_LIMIT = "The recursion limit of the interpreter is 1000 frames by default; sys.setrecursionlimit() changes it."


def _chunk(text: str, title: str = "t"):
    return SimpleNamespace(document_id=1, chunk_id=1, title=title, location={}, score=0.1, snippet="", text=text)


def test_a_passage_in_another_language_is_matched_on_shared_words_and_cognates():
    assert S.text_language(NL_BACKUP) == "nl" and S.text_language(EN_LIMIT) == "en"
    q = "When does the nightly backup of the archive run?"
    qterms = S.language.content_terms(q, "en")
    qwords = S.question_words(q, "en")
    held = S.cross_credits(qterms, qwords, NL_BACKUP, "nl")
    # "backup" / "back-up" and "archive" / "archief" are one word spelled two ways; "nightly" / "nacht", "run" are not
    assert {qwords[t] for t in held} == {"backup", "archive"}
    assert S.coverage(q, NL_BACKUP, "en") < 0.1  # by English stems alone, nothing
    assert S.coverage(q, NL_BACKUP, "en", "nl") == pytest.approx(0.5)
    # the same word, a figure, an identifier: whatever the languages
    q2 = "Which Debian release does the archive server run, 12?"
    assert S.coverage(q2, NL_BACKUP, "en", "nl") > S.coverage(q2, NL_BACKUP, "en")
    # not a word that only starts alike ("package" is no "pakket", "general" no "generatie")
    assert not S.cross_credits({"packag", "general"}, {"packag": "package", "general": "general"},
                               "Het pakket bevat een generatie", "nl")
    # a passage in the question's own language gets no cross-language credit
    assert S.match_credits(qterms, qwords, NL_BACKUP, "en", "en") == S.match_credits(qterms, qwords, NL_BACKUP, "en")


def test_the_policy_lets_a_question_through_a_passage_of_another_language_that_holds_its_words():
    policy = GroundingPolicy()
    q = "When does the nightly backup of the archive run?"
    assert policy.covered(q, [_chunk(NL_BACKUP)], "en")
    assert not GroundingPolicy(cross_coverage=0.9).covered(q, [_chunk(NL_BACKUP)], "en")
    from edge_agent.config import Settings

    assert not GroundingPolicy.from_settings(Settings(rag_min_coverage_across_languages=0.9)).covered(q, [_chunk(NL_BACKUP)], "en")
    # the reverse: a Dutch question about an English passage
    assert policy.covered("Wat is de standaard recursielimiet van de interpreter?", [_chunk(EN_LIMIT)], "nl")
    # nothing shared: declined
    assert not policy.covered("Who painted the Mona Lisa?", [_chunk(NL_BACKUP)], "en")
    assert not policy.covered("Hoeveel inwoners heeft Rotterdam?", [_chunk(EN_LIMIT)], "nl")


def test_a_figure_with_the_other_languages_thousands_mark_is_the_same_figure():
    from edge_agent.services.answers import check_answer
    from edge_agent.services.asks import unasked_relation

    s = S.Sentence(0, 0, "3. Kosten: Een enkele GPU kan meer dan $45.000 kosten.", 0.3, 0.3, language="nl")
    assert check_answer("$45,000.", "What can one GPU cost?", [s], "en").status == "ok"
    assert check_answer("$46,000.", "What can one GPU cost?", [s], "en").status != "ok"
    assert check_answer("$45.", "What can one GPU cost?", [s], "en").status == "altered_figure"  # not "45.000"
    # a price asked in English of a Dutch passage: an amount of money next to the thing is what "cost" asks for
    assert not unasked_relation("What can one GPU cost?", [s.text], "en")
    assert unasked_relation("What does the AI300 cost?", ["De AI300 is een compact werkstation met veel geheugen."], "en")


@pytest.fixture(scope="module")
def cross_chat(tiny_bundles, tmp_path_factory):
    from rag_docs import grounded_chat_over

    with grounded_chat_over(tiny_bundles["llama"], tmp_path_factory.mktemp("cross"), {"Archiefserver": NL_BACKUP, "Interpreter": EN_LIMIT}) as chat:
        yield chat


def test_an_english_question_about_a_dutch_passage_is_answered_from_it_with_its_citation(cross_chat):
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.grounding import RagOptions

    gen = cross_chat.chat([{"role": "user", "content": "When does the nightly backup of the archive run?"}],
                          SamplingOptions(max_tokens=8, temperature=0), rag=RagOptions(k=2))
    (r,) = gen.collect()
    assert r.text != SCAFFOLDS["en"].absent
    assert "02:30" in r.text  # the Dutch sentence that holds it, quoted
    used = [s for s in gen.sources if s.used]
    assert [s.title for s in used] == ["Archiefserver"] and f"[{used[0].number}]" in r.text
    assert gen.grounding["language"] == "en"


def test_a_question_the_other_language_passages_do_not_answer_is_declined(cross_chat):
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.grounding import RagOptions

    for q, absent in (("Who painted the Mona Lisa?", SCAFFOLDS["en"].absent),
                      ("How much does the archive server cost per month?", SCAFFOLDS["en"].absent),  # archive, server: no price
                      ("Hoeveel inwoners heeft Rotterdam?", SCAFFOLDS["nl"].absent)):
        gen = cross_chat.chat([{"role": "user", "content": q}], SamplingOptions(max_tokens=8, temperature=0), rag=RagOptions(k=2))
        (r,) = gen.collect()
        assert r.text == absent, q
        assert not any(s.used for s in gen.sources)



def test_a_grounded_answer_without_max_tokens_is_one_short_line(cross_chat):
    """A client that sends no max_tokens (most chat apps) gets the answers bench's 48 tokens for the model's line, not
    the chat default of hundreds (the default model ran on to 512 in 25 of 191 bench answers, none of them changed)."""
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.grounded_chat import GROUNDED_ANSWER_TOKENS
    from edge_agent.services.grounding import RagOptions

    q = [{"role": "user", "content": "When does the nightly backup of the archive run?"}]
    gen = cross_chat.chat(q, SamplingOptions(temperature=0), rag=RagOptions(k=2))
    gen.collect()
    assert gen.usage.completion_tokens == GROUNDED_ANSWER_TOKENS  # the tiny model does not end its line by itself here
    gen = cross_chat.chat(q, SamplingOptions(max_tokens=100, temperature=0), rag=RagOptions(k=2))
    gen.collect()
    assert gen.usage.completion_tokens == 100  # a client's own max_tokens still rules (the chat default here: 128)
