"""`edge-agent serve` start-up faults an operator meets: a taken port is reported at once, before any model loads."""
from __future__ import annotations

import socket

from edge_agent.cli import main


def test_a_taken_port_is_reported_before_the_model_loads(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("EDGE_AGENT_DATA_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("EDGE_AGENT_INDEX_DIR", str(tmp_path / "index"))
    with socket.socket() as taken:  # another daemon already listens there
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # no bundle in models_dir: were the model loaded first, this would fail with "bundle not found" instead
        assert main(["--models-dir", str(tmp_path / "models"), "serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "in use" in err and "Traceback" not in err
    assert not (tmp_path / "var").exists()  # nothing started, nothing written


def test_the_port_error_names_the_port_set_in_the_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(tmp_path / "none.toml"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        monkeypatch.setenv("EDGE_AGENT_PORT", str(port))  # was reported as 127.0.0.1:8080, the flag's default
        assert main(["--models-dir", str(tmp_path / "models"), "serve"]) == 2
    assert f"cannot listen on 127.0.0.1:{port}:" in capsys.readouterr().err
