"""Fixtures for job tests: a runtime over the tiny real Llama with a real document index in tmp_path."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobs_helpers import EMBED_CACHE, doc_text, job_settings  # noqa: E402,F401


@pytest.fixture(scope="session")
def embedder():
    from edge_agent.rag.embedder import OnnxEmbedder

    return OnnxEmbedder(cache_dir=EMBED_CACHE)


@pytest.fixture
def make_runtime(tiny_bundles, tmp_path, embedder):
    """make(**settings) -> a Runtime with a writable DocumentService (jobs built, not started)."""
    from edge_agent.runtime import build_runtime
    from edge_agent.services.documents import DocumentService

    made = []

    def make(start_jobs: bool = False, **overrides):
        while made:
            made.pop().close()
        settings = job_settings(tiny_bundles, tmp_path, **overrides)
        docs = DocumentService.from_settings(settings, embedder=embedder)
        rt = build_runtime(settings, documents=docs, start_jobs=start_jobs)
        made.append(rt)
        return rt

    yield make
    for rt in made:
        rt.close()


@pytest.fixture
def wordy_model(monkeypatch):
    """Generations in this process write words, not the tiny model's "::::" (jobs_helpers.install_wordy_model)."""
    from edge_agent.engine.scheduler import BatchScheduler
    from jobs_helpers import install_wordy_model

    monkeypatch.setattr(BatchScheduler, "submit", BatchScheduler.submit)  # put back after the test
    install_wordy_model()


@pytest.fixture
def wordy_site(tmp_path, monkeypatch, wordy_model):
    """wordy_model here and in the processes this test starts (a daemon, Ray's workers): a sitecustomize first on PYTHONPATH."""
    import os

    from jobs_helpers import WORDY_SITE

    site = tmp_path / "wordy-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(WORDY_SITE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
    return site


@pytest.fixture
def cli(monkeypatch, tmp_path, tiny_bundles):
    """cli(*argv) -> exit code: `edge-agent jobs ARGV` in this process, its settings (tmp_path, the tiny Llama) from the environment."""
    from edge_agent.cli import build_parser

    s = job_settings(tiny_bundles, tmp_path)
    for key, value in (("DATA_DIR", s.data_dir), ("INDEX_DIR", s.index_dir), ("MODELS_DIR", s.models_dir), ("MODEL", s.model),
                       ("THREADS", 1), ("CONTEXT_LENGTH", 512), ("INGEST_ROOTS", json.dumps([str(tmp_path / "docs")]))):
        monkeypatch.setenv(f"EDGE_AGENT_{key}", str(value))

    def run(*argv: str) -> int:
        args = build_parser().parse_args(["jobs", *argv])
        try:
            return int(args.func(args) or 0)
        except SystemExit as e:
            return int(e.code or 0)

    return run


@pytest.fixture
def old_html_reader(monkeypatch):
    """Reads HTML as the loader did before it dropped page chrome; the returned function puts the current one back."""
    from edge_agent.rag import loaders_html

    current = loaders_html._drop_page_chrome
    monkeypatch.setattr(loaders_html, "_drop_page_chrome", lambda body: None)
    return lambda: monkeypatch.setattr(loaders_html, "_drop_page_chrome", current)
