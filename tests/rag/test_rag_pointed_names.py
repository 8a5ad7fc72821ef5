"""The sentence a model's answer copies a name from (issue 13, part 4): the base model reads the shown sentences, and a
name it copies ("StopIteration", "/etc/debian_version") says which one it read the answer in, where its answer fails the
check (cut by the token limit, words of its own around the name) and the likelihood or the question's words put another
sentence first (answers._pointed_by_name, settle)."""
from __future__ import annotations

from types import SimpleNamespace

from edge_agent.services import answers as A

DECLINE = "The documents do not cover this."
GENERATORS = ('In an asynchronous generator function, an empty "return" statement indicates that the asynchronous generator '
              'is done and will cause "StopAsyncIteration" to be raised. '
              'In a generator function, the "return" statement indicates that the generator is done and will cause '
              '"StopIteration" to be raised.')
RELEASE = ["This number corresponds to the revision level of the Debian package, so a new revision level signifies changes "
           "in the packaging. Each release of Debian has a well-defined and unchanging content.",
           "To check that you run Debian, look for the file /etc/debian_version. It holds a single line."]


def _chunk(text: str, rank: int = 0):
    return SimpleNamespace(document_id=rank + 1, chunk_id=rank + 1, title=f"doc{rank}", location={}, score=0.1, snippet="", text=text)


def _ranked(question: str, texts: list[str], lang: str = "en"):
    return A.rank_sentences(question, [_chunk(t, i) for i, t in enumerate(texts)], lang)


def _passages(texts: list[str]) -> list[str]:
    return [f"doc{i}\n{t}" for i, t in enumerate(texts)]


def test_the_sentence_named_by_the_answer_is_found_whole_and_alone():
    ranked = _ranked("What exception does a generator raise when it returns?", [GENERATORS])
    sync = next(s for s in ranked if '"StopIteration"' in s.text)
    question = "What exception does a generator raise when it returns?"
    assert A._pointed_by_name('will cause "StopIteration" to be ra', question, ranked) is sync  # not StopAsyncIteration's
    assert A._pointed_by_name("StopAsyncIteration.", question, ranked) is not sync
    assert A._pointed_by_name("It is raised.", question, ranked) is None  # no name
    # a name the question writes, or an all-capitals word many sentences repeat, points at nothing
    assert A._pointed_by_name("StopIteration", "Is StopIteration raised when a generator returns?", ranked) is None
    texts = ["The TERM signal ends the process.", "Send KILL when TERM fails."]
    assert A._pointed_by_name(" KILL.", "Which signal is sent?", _ranked("Which signal is sent?", texts)) is None
    # a name two sentences write points at neither; one of a dotted name ("object.__del__") is the name whole
    two = _ranked("When is __del__ called?", ["object.__del__(self) Called when the instance is about to be destroyed.",
                                               'Whether "__del__()" is called a second time is implementation-dependent.'])
    assert A._pointed_by_name(" The __del__() method.", "Which method runs when an object is destroyed?", two) is None


def test_the_sentence_the_answer_copies_a_name_from_is_quoted_before_the_likelihoods_first():
    question = "What exception does a generator raise when it returns?"
    ranked = _ranked(question, [GENERATORS])
    sync = next(s for s in ranked if '"StopIteration"' in s.text)
    other = next(s for s in ranked if s is not sync)
    evidence = [(1, other), (1, sync)]  # the likelihood's order (grounding.focus): the asynchronous one first
    cut = ' The "return" statement indicates that the generator is done and will cause "StopIteration" to be ra'
    answer, how = A.settle(cut, question, evidence, "en", DECLINE, passages=_passages([GENERATORS]))
    assert '"StopIteration" to be raised' in answer and "StopAsyncIteration" not in answer and how["answer"] == "extractive"
    # without a name to point with, the first is quoted as before
    answer, _ = A.settle(" It is done.", question, evidence, "en", DECLINE, passages=_passages([GENERATORS]))
    assert "StopAsyncIteration" in answer


def test_a_file_name_the_answer_copies_points_past_sentences_that_match_as_well():
    question = "Which file holds the version number of the Debian release?"
    ranked = _ranked(question, RELEASE)
    evidence = [(s.chunk + 1, s) for s in ranked[:3]]
    assert "/etc/debian_version" not in evidence[0][1].text
    answer, how = A.settle(" The version number is stored in the /etc/debian_version directory.", question, evidence, "en",
                           DECLINE, passages=_passages(RELEASE))
    assert "/etc/debian_version" in answer and answer.endswith("[2]") and how["answer"] == "extractive"
    answer, _ = A.settle(" The version number is stored in a directory.", question, evidence, "en", DECLINE,
                         passages=_passages(RELEASE))
    assert "/etc/debian_version" not in answer


def test_a_named_sentence_that_holds_none_of_the_questions_words_is_not_quoted():
    question = "Which file holds the version number of the Debian release?"
    texts = ["Plants need light and water to grow.", "Gardeners water them at dawn.", "Use pH-meter readings for acid soil."]
    ranked = _ranked(question, texts)
    evidence = [(s.chunk + 1, s) for s in ranked[:3]]
    named = A._pointed_by_name(" The pH-meter file.", question, [s for _, s in evidence])
    assert named is not None and named.match < A.POINTED_MIN_MATCH
    answer, how = A.settle(" The pH-meter file.", question, evidence, "en", DECLINE, passages=_passages(texts))
    assert answer == DECLINE and how == {"answer": "declined", "check": "no_answer"}
