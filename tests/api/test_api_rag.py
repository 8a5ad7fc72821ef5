"""Chat and completions with `rag`: sources in the response and the stream, filters, 503 while loading, bad fields.

The real server on loopback over the tiny Llama and a real DocumentService (SQLite, FAISS, BM25,
the packaged embedding model) in tmp_path; the answer's wording is random, the sources are not.
"""
from __future__ import annotations

import json

import openai
import pytest

from api_helpers import KEY, QUESTION, api_settings, make_documents, start_server
from edge_agent.api import protocol as p


@pytest.fixture(scope="module")
def rag_server(tiny_bundles, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rag")
    svc, ids = make_documents(tmp)
    server = start_server(api_settings(tiny_bundles["llama"], tmp, max_batch=4), documents=svc)
    server.ids = ids
    yield server
    server.close()


@pytest.fixture(scope="module")
def client(rag_server):
    return openai.OpenAI(base_url=rag_server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def _sources(obj) -> list[dict]:
    extra = obj.model_extra or {}
    assert "sources" in extra, obj
    return [p.Source.model_validate(s).model_dump() for s in extra["sources"]]


def test_chat_with_rag_carries_sources(client, rag_server):
    r = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": QUESTION}], max_tokens=4,
                                       temperature=0, extra_body={"rag": {"k": 2}})
    sources = _sources(r)
    assert 1 <= len(sources) <= 2
    first = sources[0]
    assert first["document_id"] == rag_server.ids["archive"] and first["title"] == "Zeeland archive"
    assert "QX-7731-B" in first["snippet"] and first["score"] > 0 and first["location"]["ordinal"] == 0
    # the grounded prompt is longer than the bare question by at least the fact
    bare = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": QUESTION}], max_tokens=1)
    assert r.usage.prompt_tokens > bare.usage.prompt_tokens + 20
    assert "sources" not in (bare.model_extra or {})  # no rag, no sources field


def test_completion_with_rag_and_echo(client, rag_server):
    r = client.completions.create(model="llama", prompt=f"Question: {QUESTION}\nAnswer:", max_tokens=3, echo=True,
                                  extra_body={"rag": {"k": 1, "mode": "bm25"}})
    assert [s["document_id"] for s in _sources(r)] == [rag_server.ids["archive"]]
    assert r.choices[0].text.startswith(f"Question: {QUESTION}\nAnswer:")  # echo shows the prompt as given


def test_streams_send_sources_first(client, rag_server):
    chunks = list(client.chat.completions.create(model="llama", messages=[{"role": "user", "content": QUESTION}], max_tokens=4,
                                                 stream=True, extra_body={"rag": {}}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert _sources(chunks[0])[0]["document_id"] == rag_server.ids["archive"]
    assert all("sources" not in (c.model_extra or {}) for c in chunks[1:])
    chunks = list(client.completions.create(model="llama", prompt=QUESTION, max_tokens=3, stream=True, extra_body={"rag": {"k": 3}}))
    assert _sources(chunks[0])[0]["document_id"] == rag_server.ids["archive"]
    assert chunks[0].choices[0].text == "" and all("sources" not in (c.model_extra or {}) for c in chunks[1:])


def test_responses_api_with_rag_carries_the_chat_sources(client, rag_server):
    """POST /v1/responses takes `rag` as chat does: the same sources and answer, in the response and in response.created."""
    kw = dict(model="llama", max_output_tokens=4, temperature=0, extra_body={"rag": {"k": 2}})
    r = client.responses.create(input=QUESTION, **kw)
    chat = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": QUESTION}], max_tokens=4,
                                          temperature=0, extra_body={"rag": {"k": 2}})
    assert _sources(r) == _sources(chat) and _sources(r)[0]["document_id"] == rag_server.ids["archive"]
    assert r.output_text == chat.choices[0].message.content and r.model_extra["grounding"] == chat.model_extra["grounding"]
    events = list(client.responses.create(input=QUESTION, stream=True, **kw))
    assert _sources(events[0].response) == _sources(r) and events[-1].response.output_text == r.output_text


def test_filters_restrict_sources(client, rag_server):
    ids = rag_server.ids

    def sources(filters: dict, k: int = 4) -> list[dict]:
        r = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": QUESTION}], max_tokens=1,
                                           extra_body={"rag": {"k": k, "filters": filters}})
        return _sources(r)

    assert {s["document_id"] for s in sources({"document_ids": [ids["canteen"]]})} == {ids["canteen"]}
    assert {s["document_id"] for s in sources({"type": "md"})} == {ids["bikes"]}
    # only passages the answer was given are sources: the archive's (the bike shed has none of the question's words)
    assert {s["document_id"] for s in sources({"document_ids": [ids["archive"], ids["bikes"]]})} == {ids["archive"]}
    # nothing matches: the answer comes without sources, and says so with an empty list
    r = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": QUESTION}], max_tokens=2,
                                       extra_body={"rag": {"filters": {"document_ids": [999999]}}})
    assert _sources(r) == [] and r.choices[0].finish_reason in ("stop", "length")


def test_503_with_retry_after_while_documents_load(rag_server):
    rt = rag_server.runtime
    docs, rt.documents, rt.documents_status = rt.documents, None, "still loading"
    try:
        for path, body in (("/v1/chat/completions", {"messages": [{"role": "user", "content": QUESTION}]}),
                           ("/v1/completions", {"prompt": QUESTION}), ("/v1/retrieve", {"query": QUESTION})):
            status, headers, raw = rag_server.request("POST", path, {"model": "llama", "rag": {"k": 2}, **body}
                                                      if path != "/v1/retrieve" else body)
            assert status == 503, raw
            assert headers["retry-after"] == "5"
            err = json.loads(raw)["error"]
            assert "still loading" in err["message"] and err["code"] == "documents_unavailable"
        status, _, _ = rag_server.request("POST", "/v1/chat/completions", {"model": "llama", "max_tokens": 1,
                                                                           "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200  # chat without rag is served meanwhile
    finally:
        rt.documents, rt.documents_status = docs, None


@pytest.mark.parametrize("rag, param", [
    ({"k": 0}, "rag.k"), ({"k": 21}, "rag.k"), ({"k": "4"}, "rag.k"), ({"mode": "fuzzy"}, "rag.mode"), ({"top": 3}, "rag.top"),
    ({"filters": {"document_ids": ["a"]}}, "rag.filters.document_ids[0]"), ({"filters": {"document_ids": [0]}}, "rag.filters.document_ids[0]"),
    ({"filters": {"kind": "pdf"}}, "rag.filters.kind"), ({"filters": {"path_prefix": ""}}, "rag.filters.path_prefix"), ("hybrid", "rag"),
])
def test_bad_rag_fields_are_400(rag_server, rag, param):
    status, _, raw = rag_server.request("POST", "/v1/chat/completions",
                                        {"model": "llama", "messages": [{"role": "user", "content": QUESTION}], "rag": rag})
    assert status == 400, raw
    err = json.loads(raw)["error"]
    assert err["param"] == param and err["type"] == "invalid_request_error"


def test_rag_needs_one_text_prompt_and_a_question(rag_server):
    for body, param in (({"prompt": [1, 2, 3]}, "rag"), ({"prompt": ["a?", "b?"]}, "rag")):
        status, _, raw = rag_server.request("POST", "/v1/completions", {"model": "llama", "rag": {}, **body})
        assert status == 400 and json.loads(raw)["error"]["param"] == param, raw
    status, _, raw = rag_server.request("POST", "/v1/chat/completions",
                                        {"model": "llama", "messages": [{"role": "system", "content": "Be brief."}], "rag": {}})
    assert status == 400 and json.loads(raw)["error"]["param"] == "rag", raw


def test_sources_are_cut_to_fit_the_context(rag_server, tmp_path):
    """Twenty long chunks cannot all fit in 512 tokens: the prompt stays within the context, best chunks first."""
    from edge_agent.services.chat import SamplingOptions
    from edge_agent.services.grounding import RagOptions

    svc = rag_server.runtime.documents
    long_text = " ".join(f"Shelf {i} of the Zeeland archive holds maps of the {i}th century and letters about dikes." for i in range(200))
    doc = svc.add_text("Archive shelves", long_text).document_id
    try:
        chat = rag_server.runtime.chat
        for max_tokens in (16, 200):
            gen = chat.chat([{"role": "user", "content": "Which shelf of the Zeeland archive holds maps?"}],
                            SamplingOptions(max_tokens=max_tokens), rag=RagOptions(k=20, filters={"document_ids": [doc]}))
            gen.collect()
            assert gen.usage.prompt_tokens <= chat.context_length - max_tokens
            assert 1 <= len(gen.sources) < 20 and {s.document_id for s in gen.sources} == {doc}
        assert gen.usage.prompt_tokens > 150  # room was used, not given up
    finally:
        svc.delete(doc)


def test_sources_go_where_the_model_reads_instructions(llama_engine):
    """Chat templates: a system message (merged into a leading one); base models: the text before the transcript."""
    from types import SimpleNamespace

    from edge_agent.services.grounding import fit_sources, with_sources
    from edge_agent.services.prompts import PromptFormatter

    chunk = SimpleNamespace(document_id=7, chunk_id=70, title="Zeeland archive", location={"label": "p. 2, Codes"}, score=0.03,
                            snippet="…", text="The access   code is\nQX-7731-B.")
    g = fit_sources([chunk], 200, lambda t: len(t) // 3, lambda t, n: t[: n * 3])
    assert g.block == "Use the sources to answer.\n\nSource [1] (Zeeland archive, p. 2, Codes): The access code is QX-7731-B."
    assert [s.document_id for s in g.sources] == [7]
    assert fit_sources([chunk], 12, lambda t: len(t) // 3, lambda t, n: t[: n * 3]).sources == []  # no room: no sources

    q = [{"role": "user", "content": QUESTION}]
    base = PromptFormatter({"type": "completion"}, llama_engine.tokenizer).format_chat(with_sources(q, g.block))
    assert base.text == g.block + "\n\nQuestion: " + QUESTION + "\nAnswer:"
    chatml = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}assistant: {% endif %}")
    f = PromptFormatter({"type": "chat", "template": chatml}, llama_engine.tokenizer)
    assert f.format_chat(with_sources(q, g.block)).text.startswith("system: " + g.block + "<|im_end|>\nuser: " + QUESTION)
    merged = f.format_chat(with_sources([{"role": "system", "content": "Be brief."}, *q], g.block)).text
    assert merged.startswith("system: Be brief.\n\n" + g.block + "<|im_end|>\nuser: ")
    assert with_sources(q, g.block, in_user=True) == [{"role": "user", "content": g.block + "\n\n" + QUESTION}]


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize("doc_id", [999999, 0, 2**63, "abc", -1, "1.5"])  # unknown, outside the ids SQLite can hold, no id at all
def test_an_unknown_document_is_a_404_that_names_the_path_parameter(rag_server, method, doc_id):
    """Both routes name `document_id`, the path parameter of /openapi.json (as job_id, run_id, file_id, batch_id do)."""
    status, _, raw = rag_server.request(method, f"/v1/documents/{doc_id}")
    err = json.loads(raw)["error"]
    assert status == 404 and err["code"] == "document_not_found" and err["param"] == "document_id", err


def test_document_routes_keep_the_app_errors(rag_server):
    """The documents blueprint maps only its own errors: refusals and HTTP errors stay what the app makes them."""
    status, headers, raw = rag_server.request("GET", "/v1/documents", key=None)
    assert status == 401 and headers["www-authenticate"] == "Bearer", raw
    status, _, raw = rag_server.request("GET", "/v1/documents", headers={"Host": "evil.example"})
    assert status == 403, raw
    status, headers, raw = rag_server.request("PUT", "/v1/documents")
    assert status == 405 and "POST" in headers["allow"], raw
    status, _, raw = rag_server.request("GET", "/v1/documents/999999")
    assert status == 404 and json.loads(raw)["error"]["code"] == "document_not_found"
    status, _, raw = rag_server.request("GET", "/v1/documents?limit=0")
    assert status == 400 and json.loads(raw)["error"]["param"] == "limit"
    status, _, raw = rag_server.request("POST", "/v1/documents", b"title=x", headers={"Content-Type": "text/plain"})
    assert status == 400 and json.loads(raw)["error"]["code"] == "invalid_json", raw  # read as JSON (as OpenAI reads it): it is not
    status, _, raw = rag_server.request("POST", "/v1/documents", b"<doc/>", headers={"Content-Type": "application/xml"})
    assert status == 415, raw
