"""`edge-agent serve` start-up faults an operator meets: a taken port is reported at once, before any model loads."""
from __future__ import annotations

import json
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


def test_a_bracketed_ipv6_host_is_accepted_as_its_address(tmp_path, monkeypatch, capsys):
    """`--host [::1]` (the form URLs and allowed_hosts write) was handed to getaddrinfo brackets and all:
    "Name or service not known". It binds ::1 (here: the taken port is reported, so the name was understood)."""
    from edge_agent.config import Settings

    assert Settings(host="[::1]").host == "::1" and Settings(host=" [fe80::1%lo] ").host == "fe80::1%lo"
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("EDGE_AGENT_DATA_DIR", str(tmp_path / "var"))
    with socket.socket(socket.AF_INET6) as taken:
        taken.bind(("::1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["--models-dir", str(tmp_path / "models"), "serve", "--host", "[::1]", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on [::1]:{port}" in err and "in use" in err and "Name or service" not in err, err


def test_an_address_that_is_not_one_is_refused_as_such_not_for_a_missing_api_key(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("EDGE_AGENT_DATA_DIR", str(tmp_path / "var"))
    for host in ("256.1.1.1", "10.0.0", "[::1", "[localhost]", "::g", "1.2.3.4:8080"):
        assert main(["--models-dir", str(tmp_path / "models"), "serve", "--host", host]) == 2
        err = capsys.readouterr().err
        assert "'host' from flag" in err and "not a valid IP address" in err and "API key" not in err, (host, err)
    assert not (tmp_path / "var").exists()


def test_a_host_name_that_does_not_resolve_is_refused_as_such_not_for_a_missing_api_key(tmp_path, monkeypatch, capsys):
    """`--host nosuch.invalid` without an API key was told the name is reachable by other machines and needs a key."""
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("EDGE_AGENT_DATA_DIR", str(tmp_path / "var"))
    for keys in ([], ["k"]):  # with a key it was refused at the bind, for the name, already
        monkeypatch.setenv("EDGE_AGENT_API_KEYS", json.dumps(keys))
        assert main(["--models-dir", str(tmp_path / "models"), "serve", "--host", "nosuch.invalid", "--port", "0"]) == 2
        err = capsys.readouterr().err
        assert "nosuch.invalid" in err and ("does not resolve" in err or "not known" in err) and "API key" not in err, err
    assert not (tmp_path / "var").exists()

