"""Subprocess for the kill -9 tests: ingests (or saves) in a loop, printing ACK lines after each commit."""
from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    mode, data_dir, index_dir, cache_dir, start = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
    from edge_agent.config import Settings
    from edge_agent.rag.embedder import OnnxEmbedder
    from edge_agent.services.documents import DocumentService

    settings = Settings(data_dir=Path(data_dir), index_dir=Path(index_dir))
    svc = DocumentService.from_settings(settings, embedder=OnnxEmbedder(cache_dir=Path(cache_dir)))
    # first runs (onnxruntime's, the language detector's: seconds on a loaded machine) are not what the kill should hit
    svc.add_text("warm-up", "A first document loads what the first ingestion needs.")
    print("READY", flush=True)
    i = start
    while True:
        if mode == "save":  # mostly saves, so the kill lands inside one
            for _ in range(20):
                svc.index.save()
        text = f"Record {i} carries the marker zq{i}x. " + "Filler sentence about nothing in particular. " * (i % 7 + 1)
        res = svc.add_text(f"doc-{i}", text)
        print(f"ACK {i} {res.document_id}", flush=True)
        i += 1


if __name__ == "__main__":
    main()
