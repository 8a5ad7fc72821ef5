"""`edge-agent generate` as the README shows it: stop strings typed on a command line."""
from __future__ import annotations

import os
import subprocess
import sys

from edge_agent.cli import build_parser


def test_stop_flag_reads_llama_cpp_escapes():
    """`--stop '\\n'` is a newline (as llama.cpp reads it), not a backslash and an n; other backslashes stay."""
    args = build_parser().parse_args(["generate", "--stop", r"\n", "--stop", r"Vraag:\t", "--stop", r"C:\\x\d", "x"])
    assert args.stop == ["\n", "Vraag:\t", "C:\\x\\d"]


def test_readme_question_answer_stops_at_the_line_end(default_bundle):
    """The README's first command with --stop '\\n' prints the answer line only (without it the base model repeats the pattern)."""
    env = dict(os.environ, EDGE_AGENT_MODELS_DIR=str(default_bundle.parent))
    out = subprocess.run([sys.executable, "-m", "edge_agent", "generate", "--stop", r"\n", "Question: What is the capital of France?\nAnswer:"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Paris", out.stdout
