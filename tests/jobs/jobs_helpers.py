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


def writes(want: list[int], newline: int):
    """A logits processor that makes a generation write the token ids `want`, then a line break (the completion
    frame's stop), whatever the model would."""
    import numpy as np

    def force(tokens, logits):
        out = np.full_like(logits, -np.inf)
        out[want[len(tokens)] if len(tokens) < len(want) else newline] = 0.0
        return out

    return force


def install_wordy_model() -> None:
    """Make every generation of this process write words: each step may only choose a token that is letters (and
    spaces) and that it has not chosen before. The tiny random model otherwise writes "::::::::", which summarize
    rightly refuses as junk; with this the rest (the real engine, stops, the job, its checks) runs as in production.
    Tests that need summaries to succeed use the `wordy_model` fixture (a daemon in a subprocess: WORDY_SITE)."""
    import numpy as np

    from edge_agent.engine.scheduler import BatchScheduler

    real_submit = BatchScheduler.submit
    if getattr(real_submit, "wordy", False):
        return
    masks: dict[int, np.ndarray] = {}

    def submit(self, ids, params, *args, **kw):
        tok = self.engine.tokenizer
        if id(tok) not in masks:
            n = int(getattr(self.engine, "vocab_size", 0) or len(tok.get_vocab()))
            words = [tok.decode([i]) for i in range(n)]
            masks[id(tok)] = np.array([bool(w.strip()) and all(c.isalpha() or c == " " for c in w) for w in words])
        allowed, inner = masks[id(tok)], params.logits_processor

        def wordy(tokens, logits):
            if inner is not None:
                logits = inner(tokens, logits)
            logits = np.asarray(logits).copy()
            if np.isfinite(logits).sum() == 1:
                return logits  # a step the test's own processor forced (a blank line first, dashes) stays as it is
            logits[: len(allowed)][~allowed] = -np.inf
            logits[list(tokens)] = -np.inf
            return logits

        params.logits_processor = wordy
        return real_submit(self, ids, params, *args, **kw)

    submit.wordy = True  # type: ignore[attr-defined]
    BatchScheduler.submit = submit


# a sitecustomize.py for a daemon started in a subprocess (put its folder first on PYTHONPATH)
WORDY_SITE = f"import sys\nsys.path.insert(0, {str(HERE)!r})\nimport jobs_helpers\njobs_helpers.install_wordy_model()\n"


FOOTER = "The Python Software Foundation is a non-profit corporation."


def sphinx_page(name: str, i: int) -> str:
    """A page as Python's docs are built: a permalink in each heading, a page-level footer div."""
    return (f"""<html><head><title>{name}</title></head><body><div class="document"><div class="body">
    <h1>{name}<a class="headerlink" href="#{name}" title="Permalink">¶</a></h1><p>{doc_text(i, 4)}</p>
    <h2>Objects<a class="headerlink" href="#objects" title="Permalink">¶</a></h2><p>{doc_text(i + 50, 3)}</p></div></div>
    <div class="footer">&copy; Copyright 2001-2026, Python Software Foundation. {FOOTER}
    <a href="https://www.python.org/psf/donations/">Please donate.</a></div></body></html>""")
