"""Names-only classification: the classify kind's self-training against other ways to use the label names alone.

Research bench (no job service): each method gets the 8 label names and a run's item embeddings
(all-MiniLM-L6-v2 as the embedding method, or --embedding-model with --prompt), and labels every item; accuracy is the mean over
random splits of scripts/pydoc_labels.py (CPython's Library Reference, by chapter), on balanced
runs (--per-class items per label) and on imbalanced ones (60,45,30,20,15,12,10,8 items, the
sizes shuffled over the labels per split: a real day's mail is not balanced).

Methods (weakly-supervised text classification levers, see the issue-10 report):
  plain         cosine to each name's embedding (the embedding method without self-training)
  self_train    soft k-means seeded by the names, the kind's self-training before the centred first assignment
  keyword       items whose words contain exactly one label's name stems (PyStemmer; stems shared by
                two names and generic words dropped) seed that label, as examples; then self_train
  cluster_match k-means (k = labels, best of 10 starts), clusters named by a Hungarian matching of
                centroids to name embeddings (scipy.optimize.linear_sum_assignment)
  expand        each name plus the mean embedding of the 20 words of the run (document frequency >= 2)
                nearest to it and to no other name (class vocabulary); then self_train
  centered      first assignment by similarity minus each name's mean similarity over the run
                (a name near everything no longer wins everything), kept as an anchor of weight 8; then
                self_train: the kind's default (jobs.classify.centred_anchors)
  balanced      self_train whose E-step is balanced by Sinkhorn (equal label sizes assumed)
  prior         self_train with learned label proportions (EM mixture weights)
  cross         two embedders: the kind's default (centered) with all-MiniLM-L6-v2, whose names align best with
                the items, then its soft clusters carried into the --embedding-model's space (e.g. e5, whose items
                separate the chapters better: truemean) as anchors of weight 8 beside that model's names; then
                self_train there
  concat        two embedders at once: each item and name as [a * MiniLM vector, b * --embedding-model vector] (a^2 + b^2
                = 1, a = --concat-weight), so a cosine is the weighted sum of the two models' cosines; the kind's
                default (centered) self-training in that joint space (an ensemble of the two embedders)
  ctrspace      the kind's default in the run's mean-centred space: items minus their mean, names minus theirs,
                both renormalised (removes the direction every text shares; e5's cosines crowd near 0.8)
  truemean      not a method but the ceiling of the embedding space: each item against its label's true mean
                over the run (the gold labels' centroids); --methods truemean only when asked

    .venv/bin/python scripts/bench_classify_names.py --sets a,b --per-class 25 --seeds 0,1,2,3,4,5 [--methods ...]
"""
from __future__ import annotations

import argparse
import os
import random
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

import pydoc_labels  # noqa: E402

T = 0.05  # the kind's EMBED_TEMPERATURE
IMBALANCED = [60, 45, 30, 20, 15, 12, 10, 8]
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]+")
STOP = set("""a an and or the of for with to in on by as at from is are be its it this that these those was were will can
may not no if then than so such which what when where who how all any each other into also has have had do does been more
most some only one two use used using see e g i services service modules module support tools""".split())


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def soft(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


class Embed:
    """Unit embeddings of texts, each distinct text embedded once."""

    def __init__(self, model: str = "all-MiniLM-L6-v2", prompt: str = "passage", quantize: str = "auto"):
        from bench_classify import bench_embedder

        self.model = bench_embedder(model, prompt, quantize)
        self.memo: dict[str, np.ndarray] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self.memo))
        for i in range(0, len(todo), 128):
            self.memo.update(zip(todo[i: i + 128], unit(np.asarray(self.model.embed(todo[i: i + 128]), np.float32))))
        return np.stack([self.memo[t] for t in texts])


def vocab(texts: list[str], min_df: int) -> list[str]:
    df = Counter(w for t in texts for w in {x.lower() for x in WORD.findall(t)})
    return sorted(w for w, n in df.items() if n >= min_df and w not in STOP)


def self_train(X, anchors, prior=False, balanced=False, rounds=20):
    P, pi = unit(anchors), np.full(len(anchors), 1 / len(anchors))
    for _ in range(rounds):
        logits = X @ P.T / T + (np.log(pi) if prior else 0)
        R = soft(logits)
        if balanced:
            for _ in range(30):
                R *= (len(X) / len(P)) / np.maximum(R.sum(0), 1e-12)
                R /= R.sum(1, keepdims=True)
        pi = R.mean(0)
        P = unit(R.T @ X + anchors)
    return (X @ P.T / T + (np.log(pi) if prior else 0)).argmax(1)


def m_plain(names, texts, X, emb):
    return (X @ emb(names).T).argmax(1)


def m_self_train(names, texts, X, emb):
    return self_train(X, emb(names))


def m_prior(names, texts, X, emb):
    return self_train(X, emb(names), prior=True)


def m_balanced(names, texts, X, emb):
    return self_train(X, emb(names), balanced=True)


def keyword_seeds(names, texts) -> np.ndarray:
    """Per item: the one label whose name stems it contains, or -1 (none or several)."""
    import Stemmer

    st = Stemmer.Stemmer("english")
    per = [{st.stemWord(w.lower()) for w in WORD.findall(n) if w.lower() not in STOP} for n in names]
    shared = Counter(s for p in per for s in p)
    per = [{s for s in p if shared[s] == 1} for p in per]
    out = []
    for t in texts:
        words = {st.stemWord(w.lower()) for w in WORD.findall(t)}
        hits = [j for j, p in enumerate(per) if p & words]
        out.append(hits[0] if len(hits) == 1 else -1)
    return np.array(out)


def m_keyword(names, texts, X, emb):
    seeds = keyword_seeds(names, texts)
    anchors = emb(names) + np.stack([X[seeds == j].sum(0) for j in range(len(names))])
    return self_train(X, anchors)


def kmeans(X, k, seed, iters=50):
    rng = np.random.default_rng(seed)
    C = [X[rng.integers(len(X))]]
    for _ in range(k - 1):  # k-means++ on cosine distance
        d = np.maximum(1 - np.max(X @ np.array(C).T, 1), 0)
        C.append(X[rng.choice(len(X), p=d / d.sum())])
    C = np.array(C)
    for _ in range(iters):
        a = (X @ C.T).argmax(1)
        new = np.array([unit(X[a == j].sum(0)) if (a == j).any() else C[j] for j in range(k)])
        if np.allclose(new, C):
            break
        C = new
    a = (X @ C.T).argmax(1)
    return C, a, float((X * C[a]).sum())


def m_cluster_match(names, texts, X, emb):
    from scipy.optimize import linear_sum_assignment

    C, a, _ = max((kmeans(X, len(names), s) for s in range(10)), key=lambda r: r[2])
    rows, cols = linear_sum_assignment(-(C @ emb(names).T))
    return np.array([dict(zip(rows, cols))[j] for j in a])


def m_expand(names, texts, X, emb, m=20):
    A = emb(names)
    words = vocab(texts, 2)
    W = emb(words)
    S = W @ A.T
    owner = S.argmax(1)
    add = []
    for j in range(len(names)):
        idx = np.where(owner == j)[0]
        idx = idx[np.argsort(-S[idx, j])][:m]
        add.append(W[idx].mean(0) if len(idx) else np.zeros(A.shape[1], np.float32))
    return self_train(X, A + np.stack(add))


def m_centered(names, texts, X, emb, weight=8.0):
    A = emb(names)
    S = X @ A.T
    R = soft((S - S.mean(0)) / T)
    return self_train(X, A + weight * unit(R.T @ X))


_MINILM: list = []


def _default(X, A, weight=8.0):
    """The kind's default: centred first cluster as an anchor of weight 8, then self_train."""
    S = X @ A.T
    return self_train(X, A + weight * unit(soft((S - S.mean(0)) / T).T @ X))


def m_ctrspace(names, texts, X, emb):
    A = emb(names)
    return _default(unit(X - X.mean(0)), unit(A - A.mean(0)))


CONCAT_WEIGHT = 0.5


def m_concat(names, texts, X, emb):
    if not _MINILM:
        _MINILM.append(Embed())
    a = CONCAT_WEIGHT
    b = float(np.sqrt(1 - a * a))
    small = _MINILM[0]
    return _default(np.hstack([a * small(texts), b * X]), np.hstack([a * small(names), b * emb(names)]))


def m_cross(names, texts, X, emb, weight=8.0):
    if not _MINILM:
        _MINILM.append(Embed())
    small = _MINILM[0]
    X1, A1 = small(texts), small(names)
    S = X1 @ A1.T
    anchors1 = A1 + weight * unit(soft((S - S.mean(0)) / T).T @ X1)
    P = unit(anchors1)
    for _ in range(20):  # the kind's self-training in MiniLM's space, then its final soft clusters
        P = unit(soft(X1 @ P.T / T).T @ X1 + anchors1)
    R = soft(X1 @ P.T / T)
    return self_train(X, emb(names) + weight * unit(R.T @ X))


METHODS = {"plain": m_plain, "self_train": m_self_train, "keyword": m_keyword, "cluster_match": m_cluster_match,
           "expand": m_expand, "centered": m_centered, "balanced": m_balanced, "prior": m_prior,
           "cross": m_cross, "concat": m_concat, "ctrspace": m_ctrspace}


def runs(paras, seeds, per_class, imbalanced, scale=1):
    names = list(paras)
    for seed in seeds:
        rng = random.Random(seed)
        sizes = [n * scale for n in IMBALANCED] if imbalanced else [per_class] * len(names)
        if imbalanced:
            rng.shuffle(sizes)
        items = []
        for n, size in zip(names, sizes):
            ps = list(paras[n])
            rng.shuffle(ps)
            items += [(t, n) for t in ps[:size]]
        rng.shuffle(items)
        yield names, [t for t, _ in items], np.array([names.index(g) for _, g in items])


def main() -> int:
    global T, CONCAT_WEIGHT
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="a,b", help=f"of {','.join(pydoc_labels.ALL_SETS)}")
    ap.add_argument("--per-class", type=int, default=25)
    ap.add_argument("--seeds", default="0,1,2,3,4,5")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--imbalanced", action="store_true", help=f"items per label {IMBALANCED} instead of --per-class")
    ap.add_argument("--scale", type=int, default=1, help="--imbalanced sizes times this (a chapter with fewer "
                    "paragraphs gives all it has)")
    ap.add_argument("--embedding-model", default="all-MiniLM-L6-v2",
                    help="the packaged all-MiniLM-L6-v2 or a sentence-transformers folder (exported once into .cache)")
    ap.add_argument("--prompt", choices=("passage", "query"), default="passage",
                    help="the model's named prompt before names, words and items")
    ap.add_argument("--temperature", type=float, default=T, help="softmax temperature over cosines in self-training "
                    f"(the kind's EMBED_TEMPERATURE: {T})")
    ap.add_argument("--quantize", choices=("auto", "off"), default="auto",
                    help="off: the fp32 ONNX export (is int8 what costs accuracy?)")
    ap.add_argument("--label-template", default="{}", help='each label name put in this text before it is embedded, '
                    'e.g. "Topic: {}" or "This text is about {}." (names-only prompt templates)')
    ap.add_argument("--concat-weight", type=float, default=CONCAT_WEIGHT,
                    help="concat: MiniLM's share a of the joint vector (the other model's is sqrt(1 - a^2))")
    args = ap.parse_args()
    T, CONCAT_WEIGHT = args.temperature, args.concat_weight
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    emb = Embed(args.embedding_model, args.prompt, args.quantize)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    sizes = [n * args.scale for n in IMBALANCED]
    print(f"names only; {'imbalanced ' + str(sizes) if args.imbalanced else f'{args.per_class} per label'}; "
          f"seeds {args.seeds}; {emb.model.model_id} ({emb.model.variant}) prompt {args.prompt}; temperature {T}; "
          f"label template {args.label_template!r}; load {load}")
    for s in args.sets.split(","):
        for name in args.methods.split(","):
            accs = []
            for names, texts, gold in runs(pydoc_labels.load(s), seeds, args.per_class, args.imbalanced, args.scale):
                X = emb(texts)
                if name == "truemean":
                    pred = (X @ unit(np.stack([X[gold == j].mean(0) for j in range(len(names))])).T).argmax(1)
                else:
                    pred = METHODS[name]([args.label_template.format(n) for n in names], texts, X, emb)
                accs.append(float(np.mean(pred == gold)))
            print(f"  set {s} {name:14s} accuracy {np.mean(accs):.3f} (seeds: {' '.join(f'{a:.3f}' for a in accs)})", flush=True)
        if "keyword" in args.methods:
            prec = []
            for names, texts, gold in runs(pydoc_labels.load(s), seeds, args.per_class, args.imbalanced, args.scale):
                seeds_ = keyword_seeds(names, texts)
                prec.append((float(np.mean(seeds_[seeds_ >= 0] == gold[seeds_ >= 0])), float(np.mean(seeds_ >= 0))))
            print(f"  set {s} keyword seeds: precision {np.mean([p for p, _ in prec]):.3f}, "
                  f"{np.mean([c for _, c in prec]):.2f} of the items seeded")
    print(f"load after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
