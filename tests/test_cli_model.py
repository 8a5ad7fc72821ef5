"""`edge-agent model import --help`: says what the build options do; measured figures live in the README."""
from __future__ import annotations

import re

import pytest

from edge_agent.cli import build_parser


@pytest.mark.parametrize("command", ["import", "install-default"])
def test_build_option_help_has_no_figures_that_go_stale(command, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["model", command, "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for flag in ("--lm-head", "--attn-out", "--smooth-alpha", "--kv-cache"):
        assert flag in text
    # ratios ("1.028x", "~0.86x", "1.05-1.28x") and megabytes measured on one model once
    assert not re.findall(r"\d(?:\.\d+)?x\b|\d+ MB", text)
    assert "README, Performance" in text
