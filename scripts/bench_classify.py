"""Classification accuracy and speed of the classify kind's two methods on real labelled text.

Data: paragraphs of CPython's Library Reference labelled by their chapter (scripts/pydoc_labels.py,
from the python3.11-doc Debian package), 8 labels given by name only, then with k examples per label.
Model: the configured bundle (default: models/default) and the packaged all-MiniLM-L6-v2 embedder.

    .venv/bin/python scripts/bench_classify.py --per-class 25 --shots 1,2,4,8,16,32 [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import pydoc_labels  # noqa: E402


def accuracy(pred: list[str], gold: list[str]) -> float:
    return sum(p == g for p, g in zip(pred, gold)) / len(gold)


def run_likelihood(clf, texts: list[str], inflight: int = 6) -> tuple[list[str], float]:
    t0 = time.perf_counter()
    clf.calibration()
    preds: list[str | None] = [None] * len(texts)
    pending: dict[int, object] = {}
    nxt = 0
    while nxt < len(texts) or pending:
        while nxt < len(texts) and len(pending) < inflight:
            pending[nxt] = clf.start(texts[nxt])
            nxt += 1
        done = [i for i, p in pending.items() if p.done()]
        if not done:
            time.sleep(0.005)
        for i in done:
            preds[i] = pending.pop(i).result()[0]
    return preds, time.perf_counter() - t0  # type: ignore[return-value]


def run_embedding(clf, texts: list[str], batch: int = 16) -> tuple[list[str], float]:
    t0 = time.perf_counter()
    preds = []
    for i in range(0, len(texts), batch):
        preds += [r[0] for r in clf.classify_many(texts[i: i + batch])]
    return preds, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-class", type=int, default=25)
    ap.add_argument("--shots", default="1,2,4,8,16,32", help="examples per label to try (comma-separated)")
    ap.add_argument("--likelihood-shots", default="", help="examples per label for the likelihood method's prompt (e.g. 1)")
    ap.add_argument("--models-dir", default=str(REPO / "models"))
    ap.add_argument("--model", default="default")
    ap.add_argument("--no-likelihood", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from edge_agent.config import Settings
    from edge_agent.jobs.classify import EmbeddingClassifier, Label, LikelihoodClassifier
    from edge_agent.rag.embedder import OnnxEmbedder
    from edge_agent.runtime import build_runtime

    shots = [int(s) for s in args.shots.split(",") if s]
    evals, pool = pydoc_labels.split(args.per_class, max(shots + [0]))
    texts, gold = [t for t, _ in evals], [g for _, g in evals]
    names = list(pydoc_labels.CHAPTERS.values())
    settings = Settings(models_dir=Path(args.models_dir), model=args.model, serve_documents=False)
    embedder = OnnxEmbedder(cache_dir=REPO / ".cache" / "test-embedding-cache")
    rt = build_runtime(settings, documents=embedder, load_documents=False)
    rows = []
    try:
        labels = [Label(n) for n in names]
        preds, secs = run_embedding(EmbeddingClassifier(rt.embeddings, labels), texts)
        rows.append({"method": "embedding", "examples_per_label": 0, "accuracy": round(accuracy(preds, gold), 4),
                     "items_per_s": round(len(texts) / secs, 1)})
        for k in shots:
            lk = [Label(n, examples=pool[n][:k]) for n in names]
            preds, secs = run_embedding(EmbeddingClassifier(rt.embeddings, lk), texts)
            rows.append({"method": "embedding", "examples_per_label": k, "accuracy": round(accuracy(preds, gold), 4),
                         "items_per_s": round(len(texts) / secs, 1)})
        if not args.no_likelihood:
            preds, secs = run_likelihood(LikelihoodClassifier(rt.chat, labels), texts)
            rows.append({"method": "likelihood", "examples_per_label": 0, "accuracy": round(accuracy(preds, gold), 4),
                         "items_per_s": round(len(texts) / secs, 2)})
            for k in [int(s) for s in args.likelihood_shots.split(",") if s]:
                shots_in = [(pool[n][j], n) for j in range(k) for n in names]
                preds, secs = run_likelihood(LikelihoodClassifier(rt.chat, labels, shots=shots_in), texts)
                rows.append({"method": "likelihood", "examples_per_label": k, "accuracy": round(accuracy(preds, gold), 4),
                             "items_per_s": round(len(texts) / secs, 2)})
    finally:
        rt.close()
    out = {"items": len(texts), "labels": len(names), "load": open("/proc/loadavg").read().split()[:3], "results": rows}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{len(texts)} items, {len(names)} labels, load {' '.join(out['load'])}")
        for r in rows:
            print(f"  {r['method']:10s} examples/label {r['examples_per_label']}: accuracy {r['accuracy']:.3f}, {r['items_per_s']} items/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
