"""Grounded text completions (/v1/completions with rag) of a base model: a one-line question is answered as a chat
question is (the question in its language's scaffold, the checked answer or a decline), never continued as raw text;
any other prompt (a longer one, a sentence to continue) is completed as written, and a question-and-answer transcript
stops before a new question line.

Real parts: the tiny real Llama bundle (random weights), a real DocumentService (SQLite, FAISS, BM25, the packaged
embedding model) in a tmp dir.
"""
from __future__ import annotations

import pytest

from edge_agent.services.grounding import SCAFFOLDS, RagOptions, completion_question

NL_DOC = ("Het Zeeuwse archief\n\nHet archief is op werkdagen open van negen tot vijf. "
          "De toegangscode van het Zeeuwse archief is QX-7731-B; de sleutel ligt bij de portier. "
          "Bezoekers melden zich aan de balie.")
NL_Q = "Wat is de toegangscode van het Zeeuwse archief?"
FACT = "QX-7731-B"
LABELS = {"user": "Question: ", "assistant": "Answer:"}


@pytest.mark.parametrize("prompt, question", [
    (NL_Q, NL_Q),
    (f"  Question: {NL_Q}\nAnswer: ", NL_Q),  # the transcript's labels
    (f"Vraag: {NL_Q}\nAntwoord:", NL_Q),  # a scaffold's labels
    (f"Answer this.\nQuestion: {NL_Q}\nAnswer:", None),  # the caller's own template: completed as written
    ("Question: \nAnswer:", None),  # nothing asked
    ("De toegangscode van het Zeeuwse archief is", None),  # a sentence to continue, not a question
    ("Question: Name the access code\nAnswer:", "Name the access code"),  # labelled: asked, question mark or not
])
def test_the_question_of_a_completion_prompt(prompt, question):
    assert completion_question(prompt, LABELS) == question


@pytest.fixture(scope="module")
def base_chat(tiny_bundles, tmp_path_factory):
    from edge_agent.config import Settings
    from edge_agent.rag.embedder import OnnxEmbedder
    from edge_agent.runtime import build_engine
    from edge_agent.services.chat import ChatService
    from edge_agent.services.documents import DocumentService
    from rag_docs import EMBED_CACHE

    tmp = tmp_path_factory.mktemp("completions")
    docs = DocumentService.from_settings(Settings(data_dir=tmp / "var", index_dir=tmp / "index"), embedder=OnnxEmbedder(cache_dir=EMBED_CACHE))
    docs.add_text("Zeeuws archief", NL_DOC)
    bundle = tiny_bundles["llama"]
    scheduler = build_engine(Settings(models_dir=bundle.parent, model=bundle.name, threads=1, context_length=512, max_batch=4,
                                      data_dir=tmp / "var", index_dir=tmp / "index"))
    chat = ChatService(scheduler)
    chat.attach_documents(lambda: docs)
    yield chat
    scheduler.stop()
    docs.close()


def test_a_bare_question_is_answered_as_in_chat_not_continued(base_chat):
    from edge_agent.services.chat import SamplingOptions

    gen = base_chat.complete([NL_Q], SamplingOptions(max_tokens=6, temperature=0), rag=RagOptions(k=2))
    (r,) = gen.collect()
    how = gen.grounding["choices"][0]
    assert gen.grounding["language"] == "nl" and how["answer"] in ("model", "extractive") and how["check"] != "none"
    assert not r.text.lstrip().startswith(NL_Q[:20])  # the question is not repeated
    if how["answer"] == "extractive":  # random weights: the check replaces their noise with the passage's own words
        assert FACT in r.text and r.text.endswith("[1]")
    assert gen.sources and gen.sources[0].title == "Zeeuws archief" and gen.sources[0].used
    chat = base_chat.chat([{"role": "user", "content": NL_Q}], SamplingOptions(max_tokens=6, temperature=0), rag=RagOptions(k=2))
    assert chat.collect()[0].text == r.text  # the same answer as a chat question gets
    gp = base_chat._ground_chat([{"role": "user", "content": NL_Q}], SamplingOptions(max_tokens=6), "", RagOptions(k=2))
    assert base_chat.engine.decode(gp.ids).rstrip().endswith(f"Vraag: {NL_Q}\nAntwoord:")  # the scaffold the model saw


def test_a_labelled_question_gets_the_same_answer_and_echo_shows_the_prompt_as_given(base_chat):
    from edge_agent.services.chat import SamplingOptions

    bare = base_chat.complete([NL_Q], SamplingOptions(max_tokens=6, temperature=0), rag=RagOptions(k=2)).collect()[0].text
    prompt = f"Question: {NL_Q}\nAnswer:"
    gen = base_chat.complete([prompt], SamplingOptions(max_tokens=6, temperature=0), echo=True, rag=RagOptions(k=2))
    (r,) = gen.collect()
    assert r.text == prompt + bare


def test_an_absent_subject_is_declined_without_running_the_model(base_chat):
    from edge_agent.services.chat import SamplingOptions

    gen = base_chat.complete(["Wat is de hoofdstad van Australië?"], SamplingOptions(max_tokens=8), rag=RagOptions(k=2))
    (r,) = gen.collect()
    assert r.text == SCAFFOLDS["nl"].absent and gen.usage.completion_tokens == 0
    assert gen.grounding["choices"][0]["answer"] == "declined"


def test_a_longer_prompt_is_completed_as_written_and_stops_before_a_new_question(base_chat):
    from edge_agent.services.chat import SamplingOptions

    prompt = f"Beantwoord de vraag.\nQuestion: {NL_Q}\nAnswer:"
    opts = SamplingOptions(max_tokens=6, temperature=0)
    gen = base_chat.complete([prompt], opts, rag=RagOptions(k=2))
    gen.collect()
    assert gen.grounding["choices"][0] == {"index": 0, "answer": "model", "check": "none"}  # not checked: the caller's template
    assert "\nQuestion:" in opts.stop and "\nTekst [" in opts.stop
