"""Hybrid retrieval: dense (FAISS) and keyword (BM25) search, fused, near-duplicates left out (MMR on request).

The fusion is by score, a weighted sum of normalised scores (the convex combination of Bruch et al., "An
Analysis of Fusion Functions for Hybrid Retrieval", 2023): BM25's score plus the dense weight times the
cosine, each rescaled to [0, 1] over its own candidates (min-max), so a ranker's clear winner keeps
its lead; rank fusion (RRF, k=60) flattened it: a first place in one list lost to second and third
places in both, and a multilingual embedder's hybrid fell below its dense ranker alone. The dense
weight follows the embedding model's languages: 1 (equal to BM25) when it covers the query's language,
`uncovered_dense_weight` when it does not (all-MiniLM-L6-v2 is English only: its Dutch rankings are
weak), 1 when BM25 found nothing. Scores lie in [0, 1 + weight]; compare ranks, not scores, across queries.

Fusion of chunks can drop a document both rankers like when each finds it through a different
chunk (neither chunk is liked by both). With the caller's chunk -> document map (`doc_of`), hybrid
search in a language the embedder covers keeps every document that both rankers place among their
first k documents (a document ranks by its best chunk in that ranker): if none of its chunks made the
k hits, its best fused chunk takes the place of the lowest hit of a document that has another hit.
Only for k >= AGREEMENT_MIN_K: with fewer hits, passages of one document that answer best would give way.

Across languages: a multilingual embedder (e5) places a chunk in the query's language above the chunk in another
language that answers it (a Dutch question about an English manual: the answer chunk's cosine trails the best Dutch
chunk's by 0.015 on the median, and lies past the first 50 for 8 of 20 on xl1, blind10 and blind11), and BM25 finds little across
languages, so the fused top k held none of the other language. With cross_language_gap above 0 (off by default:
Settings.rag_cross_language_gap), when the embedder declares the languages it covers and
the index holds another covered language (at least LANE_MIN_SHARE of the chunks), dense search also takes that
language's own best LANE_CANDIDATES chunks, and every chunk of it has cross_language_gap added to its cosine before
fusion (see `_language_lanes`). Hybrid search only: BM25 keeps the query's own language in front where that holds
the answer; dense search alone with the lift put other-language chunks first (blind11's Dutch dense Recall@3 0.565 ->
0.435, blind10's English 0.90 -> 0.75).

`HybridIndex` owns both indexes and the lock that makes every update all-or-nothing
for readers: a writer changes both under the write lock, readers search under the read lock.
It knows nothing of SQL: callers feed it ids, vectors and texts.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from edge_agent.config import BM25_FILE, INDEX_FILE
from edge_agent.rag.bm25 import FIELD_WEIGHTS, TOKENIZER_VERSION, Bm25Index
from edge_agent.rag.index import FaissIndex, IndexFileError, RWLock, write_atomic

log = logging.getLogger(__name__)

BM25_MAGIC = b"EDGE-AGENT-BM25 1\n"
MODES = ("hybrid", "dense", "bm25")
_SAME = {"nb": "no", "nn": "no"}  # codes a declared language list may use for one language (Norwegian's written forms)
NEAR_DUPLICATE = 0.8  # Jaccard similarity of two chunks' words above which the lower one is left out
UNCOVERED_DENSE_WEIGHT = 0.25  # dense's weight (BM25's: 1) for a query in a language the embedder was not trained on
# document agreement (see the module docstring) only for k >= this: each agreed document takes a hit, a large share of
# few; with a multilingual embedder (then rank fusion for Dutch) it cost Dutch passage Recall@3 11 of 108 questions at
# k=3, 3 at k=4, 1 at k=5, and gave English document Recall@5 one of 60 (scripts/bench_rag.py, nlret round)
AGREEMENT_MIN_K = 5
# language lanes (module docstring): a covered index language other than the query's with at least this share of the
# chunks gets its own dense candidates, and this much on its cosines (e5: the gold chunk of a Dutch
# question about English text trails the best Dutch chunk by a median 0.015; same-language answers lead the best
# other-language chunk by a median 0.067, p10 0.031). scripts/bench_rag.py --only quality, e5, passage Recall@3 of Dutch
# questions on English chunks (hybrid): gap 0.02 / 0.03 / 0.05 / 0.07 -> xl1 0.167 -> 0.25 / 0.333 / 0.333 / 0.417;
# 0.07 cost 2 of 34 Dutch held-out questions. A language under a tenth of the chunks gets no lane: at 0.05 blind9's 39
# "English" chunks of 647 (command listings and quotes inside Dutch documents) took a lane and cost 1 of its 48 Dutch
# questions (the lifted chunks move the top of dense's rescaling range)
CROSS_LANGUAGE_GAP = 0.05  # the measured lift; off by default (HybridIndex's cross_language_gap, Settings.rag_cross_language_gap)
LANE_MIN_SHARE = 0.1
LANE_CANDIDATES = 20


@dataclass
class IndexUpdate:
    """Chunks to add (ids, vectors, texts) and chunk ids to remove."""

    add_ids: Sequence[int] = ()
    add_vectors: np.ndarray | None = None
    add_texts: Sequence["str | tuple[str, str]"] = ()  # a chunk's text, or (its title and heading, its text)
    remove_ids: Sequence[int] = ()


@dataclass
class Hit:
    """One fused result: the chunk id, its fused score and where each retriever ranked it (1-based)."""

    chunk_id: int
    score: float
    dense_rank: int | None = None
    dense_score: float | None = None
    bm25_rank: int | None = None
    bm25_score: float | None = None
    query_language: str | None = None


def _rescaled(scores: np.ndarray) -> list[float]:
    """Scores rescaled to [0, 1] over the candidates (min-max; all 1.0 when they are equal)."""
    lo, hi = (float(scores.min()), float(scores.max())) if len(scores) else (0.0, 0.0)
    return [(float(s) - lo) / (hi - lo) if hi > lo else 1.0 for s in scores]


def score_fusion(d_ids: np.ndarray, d_scores: np.ndarray, b_ids: np.ndarray, b_scores: np.ndarray, dense_weight: float) -> list[tuple[int, float]]:
    """Fuse two ranked candidate lists by score: BM25's score plus dense_weight times the cosine, each rescaled to
    [0, 1] over its own candidates (min-max, so equal weights mean equal ranges; a candidate one list lacks gets 0
    from it); best first, ties by BM25's order. Each ranker's margins count, which rank fusion flattens (with k=60
    rank 1 and rank 3 differ by 3%)."""
    scores: dict[int, float] = {int(i): s for i, s in zip(b_ids.tolist(), _rescaled(b_scores))}
    if dense_weight:
        for i, s in zip(d_ids.tolist(), _rescaled(d_scores)):
            scores[int(i)] = scores.get(int(i), 0.0) + dense_weight * s
    return sorted(scores.items(), key=lambda kv: -kv[1])


def agreed_documents(d_ids: Sequence[int], b_ids: Sequence[int], doc_of: dict[int, int], k: int) -> list[int]:
    """Documents among the first k documents of both ranked chunk lists (a document ranks by its best
    chunk), in the dense list's order; chunks missing from doc_of are left out."""

    def first_docs(ids: Sequence[int]) -> list[int]:
        out: list[int] = []
        for i in ids:
            d = doc_of.get(int(i))
            if d is not None and d not in out:
                out.append(d)
                if len(out) == k:
                    break
        return out

    in_bm25 = set(first_docs(b_ids))
    return [d for d in first_docs(d_ids) if d in in_bm25]


def keep_agreed(chosen: list[tuple[int, float]], fused: list[tuple[int, float]], agreed: Sequence[int], doc_of: dict[int, int],
                allowed: Callable[[int, list[tuple[int, float]]], bool] = lambda cid, chosen: True) -> list[tuple[int, float]]:
    """chosen (the hits) with each agreed document that has no hit in it represented by its best chunk of
    fused (one that allowed(chunk, hits) accepts), in place of the lowest hit of a document with another hit."""
    out = list(chosen)
    for d in agreed:
        docs = [doc_of.get(c) for c, _ in out]
        if d in docs:
            continue
        spare = next((j for j in range(len(out) - 1, -1, -1) if docs[j] is not None and docs.count(docs[j]) > 1), None)
        if spare is None:
            break
        rest = out[:spare] + out[spare + 1 :]
        best = next(((c, s) for c, s in fused if doc_of.get(c) == d and allowed(c, rest)), None)
        if best is not None:
            out[spare] = best
    return out


def _jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


class HybridIndex:
    """FAISS + BM25 over the same chunk ids, persisted under `index_dir`."""

    def __init__(self, index_dir: Path, dim: int, ann_threshold: int = 50_000, candidates: int = 50,
                 dense_languages: Iterable[str] | None = None, uncovered_dense_weight: float = UNCOVERED_DENSE_WEIGHT,
                 agreement_min_k: int = AGREEMENT_MIN_K, cross_language_gap: float = 0.0):
        self.index_dir = Path(index_dir)
        self.path = self.index_dir / INDEX_FILE
        self.bm25_path = self.index_dir / BM25_FILE
        self.dim = dim
        self.ann_threshold = ann_threshold
        self.candidates = candidates
        self.dense_languages = frozenset(_SAME.get(x, x) for x in dense_languages) if dense_languages else None  # None: every one
        self.uncovered_dense_weight = uncovered_dense_weight
        self.agreement_min_k = agreement_min_k
        self.cross_language_gap = cross_language_gap
        self._lane_ids: tuple[int, dict[str, np.ndarray]] = (-1, {})  # (BM25 generation, language -> its sorted chunk ids)
        self.lock = RWLock()
        self._writer = threading.Lock()  # one writer at a time (apply + save)
        self.dense = FaissIndex(dim, ann_threshold)
        self.bm25 = Bm25Index()

    # --- loading ------------------------------------------------------------
    def load_dense(self) -> None:
        """Load the saved FAISS file; raises IndexFileError (missing, corrupt, wrong shape)."""
        loaded = FaissIndex.load(self.path, self.dim, self.ann_threshold)
        with self.lock.write():
            self.dense = loaded

    def rebuild_dense(self, batches: Iterable[tuple[np.ndarray, np.ndarray]], meta: dict | None = None, save: bool = True) -> int:
        """Replace the FAISS index with (ids, vectors) batches (and save it); returns the count."""
        fresh = FaissIndex(self.dim, self.ann_threshold)
        for ids, vecs in batches:
            fresh.add(ids, vecs)
        fresh.meta = dict(meta or {})
        with self._writer:
            with self.lock.write():
                self.dense = fresh
            if save:
                self.save()
        return fresh.ntotal

    def catch_up_dense(self, ids: np.ndarray, vectors_of: Callable[[list[int]], Iterable[tuple[np.ndarray, np.ndarray]]]) -> tuple[int, int]:
        """Make the FAISS index hold exactly `ids`: drop the others, add the missing ones with vectors_of(missing)
        (ids, vectors) batches. Returns (added, removed)."""
        with self._writer:
            have = self.ids()
            extra = np.setdiff1d(have, ids)
            missing = np.setdiff1d(ids, have)
            batches = list(vectors_of(missing.tolist())) if len(missing) else []
            with self.lock.write():
                self.dense.remove(extra)
                for bid, bvec in batches:
                    self.dense.add(bid, bvec)
            self.dense.maybe_build_ann(self.lock)
        return int(sum(len(b[0]) for b in batches)), len(extra)

    def rebuild_bm25(self, batches: Iterable[tuple[np.ndarray, list[str]]]) -> None:
        """Replace the BM25 index with (ids, texts) batches."""
        all_ids, all_texts = [], []
        for ids, texts in batches:
            all_ids.append(ids)
            all_texts.extend(texts)
        ids = np.concatenate(all_ids) if all_ids else np.zeros(0, np.int64)
        fresh = Bm25Index()
        fresh.rebuild(ids, all_texts)
        with self.lock.write():
            self.bm25 = fresh

    def save_bm25(self, store_id: str) -> None:
        """Write the BM25 snapshot atomically, tagged with the SQLite store it belongs to."""
        with self.lock.read():
            payload = self.bm25.snapshot()
        head = json.dumps({"store_id": store_id, "tokenizer": TOKENIZER_VERSION, "sha256": hashlib.sha256(payload).hexdigest(),
                           "bytes": len(payload)}).encode()
        write_atomic(self.bm25_path, [BM25_MAGIC, head + b"\n", payload])

    def restore_bm25(
        self, store_id: str, chunk_ids: np.ndarray, texts_of: Callable[[np.ndarray | None], Iterable[tuple[np.ndarray, list[str]]]]
    ) -> str:
        """BM25 for exactly chunk_ids: the saved snapshot brought up to date (chunks it lacks encoded,
        chunks SQLite no longer has dropped), or a full rebuild when there is no usable snapshot.
        texts_of(ids) yields (ids, texts) batches of those chunks (None: all). Returns what it did."""
        snap = self._read_bm25(store_id)
        if snap is None:
            self.rebuild_bm25(texts_of(None))
            return "rebuilt"
        encoded = snap.catch_up(chunk_ids, texts_of)
        with self.lock.write():
            self.bm25 = snap
        return f"loaded ({encoded} chunks encoded)"

    def _read_bm25(self, store_id: str) -> Bm25Index | None:
        try:
            data = self.bm25_path.read_bytes()
            end = data.index(b"\n", len(BM25_MAGIC))
            head = json.loads(data[len(BM25_MAGIC) : end])
            payload = data[end + 1 :]
            if not data.startswith(BM25_MAGIC) or head.get("store_id") != store_id or head.get("tokenizer") != TOKENIZER_VERSION \
                    or len(payload) != head.get("bytes") or hashlib.sha256(payload).hexdigest() != head.get("sha256"):
                raise ValueError("snapshot of another store or tokenizer, or damaged")
            return Bm25Index.from_snapshot(payload)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            log.warning("BM25 snapshot not used (%s): rebuilding it", exc)
            return None

    def ids(self) -> np.ndarray:
        with self.lock.read():
            return self.dense.ids()

    def bm25_ids(self) -> np.ndarray:
        with self.lock.read():
            return np.fromiter(sorted(self.bm25.docs), dtype=np.int64, count=len(self.bm25.docs))

    # --- writes -------------------------------------------------------------
    def apply(self, update: "IndexUpdate | Callable[[], IndexUpdate]", save: bool = True) -> IndexUpdate:
        """Apply an update to both indexes as one step readers see whole, then save the FAISS file.

        `update` may be a function (e.g. the SQLite commit that yields the new chunk ids): it runs
        under the write lock, so readers never see the store and the index disagree.
        """
        with self._writer:
            with self.lock.write():
                upd = update() if callable(update) else update
                add = np.asarray(list(upd.add_ids), dtype=np.int64)
                rem = np.asarray(list(upd.remove_ids), dtype=np.int64)
                if len(add) != len(upd.add_texts) or (len(add) and (upd.add_vectors is None or len(upd.add_vectors) != len(add))):
                    raise ValueError("add_ids, add_vectors and add_texts must have the same length")
                docs = self.bm25.encode_many(upd.add_texts)
                self.dense.remove(rem)
                if len(add):
                    self.dense.add(add, upd.add_vectors)  # type: ignore[arg-type]
                merge = self.bm25.apply(add.tolist(), docs, rem.tolist())
            if merge:
                self.bm25.schedule_merge(self.lock)
            self.dense.maybe_build_ann(self.lock)
            if save:
                self.save()
        return upd

    def save(self) -> None:
        """Write the FAISS file atomically (under the read lock, so no update is half in it)."""
        with self.lock.read():
            self.dense.save(self.path)

    # --- reads --------------------------------------------------------------
    def search(
        self,
        query_vector: np.ndarray | None,
        query_text: str,
        k: int = 5,
        allowed: np.ndarray | None = None,
        mode: str = "hybrid",
        diversity: float | None = None,
        pool: int | None = None,
        doc_of: Callable[[list[int]], dict[int, int]] | None = None,
    ) -> list[Hit]:
        """Top-k chunks for a query; `allowed` limits to those chunk ids; mode is hybrid, dense or bm25.

        A chunk whose words nearly repeat a better hit's (Jaccard >= NEAR_DUPLICATE) is left out; with
        `diversity` (0..1, MMR's 1 - lambda) each next hit also trades relevance for being unlike those
        before it. `pool` asks for more ranked candidates than k (for grouping by document). `doc_of` maps
        chunk ids to document ids (unknown ones left out): with it, hybrid search keeps the documents both
        rankers agree on (see the module docstring; not with pool, not for k < agreement_min_k, only for a
        language the embedder covers)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if diversity is not None and not 0.0 <= diversity <= 1.0:
            raise ValueError("diversity must be between 0 and 1")
        n = max(k, self.candidates, pool or 0)
        with self.lock.read():
            if query_vector is not None and np.shape(query_vector)[-1] != self.dense.dim:
                query_vector = None  # embedded by the model a switch just replaced: this one query goes by BM25
            langs = self.bm25.query_languages(query_text)
            d_scores, d_ids = (
                self.dense.search(query_vector, n, allowed)
                if mode != "bm25" and query_vector is not None
                else (np.zeros(0, np.float32), np.zeros(0, np.int64))
            )
            b_ids, b_scores = self.bm25.search(query_text, n, allowed, langs) if mode != "dense" else (np.zeros(0, np.int64), [])
            lanes = self._language_lanes(langs) if mode == "hybrid" and len(d_ids) else []
            if lanes:
                d_scores, d_ids = self._with_lanes(query_vector, d_scores, d_ids, lanes, allowed, n)
        dense = {int(i): (r, float(s)) for r, (i, s) in enumerate(zip(d_ids, d_scores), start=1)}
        bm25 = {int(i): (r, float(s)) for r, (i, s) in enumerate(zip(b_ids, b_scores), start=1)}
        lang = langs[0] if langs else None
        fused = self.fuse(d_ids, d_scores, b_ids, np.asarray(b_scores, np.float32), lang)
        agree = doc_of is not None and not pool and k >= self.agreement_min_k and self.covers(lang) and len(d_ids) and len(b_ids)
        docs = doc_of([i for i, _ in fused]) if agree else {}
        agreed = agreed_documents(d_ids.tolist(), b_ids.tolist(), docs, k) if agree else []
        with self.lock.read():
            chosen = self._diverse(fused, max(k, pool or 0), diversity or 0.0)
            if agreed:
                chosen = keep_agreed(chosen, fused, agreed, docs, self._not_near_duplicate)
        if agreed and not diversity:
            chosen.sort(key=lambda kv: -kv[1])
        fused = chosen
        hits = []
        for cid, score in fused:
            d, b = dense.get(cid), bm25.get(cid)
            hits.append(Hit(cid, score, d and d[0], d and d[1], b and b[0], b and b[1], lang))
        return hits

    def _language_lanes(self, langs: list[str]) -> list[str]:
        """The index languages other than the query's that get dense candidates of their own (read lock held): only
        with declared embedder languages covering the query's and theirs, each holding LANE_MIN_SHARE of the chunks."""
        if self.dense_languages is None or not langs or not self.covers(langs[0]) or not self.cross_language_gap:
            return []
        counts = self.bm25.lang_counts
        least = LANE_MIN_SHARE * sum(counts.values())
        return sorted(lang for lang, c in counts.items()
                      if c >= least and lang not in langs and lang != "und" and _SAME.get(lang, lang) in self.dense_languages)

    def _with_lanes(self, qv: np.ndarray, d_scores: np.ndarray, d_ids: np.ndarray, lanes: list[str],
                    allowed: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Dense candidates with each lane language's own best LANE_CANDIDATES chunks added and cross_language_gap
        on every lane chunk's cosine, best first (read lock held). A lane chunk that even so stays below the
        worst of the n first candidates is left out, so the rescaling range (score_fusion) stays that of the first list."""
        gen = self.bm25._generation
        if self._lane_ids[0] != gen:
            groups: dict[str, list[int]] = {}
            for i, lang in self.bm25.langs.items():
                groups.setdefault(lang, []).append(i)
            self._lane_ids = (gen, {lang: np.asarray(sorted(v), np.int64) for lang, v in groups.items()})
        by_lang, langs, gap = self._lane_ids[1], self.bm25.langs, self.cross_language_gap
        lane_set = set(lanes)
        scores = {i: s + (gap if langs.get(i) in lane_set else 0.0) for i, s in zip(d_ids.tolist(), d_scores.tolist())}
        floor = float(d_scores.min()) if len(d_scores) >= n else -np.inf
        for lang in lanes:
            ids = by_lang.get(lang, np.zeros(0, np.int64))
            if allowed is not None:
                ids = np.intersect1d(ids, allowed)
            for s, i in zip(*(x.tolist() for x in self.dense.search_among(qv, LANE_CANDIDATES, ids))):
                if i not in scores and s + gap >= floor:
                    scores[i] = s + gap
        order = sorted(scores.items(), key=lambda kv: -kv[1])
        return np.asarray([s for _, s in order], np.float32), np.asarray([i for i, _ in order], np.int64)

    def fuse(self, d_ids: np.ndarray, d_scores: np.ndarray, b_ids: np.ndarray, b_scores: np.ndarray,
             lang: str | None) -> list[tuple[int, float]]:
        """The two ranked candidate lists as one, best first: score_fusion with dense at BM25's weight for a
        language the embedder covers (or when BM25 found nothing), at uncovered_dense_weight for one it does not."""
        weight = 1.0 if self.covers(lang) or not len(b_ids) else self.uncovered_dense_weight
        return score_fusion(d_ids, d_scores, b_ids, b_scores, weight)

    def _not_near_duplicate(self, cid: int, chosen: list[tuple[int, float]]) -> bool:
        """Whether chunk cid's words are unlike those of every chunk in chosen (bar cid itself); read lock held."""
        w = self.bm25.word_set(cid)
        return all(_jaccard(w, self.bm25.word_set(c)) < NEAR_DUPLICATE for c, _ in chosen if c != cid)

    def _diverse(self, fused: list[tuple[int, float]], k: int, diversity: float) -> list[tuple[int, float]]:
        """The first k of fused by maximal marginal relevance: relevance (the fused score rescaled to [0, 1]
        over the candidates) times 1 - diversity, less diversity times the Jaccard similarity of the chunk's
        words to the most similar hit already chosen; near-duplicates of a chosen hit are left out."""
        if not fused:
            return []
        words: dict[int, frozenset] = {}

        def sim(a: int, b: int) -> float:
            for c in (a, b):
                if c not in words:
                    words[c] = self.bm25.word_set(c)
            return _jaccard(words[a], words[b])

        chosen: list[tuple[int, float]] = []
        if not diversity:
            for cid, score in fused:
                if len(chosen) == k:
                    break
                if all(sim(cid, c) < NEAR_DUPLICATE for c, _ in chosen):
                    chosen.append((cid, score))
            return chosen
        hi, lo = fused[0][1], fused[-1][1]
        left = list(fused)
        while left and len(chosen) < k:
            best, best_val, keep = None, -np.inf, []
            for cid, score in left:
                most = max((sim(cid, c) for c, _ in chosen), default=0.0)
                if most >= NEAR_DUPLICATE:
                    continue
                keep.append((cid, score))
                val = (1.0 - diversity) * ((score - lo) / (hi - lo) if hi > lo else 1.0) - diversity * most
                if val > best_val:
                    best, best_val = (cid, score), val
            if best is None:
                break
            chosen.append(best)
            left = [c for c in keep if c[0] != best[0]]
        return chosen

    def covers(self, lang: str | None) -> bool:
        """Whether the embedding model covers lang (unknown models and unknown languages: yes)."""
        return self.dense_languages is None or lang is None or lang == "und" or _SAME.get(lang, lang) in self.dense_languages

    def stats(self) -> dict:
        with self.lock.read():
            return {
                "vectors": self.dense.ntotal,
                "bm25_chunks": len(self.bm25),
                "bm25_pending": len(self.bm25.pending_ids),
                "bm25_fields": {**self.bm25.fields_used(), "weights": list(FIELD_WEIGHTS), "tokenizer": TOKENIZER_VERSION},
                "languages": {lang: {"chunks": n, "embedder_covers": self.covers(lang)} for lang, n in self.bm25.languages().items()},
                "embedder_languages": sorted(self.dense_languages) if self.dense_languages else "any (not declared)",
                "ann": self.dense.ann_state,
                "ann_threshold": self.ann_threshold,
                "index_file": str(self.path),
            }

    def wait_background(self, timeout: float = 300.0) -> None:
        """Wait for the BM25 merge and the HNSW build (tests, CLI, benchmark)."""
        self.bm25.wait_merged(timeout)
        t = self.dense._ann_thread
        if t is not None:
            t.join(timeout)


__all__ = ["HybridIndex", "Hit", "IndexUpdate", "IndexFileError", "score_fusion", "agreed_documents", "keep_agreed",
           "INDEX_FILE", "MODES"]
