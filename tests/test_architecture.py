"""The direction of imports in ../shared/ARCHITECTURE.md, held by parsing every module."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "edge_agent"

# layer -> the edge_agent layers (and third-party modules) it must not import
FORBIDDEN = {
    "api": {"engine", "models", "rag", "store", "runtime", "onnxruntime", "faiss", "sqlite3"},  # api -> services, jobs
    "services": {"api", "cli", "runtime", "jobs"},
    "engine": {"api", "services", "rag", "store", "jobs", "models", "runtime", "flask"},
    "models": {"api", "services", "rag", "store", "jobs", "runtime", "flask"},
    "rag": {"api", "services", "engine", "models", "jobs", "runtime", "flask"},
    "store": {"api", "services", "engine", "models", "rag", "jobs", "runtime", "flask"},
    "jobs": {"api", "engine", "models", "rag", "runtime", "flask"},
    "config": {"api", "services", "engine", "models", "rag", "store", "jobs", "runtime", "hardware"},
}


def layer_of(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py")


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            mods = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            mods = [node.module]
        else:
            continue
        for m in mods:
            parts = m.split(".")
            names.add(parts[1] if parts[0] == "edge_agent" and len(parts) > 1 else parts[0])
    return names


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_imports_follow_the_architecture(path):
    bad = imported(path) & FORBIDDEN.get(layer_of(path), set())
    assert not bad, f"{path.relative_to(PKG)} imports {sorted(bad)}"


def test_nothing_is_loaded_at_import_time():
    """Importing the app factory must not load a model, open a database or start a thread."""
    import subprocess
    import sys

    code = "import threading, edge_agent.api.app, edge_agent.cli; assert threading.active_count() == 1; import sys; assert 'onnxruntime' not in sys.modules, 'onnxruntime imported'"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
