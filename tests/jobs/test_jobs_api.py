"""The jobs API on the real server over loopback: define, run, read runs and paged results, cancel, bad input."""
from __future__ import annotations

import http.client
import json
import time

import pytest

from jobs_helpers import doc_text
from edge_agent.jobs.prompts import PROMPT_VERSION


@pytest.fixture
def live(make_runtime):
    from edge_agent.api.app import create_app
    from edge_agent.server import HttpServer

    rt = make_runtime(start_jobs=True)
    srv = HttpServer(create_app(rt), "127.0.0.1", 0, threads=8).start()

    def call(method: str, path: str, body=None) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, (json.loads(data) if data.startswith(b"{") else {"raw": data.decode()})

    call.rt = rt  # type: ignore[attr-defined]
    yield call
    srv.stop_accepting()
    srv.close()


def _wait(call, run_id: str, timeout: float = 60.0) -> dict:
    end = time.monotonic() + timeout
    while True:
        status, run = call("GET", f"/v1/runs/{run_id}")
        assert status == 200
        if run["status"] not in ("queued", "running") or time.monotonic() > end:
            return run
        time.sleep(0.05)


def test_summarize_job_through_the_api(live, wordy_model):
    ids = [live.rt.documents.add_text(f"doc {i}", doc_text(i, 3)).document_id for i in range(5)]
    status, job = live("POST", "/v1/jobs", {"name": "nightly", "kind": "summarize", "params": {"max_tokens": 8},
                                            "schedule": {"cron": "0 2 * * *", "timezone": "Europe/Amsterdam"},
                                            "limits": {"concurrency": 3}})
    assert status == 200, job
    assert job["object"] == "job" and job["schedule"] == {"cron": "0 2 * * *", "timezone": "Europe/Amsterdam"}
    assert job["next_run_at"] and job["limits"] == {"concurrency": 3}
    assert live("GET", "/v1/jobs")[1]["data"][0]["id"] == job["id"]
    assert live("GET", "/v1/jobs/nightly")[1]["id"] == job["id"]  # by name too

    status, run = live("POST", f"/v1/jobs/{job['id']}/run")
    assert status == 200 and run["object"] == "job.run" and run["id"].startswith("run_") and run["concurrency"] == 3
    assert live("POST", f"/v1/jobs/{job['id']}/run")[0] in (200, 409)  # a second one while active: 409
    run = _wait(live, run["id"])
    assert run["status"] == "succeeded" and run["counts"]["succeeded"] == 5 and run["progress"] == 1.0
    assert run["elapsed_s"] >= 0 and run["bundle_id"].startswith("sha256:") and run["prompt_version"] == PROMPT_VERSION

    status, page = live("GET", f"/v1/runs/{run['id']}/results?limit=2")
    assert status == 200 and page["total"] == 5 and len(page["data"]) == 2 and page["has_more"]
    row = page["data"][0]
    assert row["status"] == "succeeded" and row["document_id"] == ids[0] and row["summary"]
    rest = live("GET", f"/v1/runs/{run['id']}/results?offset=2&limit=10")[1]
    assert [r["document_id"] for r in rest["data"]] == ids[2:] and not rest["has_more"]
    doc = live("GET", f"/v1/documents/{ids[0]}")[1]
    assert doc["summary"]["summary"] == row["summary"] and doc["summary"]["run_id"] == run["id"]

    runs = live("GET", f"/v1/jobs/{job['id']}/runs")[1]
    assert runs["data"][0]["id"] in (run["id"],) or runs["total"] == 2
    spec = live("GET", "/openapi.json")[1]
    for path in ("/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/run", "/v1/jobs/{job_id}/runs", "/v1/runs/{run_id}",
                 "/v1/runs/{run_id}/results", "/v1/runs/{run_id}/cancel"):
        assert path in spec["paths"], path
    assert "CreateJobRequest" in spec["components"]["schemas"]
    metrics = live("GET", "/metrics")[1]["raw"]
    assert 'edge_agent_job_items_total{kind="summarize",status="succeeded"} 5.0' in metrics
    assert 'edge_agent_job_runs_total{kind="summarize",status="succeeded"}' in metrics

    status, patched = live("PATCH", f"/v1/jobs/{job['id']}", {"schedule": None, "enabled": False})
    assert status == 200 and patched["schedule"] is None and patched["next_run_at"] is None
    assert live("DELETE", f"/v1/jobs/{job['id']}")[1]["deleted"] is True
    assert live("GET", f"/v1/runs/{run['id']}")[0] == 404


def test_cancel_through_the_api(live):
    for i in range(12):
        live.rt.documents.add_text(f"doc {i}", doc_text(i, 3))
    live("POST", "/v1/jobs", {"name": "slow", "kind": "summarize", "params": {"max_tokens": 200}, "limits": {"concurrency": 1}})
    run = live("POST", "/v1/jobs/slow/run")[1]
    end = time.monotonic() + 30
    while live("GET", f"/v1/runs/{run['id']}")[1]["status"] == "queued" and time.monotonic() < end:
        time.sleep(0.02)
    status, cancelled = live("POST", f"/v1/runs/{run['id']}/cancel")
    assert status == 200 and cancelled["cancel_requested"] is True
    run = _wait(live, run["id"], 10)
    assert run["status"] == "cancelled" and run["stop_reason"] == "cancelled"
    c = run["counts"]
    # the items not done say cancelled, not pending (a finished run has nothing still to come), and the counts add up
    assert c["pending"] == 0 and c["cancelled"] > 0 and c["succeeded"] < 12, c
    assert c["succeeded"] + c["failed"] + c["skipped"] + c["cancelled"] == c["total"] == 12
    assert live.rt.chat.scheduler.active == 0  # the item in flight was stopped too
    page = live("GET", f"/v1/runs/{run['id']}/results?limit=100")[1]
    assert not [r for r in page["data"] if r["status"] == "pending"]
    rows = live("GET", f"/v1/runs/{run['id']}/results?status=cancelled&limit=100")[1]
    assert rows["total"] == c["cancelled"] and all("cancelled" in r["error"] for r in rows["data"]), rows
    assert live("GET", f"/v1/runs/{run['id']}/results?status=pending")[1]["total"] == 0


@pytest.mark.parametrize("body, param, words", [
    ({"name": "x", "kind": "translate"}, "kind", "unknown job kind"),
    ({"name": "x", "kind": "summarize", "schedule": {"cron": "0 2 * *"}}, "schedule.cron", "bad cron"),
    ({"name": "x", "kind": "summarize", "schedule": {"cron": "0 0 31 2 *"}}, "schedule.cron", "matches no date"),  # was a 500
    ({"name": "x", "kind": "summarize", "schedule": {"cron": "0 2 * * *", "timezone": "Mars/Olympus"}}, "schedule.timezone",
     "unknown time zone"),
    ({"name": "x", "kind": "reindex", "params": {"folders": ["/etc"]}}, "params.folders", "outside the configured ingest roots"),
    ({"name": "x", "kind": "summarize", "params": {"max_tokens": -1}}, "params.max_tokens", "max_tokens"),
    ({"name": "x", "kind": "summarize", "limits": {"deadline": "25:99"}}, "limits.deadline", "deadline"),
    ({"name": "bad name!", "kind": "summarize"}, "name", "name"),
    ({"kind": "summarize"}, "name", "name"),
])
def test_bad_job_definitions_are_400(live, body, param, words):
    status, err = live("POST", "/v1/jobs", body)
    assert status == 400, err
    e = err["error"]
    assert e["type"] == "invalid_request_error" and e["param"] == param and words in e["message"], e
    assert "Traceback" not in e["message"]


def test_conflicts_and_unknown_ids(live):
    assert live("POST", "/v1/jobs", {"name": "a", "kind": "summarize"})[0] == 200
    status, err = live("POST", "/v1/jobs", {"name": "a", "kind": "summarize"})
    assert status == 409 and "exists already" in err["error"]["message"]
    assert live("GET", "/v1/jobs/nope")[0] == 404
    assert live("GET", "/v1/runs/run_nope")[1]["error"]["code"] == "run_not_found"
    assert live("POST", "/v1/runs/run_nope/cancel")[0] == 404
    assert live("GET", "/v1/runs/run_nope/results?limit=0")[0] == 400
    assert live("PATCH", "/v1/jobs/a", {"params": {"bogus": 1}})[0] == 400
    assert live("POST", "/v1/jobs/a/run", {"concurrency": 0})[0] == 400


def test_changing_a_jobs_kind_says_to_create_a_new_job(live):
    """kind is fixed at creation: the 400 says so and what to do, not "unknown field"; nothing changes; the schema leaves it out."""
    job = live("POST", "/v1/jobs", {"name": "k", "kind": "summarize"})[1]
    status, err = live("PATCH", f"/v1/jobs/{job['id']}", {"kind": "reindex", "enabled": False})
    e = err["error"]
    assert status == 400 and e["param"] == "kind" and e["type"] == "invalid_request_error", err
    assert "kind of a job cannot be changed" in e["message"] and "POST /v1/jobs" in e["message"]
    assert "unknown field" not in e["message"]
    after = live("GET", f"/v1/jobs/{job['id']}")[1]
    assert after["kind"] == "summarize" and after["enabled"] is True
    update = live("GET", "/openapi.json")[1]["components"]["schemas"]["UpdateJobRequest"]
    assert "kind" not in update["properties"] and update.get("additionalProperties") is False
    assert live("PATCH", f"/v1/jobs/{job['id']}", {"kinds": "x"})[1]["error"]["message"].startswith("invalid value for 'kinds': unknown field")


def test_the_job_list_pages_and_checks_limit_and_offset_as_the_other_lists(live):
    for name in ("a", "b", "c"):
        assert live("POST", "/v1/jobs", {"name": name, "kind": "summarize"})[0] == 200
    for query, param in (("limit=-5", "limit"), ("limit=0", "limit"), ("limit=1001", "limit"), ("limit=x", "limit"),
                         ("offset=-1", "offset")):
        status, err = live("GET", f"/v1/jobs?{query}")
        assert status == 400 and err["error"]["param"] == param, (query, err)
        assert live("GET", f"/v1/jobs/a/runs?{query}")[0] == 400  # the same answer as the runs list
    status, page = live("GET", "/v1/jobs?offset=1&limit=1")
    assert status == 200 and [j["name"] for j in page["data"]] == ["b"]
    assert (page["total"], page["offset"], page["limit"]) == (3, 1, 1)
    assert [j["name"] for j in live("GET", "/v1/jobs")[1]["data"]] == ["a", "b", "c"]  # no limit: all of them (up to 1000)
    status, page = live("GET", "/v1/jobs?offset=5")
    assert status == 200 and page["data"] == [] and page["total"] == 3


def test_the_job_list_reads_one_page_not_the_table(live, monkeypatch):
    """GET /v1/jobs read every job and sliced the page in memory; the page is read in SQL (LIMIT/OFFSET)."""
    import edge_agent.store.jobs as store_jobs

    for i in range(30):
        assert live("POST", "/v1/jobs", {"name": f"j{i:02d}", "kind": "summarize"})[0] == 200
    made = []
    real = store_jobs._job
    monkeypatch.setattr(store_jobs, "_job", lambda row: made.append(row) or real(row))
    status, page = live("GET", "/v1/jobs?offset=10&limit=3")
    assert status == 200 and [j["name"] for j in page["data"]] == ["j10", "j11", "j12"] and page["total"] == 30
    assert len(made) == 3  # records built for the page only


def test_job_replies_show_paths_relative_to_the_ingest_roots_as_documents_do(live, tmp_path):
    """params.folders, result keys (file:<path>) and result paths came back absolute, the server's layout, while
    /v1/documents shows paths relative to their ingest root; stored as before (absolute), shown as documents are."""
    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    for n in range(2):
        (shared / f"f{n}.txt").write_text(doc_text(n, 2))
    status, job = live("POST", "/v1/jobs", {"name": "ri", "kind": "reindex", "params": {"folders": ["shared"]}})
    assert status == 200 and job["params"]["folders"] == ["shared"], job
    assert live.rt.jobs.get_job("ri").params["folders"] == [str(shared.resolve())]  # what is stored stays resolved
    run = _wait(live, live("POST", "/v1/jobs/ri/run")[1]["id"])
    assert run["status"] == "succeeded", run
    (shared / "f1.txt").unlink()
    run = _wait(live, live("POST", "/v1/jobs/ri/run")[1]["id"])
    status, page = live("GET", f"/v1/runs/{run['id']}/results")
    assert status == 200
    shown = {(r["key"], r["result"]["action"], r["result"]["path"], r["path"]) for r in page["data"]}
    doc_id = next(r["result"]["document_id"] for r in page["data"] if r["key"].startswith("remove:"))
    assert shown == {("file:shared/f0.txt", "unchanged", "shared/f0.txt", "shared/f0.txt"),
                     (f"remove:{doc_id}", "removed", "shared/f1.txt", "shared/f1.txt")}, shown
    for path in ("/v1/jobs", "/v1/jobs/ri", "/v1/jobs/ri/runs", f"/v1/runs/{run['id']}", f"/v1/runs/{run['id']}/results"):
        assert str(tmp_path) not in json.dumps(live("GET", path)[1]), path
    status, same = live("PATCH", "/v1/jobs/ri", {"params": job["params"]})  # what a reply shows can be sent back
    assert status == 200 and same["params"]["folders"] == ["shared"], same


def test_summarize_path_prefix_may_be_relative_to_the_ingest_roots_as_replies_show_it(live, tmp_path):
    """path_prefix had to be absolute ("documents are stored by their full path") while every reply shows paths
    relative to the ingest roots: now a relative one is taken under them, and the reply shows it that way."""
    reports = tmp_path / "docs" / "reports"
    reports.mkdir(parents=True)
    (reports / "a.md").write_text(doc_text(5, 3))
    doc = live.rt.documents.add_file(reports / "a.md").document_id
    live.rt.documents.add_text("other", doc_text(6, 3))
    status, job = live("POST", "/v1/jobs", {"name": "rel", "kind": "summarize", "params": {"path_prefix": "reports", "max_tokens": 8}})
    assert status == 200 and job["params"]["path_prefix"] == "reports", job
    assert live.rt.jobs.get_job("rel").params["path_prefix"] == str(reports.resolve())  # stored as documents are
    run = _wait(live, live("POST", "/v1/jobs/rel/run")[1]["id"])
    assert run["status"] == "succeeded", run
    assert [r["key"] for r in live("GET", f"/v1/runs/{run['id']}/results")[1]["data"]] == [f"doc:{doc}"]
    status, same = live("PATCH", "/v1/jobs/rel", {"params": job["params"]})  # what a reply shows can be sent back
    assert status == 200 and same["params"]["path_prefix"] == "reports", same
    status, absolute = live("POST", "/v1/jobs", {"name": "abs", "kind": "summarize", "params": {"path_prefix": str(reports)}})
    assert status == 200 and absolute["params"]["path_prefix"] == "reports"  # an absolute one still works, shown relative
    for bad in ("../elsewhere", "reports/../../x"):
        status, err = live("POST", "/v1/jobs", {"name": "bad", "kind": "summarize", "params": {"path_prefix": bad}})
        assert status == 400 and err["error"]["param"] == "params.path_prefix" and "'..'" in err["error"]["message"], err


def test_run_and_item_errors_name_no_server_path(live, tmp_path, monkeypatch):
    """An item that failed on an OSError ("[Errno 13] Permission denied: '/tmp/.../docs/shared/locked.txt'", a file
    the daemon's user may not read) showed the server's path in its error; errors are shown as the documents API
    shows them: relative to the ingest root. (A socket gave one, "[Errno 6] No such device or address", until sockets
    were skipped; this process runs as root, whom no file mode stops, so the open is refused as for another user.)"""
    import errno
    import os

    shared = tmp_path / "docs" / "shared"
    shared.mkdir(parents=True)
    (shared / "a.txt").write_text(doc_text(1, 2))
    locked = shared / "locked.txt"
    locked.write_text(doc_text(2, 2))
    real_open = os.open

    def refusing_open(path, flags, *args, **kw):
        if os.fspath(path) == str(locked):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", refusing_open)
    assert live("POST", "/v1/jobs", {"name": "ri", "kind": "reindex", "params": {"folders": ["shared"]}})[0] == 200
    run = _wait(live, live("POST", "/v1/jobs/ri/run")[1]["id"])
    assert run["counts"]["failed"] == 1, run
    (stored,) = [i for i in live.rt.jobs.results(run["id"])[0] if i.status == "failed"]
    assert str(tmp_path) in stored.error  # the store keeps the whole text (the CLI, the log)
    status, page = live("GET", f"/v1/runs/{run['id']}/results?status=failed")
    assert status == 200
    (item,) = page["data"]
    assert item["error"] and str(tmp_path) not in item["error"] and "shared/locked.txt" in item["error"], item
    # a run's own error (a finishing hook's OSError is kept as its text) is shown the same way; the CLI keeps it whole
    from dataclasses import replace

    from edge_agent.api.jobs import run_object

    record = replace(live.rt.jobs.get_run(run["id"]), error=f"[Errno 20] Not a directory: '{tmp_path}/var/files/out.jsonl'")
    assert run_object(record, [tmp_path / "docs"]).error == "[Errno 20] Not a directory: 'out.jsonl'"
    assert run_object(record).error == record.error


def test_classify_selects_documents_as_summarize_does(live, tmp_path):
    """A classify job stored path_prefix and types as sent: 'mail' (a path as replies show it, or a job's own params
    sent back by PATCH), "eml" as a string or "EML" selected no document and the run 'succeeded' with 0 items."""
    mail = tmp_path / "docs" / "mail"
    mail.mkdir(parents=True)
    (mail / "factuur.txt").write_text("Hierbij ontvangt u factuur 2026-0412; graag betaling binnen 30 dagen.")
    doc = live.rt.documents.add_file(mail / "factuur.txt").document_id
    live.rt.documents.add_text("elders", doc_text(6, 3))
    labels = ["factuur", "klacht"]
    for name, params in (("rel", {"path_prefix": "mail"}), ("one", {"path_prefix": "mail", "types": "txt"}),
                         ("upper", {"path_prefix": str(mail), "types": ["TXT"]})):
        status, job = live("POST", "/v1/jobs", {"name": name, "kind": "classify",
                                                "params": {"labels": labels, "method": "embedding", **params}})
        assert status == 200 and job["params"]["path_prefix"] == "mail", job
        run = _wait(live, live("POST", f"/v1/jobs/{name}/run")[1]["id"])
        assert run["status"] == "succeeded", run
        assert [r["key"] for r in live("GET", f"/v1/runs/{run['id']}/results")[1]["data"]] == [f"doc:{doc}"], name
    for params, param in (({"types": ["htm"]}, "params.types"), ({"path_prefix": "../x"}, "params.path_prefix"),
                          ({"changed_only": "ja"}, "params.changed_only")):
        status, err = live("POST", "/v1/jobs", {"name": "bad", "kind": "classify", "params": {"labels": labels, **params}})
        assert status == 400 and err["error"]["param"] == param, err


def test_patching_the_time_of_a_schedule_keeps_its_time_zone(live):
    """A Dutch operator moved a nightly job from 02:30 to 04:00 with PATCH {"schedule": {"cron": "0 4 * * *"}}: the
    zone fell back to jobs_timezone (UTC), so the job ran at 05:00 in Amsterdam in winter and 06:00 in summer."""
    status, job = live("POST", "/v1/jobs", {"name": "nacht", "kind": "summarize",
                                            "schedule": {"cron": "30 2 * * *", "timezone": "Europe/Amsterdam"}})
    assert status == 200, job
    status, job = live("PATCH", "/v1/jobs/nacht", {"schedule": {"cron": "0 4 * * *"}})
    assert status == 200 and job["schedule"] == {"cron": "0 4 * * *", "timezone": "Europe/Amsterdam"}, job
    status, job = live("PATCH", "/v1/jobs/nacht", {"schedule": {"cron": "0 4 * * *", "timezone": "UTC"}})
    assert status == 200 and job["schedule"]["timezone"] == "UTC", job  # a zone that is given is taken
    assert live("POST", "/v1/jobs", {"name": "los", "kind": "summarize"})[0] == 200
    status, job = live("PATCH", "/v1/jobs/los", {"schedule": {"cron": "0 4 * * *"}})
    assert status == 200 and job["schedule"]["timezone"] == live.rt.settings.jobs_timezone, job  # no zone yet: the default


def test_a_runs_deadline_shows_the_zone_it_was_read_in(live):
    """GET /v1/runs/{id} gave deadline_at in UTC only: an operator who meant 06:00 local could not tell what was used."""
    live("POST", "/v1/jobs", {"name": "ams", "kind": "summarize", "schedule": {"cron": "0 2 * * *", "timezone": "Europe/Amsterdam"}})
    run = live("POST", "/v1/jobs/ams/run", {"deadline": "06:00"})[1]
    assert run["deadline_timezone"] == "Europe/Amsterdam" and run["deadline_local"].endswith("T06:00:00+01:00"), run
    run = _wait(live, run["id"])
    live("POST", "/v1/jobs", {"name": "off", "kind": "summarize"})
    run = live("POST", "/v1/jobs/off/run", {"deadline": "23:30-05:00"})[1]
    assert run["deadline_timezone"] == "-05:00" and run["deadline_local"].endswith("T23:30:00-05:00"), run
    assert run["deadline_at"].endswith("T04:30:00+00:00")
    _wait(live, run["id"])
    status, err = live("POST", "/v1/jobs/off/run", {"deadline": "06:00 Mars/Olympus"})
    assert status == 400 and "unknown time zone 'Mars/Olympus'" in err["error"]["message"], err


def test_a_schedule_may_be_its_cron_text_alone(live):
    """The config file takes `schedule = "0 2 * * *"` and the CLI `--schedule '0 2 * * *'`; the API refused the same
    text with "Input should be a valid dictionary or instance of Schedule" (a class name, and no way forward)."""
    status, job = live("POST", "/v1/jobs", {"name": "tekst", "kind": "summarize", "schedule": "0 2 * * *"})
    assert status == 200 and job["schedule"] == {"cron": "0 2 * * *", "timezone": live.rt.settings.jobs_timezone}, job
    assert job["next_run_at"]
    live("PATCH", "/v1/jobs/tekst", {"schedule": {"cron": "0 2 * * *", "timezone": "Europe/Amsterdam"}})
    status, job = live("PATCH", "/v1/jobs/tekst", {"schedule": "30 3 * * *"})  # the job's zone is kept
    assert status == 200 and job["schedule"] == {"cron": "30 3 * * *", "timezone": "Europe/Amsterdam"}, job
    for bad, why in (("0 25 * * *", "bad cron expression"), ("", "schedule")):
        status, err = live("POST", "/v1/jobs", {"name": "slecht", "kind": "summarize", "schedule": bad})
        assert status == 400 and why in err["error"]["message"] and "instance of" not in err["error"]["message"], err
    schema = live("GET", "/openapi.json")[1]["components"]["schemas"]["CreateJobRequest"]["properties"]["schedule"]
    assert any(alt.get("type") == "string" for alt in schema.get("anyOf", [])), schema  # /openapi.json says so


def test_running_a_job_where_the_daemon_runs_none_is_a_503_that_says_what_to_do(make_runtime):
    """With jobs_enabled = false (the systemd timers' setup) POST /v1/jobs/{id}/run answered 200 "queued" for a run
    nothing would start: it waited, and the timer's `jobs run` of the job was refused while it did."""
    from edge_agent.api.app import create_app
    from edge_agent.server import HttpServer

    rt = make_runtime(start_jobs=False)
    rt.jobs.create_job("nightly", "summarize", {})
    srv = HttpServer(create_app(rt), "127.0.0.1", 0, threads=4).start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        conn.request("POST", "/v1/jobs/nightly/run")
        r = conn.getresponse()
        err = json.loads(r.read())
        conn.close()
    finally:
        srv.stop_accepting()
        srv.close()
    assert r.status == 503 and "edge-agent jobs run" in err["error"]["message"], err
    assert rt.jobs.list_runs("nightly")[1] == 0  # nothing queued
