"""Logging for operators: our own lines at INFO for the daemon, third-party chatter only with -v.

At the default level, warnings raised through Python's `warnings` (onnx export notes,
transformers deprecations, quantization hints) and the loggers of the libraries below
are kept out of the journal; `-v` shows everything at INFO, the warnings included.
"""
from __future__ import annotations

import logging
import os
import warnings

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
    """Set up the root handler; daemon: edge_agent's INFO lines (one per request, the device chosen) are shown."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format=FORMAT, force=True)
    if verbose:
        logging.captureWarnings(False)
        warnings.resetwarnings()
        return
    if daemon:
        logging.getLogger("edge_agent").setLevel(logging.INFO)
    # transformers installs its own handler and level when first imported (after this): tell it by environment
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(logging.ERROR)
    logging.captureWarnings(True)  # warnings.warn -> the "py.warnings" logger, silenced below
    logging.getLogger("py.warnings").setLevel(logging.ERROR)
    for handler in logging.getLogger().handlers:
        handler.addFilter(OwnLinesOnly())


def warn_unknown_env() -> None:
    """Log each EDGE_AGENT_* variable that is no setting (warned, not refused: see config.unknown_env)."""
    from edge_agent.config import unknown_env

    for line in unknown_env():
        logging.getLogger("edge_agent.config").warning("%s; it is ignored", line)
