"""documents_model_aliases: a model name that answers from the documents, for apps that only let a user pick a model
(Open WebUI, chat front ends, Ollama clients): grounded without a `rag` field, the cited sources listed in the text.

The real server on loopback over the tiny Llama and a real DocumentService in tmp_path; the real openai client."""
from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import openai
import pytest

from api_helpers import KEY, QUESTION, api_settings, make_documents, start_server


@pytest.fixture(scope="module")
def server(tiny_bundles, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("docalias")
    svc, ids = make_documents(tmp)
    server = start_server(api_settings(tiny_bundles["llama"], tmp, max_batch=4, documents_model_aliases=["documents"]), documents=svc)
    server.ids = ids
    yield server
    server.close()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def _footer(text: str) -> tuple[str, list[str]]:
    answer, _, listed = text.partition("\n\nSources:\n")
    return answer, listed.splitlines()


def test_the_alias_is_listed_and_answers_from_the_documents_with_its_sources_in_the_text(client, server):
    assert "documents" in [m.id for m in client.models.list().data]
    r = client.chat.completions.create(model="documents", messages=[{"role": "user", "content": QUESTION}], max_tokens=24,
                                       temperature=0)
    sources = r.model_extra["sources"]
    assert sources and sources[0]["document_id"] == server.ids["archive"]
    answer, listed = _footer(r.choices[0].message.content)
    said = {int(n) for n in re.findall(r"\[(\d+)\]", answer)}
    assert said, r.choices[0].message.content  # grounded answers cite their passages
    titles = {s["number"]: s["title"] for s in sources}
    assert listed == [f"[{n}] {titles[n]}" for n in sorted(said)]  # exactly the cited ones, in order, with their titles
    assert "QX-7731-B" in answer and "[1] Zeeland archive" in listed

    # streamed: the same text, the list at its end
    stream = client.chat.completions.create(model="documents", messages=[{"role": "user", "content": QUESTION}], max_tokens=24,
                                            temperature=0, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == r.choices[0].message.content

    # the model's own name: no documents, no list
    plain = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": QUESTION}], max_tokens=8,
                                           temperature=0)
    assert "sources" not in (plain.model_extra or {}) and "Sources:" not in plain.choices[0].message.content


def test_a_requests_own_rag_options_win_and_completions_take_the_alias_too(client, server):
    r = client.chat.completions.create(model="documents", messages=[{"role": "user", "content": QUESTION}], max_tokens=8,
                                       temperature=0, extra_body={"rag": {"k": 1, "filters": {"document_ids": [server.ids["canteen"]]}}})
    assert [s["document_id"] for s in r.model_extra["sources"]] == [server.ids["canteen"]]
    c = client.completions.create(model="documents", prompt=f"Question: {QUESTION}\nAnswer:", max_tokens=8, temperature=0)
    assert c.model_extra["sources"][0]["document_id"] == server.ids["archive"]
    resp = client.responses.create(model="documents", input=QUESTION, max_output_tokens=24, temperature=0)
    assert resp.model_extra["sources"][0]["document_id"] == server.ids["archive"]
    assert "QX-7731-B" in resp.output_text and "\n\nSources:\n[1] Zeeland archive" in resp.output_text


def test_ollama_chat_with_the_alias_is_grounded(server):
    body = {"model": "documents", "stream": False, "messages": [{"role": "user", "content": QUESTION}],
            "options": {"temperature": 0, "num_predict": 24}}
    req = urllib.request.Request(server.url + "/api/chat", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    content = json.load(urllib.request.urlopen(req, timeout=60))["message"]["content"]
    answer, listed = _footer(content)
    assert "QX-7731-B" in answer and "[1] Zeeland archive" in listed, content
    tags = urllib.request.Request(server.url + "/api/tags", headers={"Authorization": f"Bearer {KEY}"})
    assert "documents:latest" in [m["name"] for m in json.load(urllib.request.urlopen(tags, timeout=60))["models"]]


def _post(server, path: str, body: dict):
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    return urllib.request.urlopen(req, timeout=60)


def test_ollama_generate_with_the_alias_is_grounded_as_chat_is(server):
    """/api/generate with the alias (as /api/tags lists it, "documents:latest", in any case) answers as /api/chat does:
    from the documents, the cited sources listed, no `context`; the model's own name stays plain."""
    opts = {"temperature": 0, "num_predict": 24}
    chat = json.load(_post(server, "/api/chat", {"model": "Documents:latest", "stream": False, "options": opts,
                                                 "messages": [{"role": "user", "content": QUESTION}]}))["message"]["content"]
    body = {"model": "Documents:latest", "prompt": QUESTION, "options": opts}
    got = json.load(_post(server, "/api/generate", {**body, "stream": False}))
    answer, listed = _footer(got["response"])
    assert "QX-7731-B" in answer and "[1] Zeeland archive" in listed, got["response"]
    assert got["response"] == chat and "context" not in got
    lines = [json.loads(line) for line in _post(server, "/api/generate", body).read().splitlines() if line.strip()]  # streamed
    assert "".join(line["response"] for line in lines) == got["response"] and lines[-1]["done"] and "context" not in lines[-1]

    plain = json.load(_post(server, "/api/generate", {**body, "model": "llama", "stream": False, "options": {**opts, "num_predict": 8}}))
    assert "Sources:" not in plain["response"] and plain["context"]
    for extra in ({"template": "{{ .Prompt }}"}, {"context": plain["context"]}):  # they shape a prompt of ids: refused, saying why
        with pytest.raises(urllib.error.HTTPError) as e:
            _post(server, "/api/generate", {**body, **extra})
        field = next(iter(extra))
        assert e.value.code == 400 and f"`{field}` cannot be combined" in json.load(e.value)["error"]


def test_batch_lines_with_the_alias_are_grounded_on_every_endpoint(server):
    """Batch lines reach ChatService as the routes do, so the alias grounds them all (a /v1/responses line was answered
    by the plain model while the live route grounded it: each caller applied the alias itself)."""
    from edge_agent.jobs.batch import BatchRequestRunner, run_line

    rt = server.runtime
    runner = BatchRequestRunner(chat=rt.chat, embeddings=None, settings=rt.settings, priority=10)
    bodies = {"/v1/chat/completions": {"messages": [{"role": "user", "content": QUESTION}], "max_tokens": 24},
              "/v1/completions": {"prompt": f"Question: {QUESTION}\nAnswer:", "max_tokens": 8},
              "/v1/responses": {"input": QUESTION, "max_output_tokens": 24}}
    for url, body in bodies.items():
        for model, grounded in (("documents", True), ("llama", False)):
            out = run_line(runner, {"custom_id": "x", "url": url, "body": {**body, "model": model, "temperature": 0}})["response"]["body"]
            assert ("sources" in out) is grounded, (url, model, out)
            if grounded:
                assert out["sources"][0]["document_id"] == server.ids["archive"], url
    answer = out["output"][0]["content"][0]["text"]  # the last line: /v1/responses, the plain model
    assert "Sources:" not in answer


def test_every_request_path_names_its_model_to_the_chat_service():
    """ChatService.chat/complete apply the alias to the model= they are given (the one place); a route that left it
    out would answer as the plain model, as /api/generate and /v1/responses batch lines did. The modules that serve
    requests, parsed: every call that starts a generation names the model."""
    import ast
    from pathlib import Path

    import edge_agent

    pkg = Path(edge_agent.__file__).parent
    calls, missing = 0, []
    for f in [*(pkg / "api").glob("*.py"), *(pkg / "services").glob("*_protocol.py"), pkg / "jobs" / "batch.py"]:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("chat", "complete") \
                    and len(node.args) >= 2:  # (messages or prompts, options): ChatService's, not a client's
                calls += 1
                if not any(k.arg == "model" for k in node.keywords):
                    missing.append(f"{f.relative_to(pkg)}:{node.lineno}")
    assert calls >= 9 and not missing, missing


def test_the_list_is_in_the_answers_language_and_absent_from_a_decline():
    from edge_agent.services.document_results import location_label
    from edge_agent.services.generation import sources_footer
    from edge_agent.services.grounding import Source

    # locations as retrieval makes them: the label holds the page and the heading (a PDF's page was listed twice)
    src = [Source(7, 70, "Huurcontract", {"heading": "Opzegging", "label": location_label(3, "Opzegging"), "page": 3}, 0.9, "...",
                  number=1),
           Source(8, 80, "Notitie", {}, 0.5, "...", number=2),
           Source(9, 90, "declaratiebeleid", {"heading": None, "label": location_label(2, None), "page": 2}, 0.4, "...", number=3)]
    assert sources_footer("De opzegtermijn is drie maanden [1].", src, "nl") == "\n\nBronnen:\n[1] Huurcontract, Opzegging (p. 3)"
    assert sources_footer("Two months [2][1].", src, "en") == "\n\nSources:\n[1] Huurcontract, Opzegging (p. 3)\n[2] Notitie"
    assert sources_footer("Zestig dagen [3].", src, "nl") == "\n\nBronnen:\n[3] declaratiebeleid (p. 2)"  # the page once
    assert sources_footer("De documenten gaan hier niet over.", src, "nl") == ""


WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}


def test_tools_with_the_alias_are_refused_in_the_users_terms(client, server):
    """The alias with tools said "tools the model may call cannot be combined with rag": rag is a field the app never
    sent. The 400 says that tools are not available with the documents model and what to do; tool_choice "none"
    (tools given, none called) still answers from the documents; the model's own name still calls tools."""
    said = "tools are not available with the documents model 'documents' (it answers from the documents)"
    messages = [{"role": "user", "content": QUESTION}]
    for choice in ({}, {"tool_choice": "auto"}, {"tool_choice": "required"},
                   {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}):
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="documents", messages=messages, tools=[WEATHER], max_tokens=8, **choice)
        err = e.value.body
        assert said in err["message"] and "rag" not in err["message"] and err["param"] == "tools", (choice, err)
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="documents", input=QUESTION, max_output_tokens=8,
                                tools=[{"type": "function", **WEATHER["function"]}])
    assert said in e.value.body["message"] and "rag" not in e.value.body["message"], e.value.body
    with pytest.raises(urllib.error.HTTPError) as he:
        _post(server, "/api/chat", {"model": "documents", "stream": False, "messages": messages, "tools": [WEATHER]})
    error = json.load(he.value)["error"]
    assert he.value.code == 400 and said in error and "rag" not in error, error

    none = client.chat.completions.create(model="documents", messages=messages, tools=[WEATHER], tool_choice="none",
                                          max_tokens=24, temperature=0)
    assert none.model_extra["sources"][0]["document_id"] == server.ids["archive"]
    plain = client.chat.completions.create(model="llama", messages=[{"role": "user", "content": "Weather in Delft?"}],
                                           tools=[WEATHER], max_tokens=200, temperature=0,
                                           tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert plain.choices[0].message.tool_calls[0].function.name == "get_weather"
