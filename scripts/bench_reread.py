#!/usr/bin/env python3
"""What reading a document again costs when an older reader read it (a reindex after a loader fix): the basis of
the reindex job's default reread_limit (jobs/reindex.py REREAD_LIMIT).

The files are added to a fresh index in a temp folder with the configured embedder (`embedding_model`, "auto":
multilingual-e5-small when installed), their reader versions then forgotten (NULL, as migration 9 leaves
documents read before it), and each file is added again: the path a reindex item takes (load, chunk, embed,
commit; the old chunks serve until then). Prints per-document seconds (median, p90), chunks per second and the
load average before and after; the first reading is not counted (it warms the embedder).

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_reread.py --models-dir ../main/models FILE_OR_FOLDER...
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--models-dir", type=Path, default=Path("models"))
    ap.add_argument("--embedding-model", default="auto")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from edge_agent.config import Settings
    from edge_agent.services.documents import DocumentService
    from edge_agent.services.paths import walk_files

    files = [f for p in args.paths for f in walk_files(p.resolve())]
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "var", index_dir=Path(tmp) / "index", models_dir=args.models_dir,
                            embedding_model=args.embedding_model, index_save_interval_s=0)
        svc = DocumentService.from_settings(settings)
        try:
            first = [svc.add_file(f, confined=False) for f in files]
            ready = [f for f, r in zip(files, first) if r.status == "added"]
            with svc.store.db.write() as conn:
                conn.execute("UPDATE documents SET reader_version = NULL")
            times, chunks = [], 0
            for f in ready:
                t = time.perf_counter()
                res = svc.add_file(f, confined=False)
                times.append(time.perf_counter() - t)
                assert res.status == "updated", res
                chunks += res.chunks
            model = svc.embedder.model_id
        finally:
            svc.close()
    times.sort()
    out = {"embedder": model, "documents": len(times), "chunks": chunks, "chunks_per_document": round(chunks / len(times), 1),
           "seconds_total": round(sum(times), 2), "median_s": round(statistics.median(times), 3),
           "p90_s": round(times[int(0.9 * (len(times) - 1))], 3), "chunks_per_s": round(chunks / sum(times), 1),
           "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
