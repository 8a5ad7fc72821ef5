"""OpenAI batch files: the exact line formats in and out, bad lines, oversized files; the offline CLI and the
real server through the official openai client, over the tiny real Llama."""
from __future__ import annotations

import json
import time

import openai
import pytest

from jobs_helpers import job_settings
from edge_agent.services import protocol as p

CHAT = {"model": "llama", "messages": [{"role": "user", "content": "Say something about foxes."}], "max_tokens": 6, "temperature": 0}
GOOD = [
    {"custom_id": "req-1", "method": "POST", "url": "/v1/chat/completions", "body": CHAT},
    {"custom_id": "req-2", "method": "POST", "url": "/v1/chat/completions", "body": {**CHAT, "max_tokens": 3, "min_tokens": 3}},
]
BAD = [
    "this is not json",
    json.dumps({"custom_id": "req-1", "method": "POST", "url": "/v1/chat/completions", "body": CHAT}),  # duplicate custom_id
    json.dumps({"method": "POST", "url": "/v1/chat/completions", "body": CHAT}),  # no custom_id
    json.dumps({"custom_id": "bad-url", "method": "POST", "url": "/v1/images/generations", "body": {}}),
    json.dumps({"custom_id": "bad-body", "method": "POST", "url": "/v1/chat/completions", "body": {**CHAT, "temperature": -1}}),
    json.dumps({"custom_id": "bad-model", "method": "POST", "url": "/v1/chat/completions", "body": {**CHAT, "model": "gpt-4"}}),
    json.dumps({"custom_id": "bad-min", "method": "POST", "url": "/v1/chat/completions", "body": {**CHAT, "min_tokens": 7}}),
]
BAD_CODES = {("invalid_json", None), ("duplicate_custom_id", "req-1"), ("missing_custom_id", None), ("invalid_url", "bad-url"),
             (400, "bad-body"), (404, "bad-model"), (400, "bad-min")}


def batch_bytes() -> bytes:
    lines = [json.dumps(GOOD[0]), BAD[0], json.dumps(GOOD[1]), *BAD[1:], ""]
    return "\n".join(lines).encode()


def check_output(out_lines: list[dict]) -> None:
    assert [o["custom_id"] for o in out_lines] == ["req-1", "req-2"]  # input order
    for o in out_lines:
        assert set(o) == {"id", "custom_id", "response", "error"} and o["error"] is None
        assert o["id"].startswith("batch_req_")
        r = o["response"]
        assert r["status_code"] == 200 and r["request_id"].startswith("req_")
        body = p.ChatCompletion.model_validate(r["body"])
        assert body.object == "chat.completion" and body.id.startswith("chatcmpl-")
        assert "sources" not in r["body"] and "grounding" not in r["body"]  # rag's fields only with rag, as on the live route
    assert out_lines[0]["response"]["body"]["usage"]["completion_tokens"] <= 6
    for o in out_lines:  # the live route's usage shape: prompt_tokens_details was null in batch lines
        usage = o["response"]["body"]["usage"]
        assert set(usage) == {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details"}, usage
        assert 0 <= usage["prompt_tokens_details"]["cached_tokens"] <= usage["prompt_tokens"], usage
    assert out_lines[1]["response"]["body"]["usage"]["completion_tokens"] == 3  # min_tokens 3: nothing ends it sooner


def check_errors(err_lines: list[dict]) -> None:
    got = set()
    for e in err_lines:
        assert set(e) == {"id", "custom_id", "response", "error"} and e["id"].startswith("batch_req_")
        if e["response"] is None:
            assert e["error"]["message"] and isinstance(e["error"]["line"], int)
            if e["error"]["code"] == "invalid_json":  # what is wrong and where, as the HTTP routes say it
                assert "(Expecting value at column 1)" in e["error"]["message"], e
            got.add((e["error"]["code"], e["custom_id"]))
        else:
            assert e["error"] is None and e["response"]["body"]["error"]["message"]
            got.add((e["response"]["status_code"], e["custom_id"]))
    assert got == BAD_CODES


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_cli_batch_run_offline(tiny_bundles, tmp_path):
    from edge_agent.cli import main

    src = tmp_path / "in.jsonl"
    src.write_bytes(batch_bytes())
    out, err = tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    rc = main(["--models-dir", str(tiny_bundles["llama"].parent), "--model", "llama", "--threads", "1",
               "batch", "run", str(src), "-o", str(out), "--errors", str(err), "--quiet"])
    assert rc == 1  # some lines failed
    check_output(read_jsonl(out))
    check_errors(read_jsonl(err))
    # without --errors every line goes to the output, in input order (as vllm run-batch writes it)
    rc = main(["--models-dir", str(tiny_bundles["llama"].parent), "--model", "llama", "--threads", "1",
               "batch", "run", str(src), "-o", str(out), "--quiet"])
    merged = read_jsonl(out)
    assert len(merged) == 9 and merged[0]["custom_id"] == "req-1" and merged[1]["error"]["code"] == "invalid_json"
    assert merged[2]["custom_id"] == "req-2" and merged[2]["response"]["status_code"] == 200


def test_cli_batch_run_writes_whole_progress_lines_without_a_terminal(tiny_bundles, tmp_path, capsys):
    """cron or a systemd timer: "\r1/9 requests, 0.1 s\r9/9 requests, 0.3 s" was one line in the journal."""
    from edge_agent.cli import main

    src = tmp_path / "in.jsonl"
    src.write_bytes(batch_bytes())
    main(["--models-dir", str(tiny_bundles["llama"].parent), "--model", "llama", "--threads", "1",
          "batch", "run", str(src), "-o", str(tmp_path / "out.jsonl")])
    err = capsys.readouterr().err
    assert "\r" not in err and any(line.startswith("9/9 requests, ") for line in err.splitlines()), err


def test_cli_batch_run_says_its_summary_on_stdout_as_text_or_json(tiny_bundles, tmp_path, capsys):
    """As `jobs run` and doctor: a line for a person on stdout, --json for scripts; stderr keeps progress and errors only."""
    from edge_agent.cli import main

    src, out, err = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "err.jsonl"
    src.write_bytes(batch_bytes())
    base = ["--models-dir", str(tiny_bundles["llama"].parent), "--model", "llama", "--threads", "1", "batch", "run", str(src)]
    assert main([*base, "-o", str(out), "--errors", str(err), "--quiet", "--json"]) == 1
    said = capsys.readouterr()
    summary = json.loads(said.out)
    assert summary["requests"] == 9 and summary["completed"] + summary["failed"] == 9 and summary["failed"] > 0
    assert said.err == ""
    assert main([*base, "-o", str(out), "--quiet"]) == 1
    said = capsys.readouterr()
    assert said.out.startswith(f"9 requests: {summary['completed']} completed, {summary['failed']} failed in ")
    assert f"results in {out}" in said.out and said.err == ""


def test_cli_batch_run_refuses_non_utf8(tiny_bundles, tmp_path, capsys):
    from edge_agent.cli import main

    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\xff\xfe\x00garbage")
    rc = main(["--models-dir", str(tiny_bundles["llama"].parent), "--model", "llama", "--threads", "1",
               "batch", "run", str(src), "-o", str(tmp_path / "o.jsonl"), "--quiet"])
    assert rc == 2 and "not UTF-8" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_cli_batch_run_refuses_an_empty_file_before_loading_the_model(tiny_bundles, tmp_path, capsys, monkeypatch):
    """A file without a request line ran to "0 requests" with exit 0 and wrote an empty output file."""
    import edge_agent.runtime as runtime
    from edge_agent.cli import main

    monkeypatch.setattr(runtime, "build_runtime", lambda *a, **k: pytest.fail("the model loaded for an empty file"))
    src = tmp_path / "in.jsonl"
    for data in (b"", b"\n  \n\r\n"):
        src.write_bytes(data)
        rc = main(["--models-dir", str(tiny_bundles["llama"].parent), "--model", "llama", "--threads", "1",
                   "batch", "run", str(src), "-o", str(tmp_path / "o.jsonl"), "--quiet"])
        err = capsys.readouterr().err
        assert rc == 2 and "no requests" in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # nothing written


def test_cli_batch_run_checks_its_output_paths_before_running_any_request(tiny_bundles, tmp_path, capsys, monkeypatch):
    """An output that cannot be written (a folder, a path under a file) was found only after every request had run:
    the night's results were lost with a traceback (IsADirectoryError from os.replace)."""
    import edge_agent.jobs.batch_files as batch_files
    from edge_agent.cli import main

    src = tmp_path / "in.jsonl"
    src.write_bytes(batch_bytes())
    (tmp_path / "folder").mkdir()
    monkeypatch.setattr(batch_files, "run_offline", lambda *a, **k: pytest.fail("requests ran before the paths were checked"))
    for flags in (["-o", str(tmp_path / "folder")], ["-o", str(src / "out.jsonl")],
                  ["-o", str(tmp_path / "out.jsonl"), "--errors", str(tmp_path / "folder")]):
        rc = main(["--models-dir", str(tiny_bundles["llama"].parent), "--model", "llama", "--threads", "1",
                   "batch", "run", str(src), *flags, "--quiet"])
        err = capsys.readouterr().err
        assert rc == 2 and "error: cannot write" in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "in.jsonl"]  # nothing written, no temp file left


@pytest.fixture
def server(tiny_bundles, tmp_path):
    from edge_agent.api.app import create_app
    from edge_agent.runtime import build_runtime
    from edge_agent.server import HttpServer

    settings = job_settings(tiny_bundles, tmp_path, max_batch_file_bytes=4096, serve_documents=False)
    rt = build_runtime(settings, load_documents=False, start_jobs=True)
    srv = HttpServer(create_app(rt), "127.0.0.1", 0, threads=8).start()
    yield srv, rt
    srv.close()
    rt.close()


def test_openai_client_files_and_batches(server):
    srv, rt = server
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=30)
    f = client.files.create(file=("requests.jsonl", batch_bytes()), purpose="batch")
    assert f.purpose == "batch" and f.bytes == len(batch_bytes()) and f.filename == "requests.jsonl"
    assert client.files.retrieve(f.id).id == f.id
    assert client.files.content(f.id).content == batch_bytes()
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h",
                              metadata={"team": "night"})
    assert b.status in ("validating", "in_progress") and b.metadata == {"team": "night"}
    end = time.monotonic() + 60
    while b.status not in ("completed", "failed", "cancelled") and time.monotonic() < end:
        time.sleep(0.2)
        b = client.batches.retrieve(b.id)
    assert b.status == "completed", b
    assert (b.request_counts.total, b.request_counts.completed, b.request_counts.failed) == (9, 2, 7)
    out = [json.loads(x) for x in client.files.content(b.output_file_id).text.splitlines()]
    check_output(out)
    live = client.chat.completions.with_raw_response.create(**CHAT).http_response.json()
    assert out[0]["response"]["body"]["usage"].keys() == live["usage"].keys()
    assert out[0]["response"]["body"]["usage"]["prompt_tokens"] == live["usage"]["prompt_tokens"]
    check_errors([json.loads(x) for x in client.files.content(b.error_file_id).text.splitlines()])
    assert client.files.retrieve(b.output_file_id).purpose == "batch_output"
    with pytest.raises(openai.ConflictError) as e:  # OpenAI's answer to cancelling a finished batch (it was a 200 here)
        client.batches.cancel(b.id)
    assert e.value.status_code == 409 and e.value.body == {
        "message": "Cannot cancel a batch with status 'completed'.", "type": "invalid_request_error", "param": None, "code": None}
    assert client.batches.retrieve(b.id).status == "completed"
    assert b.id in [x.id for x in client.batches.list().data]
    # the run behind it is an ordinary job run with one result per line
    run = rt.jobs.get_run(rt.jobs.store.list_runs()[0][0].id)
    assert run.kind == "batch" and run.status == "succeeded"
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_nope")
    assert client.files.delete(f.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(f.id)


def test_upload_limits_and_bad_input(server, tmp_path):
    srv, rt = server
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=30)
    with pytest.raises(openai.APIStatusError) as e:
        client.files.create(file=("big.jsonl", b"x" * 5000), purpose="batch")
    assert e.value.status_code == 413 and "max_batch_file_bytes" in e.value.message
    with pytest.raises(openai.BadRequestError):
        client.files.create(file=("a.jsonl", b"{}\n"), purpose="assistants")
    assert client.files.list().data == []  # nothing stored
    assert [q.name for q in (rt.settings.data_dir / "files").iterdir()] == []  # no partial file left
    with pytest.raises(openai.NotFoundError):
        client.batches.create(input_file_id="file-0000", endpoint="/v1/chat/completions", completion_window="24h")
    with pytest.raises(openai.BadRequestError):
        client.batches.create(input_file_id="file-0000", endpoint="/v1/nothing", completion_window="24h")  # type: ignore[arg-type]


def test_a_batch_of_an_empty_file_is_a_400(server):
    """OpenAI's Batch API refuses an input file without requests; here it completed with 0 requests."""
    srv, rt = server
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=30)
    for data in (b"", b"\n \n"):
        f = client.files.create(file=("empty.jsonl", data), purpose="batch")
        with pytest.raises(openai.BadRequestError) as e:
            client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
        assert "no requests" in e.value.message and e.value.body["param"] == "input_file_id"
    assert client.batches.list().data == []  # no batch, no job, no run left behind
    assert rt.jobs.store.list_runs()[0] == [] and rt.jobs.list_jobs() == []


def test_a_line_to_another_endpoint_fails_the_batch_as_openai_fails_it(server):
    """OpenAI fails a batch (status failed, errors with the line) when a line's url is not the batch's endpoint, before
    any line runs; here the other lines ran and that one landed in the error file, so a mistake cost a whole run."""
    srv, rt = server
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=30)
    other = {"custom_id": "comp", "method": "POST", "url": "/v1/completions", "body": {"model": "llama", "prompt": "Foxes", "max_tokens": 2}}
    lines = [GOOD[0], other, GOOD[1], {**other, "custom_id": "comp-2"}]
    f = client.files.create(file=("mixed.jsonl", "\n".join(json.dumps(x) for x in lines).encode()), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    end = time.monotonic() + 60
    while b.status not in ("completed", "failed", "cancelled") and time.monotonic() < end:
        time.sleep(0.2)
        b = client.batches.retrieve(b.id)
    assert b.status == "failed" and b.failed_at is not None and b.output_file_id is None, b
    [err] = b.errors.data
    assert (err.code, err.line, err.param) == ("mismatched_url", 2, "url"), err
    assert "/v1/completions" in err.message and "/v1/chat/completions" in err.message and "1 more line" in err.message, err.message
    assert (b.request_counts.completed, b.request_counts.failed) == (0, 0)  # nothing ran
    f = client.files.create(file=("chat.jsonl", "\n".join(json.dumps(x) for x in GOOD).encode()), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    while b.status not in ("completed", "failed", "cancelled") and time.monotonic() < end + 60:
        time.sleep(0.2)
        b = client.batches.retrieve(b.id)
    assert b.status == "completed" and b.errors is None and b.request_counts.completed == 2, b


def test_cancel_a_batch_keeps_what_finished(server):
    srv, rt = server
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=30)
    body = {**CHAT, "max_tokens": 200, "ignore_eos": True}
    lines = [json.dumps({"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}) for i in range(12)]
    f = client.files.create(file=("many.jsonl", "\n".join(lines).encode()), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    end = time.monotonic() + 30
    while client.batches.retrieve(b.id).status == "validating" and time.monotonic() < end:
        time.sleep(0.05)
    c = client.batches.cancel(b.id)
    assert c.status in ("cancelling", "cancelled")
    while c.status != "cancelled" and time.monotonic() < end + 30:
        time.sleep(0.1)
        c = client.batches.retrieve(b.id)
    assert c.status == "cancelled" and c.cancelled_at is not None
    assert c.request_counts.completed + c.request_counts.failed < 12  # it stopped early
    out = client.files.content(c.output_file_id).text.splitlines() if c.output_file_id else []
    assert len(out) == c.request_counts.completed  # what finished is kept
    with pytest.raises(openai.ConflictError) as e:
        client.batches.cancel(b.id)
    assert e.value.message.endswith("Cannot cancel a batch with status 'cancelled'.") and client.batches.retrieve(b.id).status == "cancelled"


def test_embedding_lines_match_the_embedder(embedder, tmp_path):
    """/v1/embeddings lines give the embedder's own vectors, as floats or base64, in the route's response shape."""
    import base64

    import numpy as np

    from edge_agent.jobs.batch_files import run_offline
    from edge_agent.jobs.kinds import JobContext
    from edge_agent.services.embeddings import EmbeddingService

    settings = job_settings({"llama": tmp_path / "models" / "llama"}, tmp_path)
    ctx = JobContext(chat=None, embeddings=EmbeddingService(lambda: embedder), documents=lambda: None, settings=settings)
    lines = [
        {"custom_id": "e1", "method": "POST", "url": "/v1/embeddings", "body": {"model": "default", "input": ["a fox", "an invoice"]}},
        {"custom_id": "e2", "method": "POST", "url": "/v1/embeddings", "body": {"model": "default", "input": "a fox", "encoding_format": "base64"}},
        {"custom_id": "e3", "method": "POST", "url": "/v1/embeddings", "body": {"model": "default", "input": []}},
        {"custom_id": "c1", "method": "POST", "url": "/v1/chat/completions", "body": CHAT},  # no language model in this context
    ]
    res = run_offline(ctx, "\n".join(json.dumps(x) for x in lines).encode())
    assert [ok for ok, _ in res] == [True, True, False, False]
    want = embedder.embed(["a fox", "an invoice"])
    body = p.EmbeddingList.model_validate(res[0][1]["response"]["body"])
    np.testing.assert_allclose(np.array([d.embedding for d in body.data], np.float32), want, atol=1e-5)
    b64 = res[1][1]["response"]["body"]["data"][0]["embedding"]
    np.testing.assert_allclose(np.frombuffer(base64.b64decode(b64), "<f4"), embedder.embed(["a fox"])[0], atol=1e-5)
    assert res[2][1]["response"]["status_code"] == 400 and res[3][1]["response"]["status_code"] == 503


def test_a_batch_interrupted_by_a_shutdown_resumes_and_answers_every_line_once(tiny_bundles, tmp_path):
    """Lines in flight when the daemon stops are not failed: after the restart only the rest run, each line once."""
    from edge_agent.runtime import build_runtime

    # results committed as they finish (no group window): the shutdown comes while lines are in flight
    settings = job_settings(tiny_bundles, tmp_path, serve_documents=False, jobs_concurrency=4, jobs_commit_max_ms=0)
    body = {**CHAT, "max_tokens": 120, "ignore_eos": True}
    lines = "\n".join(json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": body})
                      for i in range(16)).encode()
    rt = build_runtime(settings, load_documents=False, start_jobs=True)
    from edge_agent.jobs.batch_files import BatchService

    svc = BatchService(settings, rt.jobs)
    f = svc.upload("batch", "in.jsonl", [lines])
    b = svc.create_batch(f["id"], "/v1/chat/completions", "24h", None)
    end = time.monotonic() + 60
    while svc.batch(b["id"])["request_counts"]["completed"] < 2 and time.monotonic() < end:
        time.sleep(0.02)
    before = svc.batch(b["id"])
    rt.close()
    assert before["status"] == "in_progress" and before["request_counts"]["completed"] < 16
    rt2 = build_runtime(settings, load_documents=False, start_jobs=True)
    try:
        svc2 = BatchService(settings, rt2.jobs)
        end = time.monotonic() + 120
        while svc2.batch(b["id"])["status"] != "completed" and time.monotonic() < end:
            time.sleep(0.1)
        done = svc2.batch(b["id"])
        assert done["status"] == "completed" and done["request_counts"] == {"total": 16, "completed": 16, "failed": 0}
        assert done["error_file_id"] is None
        path, _ = svc2.content(done["output_file_id"])
        out = [json.loads(x) for x in path.read_text().splitlines()]
        assert [o["custom_id"] for o in out] == [f"r{i}" for i in range(16)]
        assert all(o["response"]["status_code"] == 200 for o in out)
        assert rt2.jobs.get_run(svc2._batch(b["id"]).run_id).resumes >= 1
    finally:
        rt2.close()


def test_batch_lines_with_logprobs_get_them(tiny_bundles, tmp_path):
    """logprobs in a batch line come back in the live routes' shapes (chat's content list, completions' legacy object)."""
    from edge_agent.cli import main

    lines = [
        {"custom_id": "chat", "method": "POST", "url": "/v1/chat/completions",
         "body": {**CHAT, "logprobs": True, "top_logprobs": 3, "ignore_eos": True}},
        {"custom_id": "echo", "method": "POST", "url": "/v1/completions",
         "body": {"model": "llama", "prompt": [1, 17, 42], "max_tokens": 2, "temperature": 0, "echo": True, "logprobs": 2,
                  "ignore_eos": True}},
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    rc = main(["--models-dir", str(tiny_bundles["llama"].parent), "--model", "llama", "--threads", "1",
               "batch", "run", str(src), "-o", str(out), "--quiet"])
    assert rc == 0
    chat, echo = (o["response"]["body"] for o in read_jsonl(out))
    content = p.ChatCompletion.model_validate(chat).choices[0].logprobs.content
    assert len(content) == 6 and all(len(e.top_logprobs) == 3 and e.logprob <= 0 for e in content)
    assert "".join(e.token for e in content) == chat["choices"][0]["message"]["content"]
    lp = p.Completion.model_validate(echo).choices[0].logprobs
    assert len(lp.tokens) == 3 + 2 and lp.token_logprobs[0] is None and all(v <= 0 for v in lp.token_logprobs[1:])


def test_responses_lines_through_the_openai_client(server):
    """/v1/responses lines (OpenAI's Batch API takes them): each answer is the live route's response object, which the
    openai client's own Response type parses, with the same text as the chat request it stands for; a bad line gets
    this API's field names (max_output_tokens, not max_tokens)."""
    from openai.types.responses import Response

    srv, rt = server
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=30)
    ask = {"model": "llama", "instructions": "Answer briefly.", "input": "Say something about foxes.", "max_output_tokens": 5,
           "temperature": 0}
    lines = [
        {"custom_id": "r-1", "method": "POST", "url": "/v1/responses", "body": ask},
        {"custom_id": "r-2", "method": "POST", "url": "/v1/responses",
         "body": {**ask, "input": [{"role": "user", "content": [{"type": "input_text", "text": "Foxes?"}]}]}},
        {"custom_id": "r-bad", "method": "POST", "url": "/v1/responses", "body": {**ask, "max_output_tokens": 10**6}},
        {"custom_id": "r-stream", "method": "POST", "url": "/v1/responses", "body": {**ask, "stream": True}},
        {"custom_id": "r-call", "method": "POST", "url": "/v1/responses", "body": {**ask, "max_output_tokens": 120, "tools": [
            {"type": "function", "name": "pick", "parameters": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0,
                                                                                                        "maximum": 9}}, "required": ["n"]}}],
            "tool_choice": {"type": "function", "name": "pick"}}},
    ]
    data = "\n".join(json.dumps(x) for x in lines).encode()
    f = client.files.create(file=("responses.jsonl", data), purpose="batch")
    b = client.batches.create(input_file_id=f.id, endpoint="/v1/responses", completion_window="24h")
    end = time.monotonic() + 60
    while b.status not in ("completed", "failed", "cancelled") and time.monotonic() < end:
        time.sleep(0.2)
        b = client.batches.retrieve(b.id)
    assert b.status == "completed" and (b.request_counts.completed, b.request_counts.failed) == (3, 2), b
    out = {o["custom_id"]: o for o in map(json.loads, client.files.content(b.output_file_id).text.splitlines())}
    assert list(out) == ["r-1", "r-2", "r-call"]
    [call] = Response.model_validate(out["r-call"]["response"]["body"]).output  # a forced call, as the live route answers it
    assert call.type == "function_call" and call.name == "pick" and 0 <= json.loads(call.arguments)["n"] <= 9, call
    expected = client.chat.completions.create(model="llama", max_tokens=5, temperature=0, messages=[
        {"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Say something about foxes."}]).choices[0].message.content
    for cid in ("r-1", "r-2"):
        r = Response.model_validate(out[cid]["response"]["body"])
        assert r.object == "response" and r.id.startswith("resp_") and r.status in ("completed", "incomplete")
        assert r.usage.output_tokens <= 5 and r.output_text
    assert Response.model_validate(out["r-1"]["response"]["body"]).output_text == expected
    errors = {e["custom_id"]: e for e in map(json.loads, client.files.content(b.error_file_id).text.splitlines())}
    bad = errors["r-bad"]["response"]
    assert bad["status_code"] == 400 and bad["body"]["error"]["param"] == "max_output_tokens", bad
    assert errors["r-stream"]["response"]["body"]["error"]["param"] == "stream"


def test_batch_lines_with_a_forced_tool_call_get_the_call(tiny_bundles, tmp_path):
    """A batch line with tool_choice gets the live route's answer: message.tool_calls, finish_reason tool_calls; with tools
    and no tool_choice ("auto") the model chooses, here made to by logit_bias on "{" (a call's first character)."""
    from tokenizers import Tokenizer

    from edge_agent.cli import main

    tool = {"type": "function", "function": {"name": "pick", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"]}}}
    body = {**CHAT, "max_tokens": 120, "tools": [tool], "tool_choice": {"type": "function", "function": {"name": "pick"}}}
    brace = Tokenizer.from_file(str(tiny_bundles["llama"] / "tokenizer.json")).token_to_id("{")
    auto = {**CHAT, "max_tokens": 120, "tools": [tool]}
    legacy = {**CHAT, "max_tokens": 120, "functions": [tool["function"]], "function_call": {"name": "pick"}}  # deprecated, still served
    lines = [("call", body), ("auto-call", {**auto, "logit_bias": {str(brace): 100}}), ("auto-words", {**auto, "logit_bias": {str(brace): -100}}),
             ("functions", legacy)]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"custom_id": c, "method": "POST", "url": "/v1/chat/completions", "body": b}) + "\n" for c, b in lines))
    rc = main(["--models-dir", str(tiny_bundles["llama"].parent), "--model", "llama", "--threads", "1",
               "batch", "run", str(src), "-o", str(out), "--quiet"])
    assert rc == 0
    got = {line["custom_id"]: p.ChatCompletion.model_validate(line["response"]["body"]).choices[0] for line in read_jsonl(out)}
    for cid in ("call", "auto-call"):
        choice = got[cid]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None, choice
        call = choice.message.tool_calls[0]
        assert call.function.name == "pick" and 0 <= json.loads(call.function.arguments)["n"] <= 9
    words = got["auto-words"]
    assert words.message.tool_calls is None and words.message.content and words.finish_reason in ("stop", "length")
    old_shape = got["functions"]  # as the live route answers `functions`: message.function_call, finish_reason function_call
    assert old_shape.finish_reason == "function_call" and old_shape.message.tool_calls is None, old_shape
    assert old_shape.message.function_call.name == "pick" and 0 <= json.loads(old_shape.message.function_call.arguments)["n"] <= 9
