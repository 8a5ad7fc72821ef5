"""Fixtures for RAG tests: the real embedding model (built once per session) and services in tmp_path."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # rag_docs helpers
from rag_docs import EMBED_CACHE  # noqa: E402


@pytest.fixture(scope="session")
def embedder():
    from edge_agent.rag.embedder import OnnxEmbedder

    return OnnxEmbedder(cache_dir=EMBED_CACHE)


@pytest.fixture
def docs_root(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    return root


@pytest.fixture
def make_settings(tmp_path: Path, docs_root: Path):
    from edge_agent.config import Settings

    def make(**overrides):
        values = dict(data_dir=tmp_path / "var", index_dir=tmp_path / "index", ingest_roots=[docs_root])
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
def make_service(make_settings, embedder):
    from edge_agent.services.documents import DocumentService

    opened = []

    def make(**overrides):
        """A service as a restarted process opens it: the ones opened before are closed first
        (one process owns an index folder at a time)."""
        while opened:
            opened.pop().close()
        svc = DocumentService.from_settings(make_settings(**overrides), embedder=embedder)
        opened.append(svc)
        return svc

    yield make
    for svc in opened:
        try:
            svc.close()
        except Exception:
            pass


@pytest.fixture
def service(make_service):
    return make_service()


@pytest.fixture
def index_cli(monkeypatch, tmp_path, embedder):
    """Runs `edge-agent index ...` handlers in-process on tmp_path/var and tmp_path/index (the
    folders make_settings uses); returns the exit status, also of a SystemExit."""
    import argparse

    from edge_agent.cli.index import register

    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("EDGE_AGENT_DATA_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("EDGE_AGENT_INDEX_DIR", str(tmp_path / "index"))
    monkeypatch.setattr("edge_agent.rag.embedder.build_embedder", lambda settings, **_: embedder)
    parser = argparse.ArgumentParser(prog="edge-agent")
    register(parser.add_subparsers(dest="cmd", required=True))

    def call(*argv: str) -> int:
        args = parser.parse_args(["index", *argv])
        try:
            return args.func(args)
        except SystemExit as e:
            return int(e.code)

    return call


@pytest.fixture
def model_cli(monkeypatch, tmp_path):
    """`edge-agent model ...` in this process, with a fresh models folder and data folder under tmp_path."""
    import argparse

    from edge_agent.cli.model import register

    monkeypatch.setenv("EDGE_AGENT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("EDGE_AGENT_DATA_DIR", str(tmp_path / "var"))
    monkeypatch.setenv("EDGE_AGENT_MODELS_DIR", str(tmp_path / "models"))
    parser = argparse.ArgumentParser(prog="edge-agent")
    register(parser.add_subparsers(dest="cmd", required=True))

    def call(*argv: str) -> int:
        args = parser.parse_args(["model", *argv])
        return args.func(args)

    return call
