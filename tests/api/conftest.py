"""Fixtures for API tests: the real waitress server on a free loopback port over tiny real models."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # api_helpers

from api_helpers import REPO, api_settings, start_server  # noqa: E402


@pytest.fixture(scope="session")
def api_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("api")


@pytest.fixture(scope="session")
def live(tiny_bundles, api_tmp):
    """The main server: tiny Llama, 16 slots, API key KEY, CORS for ORIGIN. Its data dir is its own: the servers and
    runtimes that tests start and stop on api_tmp would otherwise share its jobs database while it runs."""
    server = start_server(api_settings(tiny_bundles["llama"], api_tmp / "live"))
    yield server
    server.close()


@pytest.fixture(scope="session")
def long_bundle(tmp_path_factory) -> Path:
    """A tiny Llama with a 4096-token context, for generations that last seconds."""
    import importlib.util

    from edge_agent.models.importer import import_model

    spec = importlib.util.spec_from_file_location("edge_agent_tests_root_conftest", REPO / "tests" / "conftest.py")
    root_conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root_conftest)
    make_checkpoint = root_conftest.make_checkpoint

    root = tmp_path_factory.mktemp("long")
    ck = make_checkpoint(root / "ck", "llama", max_position_embeddings=4096)
    return import_model(ck, "long", root / "models", context_length=4096, echo=lambda s: None)


@pytest.fixture(scope="session")
def small_live(long_bundle, api_tmp):
    """One batch slot and a queue of one, over the long-context model: easy to fill."""
    server = start_server(api_settings(long_bundle, api_tmp / "small", max_batch=1, max_queue=1, context_length=4096,
                                       max_tokens_limit=4096))
    yield server
    server.close()


@pytest.fixture(scope="session")
def tools_live(long_bundle, tmp_path_factory):
    """The tiny Llama with a 2048-token context: its tokenizer spends ~550 tokens on a tools description
    (chat's and the Responses API's function-tool tests share it)."""
    server = start_server(api_settings(long_bundle, tmp_path_factory.mktemp("tools"), context_length=2048, max_batch=4))
    yield server
    server.close()
