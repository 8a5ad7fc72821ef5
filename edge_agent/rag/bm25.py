"""BM25 keyword index (bm25s) kept in step with the chunk store, with per-language terms.

Each chunk's language is detected when it is encoded and kept (also in the snapshot); its terms
are stemmed with that language's Snowball stemmer (see language.py). A query is analysed in the
index languages it is likely to be in.

bm25s builds static indexes, so this keeps two: `main`, rebuilt now and then in a
background thread, and `pending`, a small index over chunks added since `main` was
built, rebuilt on every write. Deleted chunks are masked out of `main` at once.
Results of the two are interleaved by rank. Callers hold an RWLock around use.
"""
from __future__ import annotations

import io
import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import bm25s
import numpy as np

from edge_agent.rag import language

log = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every build at DEBUG

# Bump when the terms change: saved snapshots of token ids from another version are not used.
TOKENIZER_VERSION = 3  # 3: per-language Snowball stems and stop words, each chunk's language stored


def tokenize(text: str) -> list[str]:
    """Lowercased, accent-folded unicode words; codes like "XK-99/B" also give one joined token.

    No stemming and no stop-word list (see language.terms for the per-language terms BM25 uses);
    words of scripts with vowel signs (Devanagari, Tamil, ...) stay whole.
    """
    return language.terms(text, language.UNKNOWN)


@dataclass
class _Part:
    """One bm25s index over some chunks: row i holds chunk `ids[i]`."""

    retriever: bm25s.BM25 | None
    ids: np.ndarray
    n_vocab: int  # global token ids below this are known to `retriever`
    alive: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    @classmethod
    def build(cls, ids: np.ndarray, docs: Sequence[np.ndarray], vocab: dict[str, int]) -> "_Part":
        n_vocab = len(vocab)
        if len(ids) == 0:
            return cls(None, np.zeros(0, np.int64), n_vocab)
        retriever = bm25s.BM25()
        # bm25s wants ids < vocabulary size: pass the global vocabulary as it stands now
        retriever.index((list(docs), dict(vocab)), show_progress=False)
        return cls(retriever, np.asarray(ids, dtype=np.int64), n_vocab, np.ones(len(ids), np.float32))

    def search(self, token_ids: list[int], k: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        if self.retriever is None or not token_ids:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        known = [t for t in token_ids if t < self.n_vocab]
        if not known:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        mask = self.alive
        if allowed is not None:
            mask = mask * np.isin(self.ids, allowed).astype(np.float32)
        scores = self.retriever.get_scores_from_ids(known, weight_mask=mask)
        hit = np.flatnonzero(scores > 0)
        if len(hit) > k:
            hit = hit[np.argpartition(-scores[hit], k - 1)[:k]]
        hit = hit[np.argsort(-scores[hit], kind="stable")]
        return self.ids[hit], scores[hit].astype(np.float32)


class Bm25Index:
    """BM25 over chunk texts keyed by chunk id; `add`/`remove` are cheap, merging happens in the background."""

    def __init__(self, merge_after_s: float = 1.0, sync_merge_max: int = 2000):
        self.vocab: dict[str, int] = {}
        self.docs: dict[int, np.ndarray] = {}   # chunk id -> token ids (the source of truth here)
        self.langs: dict[int, str] = {}         # chunk id -> its language (ISO 639-1, "und")
        self.lang_counts: Counter[str] = Counter()
        self.main = _Part(None, np.zeros(0, np.int64), 0)
        self.pending_ids: list[int] = []
        self.pending = _Part(None, np.zeros(0, np.int64), 0)
        self.merge_after_s = merge_after_s
        self.sync_merge_max = sync_merge_max
        self._merge_thread: threading.Thread | None = None
        self._merge_requested = threading.Event()
        self._generation = 0

    def __len__(self) -> int:
        return len(self.docs)

    def _encode(self, text: str) -> tuple[np.ndarray, str]:
        vocab = self.vocab
        lang = language.detect(text)
        out = []
        for tok in language.terms(text, lang):
            tid = vocab.get(tok)
            if tid is None:
                tid = vocab[tok] = len(vocab)
            out.append(tid)
        return np.asarray(out, dtype=np.int32), lang

    def encode_many(self, texts: Iterable[str]) -> list[tuple[np.ndarray, str]]:
        """(token ids, language) of each text (grows the vocabulary; callers hold the write lock)."""
        return [self._encode(t) for t in texts]

    def _put(self, ids: Iterable[int], encoded: Iterable[tuple[np.ndarray, str]]) -> None:
        for i, (d, lang) in zip(ids, encoded):
            i = int(i)
            old = self.langs.get(i)
            if old is not None:
                self.lang_counts[old] -= 1
            self.docs[i], self.langs[i] = d, lang
            self.lang_counts[lang] += 1

    def _drop(self, i: int) -> None:
        if self.docs.pop(i, None) is not None:
            lang = self.langs.pop(i, language.UNKNOWN)
            self.lang_counts[lang] -= 1
            if self.lang_counts[lang] <= 0:
                del self.lang_counts[lang]

    def languages(self) -> dict[str, int]:
        """Chunks per language, most first."""
        return dict(self.lang_counts.most_common())

    def query_languages(self, query: str) -> list[str]:
        """The index languages the query is likely in, most likely first (see language.likely)."""
        return language.likely(query, self.lang_counts)

    # --- writes (write lock held) ----------------------------------------
    def rebuild(self, ids: np.ndarray, texts: Sequence[str]) -> None:
        """Replace everything with these chunks (used at start-up and by rebuild)."""
        self.vocab, self.docs, self.langs, self.lang_counts = {}, {}, {}, Counter()
        self._put(ids, self.encode_many(texts))
        self._generation += 1
        self._build_main_now()

    def _build_main_now(self) -> None:
        ids = np.fromiter(sorted(self.docs), dtype=np.int64, count=len(self.docs))
        self.main = _Part.build(ids, [self.docs[int(i)] for i in ids], self.vocab)
        self.pending_ids, self.pending = [], _Part(None, np.zeros(0, np.int64), 0)

    def apply(self, add_ids: Sequence[int], add_docs: Sequence[tuple[np.ndarray, str]], remove_ids: Sequence[int]) -> bool:
        """Add (encode_many's output) and remove chunks; returns True if a background merge should be scheduled."""
        for i in remove_ids:
            self._drop(int(i))
        if len(remove_ids) and len(self.main.ids):
            gone = np.isin(self.main.ids, np.asarray(remove_ids, dtype=np.int64))
            if gone.any():
                alive = self.main.alive.copy()
                alive[gone] = 0.0
                self.main = _Part(self.main.retriever, self.main.ids, self.main.n_vocab, alive)
        self._put(add_ids, add_docs)
        self._generation += 1
        if len(self.docs) <= self.sync_merge_max:
            self._build_main_now()
            return False
        removed = {int(i) for i in remove_ids}
        self.pending_ids = [i for i in self.pending_ids if i not in removed] + [int(i) for i in add_ids]
        pids = np.asarray(self.pending_ids, dtype=np.int64)
        self.pending = _Part.build(pids, [self.docs[int(i)] for i in pids], self.vocab)
        return bool(self.pending_ids) or bool(len(self.main.alive) and self.main.alive.min() == 0)

    # --- snapshot (read lock held) ------------------------------------------
    def snapshot(self) -> bytes:
        """The chunks' token ids and the vocabulary as bytes (see from_snapshot)."""
        ids = np.fromiter(sorted(self.docs), dtype=np.int64, count=len(self.docs))
        lens = np.fromiter((len(self.docs[int(i)]) for i in ids), dtype=np.int64, count=len(ids))
        tokens = np.concatenate([self.docs[int(i)] for i in ids]) if len(ids) else np.zeros(0, np.int32)
        words = sorted(self.vocab, key=self.vocab.__getitem__)  # position = token id; no token holds a newline
        buf = io.BytesIO()
        langs = "\n".join(self.langs.get(int(i), language.UNKNOWN) for i in ids)
        np.savez(buf, ids=ids, lens=lens, tokens=tokens.astype(np.int32), vocab=np.frombuffer("\n".join(words).encode(), np.uint8),
                 langs=np.frombuffer(langs.encode(), np.uint8))
        return buf.getvalue()

    @classmethod
    def from_snapshot(cls, data: bytes) -> "Bm25Index":
        """An index holding a snapshot's chunks (its `main` not built yet); raises ValueError if it is inconsistent."""
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            if "langs" not in z.files:
                raise ValueError("BM25 snapshot without chunk languages")
            ids, lens, tokens, blob, lblob = z["ids"], z["lens"], z["tokens"], z["vocab"], z["langs"]
        words = bytes(blob).decode().split("\n") if len(blob) else []
        langs = bytes(lblob).decode().split("\n") if len(ids) else []
        if len(langs) != len(ids):
            raise ValueError("BM25 snapshot languages do not match its chunks")
        if len(ids) != len(lens) or int(lens.sum()) != len(tokens) or len(set(words)) != len(words):
            raise ValueError("inconsistent BM25 snapshot")
        if len(tokens) and (int(tokens.min()) < 0 or int(tokens.max()) >= len(words)):
            raise ValueError("BM25 snapshot token ids outside its vocabulary")
        out = cls()
        out.vocab = {w: i for i, w in enumerate(words)}
        out._put(ids.tolist(), zip(np.split(tokens, np.cumsum(lens)[:-1]) if len(ids) else [], langs))
        return out

    def catch_up(self, chunk_ids: np.ndarray, texts_of: Callable[[np.ndarray], Iterable[tuple[np.ndarray, list[str]]]]) -> int:
        """Hold exactly chunk_ids (as of a snapshot): drop the others, encode the missing ones from
        texts_of(missing) batches of (ids, texts), then build; returns how many were encoded."""
        have = np.fromiter(self.docs, dtype=np.int64, count=len(self.docs))
        for i in np.setdiff1d(have, chunk_ids).tolist():
            self._drop(i)
        missing = np.setdiff1d(chunk_ids, have)
        if len(missing):
            for ids, texts in texts_of(missing):
                self._put(ids.tolist(), self.encode_many(texts))
        self._generation += 1
        self._build_main_now()
        return len(missing)

    # --- background merge -------------------------------------------------
    def schedule_merge(self, lock) -> None:
        """Rebuild `main` over all chunks in a background thread, a little after the last write."""
        self._merge_requested.set()
        if self._merge_thread is None or not self._merge_thread.is_alive():
            self._merge_thread = threading.Thread(target=self._merge_loop, args=(lock,), name="bm25-merge", daemon=True)
            self._merge_thread.start()

    def _merge_loop(self, lock) -> None:
        while self._merge_requested.is_set():
            time.sleep(self.merge_after_s)
            self._merge_requested.clear()
            with lock.read():
                generation = self._generation
                ids = np.fromiter(sorted(self.docs), dtype=np.int64, count=len(self.docs))
                docs = [self.docs[int(i)] for i in ids]
                vocab = dict(self.vocab)
            t0 = time.monotonic()
            part = _Part.build(ids, docs, vocab)
            with lock.write():
                if generation == self._generation:
                    self.main, self.pending_ids = part, []
                    self.pending = _Part(None, np.zeros(0, np.int64), 0)
                else:
                    self._merge_requested.set()  # writes came in meanwhile: go again
            log.debug("BM25 merge of %d chunks took %.1f s", len(ids), time.monotonic() - t0)

    def wait_merged(self, timeout: float = 120.0) -> None:
        """Block until no merge is pending or running (tests, CLI)."""
        end = time.monotonic() + timeout
        while self._merge_thread is not None and self._merge_thread.is_alive() and time.monotonic() < end:
            self._merge_thread.join(0.1)

    # --- reads (read lock held) -------------------------------------------
    def search(self, query: str, k: int, allowed: np.ndarray | None = None, langs: list[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k (chunk ids, scores) for a query analysed in langs (default: query_languages(query));
        main and pending results interleaved by rank."""
        if langs is None:
            langs = self.query_languages(query)
        token_ids = [self.vocab[t] for t in language.query_terms(query, langs) if t in self.vocab]
        ids_a, sc_a = self.main.search(token_ids, k, allowed)
        if self.pending.retriever is None:
            return ids_a, sc_a
        ids_b, sc_b = self.pending.search(token_ids, k, allowed)
        ids, scores, seen = [], [], set()
        for j in range(max(len(ids_a), len(ids_b))):
            for arr, sc in ((ids_a, sc_a), (ids_b, sc_b)):
                if j < len(arr) and int(arr[j]) not in seen:
                    seen.add(int(arr[j]))
                    ids.append(int(arr[j]))
                    scores.append(float(sc[j]))
        return np.asarray(ids[:k], dtype=np.int64), np.asarray(scores[:k], dtype=np.float32)
