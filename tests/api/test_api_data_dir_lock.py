"""One daemon per data dir: a second `edge-agent serve` on the same data_dir exits 2 at once, before its model loads,
naming the data dir and the first daemon's pid; CLI commands beside the daemon still work; a daemon killed with
kill -9 leaves its lock file behind, and that file does not block the next start (the lock is an flock)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from api_helpers import REPO
from embed_cache import link_embedding_cache


def _data_dir(tmp_path: Path) -> Path:
    return link_embedding_cache(tmp_path / "var")


def _env(tmp_path: Path, data: Path) -> dict[str, str]:
    return dict(os.environ, EDGE_AGENT_CONFIG="/nonexistent/edge-agent-test.toml", EDGE_AGENT_SHUTDOWN_GRACE_S="0.5",
                EDGE_AGENT_THREADS="1", EDGE_AGENT_DATA_DIR=str(data), EDGE_AGENT_INDEX_DIR=str(tmp_path / "index"))


def _serve_cmd(bundle: Path, model: str | None = None) -> list[str]:
    return [sys.executable, "-m", "edge_agent", "--models-dir", str(bundle.parent), "serve", "--model", model or bundle.name,
            "--port", "0"]


def _start(bundle: Path, tmp_path: Path, data: Path) -> tuple[subprocess.Popen, list[str]]:
    """A real daemon on port 0, once it says ready (the document index open, so it owns the index too)."""
    proc = subprocess.Popen(_serve_cmd(bundle), cwd=REPO, env=_env(tmp_path, data), stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    end = time.monotonic() + 120
    while time.monotonic() < end:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if re.search(r"edge-agent ready: .* on http://127\.0\.0\.1:\d+", line):
            threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True).start()
            return proc, lines
    proc.kill()
    raise AssertionError("".join(lines))


def _cli(tmp_path: Path, data: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edge_agent", *args], cwd=REPO, env=_env(tmp_path, data),
                          capture_output=True, text=True, timeout=120)


def test_a_second_daemon_on_the_same_data_dir_is_refused_and_a_killed_one_blocks_nothing(tiny_bundles, tmp_path):
    bundle = tiny_bundles["llama"]
    data = _data_dir(tmp_path)
    first, first_log = _start(bundle, tmp_path, data)
    try:
        # a model that does not exist: had the second daemon loaded its model before the lock, it would say "not found"
        second = subprocess.run(_serve_cmd(bundle, model="no-such-bundle"), cwd=REPO, env=_env(tmp_path, data),
                                capture_output=True, text=True, timeout=60)
        said = second.stderr
        assert second.returncode == 2 and "Traceback" not in said, (second.returncode, said)
        errors = [line for line in said.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, said  # one line (besides the note that the test's config file does not exist)
        err = errors[0]
        assert f"pid {first.pid}" in err and str(data.resolve()) in err and "data_dir" in err, err
        assert "no-such-bundle" not in err, err

        jobs = _cli(tmp_path, data, "jobs", "list")  # reads SQLite beside the daemon
        assert jobs.returncode == 0, jobs.stderr
        stats = _cli(tmp_path, data, "index", "stats", "--json")  # the daemon owns the index: a read-only view
        assert stats.returncode == 0 and '"documents"' in stats.stdout, stats.stderr
        assert first.poll() is None, "".join(first_log)
    finally:
        first.kill()  # kill -9: no release, the lock file keeps the dead pid
        first.wait(30)
    assert (data / ".daemon.lock").read_text().strip() == str(first.pid)
    again, again_log = _start(bundle, tmp_path, data)  # ready: the stale file did not block it
    try:
        assert (data / ".daemon.lock").read_text().strip() == str(again.pid)
    finally:
        again.send_signal(signal.SIGTERM)
        assert again.wait(60) == 0, "".join(again_log)
    assert (data / ".daemon.lock").read_text() == ""  # a clean stop empties it
