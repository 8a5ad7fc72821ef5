"""The README's [[jobs]] config block, used from the command line without a daemon (a systemd timer's `jobs run`)."""
from __future__ import annotations

import json

from jobs_helpers import job_settings

README_BLOCK = """
jobs_timezone = "Europe/Amsterdam"
[[jobs]]
name = "nightly-summaries"
kind = "summarize"
schedule = "0 2 * * *"
params = { changed_only = true }
limits = { deadline = "06:00" }
"""


def test_config_jobs_are_seen_by_the_cli(monkeypatch, tmp_path, tiny_bundles, capsys):
    from edge_agent.cli import build_parser

    s = job_settings(tiny_bundles, tmp_path)
    cfg = tmp_path / "config.toml"
    cfg.write_text(README_BLOCK)
    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(cfg))
    for key, value in (("DATA_DIR", s.data_dir), ("INDEX_DIR", s.index_dir), ("MODELS_DIR", s.models_dir), ("MODEL", s.model),
                       ("THREADS", 1), ("CONTEXT_LENGTH", 512)):
        monkeypatch.setenv(f"EDGE_AGENT_{key}", str(value))

    def cli(*argv: str) -> int:
        args = build_parser().parse_args(["jobs", *argv])
        try:
            return int(args.func(args) or 0)
        except SystemExit as e:
            return int(e.code or 0)

    assert cli("list", "--json") == 0
    jobs = {j["name"]: j for j in json.loads(capsys.readouterr().out)}
    assert jobs["nightly-summaries"]["kind"] == "summarize" and jobs["nightly-summaries"]["source"] == "config"
    assert cli("run", "nightly-summaries", "--no-progress") == 0, capsys.readouterr().err
    assert "succeeded" in capsys.readouterr().out
    assert cli("list", "--json") == 0  # a second sync changes nothing
    assert [j["name"] for j in json.loads(capsys.readouterr().out)] == ["nightly-summaries"]
