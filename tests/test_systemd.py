"""systemd integration: sd_notify over a real AF_UNIX datagram socket, and the unit files verified and scored."""
from __future__ import annotations

import http.client
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
UNITS = REPO / "systemd"
# shared with the RAG tests (tests/rag/rag_docs.py): the export is done once
EMBED_CACHE = Path(os.environ.get("EDGE_AGENT_TEST_EMBED_CACHE", REPO / ".cache" / "test-embedding-cache"))


def _listener(path: Path | str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(path))
    s.settimeout(0.2)
    return s


def _drain(s: socket.socket) -> list[str]:
    out = []
    while True:
        try:
            out.append(s.recv(65536).decode())
        except socket.timeout:
            return out


# --- sd_notify --------------------------------------------------------------------------------------------

def test_notify_writes_one_datagram_to_a_path_or_an_abstract_socket(tmp_path):
    from edge_agent.sdnotify import notify

    with _listener(tmp_path / "notify") as s:
        assert notify("READY=1\nSTATUS=ready", {"NOTIFY_SOCKET": str(tmp_path / "notify")})
        assert s.recv(4096) == b"READY=1\nSTATUS=ready"
    name = f"edge-agent-test-{os.getpid()}"
    with _listener("\0" + name) as s:
        assert notify("STOPPING=1", {"NOTIFY_SOCKET": "@" + name})
        assert s.recv(4096) == b"STOPPING=1"
    assert notify("READY=1", {}) is False  # not under systemd: nothing to do
    assert notify("READY=1", {"NOTIFY_SOCKET": str(tmp_path / "nobody-listens")}) is False  # logged, not raised


def test_notifier_sends_ready_once_and_pets_the_watchdog_only_while_alive(tmp_path):
    from edge_agent.sdnotify import ServiceNotifier

    now = [100.0]
    env = {"NOTIFY_SOCKET": str(tmp_path / "n"), "WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid())}
    with _listener(tmp_path / "n") as s:
        n = ServiceNotifier(env, clock=lambda: now[0])
        assert n.watchdog_s == 2.0
        n.update(False, True, "not ready: embedder loading")
        assert _drain(s) == ["STATUS=not ready: embedder loading", "WATCHDOG=1"]
        now[0] += 1.0
        n.update(False, True, "not ready: embedder loading")
        assert _drain(s) == []  # nothing changed, the watchdog is not due
        now[0] += 1.5
        n.update(True, True, "ready: model, embedder, index")
        assert _drain(s) == ["READY=1\nSTATUS=ready: model, embedder, index", "WATCHDOG=1"]
        now[0] += 5
        n.update(True, True, "ready: model, embedder, index")
        assert _drain(s) == ["WATCHDOG=1"]  # READY=1 is sent once
        now[0] += 5
        n.update(False, False, "not ready: model failed")
        assert _drain(s) == ["STATUS=not ready: model failed"]  # a dead decode loop gets no watchdog ping
        n.stopping()
        assert _drain(s) == ["STOPPING=1\nSTATUS=shutting down"]
    assert ServiceNotifier({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "1"}).watchdog_s is None


def _get(port: int, path: str) -> int:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        return c.getresponse().status
    finally:
        c.close()


def test_daemon_tells_systemd_ready_when_ready_pets_the_watchdog_and_says_stopping(tiny_bundles, tmp_path):
    """`edge-agent serve` under a fake service manager: a real datagram socket as NOTIFY_SOCKET."""
    EMBED_CACHE.mkdir(parents=True, exist_ok=True)
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "embedding-cache").symlink_to(EMBED_CACHE)
    bundle = tiny_bundles["llama"]
    env = dict(
        os.environ, EDGE_AGENT_CONFIG="/nonexistent/edge-agent-test.toml", EDGE_AGENT_THREADS="1", EDGE_AGENT_MAX_BATCH="2",
        EDGE_AGENT_DATA_DIR=str(tmp_path / "var"), EDGE_AGENT_INDEX_DIR=str(tmp_path / "index"),
        NOTIFY_SOCKET=str(tmp_path / "notify"), WATCHDOG_USEC="1000000",  # a ping every 0.5 s
    )
    cmd = [sys.executable, "-m", "edge_agent.cli.serve", "--models-dir", str(bundle.parent), "--model", bundle.name, "--port", "0"]
    with _listener(tmp_path / "notify") as s:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        try:
            port = None
            for line in proc.stderr:
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    port = int(m.group(1))
                    break
            assert port, "the daemon did not start"
            # "(model llama, 88 threads, ...)" read as the engine's threads beside "loaded ... with 1 threads"
            assert "HTTP worker threads" in line, line
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # keep the pipe flowing
            seen: list[str] = []
            end = time.monotonic() + 120
            while not any(m.startswith("READY=1") for m in seen) and time.monotonic() < end:
                seen += _drain(s)
            assert any(m.startswith("READY=1") for m in seen), seen
            assert _get(port, "/ready") == 200  # READY=1 came when /ready answers 200
            before = seen[: [m.startswith("READY=1") for m in seen].index(True)]
            assert all(m == "WATCHDOG=1" or m.startswith("STATUS=not ready") for m in before), before
            assert "STATUS=ready: model, embedder, index" in seen[len(before)]
            time.sleep(1.6)
            assert _drain(s).count("WATCHDOG=1") >= 2
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
            assert any(m.startswith("STOPPING=1") for m in _drain(s))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# --- the unit files ---------------------------------------------------------------------------------------

def _systemd_analyze() -> str:
    """systemd-analyze, installed from the distribution's packages when missing (or skip, saying why)."""
    found = shutil.which("systemd-analyze")
    if not found:
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            pytest.skip("systemd-analyze is missing and cannot be installed here (needs root and apt-get)")
        r = subprocess.run("apt-get update -qq && apt-get install -y -qq --no-install-recommends systemd", shell=True,
                           capture_output=True, text=True, timeout=900)
        found = shutil.which("systemd-analyze")
        if r.returncode or not found:
            pytest.skip(f"systemd could not be installed: {(r.stderr or r.stdout).strip()[-300:]}")
    version = subprocess.run([found, "--version"], capture_output=True, text=True).stdout.split()
    if len(version) < 2 or not version[1].isdigit() or int(version[1]) < 250:
        pytest.skip(f"systemd-analyze {version[1:2]} is older than 250 (no offline `security`)")
    return found


@pytest.fixture(scope="module")
def unit_root(tmp_path_factory) -> tuple[str, Path]:
    """A root tree for `systemd-analyze --root`: the host's system units, ours in /etc, ExecStart's path present."""
    analyze = _systemd_analyze()
    root = tmp_path_factory.mktemp("unit-root")
    for d in ("/usr/lib/systemd/system", "/lib/systemd/system"):
        if Path(d).is_dir() and not (root / "usr/lib/systemd/system").exists():
            shutil.copytree(d, root / "usr/lib/systemd/system", symlinks=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    for unit in ("edge-agent.service", "edge-agent-job@.service", "edge-agent-job@.timer"):
        shutil.copy(UNITS / unit, root / "etc/systemd/system" / unit)
    exe = root / "opt/edge-agent/venv/bin/edge-agent"  # verify checks that ExecStart's program exists
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return analyze, root


def _verify(analyze: str, root: Path, *units: str) -> subprocess.CompletedProcess:
    return subprocess.run([analyze, "verify", "--man=no", f"--root={root}", *units], capture_output=True, text=True, timeout=60)


def _exposure(analyze: str, root: Path, unit: str) -> float:
    r = subprocess.run([analyze, "security", "--offline=true", f"--root={root}", "--no-pager", unit],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", r.stdout)
    assert m, r.stdout[-500:] + r.stderr
    return float(m.group(1))


def test_units_verify_cleanly_and_score_3_or_lower(unit_root):
    analyze, root = unit_root
    r = _verify(analyze, root, "edge-agent.service", "edge-agent-job@nightly.service", "edge-agent-job@nightly.timer")
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr  # warnings count too
    assert _exposure(analyze, root, "edge-agent.service") <= 3.0
    assert _exposure(analyze, root, "edge-agent-job@nightly.service") <= 3.0
    unit = (UNITS / "edge-agent.service").read_text()
    for line in ("Type=notify", "User=edge-agent", "StateDirectory=edge-agent", "ReadWritePaths=/var/lib/edge-agent",
                 "IPAddressDeny=any", "IPAddressAllow=localhost", "Restart=on-failure", "DevicePolicy=closed"):
        assert f"\n{line}\n" in unit, line


def test_gpu_and_lan_drop_ins_verify_and_keep_the_score(unit_root, tmp_path):
    analyze, root = unit_root
    d = root / "etc/systemd/system/edge-agent.service.d"
    d.mkdir(exist_ok=True)
    shutil.copy(UNITS / "gpu.conf", d / "gpu.conf")
    shutil.copy(UNITS / "lan.conf.example", d / "lan.conf")
    try:
        r = _verify(analyze, root, "edge-agent.service")
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
        assert _exposure(analyze, root, "edge-agent.service") <= 3.0
        (d / "broken.conf").write_text("[Service]\nIPAddressAllow=not-an-address\nDeviceAllw=/dev/nvidia0 rw\n")
        r = _verify(analyze, root, "edge-agent.service")  # the check above can fail: a typo is reported
        assert "broken.conf" in r.stdout + r.stderr
    finally:
        shutil.rmtree(d)


def test_install_sh_gives_the_job_units_the_same_non_default_paths_as_the_daemon(unit_root, tmp_path):
    """`install.sh --prefix/--data/--config-dir/--user` wrote 10-paths.conf for edge-agent.service only, so
    edge-agent-job@NAME.service still ran /opt/edge-agent/venv/bin/edge-agent in /var/lib/edge-agent as edge-agent."""
    analyze, shared = unit_root
    root = tmp_path / "root"
    shutil.copytree(shared, root, symlinks=True, ignore=lambda d, names: ["opt"] if Path(d) == shared else [])
    exe = root / "srv/ea/venv/bin/edge-agent"  # the only program there is: the one under --prefix
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    units = root / "etc/systemd/system"
    script = (f"source {REPO}/scripts/install.sh --prefix /srv/ea --data /srv/ea-data --config-dir /srv/ea-etc --user daemon"
              f" && write_path_dropins {units}")
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    r = _verify(analyze, root, "edge-agent.service", "edge-agent-job@nightly.service", "edge-agent-job@nightly.timer")
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
    job = (units / "edge-agent-job@.service.d/10-paths.conf").read_text()
    for line in ("ExecStart=/srv/ea/venv/bin/edge-agent jobs run %i", "User=daemon", "WorkingDirectory=/srv/ea-data",
                 "ReadWritePaths=/srv/ea-data", "Environment=EDGE_AGENT_CONFIG=/srv/ea-etc/config.toml HOME=/srv/ea-data"):
        assert f"\n{line}\n" in job, (line, job)
    assert "\nExecStart=/srv/ea/venv/bin/edge-agent serve\n" in (units / "edge-agent.service.d/10-paths.conf").read_text()
    r = subprocess.run(["bash", "-c", f"source {REPO}/scripts/install.sh && write_path_dropins {units}"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not list(units.glob("*.d/10-paths.conf")), r.stderr  # the defaults need no drop-in: removed
