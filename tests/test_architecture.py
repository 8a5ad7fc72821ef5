"""The direction of imports in ../shared/ARCHITECTURE.md, held by parsing every module (relative imports too)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "edge_agent"

# Modules every layer may use: settings, the hardware decision, durable file writes and pid locks.
BASE = {"config", "hardware", "fsutil"}
# layer -> the edge_agent layers it may import (besides itself), as ARCHITECTURE.md draws them
ALLOWED = {
    "__main__": {"cli"},
    "cli": {"runtime", "server", "api", "jobs", "services", "bench"} | BASE,
    "server": {"api", "runtime", "sdnotify"} | BASE,
    "runtime": {"engine", "models", "rag", "store", "services", "jobs"} | BASE,  # the one place that builds parts
    "api": {"services", "jobs"} | BASE,
    "jobs": {"services", "store"} | BASE,
    "services": {"engine", "rag", "store"} | BASE,
    "bench": {"engine", "models"} | BASE,
    "engine": BASE,
    "models": BASE,
    "rag": BASE,
    "store": BASE,
    "hardware": {"config"},
    "config": set(),
    "fsutil": set(),
    "sdnotify": set(),
    "__init__": set(),
}
# Where the code does not follow the picture yet: file -> the extra layers it imports. Shrink this, never grow it
# without a reason here and a note in ARCHITECTURE.md.
KNOWN = {
    "models/importer.py": {"engine"},  # writes the bundle format engine/bundle.py reads, and smoke-tests the result with the engine
    "models/kv_check.py": {"engine"},  # the import's check of a quantized cache runs the built graph in the engine's runner
    "models/gguf_tokenizer.py": {"engine"},  # llama.cpp's parse_special=False mode is the engine's plain encoding (engine/tokens.py)
    # cli: error and parameter types (BundleError, SamplingParams, BATCH_PRIORITY) and bundle listing come from engine;
    # model/embedding import and setup call the importers (models, rag) directly: there is no service for them yet;
    # doctor and jobs read the SQLite store directly.
    "cli/batch.py": {"engine", "rag"},
    "cli/doctor.py": {"engine", "store"},
    "cli/generate.py": {"engine"},
    "cli/jobs.py": {"engine", "store"},
    "cli/model.py": {"engine", "models", "rag"},
    "cli/serve.py": {"engine"},
    "cli/setup.py": {"engine", "models", "rag"},
}
# third-party modules a layer must not import
FORBIDDEN_THIRD_PARTY = {
    "api": {"onnxruntime", "faiss", "sqlite3"},
    "cli": {"onnxruntime", "faiss", "sqlite3", "flask"},
    "services": {"flask"},
    "engine": {"flask"},
    "models": {"flask"},
    "rag": {"flask"},
    "store": {"flask"},
    "jobs": {"flask", "onnxruntime", "faiss"},
}


def layer_of(path: Path) -> str:
    return path.relative_to(PKG).parts[0].removesuffix(".py")


def imported(path: Path) -> set[str]:
    """edge_agent layers (resolved, relative imports included) and top-level third-party modules that path imports."""
    return imported_from(path.read_text(encoding="utf-8"), path.relative_to(PKG))


def imported_from(source: str, rel: Path) -> set[str]:
    """imported() of source as if it were edge_agent/<rel>."""
    package = ["edge_agent", *rel.parts[:-1]]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = package[: len(package) - node.level + 1]
            mods = [".".join([*base, node.module])] if node.module else [".".join([*base, a.name]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods = [node.module]
        else:
            continue
        for m in mods:
            parts = m.split(".")
            if parts[0] == "edge_agent":
                if len(parts) > 1:
                    names.add(parts[1])
            else:
                names.add(parts[0])
    return names


def ours() -> set[str]:
    return {p.name.removesuffix(".py") for p in PKG.iterdir()
            if (p.suffix == ".py" or p.is_dir()) and not p.name.startswith((".", "__pycache__"))}


def test_every_layer_is_in_the_picture():
    assert ours() <= set(ALLOWED), f"new top-level modules without a place in ALLOWED: {sorted(ours() - set(ALLOWED))}"


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_follow_the_architecture(path):
    layer, rel = layer_of(path), str(path.relative_to(PKG))
    names = imported(path)
    internal = (names & ours()) - {layer}
    bad = internal - ALLOWED.get(layer, set()) - KNOWN.get(rel, set())
    assert not bad, f"{rel} ({layer}) imports {sorted(bad)}; ARCHITECTURE.md allows {layer} -> {sorted(ALLOWED.get(layer, set()))}"
    third = names & FORBIDDEN_THIRD_PARTY.get(layer, set())
    assert not third, f"{rel} imports {sorted(third)}"


def test_known_exceptions_are_still_needed():
    """An exception the code no longer needs is removed from KNOWN, so the picture only gets truer."""
    for rel, extra in KNOWN.items():
        path = PKG / rel
        assert path.is_file(), f"KNOWN lists {rel}, which is gone"
        used = imported(path) & extra
        assert used == extra, f"{rel} no longer imports {sorted(extra - used)}: drop it from KNOWN"


def test_relative_imports_are_resolved():
    """The parser sees `from ..engine import x` as an import of engine (so relative imports cannot dodge the test)."""
    source = "from ...engine import types\nfrom ... import rag\nfrom ..chat import ChatService\n"
    assert imported_from(source, Path("services/sub/probe.py")) == {"engine", "rag", "services"}


def test_nothing_is_loaded_at_import_time():
    """Importing the app factory must not load a model, open a database or start a thread."""
    import subprocess
    import sys

    code = "import threading, edge_agent.api.app, edge_agent.cli; assert threading.active_count() == 1; import sys; assert 'onnxruntime' not in sys.modules, 'onnxruntime imported'"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
