"""Classification accuracy and speed of the classify kind's two methods on real labelled text.

Data: paragraphs of CPython's Library Reference labelled by their chapter (scripts/pydoc_labels.py,
from the python3.11-doc Debian package), 8 labels given by name only, then with k examples per label;
--set b: 8 other chapters, a second set to check that a gain is not tuned to the first; c: 8 more, never tuned
on; nlfaq: the Debian FAQ in Dutch by chapter (scripts/nlfaq_labels.py, debian-faq-nl).
Model: the configured bundle (default: models/default) and the packaged all-MiniLM-L6-v2 embedder, or the
sentence-transformers folder given by --embedding-model (e.g. an imported multilingual-e5-small); --prompt names
which of that model's named prompts goes before the label texts and the items (passage, as the daemon's embedding
service does, or query; without that prompt in the model, none).
The likelihood row is also calibrated by the run itself (each label's mean score over the run's items taken away,
instead of its score after a content-free text; the same pass, no labels used).
Each embedding row is measured twice: the labels' own prototypes, and self-trained on the evaluated
items (as a classify run does by default: self_train); items/s counts embedding the items and, for
self-training, adapting the prototypes.

    .venv/bin/python scripts/bench_classify.py --per-class 25 --shots 1,2,4,8,16,32 [--set b] [--json]
        [--embedding-model models/embeddings/e5 --prompt query]
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


def run_likelihood(clf, texts: list[str], inflight: int = 6, raw: list | None = None) -> tuple[list[str], float]:
    """The likelihood method's labels for texts and the seconds taken; raw: a list that gets each text's label
    scores before calibration (sum of log-probs per label), for other calibrations of the same pass."""
    t0 = time.perf_counter()
    clf.calibration()
    preds: list[str | None] = [None] * len(texts)
    scores: list = [None] * len(texts)
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
            p = pending.pop(i)
            preds[i] = p.result()[0]
            scores[i] = [s for s, _ in p.pending.result()]
    if raw is not None:
        raw.extend(scores)
    return preds, time.perf_counter() - t0  # type: ignore[return-value]


def run_calibrated(raw: list, names: list[str], sample: int = 0) -> list[str]:
    """Labels from raw likelihood scores calibrated by the run itself: each label's score minus its mean over the
    run's texts (over up to `sample` evenly spaced texts when given, as the classify kind takes them), instead of its
    score after a content-free text."""
    import numpy as np

    scores = np.asarray(raw, np.float64)
    pool = scores[:: -(-len(scores) // sample)] if sample else scores
    return [names[int(j)] for j in (scores - pool.mean(axis=0)).argmax(axis=1)]


def run_embedding(clf, texts: list[str], batch: int = 16, self_train: bool = False,
                  first_weight: float | None = None) -> tuple[list[str], float]:
    t0 = time.perf_counter()
    import numpy as np

    vecs = np.concatenate([clf.embed(texts[i: i + batch]) for i in range(0, len(texts), batch)])
    if self_train:
        clf = clf.adapted(vecs) if first_weight is None else clf.adapted(vecs, first_weight)
    preds = [r[0] for r in clf.classify_vectors(vecs)]
    return preds, time.perf_counter() - t0


class PromptedEmbedder:
    """The embedder with the given named prompt (passage, query) before every text, for the embedding service."""

    def __init__(self, inner, prompt: str):
        self.inner, self.prompt = inner, prompt

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def embed(self, texts):
        return self.inner._encode(texts, (self.prompt,))


def bench_embedder(model: str, prompt: str, quantize: str = "auto"):
    """The OnnxEmbedder of a model (the packaged name or a folder), with `prompt` before its texts when it has one;
    quantize off: the fp32 export, in a cache folder of its own (a folder keeps one decision)."""
    from edge_agent.rag.embedder import OnnxEmbedder

    cache = REPO / ".cache" / ("test-embedding-cache" if quantize == "auto" else f"embedding-cache-{quantize}")
    emb = OnnxEmbedder(model, cache_dir=cache, quantize=quantize)
    return emb if prompt == "passage" else PromptedEmbedder(emb, prompt)


class _MemoEmbeddings:
    """An embedding service that embeds each distinct text once (accuracy rows over many seeds)."""

    def __init__(self, svc):
        self.svc = svc
        self.memo: dict[str, object] = {}

    def embed(self, texts: list[str]):
        import numpy as np

        todo = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if todo:
            vecs, _ = self.svc.embed(todo)
            self.memo.update(zip(todo, np.asarray(vecs, np.float32)))
        return np.stack([self.memo[t] for t in texts]), 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-class", type=int, default=25)
    ap.add_argument("--set", choices=pydoc_labels.ALL_SETS, default="a", help="a: the 8 chapters; b: 8 other chapters; "
                    "c: 8 more, the held-out check; nlfaq: the Debian FAQ in Dutch, 8 chapters")
    ap.add_argument("--seeds", default="0", help="splits to average the embedding rows over (comma-separated); "
                    "the likelihood rows use the first")
    ap.add_argument("--shots", default="1,2,4,8,16,32", help="examples per label to try (comma-separated)")
    ap.add_argument("--likelihood-shots", default="", help="examples per label for the likelihood method's prompt (e.g. 1)")
    ap.add_argument("--models-dir", default=str(REPO / "models"))
    ap.add_argument("--model", default="default")
    ap.add_argument("--no-likelihood", action="store_true")
    ap.add_argument("--job-rounds", type=int, default=0,
                    help="also run the first split as classify jobs (names only, self_train false / auto) through the "
                         "jobs service, this many paired rounds: items/s of a whole run")
    ap.add_argument("--uncentred", action="store_true", help="also self-train without the centred first assignment "
                    "(first_weight 0, the method before it), a row beside the default")
    ap.add_argument("--embedding-model", default="all-MiniLM-L6-v2",
                    help="the packaged all-MiniLM-L6-v2 or a sentence-transformers folder (exported once into .cache)")
    ap.add_argument("--prompt", choices=("passage", "query"), default="passage",
                    help="the model's named prompt before label texts and items (passage: as the embedding service)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from edge_agent.config import Settings
    from edge_agent.jobs.classify import RUN_CALIBRATION_SAMPLE, EmbeddingClassifier, Label, LikelihoodClassifier
    from edge_agent.runtime import build_runtime

    load_before = open("/proc/loadavg").read().split()[:3]
    shots = [int(s) for s in args.shots.split(",") if s]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    paras = pydoc_labels.load(args.set)
    names = list(paras)
    import tempfile

    tmp = tempfile.TemporaryDirectory(prefix="bench-classify-")
    settings = Settings(models_dir=Path(args.models_dir), model=args.model, serve_documents=False,
                        data_dir=Path(tmp.name) / "var", index_dir=Path(tmp.name) / "index")
    embedder = bench_embedder(args.embedding_model, args.prompt)
    rt = build_runtime(settings, documents=embedder, load_documents=False, start_jobs=False)
    rows = []
    try:
        labels = [Label(n) for n in names]
        memo = _MemoEmbeddings(rt.embeddings)  # each text is embedded once across seeds and rows
        accs: dict[tuple[str, int], list[float]] = {}
        for seed in seeds:
            evals, pool = pydoc_labels.split(args.per_class, max(shots + [0]), seed=seed, paras=paras)
            texts, gold = [t for t, _ in evals], [g for _, g in evals]
            for k in [0] + shots:
                clf = EmbeddingClassifier(memo, [Label(n, examples=pool[n][:k]) for n in names])
                for st in (False, True):
                    preds, _ = run_embedding(clf, texts, self_train=st)
                    accs.setdefault(("embedding+self_train" if st else "embedding", k), []).append(round(accuracy(preds, gold), 4))
                if args.uncentred:  # self-training as before the centred first assignment (first_weight 0), side by side
                    preds, _ = run_embedding(clf, texts, self_train=True, first_weight=0.0)
                    accs.setdefault(("self_train,uncentred", k), []).append(round(accuracy(preds, gold), 4))
        evals, pool = pydoc_labels.split(args.per_class, max(shots + [0]), seed=seeds[0], paras=paras)
        texts, gold = [t for t, _ in evals], [g for _, g in evals]
        speed: dict[str, list[float]] = {}
        clf = EmbeddingClassifier(rt.embeddings, labels)
        for _ in range(3):  # paired rounds, names only, each embedding its items afresh: the median items/s
            for st in (False, True):
                _, secs = run_embedding(clf, texts, self_train=st)
                speed.setdefault("embedding+self_train" if st else "embedding", []).append(len(texts) / secs)
        for (method, k), got in accs.items():
            rows.append({"method": method, "examples_per_label": k, "accuracy": round(sum(got) / len(got), 4), "per_seed": got,
                         **({"items_per_s": round(sorted(speed[method])[1], 1)} if k == 0 and method in speed else {})})
        for rnd in range(args.job_rounds):
            items = [{"id": str(i), "text": t} for i, t in enumerate(texts)]
            for st in (False, "auto"):
                name = f"bench-{rnd}-{str(st).lower()}"
                rt.jobs.create_job(name, "classify", {"labels": names, "method": "embedding", "source": "texts",
                                                      "texts": items, "self_train": st})
                t0 = time.perf_counter()
                run = rt.jobs.run_foreground(name)
                secs = time.perf_counter() - t0
                got, _ = rt.jobs.results(run.id, 0, len(items))
                preds = {int(r.result["id"]): r.result["label"] for r in got if r.result}
                speed.setdefault(f"job self_train={str(st).lower()}", []).append(len(items) / secs)
                acc = accuracy([preds.get(i, "") for i in range(len(texts))], gold)
                accs.setdefault((f"job self_train={str(st).lower()}", 0), []).append(round(acc, 4))
        for method in [m for m in speed if m.startswith("job")]:
            got = accs[(method, 0)]
            rows.append({"method": method, "examples_per_label": 0, "accuracy": got[0], "per_seed": got[:1],
                         "items_per_s": round(sorted(speed[method])[len(speed[method]) // 2], 1)})
        if not args.no_likelihood:
            raw: list = []
            preds, secs = run_likelihood(LikelihoodClassifier(rt.chat, labels), texts, raw=raw)
            rows.append({"method": "likelihood", "examples_per_label": 0, "accuracy": round(accuracy(preds, gold), 4),
                         "items_per_s": round(len(texts) / secs, 2)})
            # the same pass calibrated by the run: each label's mean score over all its items, and over the kind's sample
            for sample in (0, RUN_CALIBRATION_SAMPLE):
                rows.append({"method": f"likelihood, run-calibrated{f' (sample {sample})' if sample else ''}",
                             "examples_per_label": 0, "accuracy": round(accuracy(run_calibrated(raw, names, sample), gold), 4)})
            for k in [int(s) for s in args.likelihood_shots.split(",") if s]:
                shots_in = [(pool[n][j], n) for j in range(k) for n in names]
                preds, secs = run_likelihood(LikelihoodClassifier(rt.chat, labels, shots=shots_in), texts)
                rows.append({"method": "likelihood", "examples_per_label": k, "accuracy": round(accuracy(preds, gold), 4),
                             "items_per_s": round(len(texts) / secs, 2)})
    finally:
        rt.close()
        tmp.cleanup()
    out = {"set": args.set, "items": len(texts), "labels": len(names), "seeds": seeds,
           "embedding_model": embedder.model_id, "prompt": args.prompt,
           "load_before": load_before, "load": open("/proc/loadavg").read().split()[:3], "results": rows}
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"set {args.set}: {len(texts)} items, {len(names)} labels, seeds {args.seeds}, {out['embedding_model']} "
              f"prompt {args.prompt}, load {' '.join(load_before)} before, {' '.join(out['load'])} after")
        for r in rows:
            speed_s = f", {r['items_per_s']} items/s" if "items_per_s" in r else ""
            seeds_s = f" (seeds: {' '.join(f'{a:.3f}' for a in r['per_seed'])})" if len(r.get("per_seed", [])) > 1 else ""
            print(f"  {r['method']:20s} examples/label {r['examples_per_label']:2d}: accuracy {r['accuracy']:.3f}{seeds_s}{speed_s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
