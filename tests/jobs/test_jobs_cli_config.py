"""The README's [[jobs]] config block, used from the command line without a daemon (a systemd timer's `jobs run`)."""
from __future__ import annotations

import json

README_BLOCK = """
jobs_timezone = "Europe/Amsterdam"
[[jobs]]
name = "nightly-summaries"
kind = "summarize"
schedule = "0 2 * * *"
params = { changed_only = true }
limits = { deadline = "06:00" }
"""


def test_config_jobs_are_seen_by_the_cli(cli, monkeypatch, tmp_path, capsys):
    cfg = tmp_path / "config.toml"
    cfg.write_text(README_BLOCK)
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(cfg))
    assert cli("list", "--json") == 0
    jobs = {j["name"]: j for j in json.loads(capsys.readouterr().out)}
    assert jobs["nightly-summaries"]["kind"] == "summarize" and jobs["nightly-summaries"]["source"] == "config"
    assert cli("run", "nightly-summaries", "--no-progress") == 0, capsys.readouterr().err
    assert "succeeded" in capsys.readouterr().out
    assert cli("list", "--json") == 0  # a second sync changes nothing
    assert [j["name"] for j in json.loads(capsys.readouterr().out)] == ["nightly-summaries"]
