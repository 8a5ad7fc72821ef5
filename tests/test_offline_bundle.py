"""The air-gapped install: scripts/build-offline-bundle makes one archive; its install.sh installs it into a
fresh virtual environment with the network cut (`unshare -rn`), and the daemon answers and retrieves.

The bundle is built once per session with a tiny model as models/default (the default model's 500 MB
would only slow the test; README reports the real archive) and the tests' shared embedding cache.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# shared with the RAG tests (tests/rag/rag_docs.py): the export is done once
EMBED_CACHE = Path(os.environ.get("EDGE_AGENT_TEST_EMBED_CACHE", REPO / ".cache" / "test-embedding-cache"))
FACT = "The spare key of the Delft pump house hangs in cabinet K-17."

# Runs inside the network namespace with the system's Python 3.11 (stdlib only): start the installed daemon,
# wait for READY (the "ready" line = /ready 200), ask for a completion, add a document when asked, retrieve.
CLIENT = r'''
import http.client, json, os, re, signal, socket, subprocess, sys, time
exe, config, add = sys.argv[1], sys.argv[2], sys.argv[3] == "add"
out = {}
try:
    socket.create_connection(("1.1.1.1", 443), timeout=3)
    out["network"] = "open"
except OSError as e:
    out["network"] = f"cut: {e.strerror}"
env = dict(os.environ, EDGE_AGENT_CONFIG=config, EDGE_AGENT_PORT="0", EDGE_AGENT_THREADS="1", EDGE_AGENT_MAX_BATCH="2")
proc = subprocess.Popen([exe, "serve"], env=env, stderr=subprocess.PIPE, text=True, cwd="/")
port, log, end = None, [], time.monotonic() + 300
for line in proc.stderr:
    log.append(line)
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
    port = int(m.group(1)) if m else port
    if port and "edge-agent ready" in line or time.monotonic() > end:
        break
if not port or proc.poll() is not None:
    proc.kill()
    print(json.dumps({"network": out["network"], "error": "the daemon did not start", "log": "".join(log)[-3000:]}))
    sys.exit(1)
def call(method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request(method, path, body=json.dumps(body) if body else None, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read() or b"null")
try:
    out["ready"] = call("GET", "/ready")
    out["completion"] = call("POST", "/v1/completions", {"model": "default", "prompt": "The pump house", "max_tokens": 4, "temperature": 0})
    if add:
        out["add"] = call("POST", "/v1/documents", {"title": "Pump house", "text": sys.argv[4]})
    out["retrieve"] = call("POST", "/v1/retrieve", {"query": "Where is the spare key of the pump house?", "k": 1})
finally:
    proc.send_signal(signal.SIGTERM)
    out["exit"] = proc.wait(60)
    out["log"] = "".join(log)[-2000:]
print(json.dumps(out))
'''


def _base_python() -> str:
    """The interpreter the project's venv was made from: a plain Python 3.11 without our packages."""
    base = getattr(sys, "_base_executable", None) or shutil.which("python3.11")
    if not base or not Path(base).exists():
        pytest.skip("no base Python 3.11 interpreter found for a fresh virtual environment")
    return str(Path(base).resolve())


def builder():
    """scripts/build-offline-bundle as a module (its functions, without running main)."""
    from importlib.machinery import SourceFileLoader
    from importlib.util import module_from_spec, spec_from_loader

    loader = SourceFileLoader("build_offline_bundle", str(REPO / "scripts" / "build-offline-bundle"))
    module = module_from_spec(spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def offline_archive(tiny_bundles, tmp_path_factory) -> Path:
    from tiny_models import make_sentence_transformer

    out = tmp_path_factory.mktemp("offline-dist")
    # a tiny real sentence-transformers folder stands in for the converted multilingual-e5-small (470 MB)
    stand_in = make_sentence_transformer(tmp_path_factory.mktemp("multilingual"))
    r = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build-offline-bundle"), "--out", str(out),
         "--model-bundle", str(tiny_bundles["llama"]), "--embedding-cache", str(EMBED_CACHE),
         "--multilingual-folder", str(stand_in)],
        capture_output=True, text=True, timeout=1200, cwd=REPO,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return Path(json.loads(r.stdout.strip().splitlines()[-1])["archive"])


def _unshare_works() -> str | None:
    if not shutil.which("unshare") or not shutil.which("ip"):
        return "unshare or ip is missing"
    r = subprocess.run(["unshare", "-rn", "sh", "-c", "ip link set lo up"], capture_output=True, text=True)
    return None if r.returncode == 0 else f"`unshare -rn` does not work here: {r.stderr.strip()[:200]}"


@pytest.mark.slow
def test_archive_holds_wheels_model_embedding_cache_units_and_installer(offline_archive):
    with tarfile.open(offline_archive) as tar:
        names = tar.getnames()
    top = names[0].split("/")[0]
    rel = {n[len(top) + 1:] for n in names}
    assert {"install.sh", "requirements.txt", "SHA256SUMS", "BUNDLE.json", "models/default/manifest.json",
            "systemd/edge-agent.service", "systemd/gpu.conf", "systemd/edge-agent-job@.timer"} <= rel
    wheels = [n for n in rel if n.startswith("wheels/")]
    assert any(w.startswith("wheels/torch-2.13.0+cpu-") for w in wheels)  # CPU torch: no CUDA wheels
    assert not any(w.startswith("wheels/nvidia_") for w in wheels)
    assert any(w.startswith("wheels/edge_agent-") for w in wheels)
    assert any(n.startswith("embedding-cache/all-MiniLM-L6-v2-") and n.endswith("edge-agent-embedder.json") for n in rel)
    assert "models/embeddings/multilingual-e5-small/config.json" in rel  # converted: the appliance does not convert
    assert any(n.startswith("embedding-cache/multilingual-e5-small-") and n.endswith("edge-agent-embedder.json") for n in rel)


@pytest.mark.slow
def test_bundle_installs_and_answers_with_the_network_cut(offline_archive, tmp_path):
    why = _unshare_works()
    if why:
        pytest.skip(why)
    with tarfile.open(offline_archive) as tar:
        tar.extractall(tmp_path, filter="tar")
    bundle = next(p for p in tmp_path.iterdir() if p.name.startswith("edge-agent-offline-"))
    prefix, data, etc, home = tmp_path / "opt", tmp_path / "var-lib", tmp_path / "etc", tmp_path / "home"
    home.mkdir()
    (tmp_path / "client.py").write_text(CLIENT)
    install = (f"bash {bundle}/install.sh --prefix {prefix} --data {data} --config-dir {etc} --no-user --no-systemd "
               f"--no-compile --python {_base_python()}")
    exe, py, site = prefix / "venv/bin/edge-agent", _base_python(), prefix / "venv/lib/python3.11/site-packages"
    script = (
        "set -ex; ip link set lo up\n"
        f"{install} > {tmp_path}/install1.log 2>&1\n"
        f"{py} {tmp_path}/client.py {exe} {etc}/config.toml add '{FACT}' > {tmp_path}/run1.json\n"
        f"sha256sum {etc}/config.toml > {tmp_path}/config.sum\n"
        f"{install} > {tmp_path}/install2.log 2>&1\n"  # the same bundle again: idempotent, an upgrade in place
        f"sha256sum -c --quiet {tmp_path}/config.sum\n"
        f"{py} {tmp_path}/client.py {exe} {etc}/config.toml keep x > {tmp_path}/run2.json\n"
        f"test -f {site}/edge_agent/runtime.py\n"  # installed from the bundle's wheel, not an editable link here
        f"test -z \"$(ls {site} | grep __editable__)\"\n"
        f"{install} --uninstall > {tmp_path}/uninstall.log 2>&1\n"  # program gone, data and config kept
        f"test ! -e {prefix}\ntest -f {data}/data/edge-agent.db\ntest -f {etc}/config.toml\n"
        f"{install} --uninstall --purge >> {tmp_path}/uninstall.log 2>&1\n"
        f"test ! -e {data}\ntest ! -e {etc}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHON", "EDGE_AGENT_"))}
    env.update(HOME=str(home), PATH="/usr/sbin:/usr/bin:/sbin:/bin")
    r = subprocess.run(["unshare", "-rn", "bash", "-c", script], env=env, capture_output=True, text=True, timeout=1500, cwd=tmp_path)
    logs = "".join((tmp_path / f).read_text()[-3000:] for f in ("install1.log", "install2.log") if (tmp_path / f).exists())
    runs = "".join((tmp_path / f).read_text()[-3000:] for f in ("run1.json", "run2.json") if (tmp_path / f).exists())
    assert r.returncode == 0, r.stderr[-2000:] + logs + runs

    first = json.loads((tmp_path / "run1.json").read_text())
    assert first["network"].startswith("cut"), first["network"]
    assert first["ready"][0] == 200 and first["ready"][1]["status"] == "ready", first["log"]
    status, completion = first["completion"]
    assert status == 200 and completion["choices"][0]["text"] and completion["usage"]["completion_tokens"] >= 1
    assert first["add"][0] == 201
    assert first["retrieve"][0] == 200 and "K-17" in json.dumps(first["retrieve"][1]), first["retrieve"]
    assert first["exit"] == 0

    second = json.loads((tmp_path / "run2.json").read_text())  # after the second install: data and index kept
    assert second["ready"][0] == 200 and "K-17" in json.dumps(second["retrieve"][1]), second
    install1, install2 = (tmp_path / "install1.log").read_text(), (tmp_path / "install2.log").read_text()
    assert "embedding model multilingual-e5-small installed" in install1 and "installing multilingual-e5-small" not in install1
    assert "embedding model: multilingual-e5-small prepared" in install1 and "exporting" not in install1, install1
    assert "kept" in install2 and "kept embedding model multilingual-e5-small" in install2
    assert "kept" in (tmp_path / "uninstall.log").read_text() and "purged" in (tmp_path / "uninstall.log").read_text()


def test_setup_prepares_at_install_time_what_a_first_start_would_do(tiny_bundles, tmp_path, monkeypatch, capsys):
    """`edge-agent setup`: folders, bundle check, the embedding export; --check reports without changing anything."""
    from edge_agent.cli import main
    from edge_agent.config import Settings
    from edge_agent.rag.embedder import prepared_decision

    bundle = tiny_bundles["llama"]
    for key, value in dict(CONFIG="/nonexistent/edge-agent-test.toml", MODELS_DIR=bundle.parent, MODEL=bundle.name,
                           DATA_DIR=tmp_path / "data", INDEX_DIR=tmp_path / "index", EMBEDDING_QUANTIZE="off").items():
        monkeypatch.setenv(f"EDGE_AGENT_{key}", str(value))  # off: the fp32 export only, seconds instead of the int8 search
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user-cache"))  # the shared export of the packaged model: none yet
    assert main(["setup", "--check"]) == 1
    out = capsys.readouterr().out
    assert "data_dir" in out and "embedding model: not exported yet" in out and not (tmp_path / "data").exists()

    assert main(["setup"]) == 0
    out = capsys.readouterr().out
    assert f"model: {bundle.name} OK" in out and "embedding model: all-MiniLM-L6-v2 prepared (fp32" in out
    assert prepared_decision(Settings()) is not None and (tmp_path / "index").is_dir()
    assert main(["setup", "--check"]) == 0  # a first start has nothing left to do

    monkeypatch.setenv("EDGE_AGENT_MODEL", "missing")
    assert main(["setup"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing" in err and "Traceback" not in err, err


def test_bundle_carries_the_converted_multilingual_model_and_setup_neither_converts_nor_exports(tiny_bundles, tmp_path, monkeypatch, capsys):
    """The builder packs a converted multilingual-e5-small (here a tiny real stand-in) with its ONNX export, checked
    before packing; install.sh's install_models puts both where `edge-agent setup` looks, so setup (embedding_model
    auto) finds the model and its int8 choice made: no conversion, no export. A second install keeps it."""
    from tiny_models import make_sentence_transformer

    from edge_agent.cli import main
    from edge_agent.config import Settings
    from edge_agent.rag.embedder import build_embedder

    build = builder()
    stand_in = make_sentence_transformer(tmp_path / "converted")
    stage = tmp_path / "stage"
    shutil.copytree(tiny_bundles["llama"], stage / "models" / "default")
    packed = build.prepare_multilingual(stage, stand_in, tmp_path / "build-cache")
    folder = stage / "models" / "embeddings" / "multilingual-e5-small"
    export = stage / "embedding-cache" / packed["export"]["folder"]
    assert packed["converted_at_build"] is False and packed["export"]["folder"].startswith("multilingual-e5-small-")
    assert (folder / "config.json").is_file() and (export / "edge-agent-embedder.json").is_file()
    assert (export / packed["export"]["file_name"]).is_file() and not (export / "model.safetensors").exists()
    assert not (stage / "embedding-cache" / ".lock").exists()

    data = tmp_path / "var-lib"
    script = f"source {REPO}/scripts/install.sh --data {data} --no-user; HERE={stage}; install_models"
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "embedding model multilingual-e5-small installed" in r.stdout, r.stdout + r.stderr
    for key, value in dict(CONFIG="/nonexistent/edge-agent-test.toml", MODELS_DIR=data / "models", MODEL="default",
                           DATA_DIR=data / "data", INDEX_DIR=data / "index", EMBEDDING_MODEL="auto",
                           CLASSIFY_EMBEDDING_MODEL="same").items():  # (classify's own model: test_doctor's setup test)
        monkeypatch.setenv(f"EDGE_AGENT_{key}", str(value))
    assert main(["setup", "--no-build-model"]) == 0
    out = capsys.readouterr().out
    assert "embedding model: multilingual-e5-small prepared" in out and "installing" not in out and "exporting" not in out, out
    assert Settings().embedding_source() == str(data / "models" / "embeddings" / "multilingual-e5-small")
    assert build_embedder(Settings()).embed(["een proefzin"]).shape == (1, 32)

    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "kept embedding model multilingual-e5-small" in r.stdout, r.stdout + r.stderr

    # a damaged folder (a conversion that died mid-write) is refused before packing, with what to do
    (stand_in / "model.safetensors").write_bytes((stand_in / "model.safetensors").read_bytes()[:100])
    with pytest.raises(SystemExit) as exc:
        build.prepare_multilingual(tmp_path / "stage2", stand_in, tmp_path / "build-cache")
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "multilingual-e5-small" in err and "--no-multilingual" in err and "Traceback" not in err, err
