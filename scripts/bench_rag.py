"""RAG benchmark: embedding throughput (ONNX vs torch), ingestion, hybrid search latency at 100k chunks,
and Recall@5 (dense, BM25, hybrid) on questions over the Python language reference shipped with
CPython (`pydoc_data.topics`). Prints one JSON line, with the load average before and after
(a busy machine slows the two embedders unevenly: compare runs with load < 1.5).

    .venv/bin/python scripts/bench_rag.py [--chunks 100000] [--queries 300] [--only embedding]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# (question, a passage of the answer, whitespace-normalised, that must be in a retrieved chunk)
QUESTIONS = [
    ("What happens to assert statements when Python optimizes the code?", "when optimization is requested at compile time"),
    ("What does the pass statement do?", "null operation"),
    ("What does deleting a name do?", "Deletion of a name removes the binding of that name"),
    ("Where is the break statement allowed?", 'may only occur syntactically nested in a "for" or "while" loop'),
    ("When does the else clause of a loop run?", "clause, if present, is executed and the loop terminates"),
    ("What happens when a generator function returns?", 'will cause "StopIteration" to be raised'),
    ("Which variables can a nonlocal statement refer to?", "previously bound variables in the nearest enclosing scope"),
    ("Can a lambda contain statements or type annotations?", "cannot contain statements or annotations"),
    ("Where must an except clause without an expression be placed?", 'expression-less "except" clause, if present, must be last'),
    ("Which values count as false in a boolean test?", 'False", "None", numeric zero of all types'),
    ("Which operator is used for matrix multiplication?", 'The "@" (at) operator'),
    ("What is the result of raising an integer to a negative power?", "all arguments are converted to float and a float result is delivered"),
    ("What is a left shift by n bits equivalent to?", 'multiplication with "pow(2,n)"'),
    ("How is casefold different from lower?", "Casefolding is similar to lowercasing but more aggressive"),
    ("What does partition return when the separator is missing?", "return a 3-tuple containing the string itself, followed by two empty strings"),
    ("How do I pad a numeric string with zeros on the left?", "left filled with ASCII \"'0'\" digits"),
    ("Do dictionaries keep the order in which keys were inserted?", "Dictionaries preserve insertion order"),
    ("Is list sorting stable?", "guaranteed to be stable"),
    ("Which special method implements len()?", 'Called to implement the built-in function "len()"'),
    ("How must __hash__ relate to equality?", "Objects that are equal should either have the same hash value"),
    ("What is raise ... from used for?", 'The "from" clause is used for exception chaining'),
    ("Is __exit__ always called by a with statement?", '"__exit__()" will always be called'),
    ("What does continue do inside a loop?", "skips the rest of the suite and goes back"),
    ("What does a function return when it has no return statement?", "returned by functions that don’t explicitly return a value"),
    ("Can a name be used before its global declaration in the same block?", "textually preceding"),
    ("Do underscores change the value of a numeric literal?", "Underscores are ignored for determining the numeric value"),
    ("Can comparison operators be chained like a < b < c?", "Comparisons can be chained arbitrarily"),
    ("When is x is y true?", "are the same object"),
    ("What does the import statement do first?", "find a module, loading and initializing it if necessary"),
    ("What is a raw string literal?", "raw strings"),
]


def _norm(s: str) -> str:
    return " ".join(s.split())


def bench_embedding(onnx, torch_emb, texts: list[str], batch: int, rounds: int = 3) -> dict:
    """Texts/s of both embedders on the same texts and batch size: interleaved rounds, best of each."""
    import torch

    onnx.embed(texts[:batch])
    torch_emb.embed(texts[:batch])
    rates = {"onnx": 0.0, "torch": 0.0}
    for _ in range(rounds):
        for name, emb in (("onnx", onnx), ("torch", torch_emb)):
            t = time.perf_counter()
            emb.embed(texts)
            rates[name] = max(rates[name], len(texts) / (time.perf_counter() - t))
    a, b = onnx.embed(texts[:64]), torch_emb.embed(texts[:64])
    tokens = [len(e.ids) for e in onnx.tokenizer.encode_batch(texts)]
    return {
        "texts": len(texts), "mean_tokens": round(float(np.mean(tokens)), 1), "batch": batch,
        "onnx_per_s": round(rates["onnx"], 1), "torch_per_s": round(rates["torch"], 1),
        "ratio": round(rates["onnx"] / rates["torch"], 2), "onnx_variant": onnx.variant,
        "onnx_threads": onnx.threads or "default", "onnx_spin": onnx.spin, "torch_threads": torch.get_num_threads(),
        "cosine_min_vs_torch": round(float((a * b).sum(1).min()), 5),
    }


def bench_quality(svc) -> dict:
    out = {}
    for mode in ("dense", "bm25", "hybrid"):
        found = 0
        for q, answer in QUESTIONS:
            hits = svc.retrieve(q, k=5, mode=mode)
            if any(_norm(answer) in _norm(h.text) for h in hits):
                found += 1
        out[mode] = round(found / len(QUESTIONS), 3)
    return out


def synthetic_corpus(real: np.ndarray, words: list[str], n: int, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """n chunks shaped like real ones: each vector mixes two real chunk embeddings plus a little noise
    (so neighbourhoods have the structure of real text, unlike uniform random vectors, on which no
    approximate index does well), each text is 120 consecutive words of real prose (Zipf-like term
    frequencies, so BM25 meets long posting lists for common words)."""
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, len(real), n), rng.integers(0, len(real), n)
    mix = rng.uniform(0.0, 0.5, (n, 1)).astype(np.float32)
    vecs = (1 - mix) * real[i] + mix * real[j] + 0.03 * rng.standard_normal((n, real.shape[1])).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    starts = rng.integers(0, max(1, len(words) - 120), n)
    return vecs.astype(np.float32), [" ".join(words[s : s + 120]) for s in starts]


def bench_latency(real: np.ndarray, n: int, queries: int, embedder, words: list[str], ann_threshold: int, tmp: Path) -> dict:
    """Hybrid search (k=5) over n synthetic chunks built from real ones: p50/p95 with the exact index and
    with HNSW, and how many of the exact index's top 5 HNSW finds, for real questions and passages."""
    from edge_agent.rag.retrieval import HybridIndex, IndexUpdate

    vecs, texts = synthetic_corpus(real, words, n)
    idx = HybridIndex(tmp / "lat", real.shape[1], ann_threshold=n)  # exact first; HNSW (the configured threshold) below
    t = time.perf_counter()
    idx.apply(IndexUpdate(np.arange(1, n + 1), vecs, texts), save=False)
    idx.bm25.wait_merged()
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    idx.save()
    save_s = time.perf_counter() - t
    rng = np.random.default_rng(1)
    qtexts = [q for q, _ in QUESTIONS]
    while len(qtexts) < queries:  # and phrases from the text, as people paste them
        s0 = int(rng.integers(0, len(words) - 12))
        qtexts.append(" ".join(words[s0 : s0 + int(rng.integers(3, 12))]))
    qvecs = embedder.embed(qtexts)

    def measure(with_embedding: bool) -> dict:
        lat = []
        for qt, qv in zip(qtexts, qvecs):
            t0 = time.perf_counter()
            if with_embedding:
                qv = embedder.embed_query(qt)
            idx.search(qv, qt, k=5)
            lat.append((time.perf_counter() - t0) * 1000)
        lat.sort()
        return {"p50_ms": round(lat[len(lat) // 2], 2), "p95_ms": round(lat[int(len(lat) * 0.95) - 1], 2)}

    out = {"chunks": n, "queries": len(qtexts), "vectors": "mixtures of real chunk embeddings", "build_s": round(build_s, 1),
           "save_s": round(save_s, 2), "ann_threshold": ann_threshold}
    exact_top = [idx.dense.exact.search(qv.reshape(1, -1), 5)[1][0] for qv in qvecs]
    exact_hybrid = [[h.chunk_id for h in idx.search(qv, qt, k=5)] for qt, qv in zip(qtexts, qvecs)] if idx.dense.ann is None else None
    if idx.dense.ann is None:
        out["exact"] = measure(False)
    if ann_threshold < n:
        idx.dense.ann_threshold = ann_threshold
        t = time.perf_counter()
        idx.dense.maybe_build_ann(idx.lock, wait=True)
        out["hnsw_build_s"] = round(time.perf_counter() - t, 1)
        out["hnsw"] = measure(False)
        out["hnsw_with_query_embedding"] = measure(True)
        agree = sum(len(set(idx.dense.search(qv, 5)[1].tolist()) & set(e.tolist())) for qv, e in zip(qvecs, exact_top))
        out["hnsw_dense_recall_at_5_vs_exact"] = round(agree / (5 * len(qvecs)), 3)
        if exact_hybrid is not None:
            same = sum(len(set(h.chunk_id for h in idx.search(qv, qt, k=5)) & set(e)) for qt, qv, e in zip(qtexts, qvecs, exact_hybrid))
            out["hnsw_hybrid_top5_same_as_exact"] = round(same / (5 * len(qvecs)), 3)
    return out


def main() -> int:
    from edge_agent.config import Settings

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--batch", type=int, default=Settings().embedding_batch, help="texts per batch, both embedders (default: the config's)")
    ap.add_argument("--cache", default=str(REPO / ".cache" / "test-embedding-cache"), help="embedding export cache")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved embedding rounds (best of each)")
    ap.add_argument("--spin", action="store_true", help="onnxruntime threads busy-wait (as torch's OpenMP threads do)")
    ap.add_argument("--only", choices=["embedding"], help="run only the embedding comparison (about a minute)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from pydoc_data.topics import topics

    from edge_agent.rag.embedder import OnnxEmbedder, TorchEmbedder
    from edge_agent.services.documents import DocumentService

    onnx = OnnxEmbedder(cache_dir=Path(args.cache), batch_size=args.batch, spin=args.spin)
    torch_emb = TorchEmbedder(batch_size=args.batch)
    result: dict = {"bench": "rag", "cpus": os.cpu_count(), "load_avg_1m_start": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        settings = Settings(data_dir=tmp / "var", index_dir=tmp / "index", ingest_roots=[tmp])
        svc = DocumentService.from_settings(settings, embedder=onnx)
        if args.only == "embedding":
            for name, text in sorted(topics.items())[:120]:
                svc.add_text(f"Python reference: {name}", text)
            passages = [c for c in (svc.store.chunks_of(i) for i in range(1, 80)) for c in c][:512]
            result["embedding"] = bench_embedding(onnx, torch_emb, [c.text for c in passages], args.batch, args.rounds)
            result["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
            svc.close()
            print(json.dumps(result))
            return 0
        t = time.perf_counter()
        chunks = 0
        for name, text in sorted(topics.items()):
            chunks += svc.add_text(f"Python reference: {name}", text).chunks
        secs = time.perf_counter() - t
        result["ingest"] = {"documents": len(topics), "chunks": chunks, "seconds": round(secs, 1),
                            "chunks_per_s": round(chunks / secs, 1)}
        passages = [c for c in (svc.store.chunks_of(i) for i in range(1, 80)) for c in c][:512]
        result["embedding"] = bench_embedding(onnx, torch_emb, [c.text for c in passages], args.batch, args.rounds)
        result["recall_at_5"] = bench_quality(svc)
        result["questions"] = len(QUESTIONS)
        words = [w for _, t in sorted(topics.items()) for w in t.split()]
        real = svc.index.dense.exact.index.reconstruct_n(0, svc.index.dense.ntotal)
        result["search"] = bench_latency(real, args.chunks, args.queries, onnx, words, settings.ann_threshold, tmp)
        svc.close()
    result["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
