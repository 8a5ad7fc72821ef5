"""The tests' shared, already exported embedding model, and data folders that link to it (no export per test)."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EMBED_CACHE = Path(os.environ.get("EDGE_AGENT_TEST_EMBED_CACHE", REPO / ".cache" / "test-embedding-cache"))


def link_embedding_cache(data_dir: Path) -> Path:
    """Make data_dir/embedding-cache hold links to the shared export (exported first if missing); its onnx/ folder has
    links of its own, so a test may replace the model file without touching the share. Returns data_dir."""
    from edge_agent.rag.embedder import OnnxEmbedder

    shared = OnnxEmbedder(cache_dir=EMBED_CACHE).folder
    mine = data_dir / "embedding-cache" / shared.name
    (mine / "onnx").mkdir(parents=True)
    for p in shared.iterdir():
        if p.name != "onnx":
            (mine / p.name).symlink_to(p)
    for p in (shared / "onnx").iterdir():
        (mine / "onnx" / p.name).symlink_to(p)
    return data_dir
