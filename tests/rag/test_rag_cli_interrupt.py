"""Ctrl-C during `edge-agent index add`: one line and exit 130, not a traceback through onnxruntime; nothing half-added."""
from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from embed_cache import link_embedding_cache

REPO = Path(__file__).resolve().parents[2]


def test_ctrl_c_during_index_add_is_one_line(tmp_path):
    link_embedding_cache(tmp_path / "var")  # the tests' exported model, linked into this data folder
    rng = random.Random(3)
    words = "river harbour engine ledger window orchard signal market bridge lantern".split()
    doc = tmp_path / "long.txt"  # ~25 MB: still being chunked or embedded 6 s in, even on many cores
    doc.write_text("\n\n".join(" ".join(rng.choice(words) for _ in range(120)) + "." for _ in range(30000)))
    env = dict(os.environ, EDGE_AGENT_CONFIG="/nonexistent/edge-agent-test.toml", EDGE_AGENT_THREADS="1",
               EDGE_AGENT_DATA_DIR=str(tmp_path / "var"), EDGE_AGENT_INDEX_DIR=str(tmp_path / "index"))
    proc = subprocess.Popen([sys.executable, "-m", "edge_agent", "index", "add", str(doc)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(6)  # the model is loaded and the chunks are being embedded
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err and "interrupted" in err, err[-1500:]
    with sqlite3.connect(tmp_path / "var" / "edge-agent.db") as db:
        assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0
