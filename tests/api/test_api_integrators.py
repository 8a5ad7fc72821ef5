"""What an integrator meets when an existing app is pointed here instead of OpenAI, vLLM or Ollama: the real openai and
ollama clients and raw HTTP against the real server on loopback."""
from __future__ import annotations

import json
import re

import openai
import pytest

from api_helpers import KEY

MSGS = [{"role": "user", "content": "Noem een stad."}]
REQ_ID = re.compile(r"req_[0-9a-f]{32}")


@pytest.fixture()
def client(live):
    return openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0, timeout=60)


def test_every_answer_carries_a_request_id(client, live):
    """OpenAI answers every request with x-request-id (the openai client shows it as `request_id`, on errors too, and
    users quote it); vLLM echoes the client's X-Request-Id. It was missing, so `request_id` was None."""
    raw = client.chat.completions.with_raw_response.create(model="llama", messages=MSGS, max_tokens=2)
    assert REQ_ID.fullmatch(raw.request_id or ""), raw.headers
    assert raw.parse().choices[0].message.role == "assistant"
    again = client.chat.completions.with_raw_response.create(model="llama", messages=MSGS, max_tokens=2)
    assert REQ_ID.fullmatch(again.request_id or "") and again.request_id != raw.request_id
    with client.chat.completions.with_streaming_response.create(model="llama", messages=MSGS, max_tokens=2, stream=True) as s:
        assert REQ_ID.fullmatch(s.headers.get("x-request-id", "")), s.headers
        assert any(line.startswith("data: ") for line in s.iter_lines())
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="llama", messages=MSGS, max_tokens=2, temperature=9)
    assert REQ_ID.fullmatch(e.value.request_id or ""), e.value.response.headers
    echoed = client.models.with_raw_response.list(extra_headers={"X-Request-Id": "trace-42.a:b_c"})
    assert echoed.request_id == "trace-42.a:b_c"
    unsafe = client.models.with_raw_response.list(extra_headers={"X-Request-Id": "a b\"c"})
    assert REQ_ID.fullmatch(unsafe.request_id or ""), unsafe.headers  # not echoed into a header and the log
    for path in ("/api/tags", "/v1/nope", "/health"):
        status, headers, _ = live.request("GET", path)
        assert REQ_ID.fullmatch(headers.get("x-request-id", "")), (path, status, headers)


def test_a_replayed_refusal_part_is_read_and_a_wrong_role_names_the_roles(client):
    """OpenAI's assistant messages take `refusal` content parts (a client replays an earlier refusal); they were a 400
    "this model reads text only". A role that is none of the five named only system, developer and user, as if assistant
    and tool were wrong too; the deprecated `function` role now says what to send instead."""
    refused = {"role": "assistant", "content": [{"type": "refusal", "refusal": "Dat kan ik niet."}, {"type": "text", "text": " Wel dit."}]}
    r = client.chat.completions.create(model="llama", messages=[*MSGS, refused, {"role": "user", "content": "Waarom niet?"}], max_tokens=2)
    assert r.choices[0].message.role == "assistant"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="llama", messages=[*MSGS, {"role": "robot", "content": "x"}], max_tokens=2)
    err = e.value.body
    assert err["param"] == "messages[1].role" and all(role in err["message"] for role in ("assistant", "tool", "developer")), err
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="llama", max_tokens=2, messages=[*MSGS, {"role": "function", "name": "f", "content": "x"}])
    assert e.value.body["param"] == "messages[1].role" and "tool_call_id" in e.value.body["message"], e.value.body
    with pytest.raises(openai.BadRequestError) as e:  # an image in an earlier answer is still refused, saying why
        client.chat.completions.create(model="llama", max_tokens=2, messages=[
            *MSGS, {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}])
    assert "text only" in e.value.body["message"], e.value.body


def test_prompt_cache_hints_of_the_openai_client_change_nothing(client):
    """openai 3.57's chat.completions.create takes prompt_cache_retention and prompt_cache_options (caching hints; the
    prefix cache here is automatic): they were a 400 "unknown field" on chat, and prompt_cache_options on responses too.
    Responses' reasoning {"effort": "none"} is taken as chat's reasoning_effort "none" is."""
    kw = dict(model="llama", messages=MSGS, max_tokens=3, temperature=0)
    plain = client.chat.completions.create(**kw).choices[0].message.content
    hinted = client.chat.completions.create(**kw, prompt_cache_key="k", prompt_cache_retention="24h",
                                            prompt_cache_options={"ttl": "30m"})
    assert hinted.choices[0].message.content == plain
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(**kw, extra_body={"prompt_cache_retention": "1w"})
    assert e.value.body["param"] == "prompt_cache_retention", e.value.body
    r = client.responses.create(model="llama", input="Noem een stad.", max_output_tokens=3, temperature=0,
                                prompt_cache_retention="24h", prompt_cache_options={"ttl": "30m"}, reasoning={"effort": "none"})
    assert r.status in ("completed", "incomplete") and r.output_text == plain
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="llama", input="x", max_output_tokens=2, reasoning={"effort": "high"})
    assert e.value.body["param"] == "reasoning" and "does not reason" in e.value.body["message"], e.value.body
    assert json.loads(json.dumps(r.model_dump()))["object"] == "response"


def test_an_ollama_chat_longer_than_the_context_loses_its_oldest_messages(live):
    """Ollama's /api/chat drops the oldest messages of a conversation that does not fit (keeping the system messages and
    the last one), so a long Open WebUI or Continue chat goes on; here it was a 400 once the history outgrew the context
    (512 tokens on this server). A last message that cannot fit alone is still the 400, and the OpenAI route, as
    OpenAI's, still refuses an over-long conversation."""
    import ollama

    from edge_agent.services.ollama_protocol import without_oldest

    oc = ollama.Client(host=live.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
    msgs = [{"role": "system", "content": "Antwoord kort."}]
    for i in range(12):
        msgs += [{"role": "user", "content": f"Vraag {i}: vertel iets over de molens van Kinderdijk en de polders eromheen."},
                 {"role": "assistant", "content": f"Antwoord {i}: de molens pompten het water uit de polders naar de rivier."}]
    msgs.append({"role": "user", "content": "Noem een stad."})
    status, _, body = live.request("POST", "/tokenize", {"model": "llama", "messages": msgs})
    assert status == 200 and json.loads(body)["count"] > 512, body  # the whole conversation cannot fit
    r = oc.chat(model="llama", messages=msgs, options={"temperature": 0, "num_predict": 3})
    assert r.done and 0 < r.prompt_eval_count < 512 and r.eval_count >= 1, r
    counts = {}
    for n in range(1, len(msgs) - 1):
        kept = without_oldest(msgs, n)
        assert kept[0]["role"] == "system" and kept[-1] == msgs[-1]
        counts[json.loads(live.request("POST", "/tokenize", {"model": "llama", "messages": kept})[2])["count"]] = n
    n = counts.get(r.prompt_eval_count)
    assert n is not None, (r.prompt_eval_count, counts)  # the answer read the system message and the newest n messages
    same = oc.chat(model="llama", messages=without_oldest(msgs, n), options={"temperature": 0, "num_predict": 3})
    assert same.message.content == r.message.content and same.prompt_eval_count == r.prompt_eval_count
    with pytest.raises(ollama.ResponseError) as e:
        oc.chat(model="llama", messages=[msgs[0], {"role": "user", "content": "molen " * 2000}], options={"num_predict": 3})
    assert e.value.status_code == 400 and "context" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        openai.OpenAI(base_url=live.url + "/v1", api_key=KEY, max_retries=0).chat.completions.create(
            model="llama", messages=msgs, max_tokens=3)
    assert e.value.body["code"] == "context_length_exceeded"
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f", "arguments": "{}"}]}
    history = [msgs[0], msgs[1], call, {"role": "tool", "content": "42", "tool_call_id": "c1"}, msgs[2], msgs[-1]]
    assert without_oldest(history, 2) == [msgs[0], msgs[2], msgs[-1]]  # a result whose call went goes with it


def test_a_client_whose_base_url_lacks_v1_is_told_to_add_it(live):
    """The openai client (or LiteLLM, LangChain) pointed at http://host:port posts to /chat/completions; the 404 said only
    "no route matches this URL". It now names the /v1 route and the base_url to set; other 404s are as they were."""
    bare = openai.OpenAI(base_url=live.url, api_key=KEY, max_retries=0, timeout=60)
    with pytest.raises(openai.NotFoundError) as e:
        bare.chat.completions.create(model="llama", messages=MSGS, max_tokens=2)
    assert "/v1/chat/completions" in e.value.body["message"] and "base_url" in e.value.body["message"], e.value.body
    with pytest.raises(openai.NotFoundError) as e:
        bare.models.retrieve("llama")
    assert "/v1/models/llama" in e.value.body["message"], e.value.body
    for method, path in (("POST", "/models"), ("GET", "/v1/nope"), ("GET", "/nope"), ("POST", "/api/nope")):
        status, _, body = live.request(method, path, {} if method == "POST" else None)
        assert status in (404, 405) and b"base_url" not in body, (method, path, body)


def test_an_empty_ollama_embed_request_loads_the_model_as_ollama_answers_it(tiny_bundles, api_tmp):
    """Ollama answers an embed request with nothing to embed ("" or [] on /api/embed, "" on /api/embeddings) with 200 and
    no vectors: it is how a client loads (warms) the model, as an empty chat or generate is (done_reason "load", served
    here already). Both were a 400. A name that is not served is still a 404, and the chat model's a 400."""
    import ollama

    from api_helpers import REPO, api_settings, start_server
    from edge_agent.rag.embedder import OnnxEmbedder

    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    server = start_server(api_settings(tiny_bundles["llama"], api_tmp), documents=embedder)
    try:
        oc = ollama.Client(host=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60)
        for given in ("", []):
            r = oc.embed(model=embedder.name, input=given)
            assert r.embeddings == [] and r.model == embedder.name, r
        status, _, body = server.request("POST", "/api/embed", {"model": "default"})
        assert status == 200 and json.loads(body)["embeddings"] == [], body
        assert oc.embeddings(model="default", prompt="").embedding == []
        assert len(oc.embed(model="default", input="een molen").embeddings[0]) == len(embedder.embed(["x"])[0])
        with pytest.raises(ollama.ResponseError) as e:
            oc.embed(model="nomic-embed-text", input="")
        assert e.value.status_code == 404
        with pytest.raises(ollama.ResponseError) as e:
            oc.embeddings(model="llama", prompt="")
        assert e.value.status_code == 400 and "does not support embeddings" in e.value.error
        with pytest.raises(ollama.ResponseError) as e:
            oc.embed(model="default", input=["a", ""])
        assert e.value.status_code == 400
    finally:
        server.close()


def test_a_request_without_a_model_is_served_by_the_model_as_vllm_and_llama_cpp_serve_it(live):
    """llama.cpp's server ignores `model` and vLLM serves its first model when it is left out, so scripts and curl
    examples written for them send none; here that was a 400 "Field required". OpenAI's clients always send one."""
    ask = {"messages": MSGS, "max_tokens": 2, "temperature": 0}
    status, _, body = live.request("POST", "/v1/chat/completions", ask)
    assert status == 200, body
    named = json.loads(live.request("POST", "/v1/chat/completions", {**ask, "model": "llama"})[2])
    assert json.loads(body)["choices"][0]["message"] == named["choices"][0]["message"]
    status, _, body = live.request("POST", "/v1/completions", {"prompt": "De molen", "max_tokens": 2})
    assert status == 200 and json.loads(body)["usage"]["completion_tokens"] <= 2, body
    status, _, body = live.request("POST", "/v1/responses", {"input": "Noem een stad.", "max_output_tokens": 2})
    assert status == 200 and json.loads(body)["object"] == "response", body
    status, _, body = live.request("POST", "/v1/embeddings", {"input": "een molen"})  # no embedder on this server
    assert status == 503 and json.loads(body)["error"]["param"] != "model", body
    status, _, body = live.request("POST", "/v1/chat/completions", {**ask, "model": ""})
    assert status == 400 and json.loads(body)["error"]["param"] == "model", body  # an empty name is still refused


def test_the_model_cards_say_the_context_length_as_vllm_lists_it(client, live):
    """vLLM's /v1/models gives each model's max_model_len, and clients size their prompts by it (Continue's vLLM provider;
    config generators fall back to 128000 tokens without it). The cards had no length, so such a client sent prompts
    this server (512 tokens here, 4096 for the default model) refused."""
    models = client.models.list().data
    assert [m.model_extra.get("max_model_len") for m in models] == [live.runtime.chat.context_length] == [512]
    assert client.models.retrieve("default").model_extra.get("max_model_len") == 512
    status, _, body = live.request("POST", "/tokenize", {"model": "llama", "prompt": "x"})
    assert json.loads(body)["max_model_len"] == 512  # the same number /tokenize gives


def test_the_ollama_names_of_our_models_work_on_the_openai_routes(client, live):
    """/api/tags lists the models as "llama:latest" and Ollama's own /v1 routes take such names, so an app that lists
    models the Ollama way and then talks to /v1 sends them; they were a 404 model_not_found here. Another tag is not
    ours and stays a 404."""
    tags = [m["model"] for m in json.loads(live.request("GET", "/api/tags")[2])["models"]]
    assert tags == ["llama:latest"], tags
    for name, served in (("llama:latest", "llama"), ("default:latest", "llama"), ("Llama:Latest", "llama")):
        r = client.chat.completions.create(model=name, messages=MSGS, max_tokens=2)
        assert r.model == served, (name, r.model)
    assert client.completions.create(model="llama:latest", prompt="De molen", max_tokens=2).model == "llama"
    assert client.responses.create(model="llama:latest", input="Noem een stad.", max_output_tokens=2).model == "llama"
    for name in ("llama:latest", "Default:Latest"):  # models.retrieve too (an app checks the model it was given): it was a 404
        assert client.models.retrieve(name).id == "llama"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("llama:7b")
    for name in ("llama:7b", "LLAMA"):  # only the :latest spelling is Ollama's; a bare name stays exact, as on vLLM
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(model=name, messages=MSGS, max_tokens=2)


def test_tokenize_refuses_the_assistant_message_chat_refuses(live):
    """/tokenize took an assistant message with neither content nor tool_calls (the schema's anyOf refuses it, and
    chat answers 400), so vLLM-style clients counting a history before sending it got a count for a request that
    would fail (schemathesis: ST201)."""
    for path in ("/tokenize", "/v1/chat/completions"):
        status, _, body = live.request("POST", path, {"model": "llama", "messages": [*MSGS, {"role": "assistant"}], "max_tokens": 2}
                                       if path != "/tokenize" else {"model": "llama", "messages": [*MSGS, {"role": "assistant"}]})
        err = json.loads(body)["error"]
        assert status == 400 and err["param"] == "messages[1].content" and "tool_calls" in err["message"], (path, body)
    call = {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    assert live.request("POST", "/tokenize", {"model": "llama", "messages": [*MSGS, call]})[0] == 200
