"""Shared pieces of the command modules: settings from global flags, sampling flags."""
from __future__ import annotations

import argparse
import re

from edge_agent.config import Settings, load_settings


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings with the global flags (--model, --models-dir, --threads, ...) applied on top."""
    overrides = {}
    for key in ("model", "models_dir", "threads", "host", "port", "context_length"):
        value = getattr(args, key, None)
        if value is not None:
            overrides[key] = value
    return load_settings(**overrides)


def add_sampling_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-tokens", type=int, default=128, help="most tokens to generate (default 128)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--min-p", type=float, default=0.0)
    p.add_argument("--repetition-penalty", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--stop", action="append", default=[], type=unescape,
                   help="stop string (repeatable); \\n, \\t, \\r and \\\\ are read as in llama.cpp: --stop '\\n'")


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}


def unescape(text: str) -> str:
    """A command-line string with \\n, \\t, \\r and \\\\ turned into the characters (llama.cpp's escapes); others stay as typed."""
    return re.sub(r"\\([ntr\\])", lambda m: _ESCAPES[m.group(1)], text)
