"""Logging for operators: our own lines at INFO for the daemon, third-party chatter only with -v.

At the default level, warnings raised through Python's `warnings` (onnx export notes,
transformers deprecations, quantization hints) and the loggers of the libraries below
are kept out of the journal; `-v` shows everything at INFO, the warnings included.
"""
from __future__ import annotations

import logging
import os

THIRD_PARTY = (
    "onnx", "onnxruntime", "transformers", "optimum", "sentence_transformers", "torch", "huggingface_hub",
    "urllib3", "filelock", "faiss", "bm25s", "pypdf", "waitress", "croniter",
)
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class OwnLinesOnly(logging.Filter):
    """Below ERROR, pass only edge_agent's records (libraries also log on the root logger:
    onnxruntime.quantization's "consider pre-processing" hint does)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or record.name.startswith("edge_agent")


def configure(verbose: bool, daemon: bool = False) -> None:
    """Install the stderr handler; daemon: edge_agent's INFO lines (one per request, the device chosen) are shown.

    Leaves logging alone when the process has configured it already (a test runner, a program
    embedding edge-agent): their handlers, levels and warning filters are theirs.
    """
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    if verbose:
        return
    if daemon:
        logging.getLogger("edge_agent").setLevel(logging.INFO)
    # transformers installs its own handler and level when first imported (after this): tell it by environment
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(logging.ERROR)
    logging.captureWarnings(True)  # warnings.warn -> the "py.warnings" logger, which OwnLinesOnly drops
    handler.addFilter(OwnLinesOnly())


def warn_unknown_env() -> None:
    """Log each EDGE_AGENT_* variable that is no setting (warned, not refused: see config.unknown_env), and a missing EDGE_AGENT_CONFIG file."""
    from edge_agent.config import unknown_env

    for line in unknown_env():
        logging.getLogger("edge_agent.config").warning("%s; it is ignored", line)
    named = os.environ.get("EDGE_AGENT_CONFIG")
    if named and not os.path.exists(named):  # a typo in a unit file's path would otherwise go unnoticed
        logging.getLogger("edge_agent.config").warning(
            "EDGE_AGENT_CONFIG names %s, which does not exist: only defaults, EDGE_AGENT_* variables and flags apply", named)
