"""RAG benchmark: embedding throughput (ONNX vs torch), ingestion, hybrid search latency at 100k chunks,
retrieval quality on English and Dutch question sets, and grounded answers of the default model.
Prints one JSON line, with the load average before and after (a busy machine slows the two embedders
unevenly: compare runs with load < 1.5).

Quality (--only quality): CPython's `pydoc_data.topics` (79 English topics) and the three Dutch articles
of ../shared/corpus-nl in one index; English: document Recall@5 (top-5 chunks, and top-5 documents with
group="document") and passage Recall@5 on 60 questions written from the topics' text, and document
Recall@5 on 24 held-out ones and on 28 blind ones (EN_FUSION_BLIND, written before the document-level
fusion and measured once before and once after it); Dutch: passage Recall@3 on corpus-nl/questions-dev.jsonl, on 24
paraphrased questions of our own and on 34 held-out ones (scripts/rag_eval_sets.py), for dense, BM25
and hybrid; `hybrid_below_a_single_ranker` lists the rows where the hybrid is below dense or BM25 alone.
Held-out sets were written after the ranking work began and chose no setting. With --sets blind6 (blind7, blind8, nl8) also
on the 22 (18, 19, 46) Dutch questions of scripts/rag_eval_blind6.py (blind7.py, blind8.py, nl8.py) (fresh blind rows: measure them, do not tune on them).
With --sets blind9: the 48 Dutch and 10 English questions of scripts/rag_eval_blind9.py over a corpus of its own, 17 Dutch
documents Debian ships (debian-faq-nl, debian-edu-doc-nl: installed, not downloaded), read through the project's loaders
into a second index: passage Recall@3 per language for dense, BM25 and hybrid (and, with --only answers, its facts and
declines); --sets blind9 alone measures only it. --sets blind10 likewise: scripts/rag_eval_blind10.py's 23 Dutch and 20 English
questions (8 across languages) over four Dutch Debian FAQ chapters and three English Python HOWTOs, in an index of its own;
--sets blind11: scripts/rag_eval_blind11.py's 23 Dutch and 20 English questions (8 across languages) over aptitude's Dutch
manual and three other English Python HOWTOs, in an index of its own; --sets blind12: scripts/rag_eval_blind12.py's 23 Dutch
and 20 English questions (8 across languages) over GOsa's Dutch help, two Dutch manual pages and three English Debian texts
(Social Contract, Constitution, bug reporting), in an index of its own; --sets blind13: scripts/rag_eval_blind13.py's 26 Dutch
and 20 English questions (8 across languages) over ten manual pages, seven Dutch (manpages-nl's ping, timeout, shred, split;
start-stop-daemon, sources.list, deluser.conf) and three English (faillock.conf, logind.conf, journald.conf), likewise;
--sets blind14: scripts/rag_eval_blind14.py's 28 Dutch and 21 English questions (9 across languages) over contract and
licence text, Debian Edu's Dutch ITIL manual (with its sample service contract), the GPL v2 in Dutch and six English
licences from /usr/share/common-licenses, likewise.
With --sets xl1 (xl2): scripts/rag_eval_xl.py's cross-language questions (English about the Dutch documents, Dutch about the
English topics) over one mixed index of the pydoc topics, corpus-nl and blind9's Debian documents: passage Recall@3 per
question language (and, with --only answers, facts and declines); xl2 is the held-out one.
Answers (--only answers): the default model with rag k=4 on factual questions (Dutch and English,
short-span facts) and questions the documents do not answer: the share stating the fact, the share
declining, per set (--sets dev,heldout: the dev set the answer side was tuned on, 24 Dutch + 20 English
+ 8 absent, and a held-out set written before that tuning, 16 + 12 + 8).

    .venv/bin/python scripts/bench_rag.py [--chunks 100000] [--queries 300] [--only embedding|quality|answers|latency] [--sets dev,heldout]
        [--embedding-model FOLDER]
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
sys.path.insert(0, str(REPO / "scripts"))

from rag_eval_blind6 import NL_RETRIEVAL_BLIND6  # noqa: E402
from rag_eval_blind7 import NL_RETRIEVAL_BLIND7  # noqa: E402
from rag_eval_blind8 import NL_RETRIEVAL_BLIND8  # noqa: E402
from rag_eval_blind9 import EN_RETRIEVAL_BLIND9, NL_RETRIEVAL_BLIND9, corpus_files, missing_corpus  # noqa: E402
import rag_eval_blind10  # noqa: E402
import rag_eval_blind11  # noqa: E402
import rag_eval_blind12  # noqa: E402
import rag_eval_blind13  # noqa: E402
import rag_eval_blind14  # noqa: E402
from rag_eval_nl8 import NL_RETRIEVAL_NL8  # noqa: E402
from rag_eval_xl import SETS as XL_SETS, retrieval as xl_retrieval  # noqa: E402
from rag_eval_sets import EN_FUSION_BLIND, EN_HELDOUT, EN_QUESTIONS, NL_HELDOUT, NL_QUESTIONS  # noqa: E402

QUESTIONS = EN_QUESTIONS
CORPUS_NL = REPO.parent / "shared" / "corpus-nl"


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


def ingest_eval_corpus(svc) -> dict:
    """The 79 pydoc topics and the Dutch articles (titled by their first line) in one index."""
    from pydoc_data.topics import topics

    chunks = 0
    for name, text in sorted(topics.items()):
        chunks += svc.add_text(f"Python reference: {name}", text).chunks
    nl = 0
    if not any(CORPUS_NL.glob("0*.txt")):  # a copy of the checkout elsewhere (/tmp) would measure without them, silently
        raise SystemExit(f"{CORPUS_NL}: the Dutch articles (0*.txt) are missing; run from a checkout beside ../shared")
    for f in sorted(CORPUS_NL.glob("0*.txt")):
        text = f.read_text(encoding="utf-8")
        nl += svc.add_text(text.strip().split("\n", 1)[0][:120], text).chunks
    return {"documents": len(topics) + len(list(CORPUS_NL.glob("0*.txt"))), "chunks": chunks + nl, "dutch_chunks": nl}


def dutch_dev_questions() -> list[tuple[str, str]]:
    path = CORPUS_NL / "questions-dev.jsonl"
    return [(d["q"], d["phrase"]) for d in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if d]


def ingest_blind9_corpus(svc, files=None, name: str = "blind9") -> dict:
    """blind9's Debian documents (rag_eval_blind9.corpus_files; or files, for the set name), each read from disk by the
    service's own loaders."""
    files = corpus_files() if files is None else files
    results = [svc.add_file(p, confined=False) for p in files]
    failed = [f"{r.source}: {r.error}" for r in results if r.status == "failed"]
    if failed:
        raise SystemExit(f"{name}: documents failed to load: " + "; ".join(failed))
    return {"documents": len(results), "bytes": sum(p.stat().st_size for p in files),
            "chunks": sum(r.chunks for r in results), "document_ids": [r.document_id for r in results]}


def bench_quality_blind9(svc, document_ids: list[int], modes=("dense", "bm25", "hybrid")) -> dict:
    """blind9: passage Recall@3 (a top-3 chunk holds the answer phrase) per language over blind9's own index; and how many
    phrases lie inside one chunk at all (one that does not cannot be found by any mode)."""
    chunks = [_norm(c.text) for d in document_ids for c in svc.store.chunks_of(d)]
    sets = {"nl": NL_RETRIEVAL_BLIND9, "en": EN_RETRIEVAL_BLIND9}
    inside = sum(any(_norm(p) in c for c in chunks) for qs in sets.values() for _, p in qs)
    return {"phrases_inside_one_chunk": inside, **bench_quality_sets(svc, sets, modes)}


def bench_quality_sets(svc, sets: dict[str, list[tuple[str, str]]], modes=("dense", "bm25", "hybrid")) -> dict:
    """Passage Recall@3 (a top-3 chunk holds the answer phrase) per language of {lang: [(question, phrase)]} over svc."""
    out: dict = {f"{lang}_questions": len(qs) for lang, qs in sets.items()}
    for mode in modes:
        found = {lang: sum(any(_norm(p) in _norm(h.text) for h in svc.retrieve(q, k=3, mode=mode)) for q, p in qs)
                 for lang, qs in sets.items()}
        out[mode] = {**{f"{lang}_passage_recall_at_3": round(n / len(sets[lang]), 3) for lang, n in found.items()},
                     "all_passage_recall_at_3": round(sum(found.values()) / sum(len(qs) for qs in sets.values()), 3)}
    return out


def bench_quality(svc, modes=("dense", "bm25", "hybrid"), blind: tuple[str, ...] = ()) -> dict:
    """English: document Recall@5 (a top-5 chunk from a topic holding the answer phrase) and passage Recall@5;
    Dutch: passage Recall@3 (a top-3 chunk holds the phrase) on questions-dev.jsonl and on our own sets (blind6, blind7 too if asked)."""
    from pydoc_data.topics import topics

    titles = {f"Python reference: {k}": _norm(v) for k, v in topics.items()}
    out: dict = {"en_questions": len(EN_QUESTIONS), "en_heldout_questions": len(EN_HELDOUT), "en_fusion_blind_questions": len(EN_FUSION_BLIND), "nl_dev_questions": len(dutch_dev_questions()),
                 "nl_own_questions": len(NL_QUESTIONS), "nl_heldout_questions": len(NL_HELDOUT)}
    blind_rows = (("blind6", NL_RETRIEVAL_BLIND6), ("blind7", NL_RETRIEVAL_BLIND7), ("blind8", NL_RETRIEVAL_BLIND8), ("nl8", NL_RETRIEVAL_NL8))
    extra = [(name, qs) for name, qs in blind_rows if name in blind]
    for name, qs in extra:
        out[f"nl_{name}_questions"] = len(qs)

    def doc_recall(qs, mode, group="chunk") -> float:
        return sum(any(_norm(a) in titles.get(h.title, "") for h in svc.retrieve(q, k=5, mode=mode, group=group)) for q, a in qs) / len(qs)

    for mode in modes:
        psg5 = sum(any(_norm(a) in _norm(h.text) for h in svc.retrieve(q, k=5, mode=mode)) for q, a in EN_QUESTIONS)
        nl = {}
        nl_sets = [("dev", dutch_dev_questions()), ("own", [(q, p) for q, p, _ in NL_QUESTIONS]), ("heldout", NL_HELDOUT)]
        for name, qs in nl_sets + extra:
            nl[name] = sum(any(_norm(p) in _norm(h.text) for h in svc.retrieve(q, k=3, mode=mode)) for q, p in qs) / len(qs)
        out[mode] = {"en_doc_recall_at_5": round(doc_recall(EN_QUESTIONS, mode), 3),
                     "en_doc_recall_at_5_as_documents": round(doc_recall(EN_QUESTIONS, mode, "document"), 3),
                     "en_heldout_doc_recall_at_5": round(doc_recall(EN_HELDOUT, mode), 3),
                     "en_fusion_blind_doc_recall_at_5": round(doc_recall(EN_FUSION_BLIND, mode), 3),
                     "en_passage_recall_at_5": round(psg5 / len(EN_QUESTIONS), 3),
                     **{f"nl_{k}_passage_recall_at_3": round(v, 3) for k, v in nl.items()}}
    if all(m in out for m in ("dense", "bm25", "hybrid")):  # issue 13's bar: the hybrid never below either ranker alone
        out["hybrid_below_a_single_ranker"] = {k: {"hybrid": v, "dense": out["dense"][k], "bm25": out["bm25"][k]}
                                               for k, v in out["hybrid"].items() if v < max(out["dense"][k], out["bm25"][k])}
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


def synthetic_store(path: Path, n: int, per_document: int = 20):
    """A real SQLite document store whose n chunks (ids 1..n) lie in documents of per_document chunks each:
    the chunk -> document map hybrid search asks for (rows only; no vectors)."""
    from edge_agent.store.db import SqliteDatabase
    from edge_agent.store.documents import DocumentStore

    db = SqliteDatabase(path)
    now = time.time()
    with db.write() as conn:
        conn.executemany("INSERT INTO documents(id, source_key, title, kind, content_hash, size, status, chunk_count, created_at,"
                         " updated_at) VALUES (?, ?, ?, 'txt', '', 0, 'ready', ?, ?, ?)",
                         [(d, f"text:{d}", f"doc {d}", per_document, now, now) for d in range(1, n // per_document + 2)])
        conn.executemany("INSERT INTO chunks(id, document_id, ordinal, text, char_start, char_end, token_count) VALUES (?, ?, ?, '', 0, 0, 0)",
                         [(i, (i - 1) // per_document + 1, (i - 1) % per_document) for i in range(1, n + 1)])
    return db, DocumentStore(db)


def bench_latency(real: np.ndarray, n: int, queries: int, embedder, words: list[str], ann_threshold: int, tmp: Path) -> dict:
    """Hybrid search (k=5) over n synthetic chunks built from real ones: p50/p95 with the exact index and
    with HNSW, and how many of the exact index's top 5 HNSW finds, for real questions and passages.
    Then, on the last index, side by side (alternating rounds, medians): plain chunk-level fusion and with the
    document agreement the service uses (the chunk -> document map read from a real SQLite store)."""
    from edge_agent.rag.retrieval import HybridIndex, IndexUpdate

    vecs, texts = synthetic_corpus(real, words, n)
    # a fifth of the texts Dutch prose, so BM25's n-gram field and Dutch queries (score fusion) are timed too
    nl_words = [w for f in sorted(CORPUS_NL.glob("0*.txt")) for w in f.read_text(encoding="utf-8").split()]
    rng_nl = np.random.default_rng(2)
    for i in rng_nl.choice(n, n // 5, replace=False).tolist():
        s0 = int(rng_nl.integers(0, max(1, len(nl_words) - 120)))
        texts[i] = " ".join(nl_words[s0 : s0 + 120])
    idx = HybridIndex(tmp / "lat", real.shape[1], ann_threshold=n, dense_languages=getattr(embedder, "languages", None))  # exact first; HNSW (the configured threshold) below
    t = time.perf_counter()
    idx.apply(IndexUpdate(np.arange(1, n + 1), vecs, texts), save=False)
    idx.bm25.wait_merged()
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    idx.save()
    save_s = time.perf_counter() - t
    rng = np.random.default_rng(1)
    qtexts = [q for q, _ in QUESTIONS] + [q for q, _, _ in NL_QUESTIONS]
    while len(qtexts) < queries:  # and phrases from the text, as people paste them
        s0 = int(rng.integers(0, len(words) - 12))
        qtexts.append(" ".join(words[s0 : s0 + int(rng.integers(3, 12))]))
    qvecs = embedder.embed(qtexts)

    def measure(with_embedding: bool, doc_of=None) -> dict:
        lat = []
        for qt, qv in zip(qtexts, qvecs):
            t0 = time.perf_counter()
            if with_embedding:
                qv = embedder.embed_query(qt)
            idx.search(qv, qt, k=5, doc_of=doc_of)
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
    out["paired_index"] = "hnsw" if idx.dense.ann is not None else "exact"
    db, store = synthetic_store(tmp / "lat.sqlite", n)
    runs: dict[str, list[dict]] = {"chunk_fusion": [], "document_agreement": []}
    for r in range(5):  # alternating paired rounds, the order flipped each round
        for name in (("chunk_fusion", "document_agreement") if r % 2 == 0 else ("document_agreement", "chunk_fusion")):
            runs[name].append(measure(False, store.document_ids_of if name == "document_agreement" else None))
    out["paired"] = {name: {m: round(float(np.median([x[m] for x in v])), 2) for m in ("p50_ms", "p95_ms")} for name, v in runs.items()}
    out["paired"]["p95_ratio"] = round(out["paired"]["document_agreement"]["p95_ms"] / out["paired"]["chunk_fusion"]["p95_ms"], 3)
    db.close()
    return out


def main() -> int:
    from edge_agent.config import Settings

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--batch", type=int, default=Settings().embedding_batch, help="texts per batch, both embedders (default: the config's)")
    ap.add_argument("--cache", default=str(REPO / ".cache" / "test-embedding-cache"), help="embedding export cache")
    ap.add_argument("--embedding-model", help="a sentence-transformers folder to embed with instead of the packaged model "
                                              "(e.g. models/embeddings/multilingual-e5-small from `edge-agent model install-embedding`)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved embedding rounds (best of each)")
    ap.add_argument("--spin", action="store_true", help="onnxruntime threads busy-wait (as torch's OpenMP threads do)")
    ap.add_argument("--only", choices=["embedding", "quality", "answers", "latency"],
                    help="embedding: the embedding comparison (about a minute); quality: retrieval recall on the English and "
                         "Dutch sets; answers: grounded answers of --model on the fact and absent sets; latency: search at --chunks")
    ap.add_argument("--chunk-tokens", type=int, default=Settings().chunk_tokens)
    ap.add_argument("--chunk-overlap", type=int, default=Settings().chunk_overlap)
    ap.add_argument("--model", default=str(REPO / "models" / "default"), help="model bundle for --only answers")
    ap.add_argument("--sets", default="dev,heldout", help="question sets for --only answers, comma-separated: dev, heldout, blind, blind2 .. blind14 "
                         "(with --only quality, blind6 .. blind8 and nl8 add their Dutch retrieval rows; blind9 measures its "
                         "own corpus, the Dutch Debian documentation, in an index of its own); xl1, xl2: cross-language "
                         "questions over a mixed index of all three corpora")
    ap.add_argument("--answer-tokens", type=int, default=48, help="--only answers: max_tokens of each answer (0: none sent, "
                    "the server's default, as a client that sends no max_tokens gets)")
    ap.add_argument("--memo", help="--only answers: a JSON file that remembers the model's answers and likelihoods by prompt "
                                   "(greedy: the same prompt gives the same answer), so a rerun after a change to the checks runs "
                                   "the model only on prompts it has not seen; one file per bundle")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from pydoc_data.topics import topics

    from edge_agent.rag.embedder import OnnxEmbedder, TorchEmbedder
    from edge_agent.services.documents import DocumentService

    onnx = OnnxEmbedder(*([Path(args.embedding_model)] if args.embedding_model else []), cache_dir=Path(args.cache), batch_size=args.batch,
                        spin=args.spin)
    torch_emb = TorchEmbedder(batch_size=args.batch) if args.only in (None, "embedding") else None
    result: dict = {"bench": "rag", "cpus": os.cpu_count(), "load_avg_1m_start": round(os.getloadavg()[0], 2),
                    "embedding_model": onnx.model_id, "embedding_languages": onnx.languages or "any"}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        settings = Settings(data_dir=tmp / "var", index_dir=tmp / "index", ingest_roots=[tmp], chunk_tokens=args.chunk_tokens,
                            chunk_overlap=args.chunk_overlap)
        svc = DocumentService.from_settings(settings, embedder=onnx)

        def search_latency() -> dict:
            """Search over args.chunks chunks built from the ingested corpus's real vectors and words."""
            words = [w for _, t in sorted(topics.items()) for w in t.split()]
            real = svc.index.dense.exact.index.reconstruct_n(0, svc.index.dense.ntotal)
            return bench_latency(real, args.chunks, args.queries, onnx, words, settings.ann_threshold, tmp)

        if args.only in ("quality", "answers"):
            sets = tuple(args.sets.split(","))
            services = {}
            result["chunking"] = {"chunk_tokens": args.chunk_tokens, "overlap": args.chunk_overlap}
            xl = tuple(s for s in sets if s in XL_SETS)
            own_sets = {"blind10": rag_eval_blind10, "blind11": rag_eval_blind11, "blind12": rag_eval_blind12, "blind13": rag_eval_blind13,
                        "blind14": rag_eval_blind14}
            for own, module in own_sets.items():
                why = module.missing_corpus() if own in sets else None
                if why:
                    svc.close()
                    print(why, file=sys.stderr)
                    return 2
            if "blind9" in sets or xl:
                why = missing_corpus()
                if why:
                    svc.close()
                    print(why, file=sys.stderr)
                    return 2

            def own_index(name: str) -> DocumentService:
                return DocumentService.from_settings(
                    settings.model_copy(update={"data_dir": tmp / f"var_{name}", "index_dir": tmp / f"index_{name}"}), embedder=onnx)

            if "blind9" in sets:  # its own corpus, in an index of its own
                svc9 = own_index("blind9")
                t = time.perf_counter()
                result["ingest_blind9"] = ingest_blind9_corpus(svc9)
                result["ingest_blind9"]["seconds"] = round(time.perf_counter() - t, 1)
                services["blind9"] = svc9
            for own, module in own_sets.items():  # each its own corpus (Debian FAQ, aptitude, GOsa ... and HOWTOs), in an index of its own
                if own in sets:
                    services[own] = own_index(own)
                    t = time.perf_counter()
                    result[f"ingest_{own}"] = ingest_blind9_corpus(services[own], module.corpus_files(), own)
                    result[f"ingest_{own}"]["seconds"] = round(time.perf_counter() - t, 1)
            if xl:  # the pydoc topics, corpus-nl and blind9's Debian documents in one mixed index of its own
                svc_xl = own_index("xl")
                t = time.perf_counter()
                result["ingest_xl"] = ingest_eval_corpus(svc_xl)
                result["ingest_xl"]["debian_chunks"] = ingest_blind9_corpus(svc_xl)["chunks"]
                result["ingest_xl"]["seconds"] = round(time.perf_counter() - t, 1)
                services.update(dict.fromkeys(xl, svc_xl))
            others = tuple(s for s in sets if s != "blind9" and s not in own_sets and s not in XL_SETS)
            if others or args.only == "quality" and not services:
                t = time.perf_counter()
                result["ingest"] = ingest_eval_corpus(svc)
                result["ingest"]["seconds"] = round(time.perf_counter() - t, 1)
            if args.only == "quality":
                if "ingest" in result:
                    result["quality"] = bench_quality(svc, blind=others)
                for name in xl:
                    result[f"quality_{name}"] = bench_quality_sets(services[name], xl_retrieval(name))
                if "blind9" in services:
                    result["quality_blind9"] = bench_quality_blind9(services["blind9"], result["ingest_blind9"].pop("document_ids"))
                for own, module in own_sets.items():
                    if own in services:
                        result[f"ingest_{own}"].pop("document_ids")
                        name = own.upper()
                        result[f"quality_{own}"] = bench_quality_sets(services[own], {"nl": getattr(module, f"NL_RETRIEVAL_{name}"),
                                                                                      "en": getattr(module, f"EN_RETRIEVAL_{name}")})
            else:
                from bench_answers import bench_answers

                result.get("ingest_blind9", {}).pop("document_ids", None)
                for own in own_sets:
                    result.get(f"ingest_{own}", {}).pop("document_ids", None)
                result["answers"] = bench_answers(svc, Path(args.model), settings, sets=sets, memo=Path(args.memo) if args.memo else None,
                                                  services=services, max_tokens=args.answer_tokens or None)
            result["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
            for s in {id(s): s for s in services.values()}.values():
                s.close()
            svc.close()
            print(json.dumps(result))
            return 0
        if args.only == "embedding":
            for name, text in sorted(topics.items())[:120]:
                svc.add_text(f"Python reference: {name}", text)
            passages = [c for c in (svc.store.chunks_of(i) for i in range(1, 80)) for c in c][:512]
            result["embedding"] = bench_embedding(onnx, torch_emb, [c.text for c in passages], args.batch, args.rounds)
            result["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
            svc.close()
            print(json.dumps(result))
            return 0
        if args.only == "latency":
            ingest_eval_corpus(svc)
            result["search"] = search_latency()
            svc.close()
            result["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
            print(json.dumps(result))
            return 0
        t = time.perf_counter()
        result["ingest"] = ingest_eval_corpus(svc)  # the pydoc topics and the Dutch articles
        secs = time.perf_counter() - t
        result["ingest"].update(seconds=round(secs, 1), chunks_per_s=round(result["ingest"]["chunks"] / secs, 1))
        passages = [c for c in (svc.store.chunks_of(i) for i in range(1, 80)) for c in c][:512]
        result["embedding"] = bench_embedding(onnx, torch_emb, [c.text for c in passages], args.batch, args.rounds)
        result["quality"] = bench_quality(svc)
        result["search"] = search_latency()
        svc.close()
    result["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
