"""Helpers of the job tests (a module of its own: `from conftest import` can pick another folder's conftest in a full run)."""
from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
os.environ["EDGE_AGENT_CONFIG"] = "/nonexistent/edge-agent-test.toml"  # no machine config leaks into tests

EMBED_CACHE = Path(os.environ.get("EDGE_AGENT_TEST_EMBED_CACHE", REPO / ".cache" / "test-embedding-cache"))

WORDS = ("river harbour engine ledger window orchard signal market bridge lantern copper meadow "
         "archive council garden tunnel beacon quarry station valley").split()


def doc_text(i: int, sentences: int = 6) -> str:
    """A small document of real words, different for each i."""
    out = []
    for s in range(sentences):
        w = [WORDS[(i * 7 + s * 3 + k) % len(WORDS)] for k in range(8)]
        out.append(f"The {w[0]} near the {w[1]} was built for the {w[2]} and the {w[3]} in year {1900 + i * 3 + s}.")
    return " ".join(out)


def job_settings(tiny_bundles, tmp_path: Path, **overrides):
    from edge_agent.config import Settings

    (tmp_path / "docs").mkdir(exist_ok=True)
    values = dict(
        models_dir=tiny_bundles["llama"].parent, model=tiny_bundles["llama"].name, threads=1, context_length=512,
        max_batch=8, max_queue=64, data_dir=tmp_path / "var", index_dir=tmp_path / "index",
        ingest_roots=[tmp_path / "docs"], request_timeout_s=60.0, jobs_concurrency=4,
    )
    values.update(overrides)
    return Settings(**values)


def patch_submit(rt, processor_for) -> list:
    """Give the scheduler's i-th submission (from 0) the logits processor processor_for(i); returns the list that
    records each submission's prompt ids."""
    scheduler = rt.chat.scheduler
    submitted, real_submit = [], scheduler.submit

    def submit(ids, params, **kw):
        params.logits_processor = processor_for(len(submitted))
        submitted.append(list(ids))
        return real_submit(ids, params, **kw)

    scheduler.submit = submit
    return submitted
